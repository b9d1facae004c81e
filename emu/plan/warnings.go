package plan

import (
	"fmt"
	"time"

	"github.com/ocsemu/ocsemu/emu/scenario"
	"github.com/ocsemu/ocsemu/ocsfabric/circuit"
	"github.com/ocsemu/ocsemu/workers/job"
)

// Warnings are what Check lets pass but a plan's author likely did not
// mean: a job that differs from the scenario's job of the same name (the
// plan's job is what runs), and a clock stage that changes circuits but
// is shorter than their dark period (a stage in ms where ns were meant).
func Warnings(p *Plan, s *scenario.Scenario) []string {
	var out []string
	byName := map[string]*scenario.Job{}
	for i := range s.Jobs {
		byName[s.Jobs[i].Name] = &s.Jobs[i]
	}
	for _, j := range p.Jobs {
		sj, ok := byName[j.Name]
		if !ok {
			continue
		}
		var diff []string
		if j.Pattern != sj.Pattern {
			diff = append(diff, fmt.Sprintf("pattern %s (scenario %s)", j.Pattern, sj.Pattern))
		}
		if !job.SameMembers(j.Workers, sj.Workers) {
			diff = append(diff, fmt.Sprintf("workers %v (scenario %v)", j.Workers, sj.Workers))
		}
		if j.Pattern != scenario.PatternDAG && j.Bytes != int64(sj.Bytes) {
			diff = append(diff, fmt.Sprintf("bytes %d (scenario %d)", j.Bytes, int64(sj.Bytes)))
		}
		if j.Iterations != sj.Iterations {
			diff = append(diff, fmt.Sprintf("iterations %d (scenario %d)", j.Iterations, sj.Iterations))
		}
		if sj.PS != "" && j.PS != "" && j.PS != sj.PS {
			diff = append(diff, fmt.Sprintf("ps %s (scenario %s)", j.PS, sj.PS))
		}
		for _, d := range diff {
			out = append(out, fmt.Sprintf("job %s: %s: the plan's job is what runs", j.Name, d))
		}
	}
	if p.Mode == ModeClock && s.Fabric.HasOCS() {
		delay := s.Spec().ReconfigDelay.D()
		if p.ReconfigDelayNs != nil {
			delay = time.Duration(*p.ReconfigDelayNs)
		}
		short := 0
		for k := 1; k < len(p.Stages); k++ {
			st := p.Stages[k]
			if len(circuit.Dark(circuit.Config{Circuits: p.Stages[k-1].Circuits}, circuit.Config{Circuits: st.Circuits})) == 0 {
				continue
			}
			if time.Duration(st.DurationNs) < delay {
				if short == 0 {
					out = append(out, fmt.Sprintf("stage %d lasts %v, shorter than the %v its changed circuits are dark (start_ns and duration_ns are nanoseconds)", k, time.Duration(st.DurationNs), delay))
				}
				short++
			}
		}
		if short > 1 {
			out = append(out, fmt.Sprintf("%d stages in all change circuits and are shorter than their dark period", short))
		}
	}
	return out
}
