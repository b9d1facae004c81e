package scheduler

import (
	"fmt"
	"math"
	"sort"
	"time"

	"github.com/ocsemu/ocsemu/emu/flowmodel"
	"github.com/ocsemu/ocsemu/emu/plan"
	"github.com/ocsemu/ocsemu/emu/scenario"
	"github.com/ocsemu/ocsemu/ocsfabric/circuit"
	"github.com/ocsemu/ocsemu/ocsfabric/routing"
)

func init() { register("topox", TopoX) }

// TopoXSlot is paper 004's time slot (and reconfiguration latency), 1 ms.
const TopoXSlot = int64(time.Millisecond)

// TopoX is paper 004's scheduler as a heuristic: time-slotted list
// scheduling of the jobs' task graphs along the critical path, under the
// port limits of the servers (d_S: uplinks per ToR) and of the OCSs
// (d_OCS: one port per ToR and switch), with the scenario's
// scheduler.slot as the slot (the paper: 1 ms). It is NOT the paper's
// Gurobi MIP: it gives no optimality guarantee.
//
// Every phase of a job is a task: compute phases (or a dag job's compute
// tasks) start as soon as what they wait for has finished; a transfer (a
// communication phase, or a dag job's transfer task) starts only at a slot
// boundary, once every rack pair it crosses has a circuit. At each slot the
// ready transfers are taken in order of their bottom level (the longest
// estimated path from the task to the end of its job: the critical path
// first) and get circuits on free ports; a transfer keeps its circuits
// until the flow model says it has finished. Circuits nobody holds stay
// lit and are reused for the same rack pair without a dark period.
//
// Choices where the paper is silent: a transfer's time is estimated as
// its bytes per rack pair at the uplink rate; two transfers between the
// same racks may share a circuit rather than wait; a transfer that can
// never have a circuit per rack pair (a rack of it has more pairs than
// uplinks: a collective phase of a scenario job, not a task-graph
// transfer) lights a ring over its racks, holds it, and runs over the
// shortest paths the slot's circuits give.
func TopoX(s *scenario.Scenario) (*plan.Plan, error) {
	if len(s.Jobs) == 0 {
		return nil, fmt.Errorf("scenario %q has no jobs to plan", s.Name)
	}
	return TopoXJobs(s, cpuPSJobs(s), int64(s.Scheduler.Slot), 0)
}

// cpuPSJobs returns the scenario's jobs in arrival order, every ps job
// with a CPU parameter server (topox and its static baseline use no INC).
func cpuPSJobs(s *scenario.Scenario) []plan.Job {
	jobs := plan.JobsFromScenario(s)
	sort.SliceStable(jobs, func(a, b int) bool { return jobs[a].ArrivalNs < jobs[b].ArrivalNs })
	for i := range jobs {
		j := &jobs[i]
		j.INC, j.Aggregator = false, ""
		if j.Pattern == scenario.PatternPS && j.PS == "" {
			j.PS = j.Workers[0]
		}
	}
	return jobs
}

// topoTask is one phase of one job, as the list scheduler sees it.
type topoTask struct {
	ji, q int
	pairs [][2]int // undirected rack pairs a transfer crosses
	bl    int64    // bottom level: longest estimated path to the job's end
	// multiHop: some rack of the transfer has more pairs than uplinks, so
	// it can never have a circuit per pair and runs over multi-hop paths.
	multiHop bool
}

// TopoXJobs plans given jobs (pattern or dag jobs) with TopoX on s's
// fabric, in slots of slotNs; coalesceNs is the flow model's
// (flowmodel.Options.CoalesceNs, 0: exact).
func TopoXJobs(s *scenario.Scenario, jobs []plan.Job, slotNs, coalesceNs int64) (*plan.Plan, error) {
	f := s.Fabric
	if !f.HasOCS() {
		return nil, fmt.Errorf("topox schedules circuits: it needs a fabric with an OCS, not %s", f.Kind)
	}
	if f.OCS.Duplex != "full" {
		return nil, fmt.Errorf("topox: this heuristic sets full-duplex circuits (fabric.ocs.duplex: full, not %s)", f.OCS.Duplex)
	}
	if slotNs <= 0 {
		return nil, fmt.Errorf("topox: slot must be positive, got %d ns", slotNs)
	}
	sim := flowmodel.New(f, jobs, flowmodel.Options{DelayNs: int64(f.OCS.ReconfigDelay), CoalesceNs: coalesceNs})
	x := &topoX{f: f, layout: circuit.LayoutOf(f.Spec("")), jobs: jobs, sim: sim, slot: slotNs,
		acts: map[int][]plan.Activity{}, changed: true, busy: map[circuit.Uplink]int{}, litPair: map[[2]int]int{}}
	x.prepare()
	sim.OnPhaseStart = func(ji, q int, t int64) {
		key := x.keys[ji][q]
		tt := t
		a := plan.Activity{Job: key.Job, Iteration: key.Iteration, Phase: key.Phase, StartNs: &tt}
		x.acts[int(t/slotNs)] = append(x.acts[int(t/slotNs)], a)
	}
	sim.OnPhaseEnd = x.phaseEnded
	// Compute phases are released at once: they start when what they wait
	// for has finished. Transfers wait for a slot and circuits.
	for ji := range jobs {
		for q, k := range x.keys[ji] {
			if !x.isTransfer(ji, q) {
				if err := sim.Release(k.Job, k, jobs[ji].ArrivalNs, nil); err != nil {
					return nil, err
				}
			}
		}
	}
	p := &plan.Plan{Version: plan.Version, Scenario: s.Name, Scheduler: "topox", Mode: plan.ModeClock}
	var cfgs []circuit.Config
	for k := 0; !sim.Done(); k++ {
		if k >= MaxSlots {
			return nil, fmt.Errorf("topox: the jobs need more than %d slots of %v (%v of schedule): fewer or shorter iterations, or a longer scheduler.slot", MaxSlots, time.Duration(slotNs), time.Duration(MaxSlots)*time.Duration(slotNs))
		}
		t := int64(k) * slotNs
		sim.RunUntil(t)
		start, err := x.allocate(t)
		if err != nil {
			return nil, err
		}
		cfg := x.config()
		cfgs = append(cfgs, cfg)
		sim.SetCircuits(cfg, k == 0)
		for _, tk := range start {
			key := x.keys[tk.ji][tk.q]
			if err := sim.Release(key.Job, key, t, nil); err != nil {
				return nil, err
			}
		}
		sim.RunUntil(t + slotNs - 1)
	}
	// Stages: one per slot, merged while nothing starts and the circuits
	// stay the same.
	for k, cfg := range cfgs {
		acts := x.acts[k]
		if n := len(p.Stages); n > 0 && len(acts) == 0 && sameCircuits(p.Stages[n-1].Circuits, cfg.Circuits) {
			p.Stages[n-1].DurationNs += slotNs
			continue
		}
		p.Stages = append(p.Stages, plan.Stage{StartNs: int64(k) * slotNs, DurationNs: slotNs, Circuits: cfg.Circuits, Activities: acts})
	}
	p.Jobs = jobs
	run := sim.Result()
	if early(p.Stages) {
		// The first stage now has circuits the planning run did not: predict
		// the plan as written.
		var err error
		if run, err = flowmodel.SimulateWith(p, s, flowmodel.Options{CoalesceNs: coalesceNs}); err != nil {
			return nil, fmt.Errorf("topox: %w", err)
		}
	}
	p.Predicted = &plan.Predicted{MakespanNs: run.MakespanNs, JobsNs: map[string]int64{}}
	for _, jr := range run.Jobs {
		p.Predicted.JobsNs[jr.Job] = jr.JCTNs
	}
	return p, nil
}

// topoX is the state of one TopoX planning run.
type topoX struct {
	f      scenario.Fabric
	layout circuit.Layout
	jobs   []plan.Job
	sim    *flowmodel.Sim
	slot   int64
	keys   [][]plan.Key
	tasks  [][]topoTask
	succs  [][][]int
	wait   [][]int
	ready  []*topoTask
	// circuits lit now, and which transfers hold each (by circuit index)
	lit     []circuit.Circuit
	holders [][]*topoTask
	heldBy  map[*topoTask][]int // circuit indexes a running transfer holds
	acts    map[int][]plan.Activity
	// changed: a phase ended since the last allocation; nextArrival: the
	// first arrival of a ready transfer's job still to come.
	changed     bool
	nextArrival int64
	busy        map[circuit.Uplink]int // port -> lit circuit on it
	litPair     map[[2]int]int         // rack pair -> a lit circuit between them
	litChanged  bool                   // lit changed since lastCfg
	lastCfg     *circuit.Config
	paths       *routing.Paths // over the lit circuits; nil when stale
}

func (x *topoX) isTransfer(ji, q int) bool {
	_, compute := x.jobs[ji].ComputeNsOf(x.keys[ji][q].Phase)
	return !compute
}

// prepare builds every job's tasks, their rack pairs and bottom levels.
func (x *topoX) prepare() {
	rate := float64(x.f.Rates.Uplink) / 8 // bytes/s
	if x.f.Rates.Uplink == scenario.Unlimited || rate <= 0 {
		rate = math.Inf(1)
	}
	x.heldBy = map[*topoTask][]int{}
	for ji := range x.jobs {
		j := &x.jobs[ji]
		keys, preds := j.Phases(), j.Preds()
		x.keys = append(x.keys, keys)
		ts := make([]topoTask, len(keys))
		succs := make([][]int, len(keys))
		wait := make([]int, len(keys))
		est := make([]int64, len(keys))
		for q, k := range keys {
			ts[q] = topoTask{ji: ji, q: q}
			wait[q] = len(preds[q])
			for _, pq := range preds[q] {
				succs[pq] = append(succs[pq], q)
			}
			if d, ok := j.ComputeNsOf(k.Phase); ok {
				est[q] = d
				continue
			}
			perPair := map[[2]int]float64{}
			for _, fl := range j.Flows(k.Phase) {
				if a, b := plan.Rack(fl.Src), plan.Rack(fl.Dst); a != b {
					if perPair[[2]int{a, b}] == 0 && perPair[[2]int{b, a}] == 0 {
						ts[q].pairs = append(ts[q].pairs, pair(a, b))
					}
					perPair[[2]int{a, b}] += fl.Bytes
				}
			}
			for _, b := range perPair {
				est[q] = max(est[q], int64(b/rate*1e9))
			}
			deg := map[int]int{}
			for _, pr := range ts[q].pairs {
				deg[pr[0]]++
				deg[pr[1]]++
				if deg[pr[0]] > x.f.UplinksPerToR || deg[pr[1]] > x.f.UplinksPerToR {
					ts[q].multiHop = true
				}
			}
		}
		for q := len(keys) - 1; q >= 0; q-- { // preds come before their phase
			var tail int64
			for _, sq := range succs[q] {
				tail = max(tail, ts[sq].bl)
			}
			ts[q].bl = est[q] + tail
		}
		x.tasks = append(x.tasks, ts)
		x.succs = append(x.succs, succs)
		x.wait = append(x.wait, wait)
		for q := range keys {
			if wait[q] == 0 && x.isTransfer(ji, q) {
				x.ready = append(x.ready, &x.tasks[ji][q])
			}
		}
	}
}

// phaseEnded releases the circuits a transfer held and readies what
// waited for the phase.
func (x *topoX) phaseEnded(ji, q int, _ int64) {
	tk := &x.tasks[ji][q]
	for _, ci := range x.heldBy[tk] {
		hs := x.holders[ci]
		for i, h := range hs {
			if h == tk {
				x.holders[ci] = append(hs[:i], hs[i+1:]...)
				break
			}
		}
	}
	delete(x.heldBy, tk)
	x.changed = true
	for _, sq := range x.succs[ji][q] {
		if x.wait[ji][sq]--; x.wait[ji][sq] == 0 && x.isTransfer(ji, sq) {
			x.ready = append(x.ready, &x.tasks[ji][sq])
		}
	}
}

// allocate gives circuits to ready transfers, critical path first, and
// returns those that start at t.
func (x *topoX) allocate(t int64) ([]*topoTask, error) {
	// Nothing ended and nobody arrived since the last try: the ready
	// transfers would fail again.
	if !x.changed && t < x.nextArrival {
		return nil, nil
	}
	x.changed, x.nextArrival = false, math.MaxInt64
	sort.SliceStable(x.ready, func(a, b int) bool { return x.ready[a].bl > x.ready[b].bl })
	var start []*topoTask
	var stuck *topoTask
	keep := x.ready[:0]
	for _, tk := range x.ready {
		if a := x.jobs[tk.ji].ArrivalNs; a > t {
			x.nextArrival = min(x.nextArrival, a)
			keep = append(keep, tk)
			continue
		}
		if x.take(tk) {
			start = append(start, tk)
			continue
		}
		if stuck == nil {
			stuck = tk
		}
		keep = append(keep, tk)
	}
	x.ready = keep
	if stuck != nil && len(start) == 0 && len(x.heldBy) == 0 && x.sim.Idle() {
		tk := stuck
		return nil, fmt.Errorf("topox: %s gets no circuits even with every port free (it crosses %d rack pairs; ToRs have %d uplinks)",
			x.keys[tk.ji][tk.q], len(tk.pairs), x.f.UplinksPerToR)
	}
	return start, nil
}

// take gives a transfer a circuit for each rack pair it crosses: one
// between the same racks already lit, else a new one on ports no transfer
// holds. Failing that, it starts over multi-hop paths if the lit circuits
// give them: it lights a ring over its racks on free ports and holds the
// ring. It reports whether the transfer starts.
func (x *topoX) take(tk *topoTask) bool {
	var got, lit []int
	ok := true
	for _, pr := range tk.pairs {
		ci := x.findLit(pr)
		if ci < 0 {
			ci = x.newCircuit(pr)
			lit = append(lit, ci)
		}
		if ci < 0 {
			ok = false
			break
		}
		got = append(got, ci)
		x.holders[ci] = append(x.holders[ci], tk)
	}
	if !ok {
		for _, ci := range got { // roll back
			x.holders[ci] = x.holders[ci][:len(x.holders[ci])-1]
		}
		for _, ci := range lit {
			if ci >= 0 {
				x.tearDown(ci)
			}
		}
		if !tk.multiHop {
			return false // wait for ports: a direct circuit per pair (eq. 6)
		}
		// Not enough ports for a circuit per pair: light a ring over the
		// transfer's racks where ports are free, for multi-hop paths.
		seen := map[int]bool{}
		var racks []int
		for _, pr := range tk.pairs {
			for _, r := range pr {
				if !seen[r] {
					seen[r] = true
					racks = append(racks, r)
				}
			}
		}
		sort.Ints(racks)
		got, lit = got[:0], lit[:0]
		for i := range racks {
			if len(racks) == 2 && i == 1 {
				break
			}
			pr := pair(racks[i], racks[(i+1)%len(racks)])
			ci := x.findLit(pr)
			if ci < 0 {
				if ci = x.newCircuit(pr); ci >= 0 {
					lit = append(lit, ci)
				}
			}
			if ci < 0 {
				for _, ci := range got {
					x.holders[ci] = x.holders[ci][:len(x.holders[ci])-1]
				}
				for _, ci := range lit {
					x.tearDown(ci)
				}
				return false
			}
			// Held at once, so that the next edge cannot take its ports.
			x.holders[ci] = append(x.holders[ci], tk)
			got = append(got, ci)
		}
		// The ring joins all the transfer's racks: it holds just the
		// ring, and its flows take the shortest paths over whatever the
		// slot has lit.
	}
	x.heldBy[tk] = got
	return true
}

func (x *topoX) findLit(pr [2]int) int {
	if ci, ok := x.litPair[pr]; ok {
		return ci
	}
	return -1
}

// newCircuit lights a circuit for pr on ports no transfer holds (taking
// them from idle circuits if need be); -1 if there are none.
func (x *topoX) newCircuit(pr [2]int) int {
	busy := x.busy
	free := func(u circuit.Uplink) bool {
		ci, ok := busy[u]
		return !ok || len(x.holders[ci]) == 0
	}
	best, bestCost := circuit.Circuit{}, math.MaxInt
	for ua := 0; ua < x.f.UplinksPerToR; ua++ {
		A := circuit.Uplink{Rack: pr[0], Port: ua}
		if !free(A) {
			continue
		}
		swA, _ := x.layout.Switch(A)
		for ub := 0; ub < x.f.UplinksPerToR; ub++ {
			B := circuit.Uplink{Rack: pr[1], Port: ub}
			if sw, _ := x.layout.Switch(B); sw != swA || !free(B) {
				continue
			}
			cost := 0 // prefer ports that are dark already: no idle circuit torn down
			if _, ok := busy[A]; ok {
				cost++
			}
			if _, ok := busy[B]; ok {
				cost++
			}
			if cost < bestCost {
				best, bestCost = circuit.Circuit{A: A, B: B}, cost
			}
		}
	}
	if bestCost == math.MaxInt {
		return -1
	}
	// Tear down the idle circuits on those ports (swap-remove keeps the
	// indexes of held circuits in heldBy valid only if we fix them up, so
	// mark them dead instead and compact in config).
	for _, u := range []circuit.Uplink{best.A, best.B} {
		if ci, ok := busy[u]; ok {
			x.tearDown(ci)
		}
	}
	x.lit = append(x.lit, best)
	x.holders = append(x.holders, nil)
	x.busy[best.A], x.busy[best.B] = len(x.lit)-1, len(x.lit)-1
	x.litPair[pr] = len(x.lit) - 1
	x.paths, x.litChanged = nil, true
	return len(x.lit) - 1
}

// tearDown marks lit circuit ci as gone (config drops it).
func (x *topoX) tearDown(ci int) {
	c := x.lit[ci]
	if c.A.Rack < 0 {
		return
	}
	delete(x.busy, c.A)
	delete(x.busy, c.B)
	if pr := pair(c.A.Rack, c.B.Rack); x.litPair[pr] == ci {
		delete(x.litPair, pr)
		for cj, d := range x.lit { // another circuit between the same racks?
			if cj != ci && d.A.Rack >= 0 && pair(d.A.Rack, d.B.Rack) == pr {
				x.litPair[pr] = cj
				break
			}
		}
	}
	x.lit[ci] = circuit.Circuit{A: circuit.Uplink{Rack: -1}}
	x.paths, x.litChanged = nil, true
}

// config returns the circuits lit in this slot, dropping torn-down ones
// (and renumbering what transfers hold).
func (x *topoX) config() circuit.Config {
	if !x.litChanged && x.lastCfg != nil {
		return *x.lastCfg
	}
	x.litChanged = false
	remap := make([]int, len(x.lit))
	var lit []circuit.Circuit
	var holders [][]*topoTask
	for ci, c := range x.lit {
		remap[ci] = -1
		if c.A.Rack < 0 {
			continue
		}
		remap[ci] = len(lit)
		lit = append(lit, c)
		holders = append(holders, x.holders[ci])
	}
	for tk, cis := range x.heldBy {
		out := cis[:0]
		for _, ci := range cis {
			if remap[ci] >= 0 {
				out = append(out, remap[ci])
			}
		}
		x.heldBy[tk] = out
	}
	x.lit, x.holders = lit, holders
	x.busy = make(map[circuit.Uplink]int, 2*len(lit))
	x.litPair = make(map[[2]int]int, len(lit))
	for ci, c := range lit {
		x.busy[c.A], x.busy[c.B] = ci, ci
		x.litPair[pair(c.A.Rack, c.B.Rack)] = ci
	}
	x.lastCfg = &circuit.Config{Circuits: append([]circuit.Circuit(nil), lit...)}
	return *x.lastCfg
}

// early gives the first stage the circuits of the first later stage that
// has any, on ports it leaves free: they are in place before time zero at no
// cost, and the workers, which connect to their peers before time zero,
// find a path. It reports whether it added any.
func early(stages []plan.Stage) bool {
	if len(stages) < 2 {
		return false
	}
	used := map[circuit.Uplink]bool{}
	for _, c := range stages[0].Circuits {
		used[c.A], used[c.B] = true, true
	}
	added := false
	for _, st := range stages[1:] {
		if len(st.Circuits) == 0 {
			continue
		}
		for _, c := range st.Circuits {
			if !used[c.A] && !used[c.B] {
				used[c.A], used[c.B] = true, true
				stages[0].Circuits = append(stages[0].Circuits, c)
				added = true
			}
		}
		break
	}
	return added
}

func sameCircuits(a, b []circuit.Circuit) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// StaticJobs plans given jobs on one TopoOpt-style topology chosen from
// their traffic heatmap (staticFromJobs), held for the whole run: every
// phase starts as soon as what it waits for has finished. It is the
// baseline TopoX is compared with on task graphs. coalesceNs is the flow
// model's (flowmodel.Options.CoalesceNs, 0: exact).
func StaticJobs(s *scenario.Scenario, jobs []plan.Job, coalesceNs int64) (*plan.Plan, error) {
	f := s.Fabric
	if f.Kind == scenario.KindOCS && f.Racks > 2 && f.UplinksPerToR < 2 {
		return nil, fmt.Errorf("static keeps a base ring of circuits so every rack stays reachable; that needs uplinks_per_tor >= 2 (got %d)", f.UplinksPerToR)
	}
	st := plan.Stage{DurationNs: 1, Circuits: staticFromJobs(f, jobs).Circuits}
	for _, j := range jobs {
		for _, k := range j.Phases() {
			st.Activities = append(st.Activities, plan.Activity{Job: k.Job, Iteration: k.Iteration, Phase: k.Phase})
		}
	}
	p := &plan.Plan{Version: plan.Version, Scenario: s.Name, Scheduler: "static", Mode: plan.ModeClock, Jobs: jobs, Stages: []plan.Stage{st}}
	run, err := flowmodel.SimulateWith(p, s, flowmodel.Options{CoalesceNs: coalesceNs})
	if err != nil {
		return nil, fmt.Errorf("static: %w", err)
	}
	p.Stages[0].DurationNs = max(run.MakespanNs, 1)
	p.Predicted = &plan.Predicted{MakespanNs: run.MakespanNs, JobsNs: map[string]int64{}}
	for _, jr := range run.Jobs {
		p.Predicted.JobsNs[jr.Job] = jr.JCTNs
	}
	return p, nil
}
