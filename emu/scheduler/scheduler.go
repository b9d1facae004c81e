// Package scheduler holds the reference schedulers that turn a scenario
// into a plan (docs/schedulers.md). The slotted ones work in time slots
// (clock mode) on one loop (slots.go) and run the flow model as they plan,
// so every phase lands in the slot where the model says it starts, and the
// plan carries the model's prediction:
//
//   - fcfs: paper 000's FCFS baseline. At every slot, circuits are fitted
//     to the current demand greedily in job arrival order; INC goes to
//     arriving jobs in arrival order while their ToRs have capacity.
//   - static: paper 004's TopoOpt-style baseline. One topology, chosen
//     once from the whole run's rack-to-rack traffic heatmap, held for
//     the run.
//   - ljf: paper 000's large-job-first (ljf.go): INC to the largest jobs
//     first, circuits changed only where one would be a bottleneck.
//   - interleave: paper 000's grouping-based interleaving (interleave.go).
//
// They keep a base ring of circuits (when ToRs have two or more uplinks;
// ljf a circulant graph on scheduler.base_uplinks ports if set), so that
// every rack can reach every other at every slot: a plan whose
// activity has no path is refused by plan.Check.
//
// tdm and notdm (tdm.go, tdmalg.go) are papers 001/002's time-division
// multiplexing and its baseline: rounds of barrier stages, two groups of
// jobs, Algorithms 1 to 3.
package scheduler

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/ocsemu/ocsemu/emu/plan"
	"github.com/ocsemu/ocsemu/emu/scenario"
	"github.com/ocsemu/ocsemu/ocsfabric/circuit"
)

// Names lists the built-in schedulers.
var Names = scenario.SchedulerNames

// MaxSlots bounds a plan's length.
const MaxSlots = 1_000_000

// Plan runs the scenario's scheduler.
func Plan(s *scenario.Scenario) (*plan.Plan, error) {
	// Only tdm and notdm lay simplex circuits (paper 002's OXC); the
	// others' duplex plans would fail the check as "a bug".
	if s.Fabric.HasOCS() && s.Fabric.OCS.HalfDuplex() && s.Scheduler.Name != "tdm" && s.Scheduler.Name != "notdm" {
		return nil, fmt.Errorf("the %s scheduler plans duplex circuits, and this fabric's OCS is half duplex (fabric.ocs.duplex: %s): plan it with tdm or notdm (papers 001/002), or make the OCS full duplex", s.Scheduler.Name, s.Fabric.OCS.Duplex)
	}
	// Only ljf reads these; another scheduler would silently ignore them.
	if s.Scheduler.Name != "ljf" && (s.Scheduler.BaseUplinks != 0 || s.Scheduler.Order != "") {
		return nil, fmt.Errorf("scheduler.base_uplinks and scheduler.order are read by the ljf scheduler only, not by %s: remove them or plan with ljf", s.Scheduler.Name)
	}
	if slices.ContainsFunc(s.Jobs, func(j scenario.Job) bool { return j.Pattern == scenario.PatternDAG }) {
		// Task graphs (paper 004) are planned by topox and its baseline.
		switch s.Scheduler.Name {
		case "topox":
		case "static":
			return StaticJobs(s, cpuPSJobs(s), 0)
		default:
			return nil, fmt.Errorf("scheduler %s does not plan task-graph jobs (pattern dag): use topox or static", s.Scheduler.Name)
		}
	}
	switch s.Scheduler.Name {
	case "fcfs":
		return slotted(s, policy{name: "fcfs", circuits: fcfsCircuits})
	case "static":
		st, err := staticTopology(s)
		if err != nil {
			return nil, err
		}
		return slotted(s, policy{name: "static", circuits: func(*loop) circuit.Config { return st }})
	case "ljf":
		return slotted(s, policy{name: "ljf", largeINC: true, circuits: (&ljfBase{}).circuits, largestFirst: s.Scheduler.Order == scenario.OrderLargest})
	case "interleave":
		return interleave(s)
	case "tdm", "notdm":
		return TDM(s, s.Scheduler.Name == "tdm")
	}
	if plan, ok := registered[s.Scheduler.Name]; ok {
		return plan(s)
	}
	return nil, fmt.Errorf("unknown scheduler %q (built in: %s)", s.Scheduler.Name, strings.Join(Names, ", "))
}

// registered holds the schedulers that add themselves from their own file
// (oddl.go, topox.go); scenario.SchedulerNames lists them too.
var registered = map[string]func(*scenario.Scenario) (*plan.Plan, error){}

func register(name string, plan func(*scenario.Scenario) (*plan.Plan, error)) {
	if !slices.Contains(Names, name) {
		panic("scheduler " + name + " is missing from scenario.SchedulerNames")
	}
	registered[name] = plan
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
// circuits go round again, in the same order, while ports remain. The
// circuits that carry flows in progress are kept first (keepBusy).
func fcfsCircuits(l *loop) circuit.Config {
	s, sim, jobs := l.s, l.sim, l.jobs
	p := newPorts(s.Fabric)
	p.baseRing(s.Fabric.Racks)
	p.keepBusy(l)
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
