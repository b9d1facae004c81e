package flowmodel

import (
	"fmt"
	"math"
	"testing"

	"github.com/ocsemu/ocsemu/emu/plan"
)

// By hand: an 80 Mbit/s link carries 10 MB/s. A 25 MB transfer with an
// initial window of 1 MB and an RTT of 1 s gets 1, 2, 4 and 8 MB/s in its
// first four seconds (15 MB), then its window exceeds the link and the
// last 10 MB take 1 s: 5 s instead of the fluid 2.5 s. A connection used
// again within the idle limit keeps its window: 2.5 s.
func TestSlowStartByHand(t *testing.T) {
	s := scen(t, "fabric: {kind: eps, racks: 2, servers_per_rack: 1, rates: {server: 80Mbit}}\n")
	j := plan.Job{Name: "p", Pattern: "ps", Workers: []string{"r0s0"}, PS: "r1s0", Bytes: 25_000_000, Iterations: 2}
	tests := []struct {
		name   string
		idleNs int64
		want   map[[2]any]float64 // (iteration, phase) -> seconds
	}{
		{"warm connections keep their window", 6e9, map[[2]any]float64{
			{0, "push"}: 5, {0, "pull"}: 5, {1, "push"}: 2.5, {1, "pull"}: 2.5}},
		{"idle longer than the limit: slow start again", 1e9, map[[2]any]float64{
			{0, "push"}: 5, {0, "pull"}: 5, {1, "push"}: 5, {1, "pull"}: 5}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sim := New(s.Fabric, []plan.Job{j}, Options{ASAP: true,
				SlowStart: &SlowStart{InitialWindowBytes: 1e6, BaseRTTNs: 1e9, IdleResetNs: tt.idleNs}})
			sim.RunUntil(inf)
			run := sim.Result()
			for _, ph := range run.Phases {
				want, ok := tt.want[[2]any{ph.Iteration, ph.Phase}]
				if !ok {
					continue
				}
				if got := float64(ph.EndNs-ph.StartNs) / 1e9; math.Abs(got-want) > 1e-6 {
					t.Errorf("iteration %d %s: %.6f s, want %.6f", ph.Iteration, ph.Phase, got, want)
				}
			}
		})
	}
}

// A flow that starts while another job's flow keeps its link busy ramps
// at the RTT of a full queue; one on an idle path at the base RTT.
func TestSlowStartQueueInflatedRTT(t *testing.T) {
	s := scen(t, "fabric: {kind: eps, racks: 2, servers_per_rack: 2, rates: {server: 80Mbit}}\n")
	long := plan.Job{Name: "a", Pattern: "ps", Workers: []string{"r0s0"}, PS: "r1s0", Bytes: 100_000_000, Iterations: 1}
	late := plan.Job{Name: "b", Pattern: "ps", Workers: []string{"r0s1"}, PS: "r1s0", Bytes: 1_000_000, Iterations: 1, ArrivalNs: 1e9}
	sim := New(s.Fabric, []plan.Job{long, late}, Options{ASAP: true,
		SlowStart: &SlowStart{InitialWindowBytes: 14480, BaseRTTNs: 100e3, QueueNs: 10e6, IdleResetNs: RTOMinNs}})
	sim.RunUntil(1e9 + 1)
	rtt := map[string]int64{}
	for _, fl := range sim.flows {
		rtt[sim.jobs[fl.job].j.Name] = fl.rttNs
	}
	if rtt["a"] != 100e3 || rtt["b"] != 10e6+100e3 {
		t.Errorf("slow-start RTTs %v: want a at the base 0.1 ms, b at 10.1 ms (a keeps r1s0's queue full)", rtt)
	}
}

func TestShaperQueue(t *testing.T) {
	tests := []struct {
		rate string
		mtu  int
		want int64
	}{
		{"1Gbit", 1500, 10e6},       // limit = rate/100: 10 ms
		{"100Mbit", 1500, 15728640}, // three 64 KiB bursts at 12.5 MB/s
		{"10Gbit", 9000, 10e6},
	}
	for _, tt := range tests {
		s := scen(t, "fabric: {kind: eps, racks: 2, servers_per_rack: 1, rates: {server: "+tt.rate+"}}\n")
		if got := ShaperQueueNs(s.Fabric.Rates.Server, tt.mtu); got != tt.want {
			t.Errorf("%s MTU %d: queue %d ns, want %d", tt.rate, tt.mtu, got, tt.want)
		}
	}
}

// A link another job uses below its rate has no standing queue: a flow
// joining it ramps at the base RTT.
func TestSlowStartUnsaturatedPathHasNoQueue(t *testing.T) {
	s := scen(t, "fabric: {kind: eps, racks: 2, servers_per_rack: 2, rates: {server: 80Mbit}}\n")
	// a's flow is capped by its server link, half of r1's 160 Mbit/s core link (oversubscription 1).
	a := plan.Job{Name: "a", Pattern: "ps", Workers: []string{"r0s0"}, PS: "r1s0", Bytes: 100_000_000, Iterations: 1}
	b := plan.Job{Name: "b", Pattern: "ps", Workers: []string{"r0s1"}, PS: "r1s1", Bytes: 1_000_000, Iterations: 1, ArrivalNs: 1e9}
	sim := New(s.Fabric, []plan.Job{a, b}, Options{ASAP: true,
		SlowStart: &SlowStart{InitialWindowBytes: 14480, BaseRTTNs: 100e3, QueueNs: 10e6, IdleResetNs: RTOMinNs}})
	sim.RunUntil(1e9 + 1)
	for _, fl := range sim.flows {
		if name := sim.jobs[fl.job].j.Name; name == "b" && fl.rttNs != 100e3 {
			t.Errorf("b ramps at %d ns, want the base 0.1 ms: the shared core link is half used", fl.rttNs)
		}
	}
}

// By hand, as above: a 2.5 MB transfer ends in slow start (1 MB in its
// first second, 1.5 MB at 2 MB/s: 1.75 s), 0.25 s of sending before its
// window would double. Its connection, used again within the idle limit,
// goes on from there: 2 MB/s for 0.25 s, then 4 MB/s for the last 2 MB,
// 0.75 s (not the link's 0.25 s, nor slow start's 1.75 s again).
func TestSlowStartGoesOnAcrossFlows(t *testing.T) {
	s := scen(t, "fabric: {kind: eps, racks: 2, servers_per_rack: 1, rates: {server: 80Mbit}}\n")
	j := plan.Job{Name: "p", Pattern: "ps", Workers: []string{"r0s0"}, PS: "r1s0", Bytes: 2_500_000, Iterations: 2}
	for _, tt := range []struct {
		name   string
		idleNs int64
		want   map[[2]any]float64 // (iteration, phase) -> seconds
	}{
		{"warm: slow start goes on", 6e9, map[[2]any]float64{{0, "push"}: 1.75, {0, "pull"}: 1.75, {1, "push"}: 0.75, {1, "pull"}: 0.75}},
		{"idle longer than the limit: from the initial window", 1e9, map[[2]any]float64{{0, "push"}: 1.75, {0, "pull"}: 1.75, {1, "push"}: 1.75, {1, "pull"}: 1.75}},
	} {
		sim := New(s.Fabric, []plan.Job{j}, Options{ASAP: true,
			SlowStart: &SlowStart{InitialWindowBytes: 1e6, BaseRTTNs: 1e9, IdleResetNs: tt.idleNs}})
		sim.RunUntil(inf)
		got := map[[2]any]float64{}
		for _, ph := range sim.Result().Phases {
			got[[2]any{ph.Iteration, ph.Phase}] = float64(ph.EndNs-ph.StartNs) / 1e9
		}
		for k, want := range tt.want {
			if math.Abs(got[k]-want) > 1e-6 {
				t.Errorf("%s: iteration %v %v: %.6f s, want %.6f", tt.name, k[0], k[1], got[k], want)
			}
		}
	}
}

// A transfer split into chained flows on one connection (a ring's pieces)
// ramps as the one flow does: 25 MB as ten 2.5 MB flows take the 5 s of
// TestSlowStartByHand, however the pieces cut its round trips.
func TestSlowStartChainedFlowsRampAsOne(t *testing.T) {
	s := scen(t, "fabric: {kind: eps, racks: 2, servers_per_rack: 1, rates: {server: 80Mbit}}\n")
	j := plan.Job{Name: "d", Pattern: plan.PatternDAG, Workers: []string{"r0s0", "r1s0"}, Iterations: 1}
	for i := range 10 {
		tk := plan.Task{Name: fmt.Sprintf("t%d", i), Kind: plan.TaskTransfer, Src: "r0s0", Dst: "r1s0", Bytes: 2_500_000}
		if i > 0 {
			tk.After = []string{fmt.Sprintf("t%d", i-1)}
		}
		j.Tasks = append(j.Tasks, tk)
	}
	sim := New(s.Fabric, []plan.Job{j}, Options{ASAP: true,
		SlowStart: &SlowStart{InitialWindowBytes: 1e6, BaseRTTNs: 1e9, IdleResetNs: 6e9}})
	sim.RunUntil(inf)
	var end int64
	for _, ph := range sim.Result().Phases {
		end = max(end, ph.EndNs)
	}
	if got := float64(end) / 1e9; math.Abs(got-5) > 1e-6 {
		t.Errorf("ten chained flows took %.6f s, want 5 (one flow's)", got)
	}
}
