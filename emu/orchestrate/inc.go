package orchestrate

import (
	"context"
	"errors"
	"fmt"
	"net/netip"

	"github.com/ocsemu/ocsemu/dataplane/inc"
	"github.com/ocsemu/ocsemu/dataplane/topo"
	"github.com/ocsemu/ocsemu/emu/plan"
	"github.com/ocsemu/ocsemu/workers/job"
)

// Aggregators reach the ToR aggregators of a lab (emu agg; tests use a
// fake).
type Aggregators interface {
	Admit(ctx context.Context, tor string, cfg inc.JobConfig) error
	Release(ctx context.Context, tor string, id uint16) error
}

// Admission is what the aggregators decided for one INC job: written with
// the results, so that a job that fell back to a CPU parameter server says
// so.
type Admission struct {
	Job        string   `json:"job"`
	ID         uint16   `json:"id"`
	Admitted   bool     `json:"admitted"`
	ToRs       []string `json:"tors"`
	Aggregator string   `json:"aggregator"`
	// FallbackPS is the server of the CPU parameter server the job ran
	// with instead, and Reason why.
	FallbackPS string `json:"fallback_ps,omitempty"`
	Reason     string `json:"reason,omitempty"`
}

// admitINC asks every ToR of each INC job, in plan order, to admit it
// for the stages it is active in: each ToR sums its own workers, the
// plan's aggregator ToR completes the sum. A ToR holds at most its
// capacity of jobs in any one stage, the rule plan.Check and the
// scheduler apply, so a checked plan is admitted whole. A job some ToR
// refuses all the same falls back to a CPU parameter server on its first
// worker's server (jobs is changed in place). release frees what was
// admitted.
func admitINC(ctx context.Context, ag Aggregators, p *plan.Plan, jobs []job.Job, window int) (adm []Admission, release func(), err error) {
	type held struct {
		tor string
		id  uint16
	}
	// A job is active from the stage of its first activity that
	// aggregates in the ToRs to that of its last: the span plan.Check and
	// the scheduler count capacity over (with INC decided per stage, only
	// the activities that decide for it count).
	pjobs := map[string]*plan.Job{}
	for i := range p.Jobs {
		pjobs[p.Jobs[i].Name] = &p.Jobs[i]
	}
	first, last := map[string]int{}, map[string]int{}
	for si, st := range p.Stages {
		for _, a := range st.Activities {
			if pj := pjobs[a.Job]; pj == nil || !pj.EffectiveINC(a.INC) {
				continue
			}
			if _, ok := first[a.Job]; !ok {
				first[a.Job] = si
			}
			last[a.Job] = si
		}
	}
	var all []held
	release = func() {
		for _, h := range all {
			_ = ag.Release(context.WithoutCancel(ctx), h.tor, h.id)
		}
	}
	for i := range p.Jobs {
		pj := &p.Jobs[i]
		if jobs[i].INC == nil {
			continue
		}
		tors := pj.ToRs()
		root := indexOf(tors, pj.Aggregator)
		a := Admission{Job: pj.Name, ID: jobs[i].INC.ID, ToRs: tors, Aggregator: pj.Aggregator}
		var reason error
		switch {
		case ag == nil:
			reason = errors.New("the lab runs no aggregators")
		case root < 0:
			reason = fmt.Errorf("aggregator %s holds none of the job's workers (ToRs %v)", pj.Aggregator, tors)
		}
		var mine []held
		for t := 0; reason == nil && t < len(tors); t++ {
			cfg := inc.JobConfig{ID: a.ID, ToRs: len(tors), Index: t, FirstStage: first[pj.Name], LastStage: max(last[pj.Name], first[pj.Name])}
			if t != root {
				cfg.Parent = netip.AddrPortFrom(topo.GatewayAddr(plan.Rack(pj.Aggregator)), inc.Port)
			}
			if err := ag.Admit(ctx, tors[t], cfg); err != nil {
				if !errors.Is(err, inc.ErrNoRoom) {
					release()
					for _, h := range mine {
						_ = ag.Release(context.WithoutCancel(ctx), h.tor, h.id)
					}
					return nil, func() {}, fmt.Errorf("job %s: admit at %s: %w", pj.Name, tors[t], err)
				}
				reason = fmt.Errorf("%s: %w", tors[t], err)
				break
			}
			mine = append(mine, held{tors[t], a.ID})
		}
		if reason != nil {
			for _, h := range mine {
				_ = ag.Release(context.WithoutCancel(ctx), h.tor, h.id)
			}
			jobs[i].INC, jobs[i].INCIterations = nil, nil
			if jobs[i].PS == "" {
				jobs[i].PS = jobs[i].Workers[0]
			}
			a.FallbackPS, a.Reason = jobs[i].PS, reason.Error()
		} else {
			a.Admitted = true
			jobs[i].INC.Window = window
			all = append(all, mine...)
		}
		adm = append(adm, a)
	}
	return adm, release, nil
}

func indexOf(s []string, x string) int {
	for i, v := range s {
		if v == x {
			return i
		}
	}
	return -1
}
