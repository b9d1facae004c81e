package orchestrate_test

import (
	"context"
	"testing"
	"time"

	"github.com/ocsemu/ocsemu/dataplane/fabric"
	"github.com/ocsemu/ocsemu/dataplane/fabric/fabrictest"
	"github.com/ocsemu/ocsemu/emu/orchestrate"
	"github.com/ocsemu/ocsemu/emu/plan"
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
	s := fabrictest.Scenario(t, name, `fabric: {kind: ocs, racks: 4, servers_per_rack: 1, uplinks_per_tor: 3, ocs: {reconfig_delay: 1ms}, rates: {server: 1Gbit, uplink: 1Gbit}}
jobs:
  - {name: ring, pattern: ring, workers: [r0s0, r1s0, r2s0, r3s0], bytes: 4MiB, compute: 20ms, iterations: 1}
  - {name: a2a, pattern: alltoall, workers: [r0s0, r2s0], bytes: 8MiB, compute: 10ms, iterations: 4, arrival: 30ms}
scheduler: {name: fcfs, slot: 40ms}
`)
	lab := fabrictest.Deploy(t, s)
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
	// Every slot switched, in order, never before its instant. Whether a
	// switch was late depends on the machine's load: a figure
	// (BenchmarkRotorSlots in ocsfabric/ocs measures it), not a property.
	slots, late, prev := 0, 0, -1
	var maxLate, lastEffective int64
	for {
		select {
		case ev := <-events:
			if ev.Kind == "slot" {
				slots++
				if ev.Slot <= prev || ev.Effective < lastEffective {
					t.Errorf("slot %d switched at %d, after slot %d at %d: out of order", ev.Slot, ev.Effective, prev, lastEffective)
				}
				if ev.Effective < ev.Scheduled {
					t.Errorf("slot %d switched %d ns before its instant", ev.Slot, ev.Scheduled-ev.Effective)
				}
				prev, lastEffective = ev.Slot, ev.Effective
				if ev.LateNs > 0 {
					late++
					maxLate = max(maxLate, ev.LateNs)
				}
			}
			continue
		default:
		}
		break
	}
	if slots == 0 || slots != len(p.Stages)-1 {
		t.Errorf("the OCS switched %d slots, the plan has %d stages", slots, len(p.Stages))
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
