package scheduler

import (
	"fmt"
	"math"
	"sort"

	"github.com/ocsemu/ocsemu/emu/flowmodel"
	"github.com/ocsemu/ocsemu/emu/plan"
	"github.com/ocsemu/ocsemu/emu/scenario"
	"github.com/ocsemu/ocsemu/ocsfabric/circuit"
	"github.com/ocsemu/ocsemu/ocsfabric/routing"
	"github.com/ocsemu/ocsemu/workers/job"
)

func init() { register("oddl", ODDL) }

// ODDL is paper 003's scheduler: circuits per halving-doubling step. Every
// hd job runs its all-reduce step by step (plan v2 steps), and each step
// gets a stage whose circuits join exactly the rack pairs that step
// exchanges (a matching: {0-1, 2-3}, then {0-2, 1-3}, ...), so that with
// fast (wavelength) switching a node needs one optical port. The plan is in
// barrier mode: a stage starts when the previous one has finished, which is
// the paper's flow-based transmit scheduling.
//
// Where the paper is silent, ODDL here chooses (docs/schedulers-oddl-topox.md):
//
//   - The two-dimensional topology: racks form a grid of C columns (C the
//     power of two nearest sqrt(racks)); a circuit inside a row prefers an
//     even uplink (the horizontal switch), one across rows an odd uplink
//     (vertical). With one uplink per ToR both dimensions share it.
//   - A circuit that the previous stage had, and whose ports are free, is
//     kept as it was (no dark period); circuits nobody needs stay lit.
//   - Several jobs advance in lockstep: each stage holds the next phase of
//     every unfinished job whose circuits still fit; a step whose circuits
//     do not fit waits for the next stage (or, if the stage's circuits give
//     it a multi-hop path, runs over it).
//   - ring, ps and all-to-all jobs run whole phases, with circuits for
//     their rack pairs in the same way (paper 003 has hd only).
//   - On a fabric without an OCS (eps: the paper's ideal electrical
//     network, its comparison) every job runs whole phases over the packet
//     core, in the same lockstep stages.
func ODDL(s *scenario.Scenario) (*plan.Plan, error) {
	if len(s.Jobs) == 0 {
		return nil, fmt.Errorf("scenario %q has no jobs to plan", s.Name)
	}
	f := s.Fabric
	if f.HasOCS() && f.OCS.Duplex != "full" {
		return nil, fmt.Errorf("oddl: a halving-doubling step exchanges both ways at once, so it needs full-duplex circuits (fabric.ocs.duplex: full, not %s)", f.OCS.Duplex)
	}
	jobs := plan.JobsFromScenario(s)
	sort.SliceStable(jobs, func(a, b int) bool { return jobs[a].ArrivalNs < jobs[b].ArrivalNs })
	for i := range jobs {
		j := &jobs[i]
		j.INC = false // ODDL has no in-network aggregation
		j.Aggregator = ""
		if j.Pattern == scenario.PatternPS && j.PS == "" {
			j.PS = j.Workers[0]
		}
		j.Steps = f.HasOCS() && j.Pattern == scenario.PatternHD && len(j.Workers) >= 2
	}
	p := &plan.Plan{Version: plan.Version, Scenario: s.Name, Scheduler: "oddl", Mode: plan.ModeBarrier, Jobs: jobs}
	keys := make([][]plan.Key, len(jobs))
	next := make([]int, len(jobs))
	left := 0
	for i := range jobs {
		keys[i] = jobs[i].Phases()
		left += len(keys[i])
	}
	g := newGrid(f)
	var prev circuit.Config
	for left > 0 {
		if len(p.Stages) >= MaxSlots {
			return nil, fmt.Errorf("oddl: the jobs need more than %d stages: fewer iterations", MaxSlots)
		}
		st := plan.Stage{StartNs: 0}
		pa := g.start(prev)
		for ji := range jobs {
			if next[ji] >= len(keys[ji]) {
				continue
			}
			k := keys[ji][next[ji]]
			if !g.fits(pa, &jobs[ji], k.Phase) {
				continue
			}
			a := plan.Activity{Job: k.Job, Iteration: k.Iteration, Phase: k.Phase}
			if step, ok := job.ParseStep(k.Phase); ok {
				a.Phase, a.Step = job.PhaseAllReduce, &step
			}
			st.Activities = append(st.Activities, a)
			next[ji]++
			left--
		}
		if len(st.Activities) == 0 {
			for ji := range jobs {
				if next[ji] < len(keys[ji]) {
					return nil, fmt.Errorf("oddl: job %s %s needs more circuits than the ToRs have uplinks (%d per ToR), even alone", jobs[ji].Name, keys[ji][next[ji]].Phase, f.UplinksPerToR)
				}
			}
		}
		st.Circuits = g.finish(pa)
		prev = circuit.Config{Circuits: st.Circuits}
		p.Stages = append(p.Stages, st)
	}
	backfill(p.Stages)
	if err := predict(p, s); err != nil {
		return nil, fmt.Errorf("oddl: %w", err)
	}
	return p, nil
}

// backfill sets circuits up a stage early wherever their ports are free
// then (the first stage's circuits are in place before time zero), so that
// a stage rarely waits for a dark period: in barrier mode nothing runs on
// a port whose stage does not use it.
func backfill(stages []plan.Stage) {
	for si := len(stages) - 2; si >= 0; si-- {
		used := map[circuit.Uplink]bool{}
		for _, c := range stages[si].Circuits {
			used[c.A], used[c.B] = true, true
		}
		for _, c := range stages[si+1].Circuits {
			if !used[c.A] && !used[c.B] {
				used[c.A], used[c.B] = true, true
				stages[si].Circuits = append(stages[si].Circuits, c)
			}
		}
	}
}

// predict simulates a finished plan and writes the model's answer into it.
func predict(p *plan.Plan, s *scenario.Scenario) error {
	run, err := flowmodel.Simulate(p, s)
	if err != nil {
		return err
	}
	p.Predicted = &plan.Predicted{MakespanNs: run.MakespanNs, JobsNs: map[string]int64{}}
	for _, jr := range run.Jobs {
		p.Predicted.JobsNs[jr.Job] = jr.JCTNs
	}
	for i, st := range run.Stages {
		if i < len(p.Stages) && st.EndNs > st.StartNs {
			p.Stages[i].PredictedNs = st.EndNs - st.StartNs
		}
	}
	return nil
}

// grid hands out circuits for one stage on the two-dimensional topology.
type grid struct {
	f      scenario.Fabric
	layout circuit.Layout
	cols   int
}

func newGrid(f scenario.Fabric) *grid {
	g := &grid{f: f, cols: 1}
	if f.HasOCS() {
		g.layout = circuit.LayoutOf(f.Spec(""))
	}
	for g.cols*g.cols*2 <= f.Racks {
		g.cols *= 2
	}
	return g
}

// alloc is one stage's circuits in the making.
type alloc struct {
	used  map[circuit.Uplink]bool
	cfg   circuit.Config
	pairs map[[2]int]bool // undirected rack pairs with a circuit
	prev  map[[2]int][]circuit.Circuit
	paths *routing.Paths // over cfg, rebuilt when stale
}

func (g *grid) start(prev circuit.Config) *alloc {
	a := &alloc{used: map[circuit.Uplink]bool{}, pairs: map[[2]int]bool{}, prev: map[[2]int][]circuit.Circuit{}}
	for _, c := range prev.Circuits {
		pr := pair(c.A.Rack, c.B.Rack)
		a.prev[pr] = append(a.prev[pr], c)
	}
	return a
}

// fits adds the circuits phase needs, if it can: it reports false (and
// adds nothing) when the ports are not there and the stage's circuits give
// no multi-hop path either.
func (g *grid) fits(a *alloc, j *plan.Job, phase string) bool {
	if !g.f.HasOCS() {
		return true
	}
	need := map[[2]int]bool{}
	var order [][2]int
	for _, rp := range j.RackPairs(phase) {
		pr := pair(rp[0], rp[1])
		if !a.pairs[pr] && !need[pr] {
			need[pr] = true
			order = append(order, pr)
		}
	}
	if len(order) == 0 {
		return true
	}
	var added []circuit.Circuit
	for _, pr := range order {
		c, ok := g.circuit(a, pr)
		if !ok {
			for _, c := range added { // roll back
				delete(a.used, c.A)
				delete(a.used, c.B)
				delete(a.pairs, pair(c.A.Rack, c.B.Rack))
			}
			a.cfg.Circuits = a.cfg.Circuits[:len(a.cfg.Circuits)-len(added)]
			return g.multiHop(a, j, phase)
		}
		a.used[c.A], a.used[c.B] = true, true
		a.pairs[pr] = true
		a.cfg.Circuits = append(a.cfg.Circuits, c)
		added = append(added, c)
	}
	a.paths = nil
	return true
}

// multiHop reports whether the stage's circuits so far reach every rack
// pair of the phase.
func (g *grid) multiHop(a *alloc, j *plan.Job, phase string) bool {
	if g.f.HasEPS() {
		return true // the packet core carries what the circuits do not
	}
	if a.paths == nil {
		a.paths = routing.NewPaths(g.f.Racks, a.cfg)
	}
	for _, rp := range j.RackPairs(phase) {
		if a.paths.Hops(rp[0], rp[1]) < 0 {
			return false
		}
	}
	return true
}

// circuit finds ports for a circuit between the racks of pr: the previous
// stage's circuit if its ports are free, else a free uplink of each rack
// on a common switch, preferring the pair's dimension (even uplinks in a
// row, odd across rows).
func (g *grid) circuit(a *alloc, pr [2]int) (circuit.Circuit, bool) {
	for _, c := range a.prev[pr] {
		if !a.used[c.A] && !a.used[c.B] {
			return c, true
		}
	}
	dim := 0
	if pr[0]/g.cols != pr[1]/g.cols {
		dim = 1
	}
	best, bestScore := circuit.Circuit{}, math.MaxInt
	U := g.f.UplinksPerToR
	for ua := 0; ua < U; ua++ {
		A := circuit.Uplink{Rack: pr[0], Port: ua}
		if a.used[A] {
			continue
		}
		swA, _ := g.layout.Switch(A)
		for ub := 0; ub < U; ub++ {
			B := circuit.Uplink{Rack: pr[1], Port: ub}
			if a.used[B] {
				continue
			}
			if swB, _ := g.layout.Switch(B); swB != swA {
				continue
			}
			score := 0
			if U > 1 && ua%2 != dim {
				score += 2
			}
			if U > 1 && ub%2 != dim {
				score += 2
			}
			if score < bestScore {
				best, bestScore = circuit.Circuit{A: A, B: B, Simplex: g.layout.HalfDuplex}, score
			}
		}
	}
	return best, bestScore != math.MaxInt
}

// finish returns the stage's circuits: those the phases need, then the
// previous stage's circuits whose ports nobody took (they stay lit).
func (g *grid) finish(a *alloc) []circuit.Circuit {
	out := a.cfg.Circuits
	var keep []circuit.Circuit
	for _, cs := range a.prev {
		for _, c := range cs {
			if !a.used[c.A] && !a.used[c.B] {
				a.used[c.A], a.used[c.B] = true, true
				keep = append(keep, c)
			}
		}
	}
	sort.Slice(keep, func(i, j int) bool {
		if keep[i].A.Rack != keep[j].A.Rack {
			return keep[i].A.Rack < keep[j].A.Rack
		}
		return keep[i].A.Port < keep[j].A.Port
	})
	return append(out, keep...)
}
