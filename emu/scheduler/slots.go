package scheduler

import (
	"fmt"
	"sort"
	"time"

	"github.com/ocsemu/ocsemu/emu/flowmodel"
	"github.com/ocsemu/ocsemu/emu/plan"
	"github.com/ocsemu/ocsemu/emu/scenario"
	"github.com/ocsemu/ocsemu/ocsfabric/circuit"
)

// policy is what a time-slotted scheduler decides; the slot loop does the
// rest (admission, INC bookkeeping, the flow model, the plan).
type policy struct {
	name string
	// largeINC grants INC, among the jobs admitted in a slot, largest
	// first (more workers, then more bytes), while the ToRs have room;
	// the rest get a CPU PS (paper 000's step 2: "allocate CPU resources
	// as PS aggregators for the remaining jobs when INC resources
	// exhaust"). Otherwise INC goes in arrival order to every job that
	// asks.
	largeINC bool
	// circuits chooses the slot's circuit map (OCS fabrics only).
	circuits func(l *loop) circuit.Config
	// notBefore, if set, delays a job's admission (interleave's cohorts).
	notBefore func(ji int) int64
	// setup, if set, sees the jobs (in arrival order) before slot 0.
	setup func(l *loop)
	// largestFirst admits the waiting jobs that have arrived largest
	// first (larger), not in arrival order (ljf with scheduler.order:
	// largest).
	largestFirst bool
}

// loop is the state of one slotted planning run, as policies see it.
type loop struct {
	s    *scenario.Scenario
	sim  *flowmodel.Sim
	jobs []plan.Job
	// prev is the previous slot's circuit map.
	prev circuit.Config
	slot int64
	now  int64
}

// slotted is the slot loop every time-slotted scheduler shares. At every
// slot it
//
//  1. frees the servers and INC slots of jobs that have finished;
//  2. admits waiting jobs that have arrived (by the end of the slot), in
//     arrival order (or largest first, policy.largestFirst); with scheduler.exclusive_servers a job waits until
//     none of its servers is used by an active job, and servers of a
//     waiting job are reserved against later jobs (no starvation);
//  3. grants INC to the admitted jobs that ask for it, in the policy's
//     order, while every one of their ToRs has capacity (scheduler.inc:
//     false turns INC off);
//  4. sets the slot's circuits and runs the flow model to the slot's end.
func slotted(s *scenario.Scenario, pol policy) (*plan.Plan, error) {
	if len(s.Jobs) == 0 {
		return nil, fmt.Errorf("scenario %q has no jobs to plan", s.Name)
	}
	f := s.Fabric
	if f.Kind == scenario.KindOCS && f.Racks > 2 && f.UplinksPerToR < 2 {
		return nil, fmt.Errorf("%s keeps a base ring of circuits so every rack stays reachable; that needs uplinks_per_tor >= 2 (got %d)", pol.name, f.UplinksPerToR)
	}
	slot := int64(s.Scheduler.Slot)
	jobs := plan.JobsFromScenario(s)
	psOf := map[string]string{}
	for i := range s.Jobs {
		psOf[s.Jobs[i].Name] = s.Jobs[i].PSServer()
	}
	sort.SliceStable(jobs, func(a, b int) bool { return jobs[a].ArrivalNs < jobs[b].ArrivalNs })
	wantINC := make([]bool, len(jobs))
	for i := range jobs {
		wantINC[i] = jobs[i].INC && !s.Scheduler.INCOff()
		jobs[i].INC, jobs[i].Aggregator = false, "" // granted at admission
		if jobs[i].Pattern == scenario.PatternPS && jobs[i].PS == "" {
			jobs[i].PS = psOf[jobs[i].Name]
		}
	}
	// waiting is the admission order.
	waiting := make([]int, len(jobs))
	for i := range waiting {
		waiting[i] = i
	}
	p := &plan.Plan{Version: plan.Version, Scenario: s.Name, Scheduler: pol.name, Mode: plan.ModeClock}
	sim := flowmodel.New(f, jobs, flowmodel.Options{ASAP: true, DelayNs: int64(f.OCS.ReconfigDelay)})
	for ji := range jobs {
		sim.Hold(ji)
	}
	keys := make([][]plan.Key, len(jobs)) // each job's phases, listed once
	keysOf := func(ji int) []plan.Key {
		if keys[ji] == nil {
			keys[ji] = jobs[ji].Phases()
		}
		return keys[ji]
	}
	sim.OnPhaseStart = func(ji, q int, t int64) {
		k := int(t / slot)
		j := &jobs[ji]
		key := keysOf(ji)[q]
		tt := t
		p.Stages[k].Activities = append(p.Stages[k].Activities, plan.Activity{Job: j.Name, Iteration: key.Iteration, Phase: key.Phase, StartNs: &tt})
	}
	l := &loop{s: s, sim: sim, jobs: jobs, slot: slot}
	if pol.setup != nil {
		pol.setup(l)
	}
	incUse := map[string][]int{}  // ToR -> INC jobs holding it
	busy := map[string]int{}      // server -> active job using it
	active := map[int]bool{}      // admitted, not yet known to be finished
	reserved := map[string]bool{} // servers of waiting jobs, per slot (kept to reuse its storage)
	for k := 0; ; k++ {
		if k >= MaxSlots {
			return nil, fmt.Errorf("scheduler %s: the jobs need more than %d slots of %v (%v of schedule): fewer or shorter iterations, or a longer scheduler.slot", s.Scheduler.Name, MaxSlots, s.Scheduler.Slot, time.Duration(MaxSlots)*s.Scheduler.Slot.D())
		}
		t := int64(k) * slot
		l.now = t
		p.Stages = append(p.Stages, plan.Stage{StartNs: t, DurationNs: slot})
		finished := func(ji int) bool {
			_, end := sim.PhaseTimes(ji, len(keysOf(ji))-1)
			return end >= 0 && end <= t
		}
		for ji := range active {
			if finished(ji) {
				delete(active, ji)
				for _, w := range jobs[ji].Workers {
					if busy[w] == ji {
						delete(busy, w)
					}
				}
			}
		}
		for tor, js := range incUse {
			keep := js[:0]
			for _, ji := range js {
				if !finished(ji) {
					keep = append(keep, ji)
				}
			}
			incUse[tor] = keep
		}
		clear(reserved)
		var admitted []int
		if pol.largestFirst {
			arrived := func(ji int) bool { return jobs[ji].ArrivalNs < t+slot }
			sort.SliceStable(waiting, func(a, b int) bool {
				ja, jb := waiting[a], waiting[b]
				if arrived(ja) != arrived(jb) {
					return arrived(ja)
				}
				return arrived(ja) && larger(&jobs[ja], &jobs[jb])
			})
		}
		rest := waiting[:0]
		for _, ji := range waiting {
			j := &jobs[ji]
			nb := j.ArrivalNs
			if pol.notBefore != nil {
				nb = max(nb, pol.notBefore(ji))
			}
			if nb >= t+slot {
				rest = append(rest, ji)
				continue
			}
			if s.Scheduler.ExclusiveServers {
				free := true
				for _, w := range j.Workers {
					if _, used := busy[w]; used || reserved[w] {
						free = false
					}
				}
				if !free {
					for _, w := range j.Workers {
						reserved[w] = true
					}
					rest = append(rest, ji)
					continue
				}
				for _, w := range j.Workers {
					busy[w] = ji
				}
			}
			admitted = append(admitted, ji)
			active[ji] = true
		}
		if pol.largeINC {
			sort.SliceStable(admitted, func(a, b int) bool { return larger(&jobs[admitted[a]], &jobs[admitted[b]]) })
		}
		for _, ji := range admitted {
			j := &jobs[ji]
			if wantINC[ji] {
				ok := true
				for _, tor := range j.ToRs() {
					if len(incUse[tor]) >= f.INC.Capacity {
						ok = false
					}
				}
				if ok {
					j.INC, j.PS, j.Aggregator = true, "", plan.DefaultAggregator(j.Workers)
					for _, tor := range j.ToRs() {
						incUse[tor] = append(incUse[tor], ji)
					}
				}
			}
			nb := j.ArrivalNs
			if pol.notBefore != nil {
				nb = max(nb, pol.notBefore(ji))
			}
			sim.Admit(ji, max(nb, t))
		}
		waiting = rest
		var cfg circuit.Config
		if f.HasOCS() {
			cfg = pol.circuits(l)
		}
		p.Stages[k].Circuits = cfg.Circuits
		sim.SetCircuits(cfg, k == 0)
		l.prev = cfg
		sim.RunUntil(t + slot - 1)
		if sim.Done() && len(waiting) == 0 {
			break
		}
	}
	p.Jobs = jobs
	run := sim.Result()
	p.Predicted = &plan.Predicted{MakespanNs: run.MakespanNs, JobsNs: map[string]int64{}}
	for _, jr := range run.Jobs {
		p.Predicted.JobsNs[jr.Job] = jr.JCTNs
	}
	for k := range p.Stages {
		p.Stages[k].PredictedNs = p.Stages[k].DurationNs
	}
	return p, nil
}

// larger orders jobs by worker count, then bytes per worker, largest
// first; ties keep arrival order (the sort is stable).
func larger(a, b *plan.Job) bool {
	if len(a.Workers) != len(b.Workers) {
		return len(a.Workers) > len(b.Workers)
	}
	return a.Bytes > b.Bytes
}
