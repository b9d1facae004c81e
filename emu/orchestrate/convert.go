package orchestrate

import (
	"fmt"
	"slices"

	"github.com/ocsemu/ocsemu/emu/plan"
	"github.com/ocsemu/ocsemu/workers/job"
)

// WorkerJobs converts a plan's jobs into the workers' own job type: the
// one place where a plan becomes what the workers run. An INC job gets
// its aggregator number (its place in the plan, from 1); Run admits it at
// its ToRs and falls back to a CPU parameter server if one refuses.
func WorkerJobs(p *plan.Plan) ([]job.Job, error) {
	if len(p.Jobs) >= 1<<16 {
		return nil, fmt.Errorf("%d jobs: INC numbers jobs with 16 bits", len(p.Jobs))
	}
	out := make([]job.Job, 0, len(p.Jobs))
	decide, err := incPerIteration(p)
	if err != nil {
		return nil, err
	}
	for i, j := range p.Jobs {
		wj := job.Job{Name: j.Name, Pattern: j.Pattern, Workers: j.Workers, Bytes: j.Bytes,
			ComputeNs: j.ComputeNs, Iterations: j.Iterations, ArrivalNs: j.ArrivalNs, PS: j.PS, Ring: j.Ring,
			CongestionControl: j.CongestionControl, Steps: j.Steps, Tasks: j.Tasks}
		its, mixed := decide[j.Name]
		if j.INC || mixed && slices.Contains(its, true) {
			wj.INC = &job.INC{ID: uint16(i + 1), Window: DefaultINCWindow}
		}
		if mixed && wj.INC != nil && slices.Contains(its, false) {
			// Some iterations aggregate in the ToRs, others at the CPU
			// parameter server (paper 000 decides per slot).
			wj.INCIterations = its
		}
		out = append(out, wj)
	}
	return out, nil
}

// incPerIteration reads the plan's per-stage INC decisions (plan v2): for
// every job some activity of which decides, whether each iteration
// aggregates in the ToRs. An iteration's push and pull must agree: the
// INC push is the whole in-network all-reduce, and its pull only checks
// the result.
func incPerIteration(p *plan.Plan) (map[string][]bool, error) {
	out := map[string][]bool{}
	jobs := map[string]*plan.Job{}
	for i := range p.Jobs {
		jobs[p.Jobs[i].Name] = &p.Jobs[i]
	}
	set := map[string][]int{} // -1 unset, 0 false, 1 true; per iteration
	for si, st := range p.Stages {
		for _, a := range st.Activities {
			if a.INC == nil {
				continue
			}
			pj := jobs[a.Job]
			if pj == nil || a.Iteration < 0 || a.Iteration >= pj.Iterations {
				continue // plan.Check refuses it
			}
			if set[a.Job] == nil {
				set[a.Job] = make([]int, pj.Iterations)
				for k := range set[a.Job] {
					set[a.Job][k] = -1
				}
			}
			v := 0
			if *a.INC {
				v = 1
			}
			if prev := set[a.Job][a.Iteration]; prev >= 0 && prev != v {
				return nil, fmt.Errorf("stage %d: job %s iteration %d %s decides inc %v, but the iteration's other phase decided %v: the workers aggregate a whole iteration in the ToRs (push is the in-network all-reduce) or at the parameter server", si, a.Job, a.Iteration, a.Phase, *a.INC, prev == 1)
			}
			set[a.Job][a.Iteration] = v
		}
	}
	for name, its := range set {
		pj := jobs[name]
		dec := make([]bool, len(its))
		for k, v := range its {
			dec[k] = v == 1 || v < 0 && pj.INC
		}
		out[name] = dec
	}
	return out, nil
}

// DefaultINCWindow is the slots each worker of an INC job keeps in flight
// (capped by the job's partition). 64 starved INC beside TCP jobs that
// fill the shared shaper queues: docs/inc.md, "INC beside TCP".
const DefaultINCWindow = 256

// Schedule converts a plan's stages into the schedule that gates the
// workers' phases.
func Schedule(p *plan.Plan) *job.Schedule {
	s := &job.Schedule{Mode: p.Mode, Stages: make([]job.Stage, len(p.Stages))}
	for i, st := range p.Stages {
		s.Stages[i].StartNs = st.StartNs
		for _, a := range st.Activities {
			s.Stages[i].Activities = append(s.Stages[i].Activities, job.Activity{
				Key: job.Key{Job: a.Job, Iteration: a.Iteration, Phase: plan.ActivityPhase(a)}, StartNs: a.StartNs})
		}
	}
	return s
}
