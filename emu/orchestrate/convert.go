package orchestrate

import (
	"fmt"

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
	jobINC := map[string]bool{}
	for i, j := range p.Jobs {
		if j.Pattern == plan.PatternDAG {
			return nil, fmt.Errorf("job %s is a task graph (pattern dag), which the workers do not run yet: predict it with emu simulate", j.Name)
		}
		wj := job.Job{Name: j.Name, Pattern: j.Pattern, Workers: j.Workers, Bytes: j.Bytes,
			ComputeNs: j.ComputeNs, Iterations: j.Iterations, ArrivalNs: j.ArrivalNs, PS: j.PS, Ring: j.Ring,
			CongestionControl: j.CongestionControl, Steps: j.Steps}
		if j.INC {
			wj.INC = &job.INC{ID: uint16(i + 1), Window: DefaultINCWindow}
		}
		jobINC[j.Name] = j.INC
		out = append(out, wj)
	}
	for si, st := range p.Stages {
		for _, a := range st.Activities {
			if a.INC != nil && *a.INC != jobINC[a.Job] {
				return nil, fmt.Errorf("stage %d: job %s iteration %d %s decides in-network aggregation per stage (plan v2), which the workers do not run yet: they run a job with or without INC for its whole life", si, a.Job, a.Iteration, a.Phase)
			}
		}
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
