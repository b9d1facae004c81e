package scheduler

import (
	"testing"

	"github.com/ocsemu/ocsemu/emu/scenario"
)

// Goal: each scheduler plans a 100-job, 16-pod case in at most 1 s.
func BenchmarkPlan100Jobs16Pods(b *testing.B) {
	for _, sched := range Names {
		if sched == "oddl" || sched == "topox" {
			continue // all-reduce schedulers: BenchmarkPlan100Jobs16PodsHD
		}
		b.Run(sched, func(b *testing.B) {
			s := case100(sched)
			for i := 0; i < b.N; i++ {
				if _, err := Plan(s); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkPlan100Jobs16PodsHD plans issue 11's speed case with each
// scheduler of papers 003 and 004: 100 hd jobs of 4 or 8 workers on 16
// pods (racks of 8 servers, 2 uplinks per ToR), 2 iterations each. The
// goal is at most 1 s per plan (docs/benchmarks.md); planning includes the
// scheduler's own flow-model prediction.
func BenchmarkPlan100Jobs16PodsHD(b *testing.B) {
	for _, sched := range []string{"oddl", "topox"} {
		b.Run(sched, func(b *testing.B) {
			s := manyJobs(b, 16, 100, sched)
			if sched == "topox" {
				s.Scheduler.Slot = scenario.Duration(TopoXSlot)
			}
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				p, err := Plan(s)
				if err != nil {
					b.Fatal(err)
				}
				if i == 0 {
					b.ReportMetric(float64(len(p.Stages)), "stages")
					b.ReportMetric(float64(p.Predicted.MakespanNs)/1e9, "makespan-s")
				}
			}
		})
	}
}

// case100 is the 100-job, 16-pod case: TDMBench's jobs, which every
// scheduler can plan (the slotted ones on 2 uplinks or more).
func case100(sched string) *scenario.Scenario {
	s := TDMBench(100, 16, 1, 1, "full")
	s.Scheduler.Name = sched
	s.Scheduler.Slot = scenario.Duration(50e6)
	return s
}
