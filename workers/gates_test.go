package workers

import (
	"testing"

	"github.com/ocsemu/ocsemu/workers/job"
)

// A job's phases are gated at its arrival in barrier and clock plans, as
// the flow model holds it back; before, a barrier plan's job started at
// time zero whatever its arrival_ns.
func TestGatesHoldAJobUntilItArrives(t *testing.T) {
	at := func(ns int64) *int64 { return &ns }
	j := &job.Job{Name: "rec", Pattern: job.PatternRing, Workers: []string{"a", "b"}, Iterations: 1, ArrivalNs: 200e6}
	stages := func(mode string) *job.Schedule {
		return &job.Schedule{Mode: mode, Stages: []job.Stage{
			{StartNs: 0, Activities: []job.Activity{{Key: job.Key{Job: "rec", Iteration: 0, Phase: job.PhaseCompute}}}},
			{StartNs: 300e6, Activities: []job.Activity{{Key: job.Key{Job: "rec", Iteration: 0, Phase: job.PhaseAllReduce}, StartNs: at(310e6)}}},
		}}
	}
	for _, tt := range []struct {
		mode    string
		arrival int64
		want    []int64 // NotBeforeNs per phase
	}{
		{job.ModeBarrier, 200e6, []int64{200e6, 310e6}},
		{job.ModeClock, 200e6, []int64{200e6, 310e6}},
		{job.ModeBarrier, 0, []int64{-1, 310e6}},
		{job.ModeClock, 400e6, []int64{400e6, 400e6}},
	} {
		j.ArrivalNs = tt.arrival
		gates, _, err := gatesFor(stages(tt.mode), j)
		if err != nil {
			t.Fatal(err)
		}
		for i, g := range gates {
			if g.NotBeforeNs != tt.want[i] {
				t.Errorf("%s, arrival %d: phase %d not before %d, want %d", tt.mode, tt.arrival, i, g.NotBeforeNs, tt.want[i])
			}
		}
	}
}
