package orchestrate_test

import (
	"context"
	"testing"
	"time"

	"github.com/ocsemu/ocsemu/dataplane/fabric"
	"github.com/ocsemu/ocsemu/dataplane/fabric/fabrictest"
	"github.com/ocsemu/ocsemu/emu/orchestrate"
	"github.com/ocsemu/ocsemu/emu/plan"
	"github.com/ocsemu/ocsemu/emu/scenario"
	"github.com/ocsemu/ocsemu/emu/scheduler"
	"github.com/ocsemu/ocsemu/ocsfabric/circuit"
	"github.com/ocsemu/ocsemu/ocsfabric/ocs"
)

// TestPlanOnOCSFabric plans two jobs with fcfs on an OCS fabric, runs the
// plan with real ranks while the OCS follows the plan's stages against
// the same time zero, and checks that every phase ran, verified, no
// earlier than planned, and that the circuits really changed.
func TestPlanOnOCSFabric(t *testing.T) {
	fabrictest.SkipUnlessRoot(t)
	name := fabrictest.UniqueLab("orc")
	s, err := scenario.Parse([]byte("name: "+name+"\n"+`fabric: {kind: ocs, racks: 4, servers_per_rack: 1, uplinks_per_tor: 3, ocs: {reconfig_delay: 1ms}, rates: {server: 1Gbit, uplink: 1Gbit}}
jobs:
  - {name: ring, pattern: ring, workers: [r0s0, r1s0, r2s0, r3s0], bytes: 4MiB, compute: 20ms, iterations: 1}
  - {name: a2a, pattern: alltoall, workers: [r0s0, r2s0], bytes: 8MiB, compute: 10ms, iterations: 4, arrival: 30ms}
scheduler: {name: fcfs, slot: 40ms}
`), "test")
	if err != nil {
		t.Fatal(err)
	}
	lab := fabrictest.Deploy(t, s.Spec())
	ctl, err := ocs.New(context.Background(), lab, ocs.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- ocs.Serve(ctx, ctl, fabric.LabFile(name, "ocs.sock")) }()
	t.Cleanup(func() { cancel(); <-served; ctl.Close() })
	deadline := time.Now().Add(time.Minute)
	for cl := ocs.NewClient(fabric.LabFile(name, "ocs.sock")); cl.Ping(ctx) != nil; {
		if time.Now().After(deadline) {
			t.Fatal("the OCS API did not come up")
		}
		time.Sleep(5 * time.Millisecond) // the API comes up in its goroutine
	}
	events, stop := ctl.Subscribe()
	defer stop()

	p, err := scheduler.Plan(s)
	if err != nil {
		t.Fatal(err)
	}
	if err := plan.Check(p, s); err != nil {
		t.Fatal(err)
	}
	reconf := 0
	for k := 1; k < len(p.Stages); k++ {
		if len(circuitDiff(p.Stages[k-1], p.Stages[k])) > 0 {
			reconf++
		}
	}
	if reconf == 0 {
		t.Fatal("the plan never changes its circuits; the test would not cover reconfiguration")
	}
	res, err := orchestrate.Run(context.Background(), &orchestrate.Options{Lab: lab, Scenario: s, Plan: p, Dir: t.TempDir(), Verify: true})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := len(res.Compare), len(res.Prediction.Phases); got != want {
		t.Errorf("%d phases compared, %d predicted", got, want)
	}
	for _, st := range res.Stats {
		if st.Phase != "compute" && !st.Verified {
			t.Errorf("%s iteration %d %s not verified", st.Job, st.Iteration, st.Phase)
		}
	}
	// No phase may start before the plan lets it.
	planned := map[plan.Key]int64{}
	for _, st := range p.Stages {
		for _, a := range st.Activities {
			planned[plan.Key{Job: a.Job, Iteration: a.Iteration, Phase: a.Phase}] = max(st.StartNs, *a.StartNs)
		}
	}
	for _, r := range res.Outcome.Phases {
		if r.Rank < 0 {
			continue
		}
		k := plan.Key{Job: r.Job, Iteration: r.Iteration, Phase: r.Phase}
		if off := r.StartNs - res.Outcome.T0; off < planned[k] {
			t.Errorf("%s rank %d started %.3f ms before its planned %.3f ms", k, r.Rank, float64(planned[k]-off)/1e6, float64(planned[k])/1e6)
		}
	}
	// Every slot switched once, in order, never before its instant.
	// Whether a switch was late depends on the machine's load: a figure
	// (BenchmarkRotorSlots in ocsfabric/ocs measures it), not a property.
	// Events may arrive out of slot order (a slot's event is logged once
	// its routes are in), so they are ordered by slot here.
	// A slot's event may still be on its way (its routes go in off the
	// switching path): wait for every slot, then for stragglers.
	bySlot := map[int]ocs.Event{}
	wait := time.After(time.Minute)
collect:
	for {
		var more <-chan time.Time
		if len(bySlot) >= len(p.Stages)-1 {
			more = time.After(100 * time.Millisecond) // any duplicate?
		}
		select {
		case ev := <-events:
			if ev.Kind == "slot" {
				if _, dup := bySlot[ev.Slot]; dup {
					t.Errorf("slot %d switched twice", ev.Slot)
				}
				bySlot[ev.Slot] = ev
			}
		case <-more:
			break collect
		case <-wait:
			break collect
		}
	}
	slots, late := len(bySlot), 0
	if slots == 0 || slots != len(p.Stages)-1 {
		t.Errorf("the OCS switched %d slots, the plan has %d stages", slots, len(p.Stages))
	}
	var maxLate int64
	for i := range slots {
		ev, ok := bySlot[i]
		if !ok {
			t.Errorf("slot %d never switched", i)
			continue
		}
		if ev.Effective < ev.Scheduled {
			t.Errorf("slot %d switched %d ns before its instant", i, ev.Scheduled-ev.Effective)
		}
		if prev, ok := bySlot[i-1]; ok && (ev.Scheduled <= prev.Scheduled || ev.Effective < prev.Effective) {
			t.Errorf("slot %d (due %d, switched %d) is not after slot %d (due %d, switched %d)", i, ev.Scheduled, ev.Effective, i-1, prev.Scheduled, prev.Effective)
		}
		if ev.LateNs > 0 {
			late++
			maxLate = max(maxLate, ev.LateNs)
		}
	}
	t.Logf("%d of %d slots switched late (at most %.3f ms)", late, slots, float64(maxLate)/1e6)
	t.Logf("%d stages, %d reconfigurations planned; makespan predicted %.3fs, measured %.3fs",
		len(p.Stages), res.Prediction.Reconfigurations, float64(res.Prediction.MakespanNs)/1e9, float64(res.Measurement.MakespanNs)/1e9)
}

func circuitDiff(a, b plan.Stage) []string {
	var out []string
	for _, u := range circuit.Dark(circuit.Config{Circuits: a.Circuits}, circuit.Config{Circuits: b.Circuits}) {
		out = append(out, u.String())
	}
	return out
}
