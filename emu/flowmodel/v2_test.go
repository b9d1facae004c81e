package flowmodel

import (
	"testing"

	"github.com/ocsemu/ocsemu/emu/plan"
	"github.com/ocsemu/ocsemu/ocsfabric/circuit"
)

func stepAct(job string, k int) plan.Activity {
	a := act(job, 0, "allreduce")
	a.Step = &k
	return a
}

// Halving-doubling step by step on 4 racks x 1 uplink (paper 003 in
// miniature), by hand. S = 250 MB at 1 Gbit/s (125 MB/s per direction):
// halving step 0 (distance 1, circuits {0-1, 2-3}) sends S/2 = 125 MB each
// way: 1 s; step 1 (distance 2, {0-2, 1-3}) 62.5 MB: 0.5 s; doubling
// mirrors them: 0.5 s, 1 s. The OCS switches twice (1 ms dark each), so
// the all-reduce ends at 10 ms compute + 3 s + 2 ms. The same job on an
// ideal packet core sends every step's bytes at once, 1.5 S per server:
// 3 s.
func TestHDSteps(t *testing.T) {
	s := scen(t, `fabric: {kind: ocs, racks: 4, servers_per_rack: 1, uplinks_per_tor: 1, ocs: {switches: 1, reconfig_delay: 1ms}, rates: {server: 1Gbit, uplink: 1Gbit}}`)
	m1 := []circuit.Circuit{c("tor0:0", "tor1:0"), c("tor2:0", "tor3:0")}
	m2 := []circuit.Circuit{c("tor0:0", "tor2:0"), c("tor1:0", "tor3:0")}
	j := plan.Job{Name: "hd", Pattern: "hd", Workers: []string{"r0s0", "r1s0", "r2s0", "r3s0"}, Bytes: 250e6, ComputeNs: 10 * ms, Iterations: 1, Steps: true}
	p := &plan.Plan{Version: 2, Scenario: "t", Mode: plan.ModeBarrier, Jobs: []plan.Job{j},
		Stages: []plan.Stage{{Circuits: m1, Activities: []plan.Activity{act("hd", 0, "compute")}}}}
	for k, m := range [][]circuit.Circuit{m1, m2, m2, m1} {
		p.Stages = append(p.Stages, plan.Stage{Circuits: m, Activities: []plan.Activity{stepAct("hd", k)}})
	}
	wantEnds := []int64{1010 * ms, 1511 * ms, 2011 * ms, 3012 * ms}
	for k, want := range wantEnds {
		if got := phaseEnd(t, p, s, "hd", 0, "allreduce."+string(rune('0'+k))); !near(got, want) {
			t.Errorf("step %d ends at %d ns, want %d", k, got, want)
		}
	}
	run, err := Simulate(p, s)
	if err != nil {
		t.Fatal(err)
	}
	if run.Reconfigurations != 2 {
		t.Errorf("%d reconfigurations, want 2", run.Reconfigurations)
	}

	eps := scen(t, `fabric: {kind: eps, racks: 4, servers_per_rack: 1, rates: {server: 1Gbit}}`)
	j.Steps = false
	pe := &plan.Plan{Version: 2, Scenario: "t", Mode: plan.ModeBarrier, Jobs: []plan.Job{j}, Stages: []plan.Stage{
		{Activities: []plan.Activity{act("hd", 0, "compute")}}, {Activities: []plan.Activity{act("hd", 0, "allreduce")}}}}
	if got, want := phaseEnd(t, pe, eps, "hd", 0, "allreduce"), 3010*ms; !near(got, want) {
		t.Errorf("hd on the packet core ends at %d ns, want %d", got, want)
	}
}

// A task graph, by hand: r0s0 computes 1 ms, then sends 1.25 MB to r1s0
// (send-a) and to r2s0 (send-b, planned to start at 11 ms); r1s0 computes
// 2 ms on what it got. 1.25 MB alone at 1 Gbit/s: 10 ms. Iteration 0:
// fwd 0-1, send-a 1-11, bwd 11-13, send-b 11-21 (its start time). Iteration
// 1 waits for both sinks (send-b, bwd): fwd 21-22, then the two sends share
// r0s0's server link (0.5 Gbit/s each): 22-42, bwd 42-44.
func TestDAG(t *testing.T) {
	s := scen(t, `fabric: {kind: ocs, racks: 4, servers_per_rack: 1, uplinks_per_tor: 2, ocs: {switches: 1, reconfig_delay: 1ms}, rates: {server: 1Gbit, uplink: 1Gbit}}`)
	j := plan.Job{Name: "g", Pattern: plan.PatternDAG, Workers: []string{"r0s0", "r1s0", "r2s0"}, Iterations: 2, Tasks: []plan.Task{
		{Name: "fwd", Kind: plan.TaskCompute, Server: "r0s0", ComputeNs: ms},
		{Name: "send-a", Kind: plan.TaskTransfer, Src: "r0s0", Dst: "r1s0", Bytes: 1.25e6, After: []string{"fwd"}},
		{Name: "send-b", Kind: plan.TaskTransfer, Src: "r0s0", Dst: "r2s0", Bytes: 1.25e6, After: []string{"fwd"}},
		{Name: "bwd", Kind: plan.TaskCompute, Server: "r1s0", ComputeNs: 2 * ms, After: []string{"send-a"}},
	}}
	startB := 11 * ms
	var acts []plan.Activity
	for it := 0; it < 2; it++ {
		for _, task := range j.Tasks {
			a := act("g", it, task.Name)
			if it == 0 && task.Name == "send-b" {
				a.StartNs = &startB
			}
			acts = append(acts, a)
		}
	}
	p := &plan.Plan{Version: 2, Scenario: "t", Mode: plan.ModeClock, Jobs: []plan.Job{j}, Stages: []plan.Stage{
		{DurationNs: 100 * ms, Circuits: []circuit.Circuit{c("tor0:0", "tor1:0"), c("tor0:1", "tor2:0")}, Activities: acts}}}
	for _, tt := range []struct {
		it    int
		phase string
		end   int64
	}{{0, "fwd", ms}, {0, "send-a", 11 * ms}, {0, "bwd", 13 * ms}, {0, "send-b", 21 * ms},
		{1, "fwd", 22 * ms}, {1, "send-a", 42 * ms}, {1, "send-b", 42 * ms}, {1, "bwd", 44 * ms}} {
		if got := phaseEnd(t, p, s, "g", tt.it, tt.phase); !near(got, tt.end) {
			t.Errorf("iteration %d %s ends at %d ns, want %d", tt.it, tt.phase, got, tt.end)
		}
	}
}

// INC decided per stage: the same ps job pushes through its ToRs (INC) in
// iteration 0 and to its CPU parameter server in iteration 1. Workers r0s0
// and r1s0, PS r0s0, 125 MB at 1 Gbit/s. With INC the push is the whole
// all-reduce: r1s0's 125 MB go to tor1, tor1's partial sum to tor0,
// r0s0's to tor0, and the sum comes back down at the same time on the
// other direction of each link: 1 s, 6 flows; the pull moves nothing.
// Without, only r1s0 -> r0s0 crosses (r0s0 is the PS): 1 s, 1 flow, and
// the pull another 1 s.
func TestINCPerStage(t *testing.T) {
	s := scen(t, `fabric: {kind: ocs, racks: 2, servers_per_rack: 1, uplinks_per_tor: 1, ocs: {switches: 1}, inc: {capacity: 1}, rates: {server: 1Gbit, uplink: 1Gbit}}`)
	yes, no := true, false
	j := plan.Job{Name: "a", Pattern: "ps", Workers: []string{"r0s0", "r1s0"}, PS: "r0s0", Aggregator: "tor0", Bytes: 125e6, Iterations: 2}
	cir := []circuit.Circuit{c("tor0:0", "tor1:0")}
	p := &plan.Plan{Version: 2, Scenario: "t", Mode: plan.ModeBarrier, Jobs: []plan.Job{j}}
	for it, inc := range []*bool{&yes, &no} {
		push, pull := act("a", it, "push"), act("a", it, "pull")
		push.INC, pull.INC = inc, inc
		p.Stages = append(p.Stages, plan.Stage{Circuits: cir, Activities: []plan.Activity{act("a", it, "compute")}},
			plan.Stage{Circuits: cir, Activities: []plan.Activity{push}}, plan.Stage{Circuits: cir, Activities: []plan.Activity{pull}})
	}
	if err := plan.Check(p, s); err != nil {
		t.Fatal(err)
	}
	run, err := Simulate(p, s)
	if err != nil {
		t.Fatal(err)
	}
	bytes := map[int]float64{}
	for _, ph := range run.Phases {
		if ph.Phase == "push" {
			bytes[ph.Iteration] = ph.Bytes
		}
	}
	if bytes[0] != 750e6 || bytes[1] != 125e6 {
		t.Errorf("push bytes with INC %g, without %g; want 750e6 and 125e6", bytes[0], bytes[1])
	}
	if !near(run.MakespanNs, 3000*ms) {
		t.Errorf("makespan %d, want 3 s (INC push 1 s, no pull; push and pull 1 s each)", run.MakespanNs)
	}
}

// CoalesceNs rounds completions up to its multiple: 125 MB at 1 Gbit/s
// ends at exactly 1 s either way; 125,000,001 B ends 8 ns later exactly,
// and at the next microsecond when coalesced.
func TestCoalesce(t *testing.T) {
	s := scen(t, `fabric: {kind: eps, racks: 2, servers_per_rack: 1, rates: {server: 1Gbit}}`)
	for _, tt := range []struct {
		bytes    int64
		coalesce int64
		want     int64
	}{{125e6, 0, 1e9}, {125e6, 1000, 1e9}, {125e6 + 1, 0, 1e9 + 8}, {125e6 + 1, 1000, 1e9 + 1000}} {
		j := plan.Job{Name: "a", Pattern: "ring", Workers: []string{"r0s0", "r1s0"}, Bytes: tt.bytes, Iterations: 1}
		p := &plan.Plan{Version: 2, Mode: plan.ModeBarrier, Jobs: []plan.Job{j}, Stages: []plan.Stage{
			{Activities: []plan.Activity{act("a", 0, "compute")}}, {Activities: []plan.Activity{act("a", 0, "allreduce")}}}}
		run, err := SimulateWith(p, s, Options{CoalesceNs: tt.coalesce})
		if err != nil {
			t.Fatal(err)
		}
		if run.MakespanNs != tt.want {
			t.Errorf("%d B, coalesce %d ns: makespan %d, want %d", tt.bytes, tt.coalesce, run.MakespanNs, tt.want)
		}
	}
}
