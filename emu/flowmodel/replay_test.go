package flowmodel

import (
	"testing"

	"github.com/ocsemu/ocsemu/emu/plan"
	"github.com/ocsemu/ocsemu/emu/scenario"
	"github.com/ocsemu/ocsemu/ocsfabric/circuit"
	"github.com/ocsemu/ocsemu/workers/record"
)

func phaseOf(run *record.Run, job string, it int, phase string) (record.Phase, bool) {
	for _, ph := range run.Phases {
		if ph.Job == job && ph.Iteration == it && ph.Phase == phase {
			return ph, true
		}
	}
	return record.Phase{}, false
}

// twoPushes is a plan of two jobs that each push S over the one circuit,
// a at 0 and b at 2 s: alone, each takes 1 s.
func twoPushes(t *testing.T) (*plan.Plan, *scenario.Scenario) {
	t.Helper()
	s := scen(t, "fabric: {kind: ocs, racks: 2, servers_per_rack: 2, rates: {server: 10Gbit, uplink: 1Gbit}}\n")
	at := func(ns int64) *int64 { return &ns }
	p := &plan.Plan{Mode: plan.ModeClock,
		Jobs: []plan.Job{{Name: "a", Pattern: "ps", Workers: []string{"r0s0", "r1s0"}, PS: "r0s0", Bytes: S, Iterations: 1},
			{Name: "b", Pattern: "ps", Workers: []string{"r0s1", "r1s1"}, PS: "r0s1", Bytes: S, Iterations: 1}},
		Stages: []plan.Stage{
			{DurationNs: 2000 * ms, Circuits: []circuit.Circuit{c("tor0:0", "tor1:0")},
				Activities: []plan.Activity{act("a", 0, "compute"), act("a", 0, "push"), act("a", 0, "pull"), act("b", 0, "compute")}},
			{StartNs: 2000 * ms, DurationNs: 10000 * ms, Circuits: []circuit.Circuit{c("tor0:0", "tor1:0")},
				Activities: []plan.Activity{{Job: "b", Iteration: 0, Phase: "push", StartNs: at(2000 * ms)}, act("b", 0, "pull")}},
		},
	}
	if err := plan.Check(p, s); err != nil {
		t.Fatal(err)
	}
	return p, s
}

func TestReplay(t *testing.T) {
	p, s := twoPushes(t)
	pred, err := SimulateModel(p, s, Ideal)
	if err != nil {
		t.Fatal(err)
	}
	// Replayed at the model's own starts, nothing changes.
	own := replayOwn(t, p, s, Ideal, pred)
	if own == nil {
		return
	}
	// b's push really started at 0.5 s, half-way through a's: from then
	// they share the circuit, a ends at 1.5 s and b at 2 s.
	drifted, err := Replay(p, s, Ideal, map[plan.Key]int64{{Job: "b", Iteration: 0, Phase: "push"}: 500 * ms})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		job        string
		start, end int64
	}{{"a", 0, 1500 * ms}, {"b", 500 * ms, 2000 * ms}} {
		ph, ok := phaseOf(drifted, tc.job, 0, "push")
		if !ok || !near(ph.StartNs, tc.start) || !near(ph.EndNs, tc.end) {
			t.Errorf("%s push replayed: %+v, want [%d, %d] ms", tc.job, ph, tc.start/ms, tc.end/ms)
		}
	}
	// a's pull really started at 0.5 s, while its push still ran in the
	// model (one worker had its data early): it starts then all the same,
	// in the circuit's other direction, and ends at 1.5 s.
	early, err := Replay(p, s, Ideal, map[plan.Key]int64{{Job: "a", Iteration: 0, Phase: "push"}: 0, {Job: "a", Iteration: 0, Phase: "pull"}: 500 * ms})
	if err != nil {
		t.Fatal(err)
	}
	if ph, ok := phaseOf(early, "a", 0, "pull"); !ok || !near(ph.StartNs, 500*ms) || !near(ph.EndNs, 1500*ms) {
		t.Errorf("a's pull replayed: %+v, want [500, 1500] ms", ph)
	}
	if a := p.Stages[1].Activities[0]; a.StartNs == nil || *a.StartNs != 2000*ms || len(p.Stages[0].Activities) != 4 || len(p.Stages[1].Activities) != 2 {
		t.Errorf("Replay changed the plan it was given: stage 1 starts with %+v", a)
	}
	if again, _ := SimulateModel(p, s, Ideal); again.Phases[0] != pred.Phases[0] || again.MakespanNs != pred.MakespanNs {
		t.Error("Replay changed the plan it was given")
	}
	// A barrier plan has no instants to replay against.
	b := *p
	b.Mode = plan.ModeBarrier
	if r, err := Replay(&b, s, Ideal, own); r != nil || err != nil {
		t.Errorf("barrier plan replayed: %v %v", r, err)
	}
}

// A per-rank ring replayed at the model's own starts (each phase's first
// rank's, the all-reduce's last rank's, as the emulation times it) is the
// model again: its early rank keeps its head start.
func TestReplayPerRankRingAtOwnStarts(t *testing.T) {
	s := scen(t, "fabric: {kind: ocs, racks: 3, servers_per_rack: 2, uplinks_per_tor: 2, rates: {server: 100Mbit, uplink: 10Mbit}}\n")
	p := ringPlan(true, S/100)
	if err := plan.Check(p, s); err != nil {
		t.Fatal(err)
	}
	for _, m := range []Model{Calibrated, TCPAware} {
		pred, err := SimulateModel(p, s, m)
		if err != nil {
			t.Fatal(err)
		}
		replayOwn(t, p, s, m, pred)
	}
}

// replayOwn replays model m at the starts of its own prediction pred and
// fails t unless every phase comes back (start, end and duration); it
// returns the starts, nil if the replay failed.
func replayOwn(t *testing.T, p *plan.Plan, s *scenario.Scenario, m Model, pred *record.Run) map[plan.Key]int64 {
	t.Helper()
	own := map[plan.Key]int64{}
	for _, ph := range pred.Phases {
		own[plan.Key{Job: ph.Job, Iteration: ph.Iteration, Phase: ph.Phase}] = ph.StartNs
	}
	same, err := Replay(p, s, m, own)
	if err != nil {
		t.Error(err)
		return nil
	}
	for _, ph := range pred.Phases {
		r, ok := phaseOf(same, ph.Job, ph.Iteration, ph.Phase)
		if !ok || !near(r.StartNs, ph.StartNs) || !near(r.EndNs, ph.EndNs) || !near(r.DurationNs, ph.DurationNs) {
			t.Errorf("%s: %s %d %s replayed [%d, %d] for %d ns, predicted [%d, %d] for %d", m, ph.Job, ph.Iteration, ph.Phase, r.StartNs, r.EndNs, r.DurationNs, ph.StartNs, ph.EndNs, ph.DurationNs)
		}
	}
	return own
}
