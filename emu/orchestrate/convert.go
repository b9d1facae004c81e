package orchestrate

import (
	"fmt"

	"github.com/ocsemu/ocsemu/emu/plan"
	"github.com/ocsemu/ocsemu/workers/job"
)

// WorkerJobs converts a plan's jobs into the workers' own job type: the
// one place where a plan becomes what the workers run. A job the workers
// cannot run yet (in-network aggregation) is refused here, before any
// kernel work.
func WorkerJobs(p *plan.Plan) ([]job.Job, error) {
	out := make([]job.Job, 0, len(p.Jobs))
	for _, j := range p.Jobs {
		if j.INC {
			return nil, fmt.Errorf("job %s asks for in-network aggregation, which the emulator does not run yet: plan it with inc: false (a CPU parameter server)", j.Name)
		}
		if j.Pattern == plan.PatternDAG {
			return nil, fmt.Errorf("job %s is a task graph (pattern dag), which the workers do not run yet: predict it with emu simulate", j.Name)
		}
		out = append(out, job.Job{Name: j.Name, Pattern: j.Pattern, Workers: j.Workers, Bytes: j.Bytes,
			ComputeNs: j.ComputeNs, Iterations: j.Iterations, ArrivalNs: j.ArrivalNs, PS: j.PS, Ring: j.Ring,
			CongestionControl: j.CongestionControl, Steps: j.Steps})
	}
	for si, st := range p.Stages {
		for _, a := range st.Activities {
			if a.INC != nil && *a.INC {
				return nil, fmt.Errorf("stage %d: job %s iteration %d %s asks for in-network aggregation, which the emulator does not run yet", si, a.Job, a.Iteration, a.Phase)
			}
		}
	}
	return out, nil
}

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
