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
	// plan.Check refuses an iteration whose push and pull disagree; so
	// does this, for a plan that skipped it (one message, plan's).
	decide, err := plan.IterationINC(p)
	if err != nil {
		return nil, err
	}
	for i, j := range p.Jobs {
		wj := job.Job{Name: j.Name, Pattern: j.Pattern, Workers: j.Workers, Bytes: j.Bytes,
			ComputeNs: j.ComputeNs, Iterations: j.Iterations, ArrivalNs: j.ArrivalNs, PS: j.PS, Ring: j.Ring,
			CongestionControl: j.CongestionControl, Steps: j.Steps, Tasks: j.Tasks}
		// A ps job's iterations aggregate in the ToRs as their push and
		// pull decide (plan v2) or, undecided, as the job says.
		its, ps := decide[j.Name]
		if j.INC && !ps || slices.Contains(its, true) {
			wj.INC = &job.INC{ID: uint16(i + 1), Window: DefaultINCWindow}
		}
		if wj.INC != nil && slices.Contains(its, false) {
			// Some iterations aggregate in the ToRs, others at the CPU
			// parameter server (paper 000 decides per slot).
			wj.INCIterations = its
		}
		out = append(out, wj)
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
