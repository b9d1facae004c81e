package labs

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"strings"

	"github.com/ocsemu/ocsemu/emu/flowmodel"
	"github.com/ocsemu/ocsemu/emu/plan"
	"github.com/ocsemu/ocsemu/workers/record"
)

// Lab 04: the student rewrites a plan in which two jobs run in lockstep
// (both all-reduce over the one circuit at once) into one that interleaves
// them, predicts it with the flow model, and runs it.

func studentPlan(e *Env) (*plan.Plan, error) {
	return studentFile(e, "plan.json", plan.Parse)
}

// predicted simulates the student's plan with the flow model.
func predicted(e *Env) (*record.Run, error) {
	return once(e, "prediction", func() (*record.Run, error) {
		p, err := studentPlan(e)
		if err != nil {
			return nil, errors.New("plan.json did not parse (see above)")
		}
		if err := plan.Check(p, e.Scenario); err != nil {
			return nil, errors.New("plan.json does not fit the scenario (see above)")
		}
		return flowmodel.Simulate(p, e.Scenario)
	})
}

// lockstep is the flow model's makespan of the lab's own starting plan.
func lockstep(e *Env) (int64, error) {
	data, err := fs.ReadFile(e.Lab.files, "start/plan.json")
	if err != nil {
		return 0, err
	}
	p, err := plan.Parse(data, "start/plan.json")
	if err != nil {
		return 0, err
	}
	r, err := flowmodel.Simulate(p, e.Scenario)
	if err != nil {
		return 0, err
	}
	return r.MakespanNs, nil
}

// commPhase says whether a phase moves data.
func commPhase(phase string) bool { return phase != "compute" }

func init() {
	registry["04-plan"] = []Check{
		{Name: "plan.json parses (plan version 1)", Run: func(ctx context.Context, e *Env) (string, error) {
			p, err := studentPlan(e)
			if err != nil {
				return "", err
			}
			return fmt.Sprintf("%s mode, %d jobs, %d stages", p.Mode, len(p.Jobs), len(p.Stages)), nil
		}},
		{Name: "the plan fits the lab's scenario (every phase once, in order, over circuits)", Run: func(ctx context.Context, e *Env) (string, error) {
			p, err := studentPlan(e)
			if err != nil {
				return "", errors.New("plan.json did not parse (see above)")
			}
			if err := plan.Check(p, e.Scenario); err != nil {
				return "", err
			}
			return "emu simulate would accept it", nil
		}},
		{Name: "the jobs interleave: one communicates while the other computes, never both at once", FailsOnStart: true, Run: func(ctx context.Context, e *Env) (string, error) {
			p, err := studentPlan(e)
			if err != nil {
				return "", errors.New("plan.json did not parse (see above)")
			}
			overlap := 0
			for i, st := range p.Stages {
				comm, compute := map[string]bool{}, map[string]bool{}
				for _, a := range st.Activities {
					if commPhase(a.Phase) {
						comm[a.Job] = true
					} else {
						compute[a.Job] = true
					}
				}
				if len(comm) > 1 {
					var js []string
					for j := range comm {
						js = append(js, j)
					}
					return "", fmt.Errorf("stage %d starts the communication of %s together: they share the one circuit and each gets half", i, strings.Join(js, " and "))
				}
				for j := range comm {
					for k := range compute {
						if j != k {
							overlap++
						}
					}
				}
			}
			if overlap == 0 {
				return "", errors.New("no stage runs one job's all-reduce beside the other's compute")
			}
			return fmt.Sprintf("%d stages hide one job's all-reduce behind the other's compute", overlap), nil
		}},
		{Name: "the flow model predicts a makespan at most 85% of the lockstep plan's", FailsOnStart: true, Run: func(ctx context.Context, e *Env) (string, error) {
			r, err := predicted(e)
			if err != nil {
				return "", err
			}
			base, err := lockstep(e)
			if err != nil {
				return "", err
			}
			frac := float64(r.MakespanNs) / float64(base)
			if frac > 0.85 {
				return "", fmt.Errorf("predicted %.1f ms, %.0f%% of the lockstep plan's %.1f ms", float64(r.MakespanNs)/1e6, 100*frac, float64(base)/1e6)
			}
			return fmt.Sprintf("predicted %.1f ms against %.1f ms in lockstep (%.0f%%)", float64(r.MakespanNs)/1e6, float64(base)/1e6, 100*frac), nil
		}},
		{Name: "answer: the makespan `emu simulate` predicts for your plan", FailsOnStart: true, Run: func(ctx context.Context, e *Env) (string, error) {
			n, err := e.Number("predicted_makespan_ms")
			if err != nil {
				return "", err
			}
			r, err := predicted(e)
			if err != nil {
				return "", err
			}
			want := float64(r.MakespanNs) / 1e6
			if math.Abs(n-want) > 0.02*want {
				return "", fmt.Errorf("you answered %v ms; `emu simulate plan.json -s scenario.yaml` predicts %.1f ms", n, want)
			}
			return fmt.Sprintf("%.1f ms", want), nil
		}},
		{Name: "answer: the makespan `emu run --plan` measured is plausible", FailsOnStart: true, Run: func(ctx context.Context, e *Env) (string, error) {
			n, err := e.Number("measured_makespan_ms")
			if err != nil {
				return "", err
			}
			r, err := predicted(e)
			if err != nil {
				return "", err
			}
			want := float64(r.MakespanNs) / 1e6
			if n < 0.9*want || n > 2*want {
				return "", fmt.Errorf("you measured %v ms for a plan predicted at %.1f ms: a run is rarely faster than the model, and seldom twice slower (see the run's report)", n, want)
			}
			return fmt.Sprintf("%v ms measured, %+.0f%% against the prediction", n, 100*(n-want)/want), nil
		}},
	}
}
