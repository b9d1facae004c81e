package plan

import (
	"fmt"

	"github.com/ocsemu/ocsemu/emu/scenario"
)

// EffectiveINC is whether an activity of j whose own decision is inc
// (plan v2; nil when it makes none) aggregates in the ToRs: its decision,
// or else the job's. The flow model, the checker, WorkerJobs and the
// aggregators' admission all ask this one function.
func (j *Job) EffectiveINC(inc *bool) bool {
	if inc != nil {
		return *inc
	}
	return j.INC
}

// iterationINC records, per ps job and iteration, the effective INC
// decision of the iteration's push and pull, which must agree: the INC
// push is the whole in-network all-reduce and its pull moves nothing, so
// workers aggregate a whole iteration either in the ToRs or at the CPU
// parameter server.
type iterationINC map[jobIteration]phaseINC

type jobIteration struct {
	job       string
	iteration int
}

// phaseINC is the first decision recorded for an iteration and the phase
// that made it.
type phaseINC struct {
	inc   bool
	phase string
}

// record notes the decision of activity a of job j, in stage si, and
// refuses one that contradicts the iteration's other phase. Activities
// other than a ps job's push and pull decide nothing.
func (d iterationINC) record(si int, j *Job, a Activity) error {
	if j.Pattern != scenario.PatternPS || a.Phase != scenario.PhasePush && a.Phase != scenario.PhasePull {
		return nil
	}
	k := jobIteration{j.Name, a.Iteration}
	inc := j.EffectiveINC(a.INC)
	prev, ok := d[k]
	if !ok {
		d[k] = phaseINC{inc, a.Phase}
		return nil
	}
	if prev.inc != inc {
		return fmt.Errorf("stage %d: job %s iteration %d %s decides inc %v, but the iteration's %s decided %v (an unset inc is the job's, %v): the workers aggregate a whole iteration in the ToRs (push is the in-network all-reduce) or at the parameter server",
			si, j.Name, a.Iteration, a.Phase, inc, prev.phase, prev.inc, j.INC)
	}
	return nil
}

// IterationINC is, for every ps job of a checked plan, whether each
// iteration aggregates in the ToRs (EffectiveINC of its push and pull).
// It refuses an iteration whose push and pull disagree, as Check does.
func IterationINC(p *Plan) (map[string][]bool, error) {
	jobs := map[string]*Job{}
	out := map[string][]bool{}
	for i := range p.Jobs {
		j := &p.Jobs[i]
		if j.Pattern != scenario.PatternPS || j.Iterations < 1 || j.Iterations > MaxIterations {
			continue
		}
		jobs[j.Name] = j
		its := make([]bool, j.Iterations)
		for k := range its {
			its[k] = j.INC
		}
		out[j.Name] = its
	}
	d := iterationINC{}
	for si, st := range p.Stages {
		for _, a := range st.Activities {
			j := jobs[a.Job]
			if j == nil || a.Iteration < 0 || a.Iteration >= j.Iterations {
				continue // Check refuses it
			}
			if err := d.record(si, j, a); err != nil {
				return nil, err
			}
			out[j.Name][a.Iteration] = j.EffectiveINC(a.INC)
		}
	}
	return out, nil
}
