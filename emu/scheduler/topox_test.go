package scheduler

import (
	"fmt"
	"testing"

	"github.com/ocsemu/ocsemu/emu/flowmodel"
	"github.com/ocsemu/ocsemu/emu/plan"
)

// TopoX by hand: r0s0 computes 1 ms, then sends 1.25 MB (10 ms at
// 1 Gbit/s) to each of r1s0, r2s0 and r3s0; r3s0 then computes 5 ms. r0's
// ToR has one uplink, so the transfers take turns, in slots of 1 ms: the
// one to r3 first (it is on the critical path), 1-11 ms; then to r1 and
// r2, 11-21 and 21-31 ms; r3 computes 11-16 ms. Makespan 31 ms.
func TestTopoXCriticalPathFirst(t *testing.T) {
	s := parse(t, `name: t
fabric: {kind: ocs, racks: 4, servers_per_rack: 1, uplinks_per_tor: 1, ocs: {switches: 1, reconfig_delay: 0s}, rates: {server: 1Gbit, uplink: 1Gbit}}
`)
	j := plan.Job{Name: "g", Pattern: plan.PatternDAG, Workers: []string{"r0s0", "r1s0", "r2s0", "r3s0"}, Iterations: 1, Tasks: []plan.Task{
		{Name: "fwd", Kind: plan.TaskCompute, Server: "r0s0", ComputeNs: 1e6},
		{Name: "to1", Kind: plan.TaskTransfer, Src: "r0s0", Dst: "r1s0", Bytes: 1.25e6, After: []string{"fwd"}},
		{Name: "to2", Kind: plan.TaskTransfer, Src: "r0s0", Dst: "r2s0", Bytes: 1.25e6, After: []string{"fwd"}},
		{Name: "to3", Kind: plan.TaskTransfer, Src: "r0s0", Dst: "r3s0", Bytes: 1.25e6, After: []string{"fwd"}},
		{Name: "bwd", Kind: plan.TaskCompute, Server: "r3s0", ComputeNs: 5e6, After: []string{"to3"}},
	}}
	p, err := TopoXJobs(s, []plan.Job{j}, TopoXSlot, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := plan.Check(p, s); err != nil {
		t.Fatalf("plan does not check: %v", err)
	}
	run, err := flowmodel.Simulate(p, s)
	if err != nil {
		t.Fatal(err)
	}
	ends := map[string]int64{}
	for _, ph := range run.Phases {
		ends[ph.Phase] = ph.EndNs
	}
	for phase, want := range map[string]int64{"fwd": 1e6, "to3": 11e6, "bwd": 16e6, "to1": 21e6, "to2": 31e6} {
		if d := ends[phase] - want; d < -2 || d > 2 {
			t.Errorf("%s ends at %d ns, want %d (all: %v)", phase, ends[phase], want, ends)
		}
	}
	if d := run.MakespanNs - p.Predicted.MakespanNs; d < -2 || d > 2 {
		t.Errorf("simulated makespan %d, topox predicted %d", run.MakespanNs, p.Predicted.MakespanNs)
	}
}

// TopoX and static on scenario jobs (pattern jobs, not task graphs): the
// plans check and predict themselves.
func TestTopoXScenarioJobs(t *testing.T) {
	s := manyJobs(t, 8, 10, "topox")
	s.Scheduler.Slot = 1e6
	p, run := planAndSimulate(t, s)
	if d := run.MakespanNs - p.Predicted.MakespanNs; d < -1000 || d > 1000 {
		t.Errorf("simulated makespan %d, topox predicted %d", run.MakespanNs, p.Predicted.MakespanNs)
	}
	t.Log(fmt.Sprintf("%d stages, makespan %.3f s", len(p.Stages), float64(run.MakespanNs)/1e9))
}

// The benchmark's case (100 hd jobs on 16 pods, most of whose all-reduces
// need more rack pairs than uplinks) plans, checks and predicts itself: a
// ring a transfer lights for its multi-hop paths must not lose an edge to
// its own next edge (it once did, and the plan never ended).
func TestPlan100Jobs16Pods(t *testing.T) {
	for _, sched := range []string{"oddl", "topox"} {
		s := manyJobs(t, 16, 100, sched)
		s.Scheduler.Slot = 1e6
		p, run := planAndSimulate(t, s)
		if d := run.MakespanNs - p.Predicted.MakespanNs; d < -1000 || d > 1000 {
			t.Errorf("%s: simulated makespan %d, predicted %d", sched, run.MakespanNs, p.Predicted.MakespanNs)
		}
	}
}
