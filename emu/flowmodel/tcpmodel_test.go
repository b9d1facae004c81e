package flowmodel

import (
	"math"
	"testing"

	"github.com/ocsemu/ocsemu/emu/plan"
	"github.com/ocsemu/ocsemu/emu/scenario"
	"github.com/ocsemu/ocsemu/ocsfabric/circuit"
)

// pushEnds runs jobs (ASAP) over circuits cfg, switching to next at
// switchAt if next is set, and returns when each job's first push ended.
func pushEnds(t *testing.T, s *scenario.Scenario, jobs []plan.Job, opt Options, cfg []circuit.Circuit, switchAt int64, next []circuit.Circuit) map[string]float64 {
	t.Helper()
	opt.ASAP = true
	sim := New(s.Fabric, jobs, opt)
	sim.SetCircuits(circuit.Config{Circuits: cfg}, true)
	if next != nil {
		sim.RunUntil(switchAt)
		sim.SetCircuits(circuit.Config{Circuits: next}, false)
	}
	sim.RunUntil(inf)
	out := map[string]float64{}
	for _, ph := range sim.Result().Phases {
		if ph.Phase == "push" && ph.Iteration == 0 {
			out[ph.Job] = float64(ph.EndNs) / 1e9
		}
	}
	return out
}

// The parking lot by hand: racks 0-1-2 in a chain of two 1 Gbit/s
// (125 MB/s) circuits; a sends r0 -> r2 over both, b r1 -> r2 over the
// second, c r0 -> r1 over the first, 75 MB each. Base RTT 1 ms, a full
// queue 1 ms: a's RTT is 3 ms, b's and c's 2 ms. With α = 1 the weights
// are 1/3 and 1/2, so a gets 2/5 of each circuit (50 MB/s) and b and c
// 3/5 (75 MB/s): b and c end at 1 s, when a has 25 MB left, which takes
// 0.2 s alone. With α = 0 (max-min) all get 62.5 MB/s and end at 1.2 s.
// Without c the first circuit is not full, adds no queue, and a and b
// share the second equally. Fair switch ports (switch_queue: fair) share
// per flow whatever the RTTs: max-min again.
func TestRTTBiasedSharingByHand(t *testing.T) {
	fabric := func(queue string) *scenario.Scenario {
		return scen(t, "fabric: {kind: ocs, racks: 3, servers_per_rack: 2, uplinks_per_tor: 2, switch_queue: "+queue+", rates: {server: 10Gbit, uplink: 1Gbit}}\n")
	}
	job := func(name, w, ps string) plan.Job {
		return plan.Job{Name: name, Pattern: "ps", Workers: []string{w, ps}, PS: ps, Bytes: 75_000_000, Iterations: 1}
	}
	ja, jb, jc := job("a", "r0s0", "r2s0"), job("b", "r1s0", "r2s1"), job("c", "r0s1", "r1s1")
	chain := []circuit.Circuit{c("tor0:0", "tor1:0"), c("tor1:1", "tor2:0")}
	tests := []struct {
		name  string
		queue string
		alpha float64
		jobs  []plan.Job
		want  map[string]float64
	}{
		{"alpha 1: the 2-hop flow gets 2/5", "fifo", 1, []plan.Job{ja, jb, jc}, map[string]float64{"a": 1.2, "b": 1, "c": 1}},
		{"alpha 0 is max-min", "fifo", 0, []plan.Job{ja, jb, jc}, map[string]float64{"a": 1.2, "b": 1.2, "c": 1.2}},
		{"a hop that is not full adds no queue", "fifo", 1, []plan.Job{ja, jb}, map[string]float64{"a": 1.2, "b": 1.2}},
		{"fair switch ports share max-min", "fair", 1, []plan.Job{ja, jb, jc}, map[string]float64{"a": 1.2, "b": 1.2, "c": 1.2}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tm := &TCPModel{RTTExponent: tt.alpha, BaseRTTNs: 1e6, QueueNs: func(scenario.Rate) int64 { return 1e6 }, PTOMinNs: 2e6, RTOMinNs: 200e6, MSS: 1448}
			got := pushEnds(t, fabric(tt.queue), tt.jobs, Options{TCP: tm}, chain, 0, nil)
			for j, want := range tt.want {
				if math.Abs(got[j]-want) > 1e-6 {
					t.Errorf("%s's push ends at %.6f s, want %.6f", j, got[j], want)
				}
			}
		})
	}
}

// A reconfiguration under a flow by hand: one 125 MB push over a 1 Gbit/s
// circuit (125 MB/s, 1 s alone), the circuit removed at 0.5 s. Base RTT 1
// ms and a full queue 9 ms: the flow's SRTT is 10 ms and it loses
// 125 MB/s x 10 ms = 1.25 MB, sent again (10 ms). With a lit second
// circuit it moves over and repairs the loss from SACKs: 1.01 s. With
// only a new circuit, dark for 1 ms, its window goes into the dark and it
// waits for the loss probe, PTO = 2 x 10 + 2 = 22 ms: 1.032 s. Dark for
// 50 ms, the probe is lost too and the RTO fires at SRTT + 200 ms = 210
// ms (the window restarts at one segment, here the whole rate): 1.22 s.
// The calibrated model only pauses the flow for the dark period.
func TestReconfigurationCostByHand(t *testing.T) {
	s := scen(t, "fabric: {kind: ocs, racks: 2, servers_per_rack: 1, uplinks_per_tor: 2, rates: {server: 10Gbit, uplink: 1Gbit}}\n")
	jobs := []plan.Job{{Name: "p", Pattern: "ps", Workers: []string{"r0s0", "r1s0"}, PS: "r1s0", Bytes: 125_000_000, Iterations: 1}}
	tm := &TCPModel{RTTExponent: 1, BaseRTTNs: 1e6, QueueNs: func(scenario.Rate) int64 { return 9e6 }, PTOMinNs: 2e6, RTOMinNs: 200e6, MSS: 1.25e6}
	both := []circuit.Circuit{c("tor0:0", "tor1:0"), c("tor0:1", "tor1:1")}
	// the circuit the flow hashes onto goes; the other stays lit
	ups, ok := FlowPath(2, circuit.Config{Circuits: both}, 0, 0, nil, "r0s0", "r1s0")
	if !ok {
		t.Fatal("no path")
	}
	kept := []circuit.Circuit{both[1-ups[0].Port]}
	tests := []struct {
		name     string
		opt      Options
		from, to []circuit.Circuit
		want     float64
	}{
		{"lit alternative: RACK repairs the lost 1.25 MB", Options{TCP: tm, DelayNs: 1e6}, both, kept, 1.01},
		{"dark 1 ms, no alternative: loss probe at 22 ms", Options{TCP: tm, DelayNs: 1e6}, both[:1], both[1:], 1.032},
		{"dark 50 ms: RTO at 210 ms", Options{TCP: tm, DelayNs: 50e6}, both[:1], both[1:], 1.22},
		{"calibrated model: the dark period only", Options{DelayNs: 50e6}, both[:1], both[1:], 1.05},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var ds []Disruption
			tt.opt.OnDisrupt = func(d Disruption) { ds = append(ds, d) }
			got := pushEnds(t, s, jobs, tt.opt, tt.from, 500e6, tt.to)["p"]
			if math.Abs(got-tt.want) > 1e-6 {
				t.Errorf("push ends at %.6f s, want %.6f", got, tt.want)
			}
			if len(ds) != 1 || ds[0].Key.Phase != "push" || ds[0].AtNs != 500e6 {
				t.Errorf("disruptions %+v: want the push flow's, at 0.5 s", ds)
			}
		})
	}
}

func TestRecoveryStall(t *testing.T) {
	tm := &TCPModel{PTOMinNs: 2e6, RTOMinNs: 200e6, MSS: 1448}
	const srtt = 2.5e6
	tests := []struct {
		name  string
		dark  int64
		hit   bool
		left  float64
		stall int64
		rto   bool
	}{
		{"hit, lit path, data left: RACK, no stall", 0, true, 1e6, 0, false},
		{"hit, lit path, tail loss: one PTO", 0, true, 100, 7e6, false},
		{"moved into a 1 ms dark: the ACK clock outlives it", 1e6, false, 1e6, 0, false},
		{"moved into a 5 ms dark: window lost, the probe recovers", 5e6, false, 1e6, 7e6, false},
		{"hit and 1 ms dark: no ACK clock, the probe recovers", 1e6, true, 1e6, 7e6, false},
		{"dark 50 ms: RTO = SRTT + rto_min", 50e6, true, 1e6, 202.5e6, true},
		{"dark 300 ms: one back-off", 300e6, false, 1e6, 202.5e6 + 405e6, true},
	}
	for _, tt := range tests {
		stall, rto := recoveryStall(tm, srtt, tt.dark, tt.hit, tt.left)
		if stall != tt.stall || rto != tt.rto {
			t.Errorf("%s: stall %d rto %v, want %d %v", tt.name, stall, rto, tt.stall, tt.rto)
		}
	}
}

// A flow moved into a dark circuit without losing its old one: racks
// 0-1-2 in a chain, a 125 MB push r0 -> r2 over both circuits (SRTT 1 +
// 9 + 9 = 19 ms: both are full), and at 0.5 s a direct circuit r0-r2
// appears, dark for D, the only shortest path. With D = 1 ms < SRTT the
// ACKs of the data on the old path clock 125 MB/s x 1 ms = 125 KB into
// the dark, resent after it: 0.5 + 0.001 + 62.625 MB / 125 MB/s = 1.002
// s. With D = 30 ms >= SRTT the whole window, 125 MB/s x 19 ms = 2.375 MB,
// goes into the dark and the loss probe comes at 2 x 19 + 2 = 40 ms:
// 0.5 + 0.040 + 64.875 / 125 = 1.059 s (the calibrated model: 1.03 s).
func TestMovedIntoTheDarkByHand(t *testing.T) {
	s := scen(t, "fabric: {kind: ocs, racks: 3, servers_per_rack: 1, uplinks_per_tor: 2, rates: {server: 10Gbit, uplink: 1Gbit}}\n")
	jobs := []plan.Job{{Name: "p", Pattern: "ps", Workers: []string{"r0s0", "r2s0"}, PS: "r2s0", Bytes: 125_000_000, Iterations: 1}}
	tm := &TCPModel{RTTExponent: 1, BaseRTTNs: 1e6, QueueNs: func(scenario.Rate) int64 { return 9e6 }, PTOMinNs: 2e6, RTOMinNs: 200e6, MSS: 1448}
	chain := []circuit.Circuit{c("tor0:0", "tor1:0"), c("tor1:1", "tor2:0")}
	direct := append(append([]circuit.Circuit(nil), chain...), c("tor0:1", "tor2:1"))
	tests := []struct {
		name string
		opt  Options
		want float64
	}{
		{"dark 1 ms: the ACK clock outlives it", Options{TCP: tm, DelayNs: 1e6}, 1.002},
		{"dark 30 ms: the window is lost, loss probe at 40 ms", Options{TCP: tm, DelayNs: 30e6}, 1.059},
		{"calibrated model: the dark period only", Options{DelayNs: 30e6}, 1.03},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var ds []Disruption
			tt.opt.OnDisrupt = func(d Disruption) { ds = append(ds, d) }
			got := pushEnds(t, s, jobs, tt.opt, chain, 500e6, direct)["p"]
			if math.Abs(got-tt.want) > 1e-6 {
				t.Errorf("push ends at %.6f s, want %.6f", got, tt.want)
			}
			if len(ds) != 0 {
				t.Errorf("disruptions %+v: the old circuits stay, none is disrupted", ds)
			}
		})
	}
}

// A sender's queue as a flow held back elsewhere sees it, by hand: r0s0
// (125 MB/s) sends a to r0s1 in its rack and b to r1s0 over a 50 MB/s
// circuit, which c (r0s1 to r1s1) shares. Max-min holds b and c back at
// the circuit (25 MB/s each) and a at r0s0's uplink (100 MB/s, 0.8 of
// it). Base RTT 1 ms, a full queue 1 ms, α = 1: b crosses both full
// queues, c only the circuit's. Counting all of r0s0's queue, b's RTT is
// 3 ms and c's 2, so b gets 50 x (1/3)/(1/3 + 1/2) = 20 MB/s and its 10
// MB end at 0.5 s. Counting 0.8 of it (the share a uses): RTT 2.8 ms,
// 20.83 MB/s, 0.48 s. Half of that, 0.4: RTT 2.4 ms, 22.73 MB/s, 0.44 s.
func TestHeldBackSenderQueueByHand(t *testing.T) {
	s := scen(t, "fabric: {kind: ocs, racks: 2, servers_per_rack: 2, uplinks_per_tor: 1, rates: {server: 1Gbit, uplink: 400Mbit}}\n")
	job := func(name, w, ps string, bytes int64) plan.Job {
		return plan.Job{Name: name, Pattern: "ps", Workers: []string{w, ps}, PS: ps, Bytes: bytes, Iterations: 1}
	}
	jobs := []plan.Job{job("a", "r0s0", "r0s1", 200_000_000), job("b", "r0s0", "r1s0", 10_000_000), job("c", "r0s1", "r1s1", 200_000_000)}
	circuits := []circuit.Circuit{c("tor0:0", "tor1:0")}
	for _, tt := range []struct {
		name  string
		scale float64
		want  float64
	}{
		{"the whole queue", 0, 0.5},
		{"the share the flows held there use", 1, 0.48},
		{"half of that", 0.5, 0.44},
	} {
		t.Run(tt.name, func(t *testing.T) {
			tm := &TCPModel{RTTExponent: 1, BaseRTTNs: 1e6, QueueNs: func(scenario.Rate) int64 { return 1e6 }, PTOMinNs: 2e6, RTOMinNs: 200e6, MSS: 1448,
				HeldBackSenderQueue: tt.scale}
			got := pushEnds(t, s, jobs, Options{TCP: tm}, circuits, 0, nil)
			if math.Abs(got["b"]-tt.want) > 1e-6 {
				t.Errorf("b's push ends at %.6f s, want %.6f", got["b"], tt.want)
			}
		})
	}
}
