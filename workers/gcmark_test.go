package workers

import (
	"runtime"
	"testing"
)

// A collection between a phase's start and end shows in its record: at
// least the one forced here, with the CPU time the collector took.
func TestGCMarkRecordsACollection(t *testing.T) {
	m := readGC()
	runtime.GC()
	var rec PhaseRecord
	m.into(&rec)
	if rec.GCCycles < 1 || rec.GCNs <= 0 {
		t.Errorf("after a forced collection: %d cycles, %d ns of GC CPU; want at least 1 and more than 0", rec.GCCycles, rec.GCNs)
	}
	if n := testing.AllocsPerRun(100, func() { _ = readGC() }); n != 0 {
		t.Errorf("reading the collector allocated %.0f times, want 0", n)
	}
}
