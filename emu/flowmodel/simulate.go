package flowmodel

import (
	"cmp"
	"fmt"
	"slices"
	"sort"

	"github.com/ocsemu/ocsemu/emu/plan"
	"github.com/ocsemu/ocsemu/emu/scenario"
	"github.com/ocsemu/ocsemu/ocsfabric/circuit"
	"github.com/ocsemu/ocsemu/workers/job"
	"github.com/ocsemu/ocsemu/workers/record"
)

// DelayOf is the reconfiguration delay a plan runs with.
func DelayOf(p *plan.Plan, s *scenario.Scenario) int64 {
	if p.ReconfigDelayNs != nil {
		return *p.ReconfigDelayNs
	}
	return int64(s.Fabric.OCS.ReconfigDelay)
}

// Simulate runs a checked plan through the flow model.
//
// Clock mode: stage k starts exactly at its start_ns, installs its circuits
// and releases its activities; activities run on into later stages if
// they must. Barrier mode: stage k starts at its start_ns or when stage
// k-1's activities have all finished, whichever is later.
func Simulate(p *plan.Plan, s *scenario.Scenario) (*record.Run, error) {
	return SimulateModel(p, s, Ideal)
}

// SimulateModel runs a checked plan through the flow model in one of its
// modes (Ideal: the papers' fluid model; Calibrated: calibrate.go;
// TCPAware: tcpaware.go).
func SimulateModel(p *plan.Plan, s *scenario.Scenario, m Model) (*record.Run, error) {
	return SimulateRanks(p, s, m, m == Calibrated || m == TCPAware)
}

// SimulateRanks is SimulateModel with all-to-all and ring ranks on their own
// (perRank, what the calibrated and TCP-aware models do) or in lockstep
// (what the ideal model does): the attribution's "ranks" part is the
// difference.
func SimulateRanks(p *plan.Plan, s *scenario.Scenario, m Model, perRank bool) (*record.Run, error) {
	return simulate(p, s, modelOptions(s, m, perRank), m)
}

// modelOptions are a model's options on a scenario.
func modelOptions(s *scenario.Scenario, m Model, perRank bool) Options {
	var opt Options
	if m == Calibrated || m == TCPAware {
		opt.Goodput = Framing(s.Fabric.MTU).Goodput()
	}
	opt.PerRank = perRank
	if m == TCPAware {
		opt.SlowStart = SlowStartFor(s.Fabric)
		opt.TCP = TCPModelFor(s.Fabric)
	}
	return opt
}

// SimulateWith is Simulate (the ideal model) with options (CoalesceNs);
// the reconfiguration delay is always the plan's.
func SimulateWith(p *plan.Plan, s *scenario.Scenario, opt Options) (*record.Run, error) {
	return simulate(p, s, opt, Ideal)
}

func simulate(p *plan.Plan, s *scenario.Scenario, opt Options, m Model) (*record.Run, error) {
	opt.ASAP, opt.DelayNs = false, DelayOf(p, s)
	jobs := p.Jobs
	var pr *perRank
	if opt.PerRank && p.Mode == plan.ModeClock {
		pr, jobs = newPerRank(p)
	}
	sim := New(s.Fabric, jobs, opt)
	if pr != nil {
		sim.keyName = pr.original
	}
	stages := make([]record.Stage, len(p.Stages))
	for si := range p.Stages {
		st := &p.Stages[si]
		start := st.StartNs
		if p.Mode == plan.ModeBarrier {
			start = max(sim.Now(), st.StartNs)
		}
		sim.RunUntil(start)
		sim.SetCircuits(circuit.Config{Circuits: st.Circuits}, si == 0)
		for _, a := range st.Activities {
			nb := start
			if a.StartNs != nil {
				nb = max(nb, *a.StartNs)
			}
			k := plan.Key{Job: a.Job, Iteration: a.Iteration, Phase: plan.ActivityPhase(a)}
			if pr != nil {
				if tasks, ok := pr.tasksOf(a.Job, k); ok {
					pr.release[k] = nb
					if err := sim.ReleaseAll(a.Job, tasks, nb, &a); err != nil {
						return nil, fmt.Errorf("stage %d: %w", si, err)
					}
					continue
				}
			}
			if err := sim.Release(a.Job, k, nb, &a); err != nil {
				return nil, fmt.Errorf("stage %d: %w", si, err)
			}
		}
		stages[si] = record.Stage{Index: si, StartNs: start}
		switch p.Mode {
		case plan.ModeBarrier:
			if err := sim.runStage(st); err != nil {
				return nil, fmt.Errorf("stage %d: %w", si, err)
			}
			stages[si].EndNs = sim.Now()
		default:
			stages[si].EndNs = st.StartNs + st.DurationNs
		}
	}
	sim.RunUntil(inf)
	if err := sim.unfinished(); err != nil {
		return nil, err
	}
	run := sim.Result()
	if pr != nil {
		pr.fold(run)
	}
	run.PhaseLinks = sim.phaseLinks(run.Phases)
	sim.traceINCHops(run.Phases)
	run.Stages = stages
	if m != Ideal {
		run.Source = "flow-model-" + string(m)
	}
	run.Scenario, run.Scheduler, run.Mode = p.Scenario, p.Scheduler, p.Mode
	return run, nil
}

// runStage runs events until every activity of a barrier stage is done.
func (s *Sim) runStage(st *plan.Stage) error {
	for {
		done := true
		for _, a := range st.Activities {
			if !s.phaseDone(a.Job, plan.Key{Job: a.Job, Iteration: a.Iteration, Phase: plan.ActivityPhase(a)}) {
				done = false
				break
			}
		}
		if done {
			return nil
		}
		if s.Idle() {
			return s.unfinished()
		}
		s.RunUntil(s.events[0].t)
	}
}

func (s *Sim) phaseDone(job string, k plan.Key) bool {
	js := s.jobs[s.byName[job]]
	q, ok := js.keyIdx[k]
	return ok && js.End[q] >= 0
}

// unfinished explains phases that can never finish.
func (s *Sim) unfinished() error {
	for _, js := range s.jobs {
		if js.next < len(js.keys) {
			k := js.keys[js.next]
			if s.keyName != nil {
				k = s.keyName(k)
			}
			why := "it was never released"
			if js.running > 0 {
				why = "its flows have no path over the circuits"
			}
			return fmt.Errorf("stalled at %.3fs: %s cannot finish: %s", float64(s.now)/1e9, k, why)
		}
	}
	return nil
}

// Result collects per-phase and per-job records.
func (s *Sim) Result() *record.Run {
	run := &record.Run{Source: "flow-model"}
	for _, js := range s.jobs {
		jr := record.Job{Job: js.j.Name, ArrivalNs: js.j.ArrivalNs, StartNs: -1, EndNs: -1}
		for q, k := range js.keys {
			if js.Start[q] < 0 {
				continue
			}
			run.Phases = append(run.Phases, record.Phase{Job: k.Job, Iteration: k.Iteration, Phase: k.Phase, Rank: -1,
				StartNs: js.Start[q], EndNs: js.End[q], Bytes: js.bytes[q]})
			if jr.StartNs < 0 {
				jr.StartNs = js.Start[q]
			}
			jr.EndNs = max(jr.EndNs, js.End[q])
		}
		if jr.EndNs >= 0 {
			jr.JCTNs = jr.EndNs - jr.ArrivalNs
		}
		run.Jobs = append(run.Jobs, jr)
		run.MakespanNs = max(run.MakespanNs, jr.EndNs)
	}
	run.Phases = byStart(run.Phases)
	run.Reconfigurations = s.Stats.Reconfigurations
	run.PortsReconfigured = s.Stats.PortsReconfigured
	run.OCSBytes = s.Stats.OCSBytes
	run.CircuitHopBytes = s.Stats.CircuitHopBytes
	if s.Stats.UplinkBytes != nil {
		run.UplinkBytes = map[string]float64{} // an OCS fabric: empty when nothing crossed a circuit
	}
	for i, b := range s.Stats.UplinkBytes {
		if b > 0 {
			run.UplinkBytes[circuit.Uplink{Rack: i / s.f.UplinksPerToR, Port: i % s.f.UplinksPerToR}.String()] = b
		}
	}
	return run
}

// byStart orders phases by start, ties in their order, as a stable sort
// does: sorting indexes, not the records, in O(n log n) (sort.SliceStable
// moves the records O(n log² n) times, which showed at 4x paper 000).
func byStart(ps []record.Phase) []record.Phase {
	idx := make([]int32, len(ps))
	for i := range idx {
		idx[i] = int32(i)
	}
	slices.SortFunc(idx, func(a, b int32) int {
		return cmp.Or(cmp.Compare(ps[a].StartNs, ps[b].StartNs), cmp.Compare(a, b))
	})
	out := make([]record.Phase, len(ps))
	for i, j := range idx {
		out[i] = ps[j]
	}
	return out
}

// PhaseTimes returns the start and end of phase q of job ji (-1 if not yet).
func (s *Sim) PhaseTimes(ji, q int) (int64, int64) { return s.jobs[ji].Start[q], s.jobs[ji].End[q] }

// ActiveRackDemand returns, per directed rack pair, the bytes still to
// cross it: of flows in progress, and of the next communication phase of
// every unfinished job that has arrived. Schedulers fit circuits to it.
func (s *Sim) ActiveRackDemand() map[[2]int]float64 {
	d := map[[2]int]float64{}
	for _, fl := range s.live {
		if !fl.done && fl.srcRack != fl.dstRack {
			d[[2]int{fl.srcRack, fl.dstRack}] += fl.remaining
		}
	}
	for _, js := range s.jobs {
		if js.held || js.j.ArrivalNs > s.now || js.next >= len(js.keys) {
			continue
		}
		for q := js.next; q < len(js.keys) && q <= js.next+2; q++ {
			if js.Start[q] >= 0 {
				continue
			}
			for _, f := range js.j.Flows(js.keys[q].Phase) {
				if a, b := plan.Rack(f.Src), plan.Rack(f.Dst); a != b {
					d[[2]int{a, b}] += f.Bytes
				}
			}
		}
	}
	return d
}

// JobsActive returns the indexes of jobs that have arrived and not
// finished, in arrival order.
func (s *Sim) JobsActive() []int {
	var out []int
	for ji, js := range s.jobs {
		if !js.held && js.j.ArrivalNs <= s.now && js.next < len(js.keys) {
			out = append(out, ji)
		}
	}
	sort.SliceStable(out, func(a, b int) bool { return s.jobs[out[a]].j.ArrivalNs < s.jobs[out[b]].j.ArrivalNs })
	return out
}

// Done reports whether every job has finished.
func (s *Sim) Done() bool {
	for _, js := range s.jobs {
		if js.next < len(js.keys) {
			return false
		}
	}
	return true
}

// UnlimitedLinks explains what the flow model cannot predict on a fabric
// whose links are unlimited (fabric.rates not set): an unshaped link
// carries any amount in no time, so such transfers predict as 0 s. Empty
// when the rates bound every transfer.
func UnlimitedLinks(f scenario.Fabric) string {
	if f.Rates.Server != scenario.Unlimited {
		return ""
	}
	if f.HasOCS() && f.Rates.Uplink != scenario.Unlimited {
		what := "transfers within a rack"
		if f.HasEPS() {
			what += " and over the packet core"
		}
		return fmt.Sprintf("fabric.rates.server is unlimited, so %s take no time in the flow model: set fabric.rates.server to the rate to emulate, e.g. 1Gbit", what)
	}
	set := "fabric.rates.server"
	if f.HasOCS() {
		set = "fabric.rates.server and fabric.rates.uplink"
	}
	return fmt.Sprintf("the fabric's links are unlimited (%s not set), so the flow model cannot predict transfer times: every transfer without a rate cap takes no time, and only compute counts. Set %s to the rates to emulate, e.g. 1Gbit",
		set, set)
}

// Replay predicts a clock-mode plan again with every phase started when
// the emulation started it (starts: ns from time zero, per phase) instead
// of when the plan said, circuits still switching at the plan's instants.
// A phase with a measured start starts then even where its predecessor
// still runs in the model (a parameter server's next push starts once
// its first worker has its pull, not once the last has); an all-to-all's
// or a ring's ranks still wait for their own flows (perrank.go), a ring
// released with its iteration's compute (startOf). Against Simulate's
// prediction it shows how much of a phase's time came from what ran
// beside it once the phases had drifted from the plan: the attribution's
// drift. Barrier plans have no fixed instants to replay against: nil,
// nil.
func Replay(p *plan.Plan, s *scenario.Scenario, m Model, starts map[plan.Key]int64) (*record.Run, error) {
	if p.Mode != plan.ModeClock || len(p.Stages) == 0 {
		return nil, nil
	}
	q := *p
	q.Stages = make([]plan.Stage, len(p.Stages))
	for i, st := range p.Stages {
		q.Stages[i] = st
		q.Stages[i].Activities = nil
	}
	// stageAt is the last stage that starts at or before t.
	stageAt := func(t int64) int {
		i := 0
		for i+1 < len(q.Stages) && q.Stages[i+1].StartNs <= t {
			i++
		}
		return i
	}
	perRank := m == Calibrated || m == TCPAware
	var expanded map[string]*plan.Job
	if perRank {
		expanded = expandedJobs(p)
	}
	// startOf is when the replay releases a phase: its measured start,
	// but a per-rank ring's all-reduce with its iteration's compute. Its
	// measured start is its last rank's (workers.Summarize); released
	// with the compute, each rank starts as its own compute ends in the
	// replay, and the early ranks keep their head start.
	startOf := func(k plan.Key) (int64, bool) {
		if j, ok := expanded[k.Job]; ok && j.Pattern == job.PatternRing && k.Phase == job.PhaseAllReduce {
			if t, ok := starts[plan.Key{Job: k.Job, Iteration: k.Iteration, Phase: job.PhaseCompute}]; ok {
				return t, true
			}
		}
		t, ok := starts[k]
		return t, ok
	}
	for i, st := range p.Stages {
		for _, a := range st.Activities {
			k := plan.Key{Job: a.Job, Iteration: a.Iteration, Phase: plan.ActivityPhase(a)}
			si := i
			if t, ok := startOf(k); ok {
				t = max(t, 0)
				a.StartNs = &t
				si = stageAt(t)
			}
			q.Stages[si].Activities = append(q.Stages[si].Activities, a)
		}
	}
	opt := modelOptions(s, m, perRank)
	opt.LinkShares = true
	opt.Unchained = make(map[plan.Key]bool, len(starts))
	for k := range starts {
		opt.Unchained[k] = true
	}
	run, err := simulate(&q, s, opt, m)
	if err != nil {
		return nil, fmt.Errorf("replay at the measured starts: %w", err)
	}
	run.Source += "-replay"
	return run, nil
}
