package workers

import (
	"runtime"
	"runtime/metrics"
	"sync"
)

// gcMark is this process's garbage collector so far, as it stalls the
// rank: the time goroutines spent assisting the collector and the
// stop-the-world pauses (CPU time over GOMAXPROCS: wall time), and the
// cycles it ran (runtime/metrics). The collector's own background work
// is left out: it competes for CPUs like any other process, which the
// cpu part and the headroom line see. A rank reads one when a phase
// starts and records what the collector did until the phase ended
// (PhaseRecord.GCNs, GCCycles). The runtime adds a collection's CPU time
// when the collection ends, so a collection is charged to the phase it
// ends in.
type gcMark struct {
	cpuNs  int64 // assists and pauses
	cycles uint64
}

var gcMetrics = [...]string{"/cpu/classes/gc/mark/assist:cpu-seconds", "/cpu/classes/gc/pause:cpu-seconds", "/gc/cycles/total:gc-cycles"}

// gcSamples is readGC's buffer, named once and kept so that reading
// allocates nothing.
var gcSamples = struct {
	sync.Mutex
	s [len(gcMetrics)]metrics.Sample
}{s: [...]metrics.Sample{{Name: gcMetrics[0]}, {Name: gcMetrics[1]}, {Name: gcMetrics[2]}}}

func readGC() gcMark {
	gcSamples.Lock()
	defer gcSamples.Unlock()
	s := &gcSamples.s
	metrics.Read(s[:])
	secs := func(v metrics.Value) float64 {
		if v.Kind() != metrics.KindFloat64 {
			return 0
		}
		return v.Float64()
	}
	var m gcMark
	m.cpuNs = int64((secs(s[0].Value) + secs(s[1].Value)/float64(runtime.GOMAXPROCS(0))) * 1e9)
	if s[2].Value.Kind() == metrics.KindUint64 {
		m.cycles = s[2].Value.Uint64()
	}
	return m
}

// into records in rec what the collector did since m.
func (m gcMark) into(rec *PhaseRecord) {
	now := readGC()
	rec.GCNs, rec.GCCycles = max(0, now.cpuNs-m.cpuNs), now.cycles-m.cycles
}
