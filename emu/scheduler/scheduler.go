// Package scheduler holds the reference schedulers that turn a scenario
// into a plan. Both baselines here work in time slots (clock mode) and
// run the flow model as they plan, so every phase lands in the slot where
// the model says it starts, and the plan carries the model's prediction:
//
//   - fcfs: paper 000's FCFS baseline. At every slot, circuits are fitted
//     to the current demand greedily in job arrival order; INC goes to
//     arriving jobs in arrival order while their ToRs have capacity.
//   - static: paper 004's TopoOpt-style baseline. One topology, chosen
//     once from the whole run's rack-to-rack traffic heatmap, held for
//     the run.
//
// Both keep a base ring of circuits (when ToRs have two or more uplinks),
// so that every rack can reach every other at every slot: a plan whose
// activity has no path is refused by plan.Check.
package scheduler

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/ocsemu/ocsemu/emu/flowmodel"
	"github.com/ocsemu/ocsemu/emu/plan"
	"github.com/ocsemu/ocsemu/emu/scenario"
	"github.com/ocsemu/ocsemu/ocsfabric/circuit"
)

// Names lists the built-in schedulers.
var Names = []string{"fcfs", "static"}

// MaxSlots bounds a plan's length.
const MaxSlots = 1_000_000

// Plan runs the scenario's scheduler.
func Plan(s *scenario.Scenario) (*plan.Plan, error) {
	switch s.Scheduler.Name {
	case "fcfs":
		return slotted(s, "fcfs", fcfsCircuits)
	case "static":
		st, err := staticTopology(s)
		if err != nil {
			return nil, err
		}
		return slotted(s, "static", func(*scenario.Scenario, *flowmodel.Sim, []plan.Job) circuit.Config { return st })
	}
	if plan, ok := registered[s.Scheduler.Name]; ok {
		return plan(s)
	}
	return nil, fmt.Errorf("unknown scheduler %q (built in: %s)", s.Scheduler.Name, strings.Join(Names, ", "))
}

// registered holds the schedulers that add themselves from their own file
// (oddl.go, topox.go), in Names too.
var registered = map[string]func(*scenario.Scenario) (*plan.Plan, error){}

func register(name string, plan func(*scenario.Scenario) (*plan.Plan, error)) {
	registered[name] = plan
	Names = append(Names, name)
}

type circuitsFn func(s *scenario.Scenario, sim *flowmodel.Sim, jobs []plan.Job) circuit.Config

// slotted is the slot loop both baselines share.
func slotted(s *scenario.Scenario, name string, choose circuitsFn) (*plan.Plan, error) {
	if len(s.Jobs) == 0 {
		return nil, fmt.Errorf("scenario %q has no jobs to plan", s.Name)
	}
	f := s.Fabric
	if f.Kind == scenario.KindOCS && f.Racks > 2 && f.UplinksPerToR < 2 {
		return nil, fmt.Errorf("%s keeps a base ring of circuits so every rack stays reachable; that needs uplinks_per_tor >= 2 (got %d)", name, f.UplinksPerToR)
	}
	slot := int64(s.Scheduler.Slot)
	jobs := plan.JobsFromScenario(s)
	sort.SliceStable(jobs, func(a, b int) bool { return jobs[a].ArrivalNs < jobs[b].ArrivalNs })
	wantINC := make([]bool, len(jobs))
	for i := range jobs {
		wantINC[i] = jobs[i].INC
		jobs[i].INC = false // granted at arrival
		if jobs[i].Pattern == scenario.PatternPS && jobs[i].PS == "" {
			jobs[i].PS = jobs[i].Workers[0]
		}
	}
	p := &plan.Plan{Version: plan.Version, Scenario: s.Name, Scheduler: name, Mode: plan.ModeClock}
	sim := flowmodel.New(f, jobs, flowmodel.Options{ASAP: true, DelayNs: int64(f.OCS.ReconfigDelay)})
	sim.OnPhaseStart = func(ji, q int, t int64) {
		k := int(t / slot)
		j := &jobs[ji]
		key := j.Phases()[q]
		tt := t
		p.Stages[k].Activities = append(p.Stages[k].Activities, plan.Activity{Job: j.Name, Iteration: key.Iteration, Phase: key.Phase, StartNs: &tt})
	}
	incUse := map[string][]int{} // ToR -> INC jobs holding it
	next := 0                    // next job to arrive
	for k := 0; ; k++ {
		if k >= MaxSlots {
			return nil, fmt.Errorf("plan exceeds %d slots of %v", MaxSlots, s.Scheduler.Slot)
		}
		t := int64(k) * slot
		// Release INC held by jobs that have finished.
		for tor, js := range incUse {
			keep := js[:0]
			for _, ji := range js {
				if _, end := sim.PhaseTimes(ji, len(jobs[ji].Phases())-1); end < 0 || end > t {
					keep = append(keep, ji)
				}
			}
			incUse[tor] = keep
		}
		// Grant INC to jobs arriving in this slot, in arrival order.
		for ; next < len(jobs) && jobs[next].ArrivalNs < t+slot; next++ {
			j := &jobs[next]
			if !wantINC[next] {
				continue
			}
			ok := true
			for _, tor := range j.ToRs() {
				if len(incUse[tor]) >= f.INC.Capacity {
					ok = false
				}
			}
			if ok {
				j.INC, j.PS, j.Aggregator = true, "", plan.DefaultAggregator(j.Workers)
				for _, tor := range j.ToRs() {
					incUse[tor] = append(incUse[tor], next)
				}
			}
		}
		var cfg circuit.Config
		if f.HasOCS() {
			cfg = choose(s, sim, jobs)
		}
		p.Stages = append(p.Stages, plan.Stage{StartNs: t, DurationNs: slot, Circuits: cfg.Circuits})
		sim.SetCircuits(cfg, k == 0)
		sim.RunUntil(t + slot - 1)
		if sim.Done() && next == len(jobs) {
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

// ports tracks free uplinks per rack and OCS switch.
type ports struct {
	layout circuit.Layout
	free   map[[2]int][]int // (rack, ocs) -> free uplinks
	cfg    circuit.Config
	count  map[[2]int]int // undirected rack pair -> circuits
}

func newPorts(f scenario.Fabric) *ports {
	p := &ports{layout: circuit.LayoutOf(f.Spec("")), free: map[[2]int][]int{}, count: map[[2]int]int{}}
	for r := 0; r < f.Racks; r++ {
		for u := 0; u < f.UplinksPerToR; u++ {
			sw, _ := p.layout.Switch(circuit.Uplink{Rack: r, Port: u})
			p.free[[2]int{r, sw}] = append(p.free[[2]int{r, sw}], u)
		}
	}
	return p
}

// connect adds one circuit between racks a and b if both have a free
// uplink on a common OCS.
func (p *ports) connect(a, b int) bool {
	if a == b {
		return false
	}
	for sw := 0; sw < p.layout.Switches; sw++ {
		fa, fb := p.free[[2]int{a, sw}], p.free[[2]int{b, sw}]
		if len(fa) == 0 || len(fb) == 0 {
			continue
		}
		p.cfg.Circuits = append(p.cfg.Circuits, circuit.Circuit{A: circuit.Uplink{Rack: a, Port: fa[0]}, B: circuit.Uplink{Rack: b, Port: fb[0]}})
		p.free[[2]int{a, sw}], p.free[[2]int{b, sw}] = fa[1:], fb[1:]
		p.count[pair(a, b)]++
		return true
	}
	return false
}

func pair(a, b int) [2]int {
	if a > b {
		a, b = b, a
	}
	return [2]int{a, b}
}

// baseRing connects rack i to rack i+1 (and the last to the first), so
// that every rack reaches every other over multi-hop paths.
func (p *ports) baseRing(racks int) {
	if racks < 2 {
		return
	}
	if racks == 2 {
		p.connect(0, 1)
		return
	}
	if p.layout.Uplinks < 2 {
		return
	}
	for r := 0; r < racks; r++ {
		p.connect(r, (r+1)%racks)
	}
}

// fcfsCircuits fits circuits to the demand of active jobs, greedily in
// arrival order: every job's rack pairs get a circuit in turn, then extra
// circuits go round again, in the same order, while ports remain.
func fcfsCircuits(s *scenario.Scenario, sim *flowmodel.Sim, jobs []plan.Job) circuit.Config {
	p := newPorts(s.Fabric)
	p.baseRing(s.Fabric.Racks)
	demand := sim.ActiveRackDemand()
	var order [][2]int
	seen := map[[2]int]bool{}
	for _, ji := range sim.JobsActive() {
		j := &jobs[ji]
		for _, ph := range []string{scenario.PhasePush, scenario.PhasePull, scenario.PhaseAllReduce, scenario.PhaseAllToAll} {
			for _, rp := range j.RackPairs(ph) {
				pp := pair(rp[0], rp[1])
				if !seen[pp] && demand[rp] > 0 {
					seen[pp] = true
					order = append(order, pp)
				}
			}
		}
	}
	for round := 0; round < s.Fabric.UplinksPerToR; round++ {
		added := false
		for _, pp := range order {
			if p.connect(pp[0], pp[1]) {
				added = true
			}
		}
		if !added {
			break
		}
	}
	return p.cfg
}

// staticTopology chooses one topology for the whole run from the traffic
// heatmap: a base ring, then circuits one at a time to the rack pair with
// the most bytes per circuit, while ports remain (TopoOpt-style).
func staticTopology(s *scenario.Scenario) (circuit.Config, error) {
	return staticFromJobs(s.Fabric, plan.JobsFromScenario(s)), nil
}

// staticFromJobs is staticTopology for given jobs (pattern or dag jobs).
func staticFromJobs(f scenario.Fabric, jobs []plan.Job) circuit.Config {
	if !f.HasOCS() {
		return circuit.Config{}
	}
	heat := map[[2]int]float64{}
	for _, j := range jobs {
		for _, ph := range j.IterPhases() {
			for _, fl := range j.Flows(ph) {
				if a, b := plan.Rack(fl.Src), plan.Rack(fl.Dst); a != b {
					heat[pair(a, b)] += fl.Bytes * float64(j.Iterations)
				}
			}
		}
	}
	p := newPorts(f)
	p.baseRing(f.Racks)
	type cand struct {
		pr    [2]int
		bytes float64
	}
	var cands []cand
	for pr, b := range heat {
		cands = append(cands, cand{pr, b})
	}
	sort.Slice(cands, func(i, j int) bool {
		if cands[i].bytes != cands[j].bytes {
			return cands[i].bytes > cands[j].bytes
		}
		return cands[i].pr[0] < cands[j].pr[0] || cands[i].pr[0] == cands[j].pr[0] && cands[i].pr[1] < cands[j].pr[1]
	})
	// Greedy on bytes per circuit. The sort above makes ties go the same
	// way on every run; a pair that can get no more ports drops out.
	for len(cands) > 0 {
		best, bestScore := 0, -1.0
		for i, c := range cands {
			if score := c.bytes / float64(p.count[c.pr]+1); score > bestScore {
				best, bestScore = i, score
			}
		}
		if !p.connect(cands[best].pr[0], cands[best].pr[1]) {
			cands = slices.Delete(cands, best, best+1)
		}
	}
	return p.cfg
}
