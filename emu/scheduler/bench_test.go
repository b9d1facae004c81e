package scheduler

import (
	"testing"

	"github.com/ocsemu/ocsemu/emu/scenario"
)

// Goal: each scheduler plans a 100-job, 16-pod case in at most 1 s.
func BenchmarkPlan100Jobs16Pods(b *testing.B) {
	for _, sched := range Names {
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

// case100 is the 100-job, 16-pod case: TDMBench's jobs, which every
// scheduler can plan (the slotted ones on 2 uplinks or more).
func case100(sched string) *scenario.Scenario {
	s := TDMBench(100, 16, 1, 1, "full")
	s.Scheduler.Name = sched
	s.Scheduler.Slot = scenario.Duration(50e6)
	return s
}
