package workers

import (
	"runtime/metrics"
	"sync"
)

// gcMark is this process's garbage collector so far: the CPU time it
// took and the cycles it ran (runtime/metrics). A rank reads one when a
// phase starts and records what the collector did until the phase ended
// (PhaseRecord.GCNs, GCCycles): a collection inside a measured phase
// stalls the rank on this machine's few CPUs, and the attribution counts
// it (its gc part).
type gcMark struct {
	cpuNs  int64
	cycles uint64
}

var gcMetrics = [...]string{"/cpu/classes/gc/total:cpu-seconds", "/gc/cycles/total:gc-cycles"}

// gcSamples is readGC's buffer, kept so that reading allocates nothing.
var gcSamples struct {
	sync.Mutex
	s [len(gcMetrics)]metrics.Sample
}

func readGC() gcMark {
	gcSamples.Lock()
	defer gcSamples.Unlock()
	s := &gcSamples.s
	for i, n := range gcMetrics {
		s[i].Name = n
	}
	metrics.Read(s[:])
	var m gcMark
	if s[0].Value.Kind() == metrics.KindFloat64 {
		m.cpuNs = int64(s[0].Value.Float64() * 1e9)
	}
	if s[1].Value.Kind() == metrics.KindUint64 {
		m.cycles = s[1].Value.Uint64()
	}
	return m
}

// into records in rec what the collector did since m.
func (m gcMark) into(rec *PhaseRecord) {
	now := readGC()
	rec.GCNs, rec.GCCycles = max(0, now.cpuNs-m.cpuNs), now.cycles-m.cycles
}
