package orchestrate

import (
	"slices"
	"strings"
	"testing"

	"github.com/ocsemu/ocsemu/emu/plan"
)

// WorkerJobs turns per-stage INC decisions into per-iteration ones: a
// job aggregates in the ToRs in the iterations whose push and pull say so
// (or, undecided, as the job says), at its parameter server in the
// others; push and pull of one iteration must agree.
func TestWorkerJobsINCPerStage(t *testing.T) {
	yes, no := true, false
	mk := func(jobINC bool, decide ...*bool) *plan.Plan {
		p := &plan.Plan{Version: 2, Mode: plan.ModeBarrier, Jobs: []plan.Job{{Name: "j", Pattern: "ps",
			Workers: []string{"r0s0", "r1s0"}, Bytes: 1 << 20, Iterations: 2, INC: jobINC, Aggregator: "tor0", PS: "r0s1"}}}
		for i, d := range decide {
			it, phase := i/2, []string{"push", "pull"}[i%2]
			p.Stages = append(p.Stages, plan.Stage{Activities: []plan.Activity{{Job: "j", Iteration: it, Phase: phase, INC: d}}})
		}
		return p
	}
	for _, tc := range []struct {
		name  string
		p     *plan.Plan
		inc   bool   // the workers' job has an INC client
		iters []bool // nil: every iteration alike
		ps    bool   // it runs a parameter server
		err   string
	}{
		{"job inc, undecided", mk(true, nil, nil, nil, nil), true, nil, false, ""},
		{"job inc, iteration 1 at the PS", mk(true, nil, nil, &no, &no), true, []bool{true, false}, true, ""},
		{"no job inc, iteration 0 in the ToRs", mk(false, &yes, &yes, nil, nil), true, []bool{true, false}, true, ""},
		{"no job inc, decided off", mk(false, &no, &no, &no, &no), false, nil, true, ""},
		{"job inc, decided off everywhere", mk(true, &no, &no, &no, &no), false, nil, true, ""},
		{"push and pull disagree", mk(true, &yes, &no, nil, nil), false, nil, false, "iteration 0 pull decides inc false, but the iteration's push decided true"},
		// An unset inc is the job's: this pull aggregates in the ToRs
		// (the flow model predicts it moves nothing) while its push goes
		// to the parameter server.
		{"push off, pull unset in an inc job", mk(true, &no, nil, nil, nil), false, nil, false, "iteration 0 pull decides inc true, but the iteration's push decided false"},
		{"push unset in an inc job, pull off", mk(true, nil, &no, nil, nil), false, nil, false, "iteration 0 pull decides inc false, but the iteration's push decided true"},
		{"push on, pull unset in a ps job", mk(false, nil, nil, &yes, nil), false, nil, false, "iteration 1 pull decides inc false, but the iteration's push decided true"},
	} {
		jobs, err := WorkerJobs(tc.p)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%s: error %v, want %q", tc.name, err, tc.err)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", tc.name, err)
			continue
		}
		j := jobs[0]
		if (j.INC != nil) != tc.inc || !slices.Equal(j.INCIterations, tc.iters) || j.UsesPS() != tc.ps {
			t.Errorf("%s: inc %v, iterations %v, parameter server %v; want %v, %v, %v", tc.name, j.INC != nil, j.INCIterations, j.UsesPS(), tc.inc, tc.iters, tc.ps)
		}
	}
}
