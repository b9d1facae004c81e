package flowmodel

import (
	"math"
	"testing"

	"github.com/ocsemu/ocsemu/dataplane/topo"
	"github.com/ocsemu/ocsemu/emu/plan"
	"github.com/ocsemu/ocsemu/emu/scenario"
)

// By hand, on two racks of two servers whose core links carry 10 MB/s
// (80 Mbit/s servers, oversubscription 2): an INC push (r0s0 and r1s0,
// root tor0) and a TCP push r0s1 -> r1s1 start together. The TCP flow and
// the tree's segment tor0 -> tor1 share tor0's core uplink and tor1's core
// downlink, both full. With α = 1, a 1 ms base RTT and a queue of q per
// full link, the TCP flow's RTT is 1 + 2q ms (two full queues) and the
// segment shares like a flow through one: 1 + q ms. So on those links
// the segment gets 10 * (1/(1+q)) / (1/(1+q) + 1/(1+2q)) MB/s, every
// segment of the tree moves at that rate, capped by the window over the
// tree's round trip, 1 + 1 + 2q ms (the base RTT, 1 ms of aggregator hops
// and the two queues TCP keeps on tor1's branch), and the TCP flow gets
// the rest. The window is what the slowest link (the 80 Mbit/s core)
// carries in INCWindowRTTNs, 8 ms: 56 slots of 1440 B, 80,640 B. What it
// holds beyond that round trip waits in the queue of the link holding the
// tree back, which the TCP flow crosses too (incWindowQueues).
func TestINCTreeSharesByHand(t *testing.T) {
	s := scen(t, "fabric: {kind: eps, racks: 2, servers_per_rack: 2, rates: {server: 80Mbit}, eps: {oversubscription: 2}}\n")
	tree := plan.Job{Name: "inc", Pattern: "ps", Workers: []string{"r0s0", "r1s0"}, INC: true, Aggregator: "tor0", Bytes: 100e6, Iterations: 1}
	tcp := plan.Job{Name: "tcp", Pattern: "ps", Workers: []string{"r0s1"}, PS: "r1s1", Bytes: 100e6, Iterations: 1}
	window := 56.0 * INCSlotBytes
	if got := INCWindow(s.Fabric); got != 56 {
		t.Fatalf("INCWindow = %d slots, want 56", got)
	}
	// The window's queue: at rate r (MB/s) the 80,640 B in flight take
	// 4 + Q ms, Q the queue they build at the core, which the TCP flow
	// sees too: r = 80.64 / (4 + Q) = 10 * (1/2) / (1/2 + 1/(3 + Q)).
	// Solved by bisection on Q: 5.880 ms, r = 8.1618 MB/s; the model
	// settles the queue to a microsecond (0.001 MB/s here).
	lo, hi := 0.0, 100.0
	for range 100 {
		q := (lo + hi) / 2
		if window/1e3/(4+q) > 5/(0.5+1/(3+q)) {
			lo = q
		} else {
			hi = q
		}
	}
	queued := window / 1e3 / (4 + lo)
	tests := []struct {
		name     string
		queueMs  float64
		inc      float64 // MB/s
		capacity int     // jobs per ToR; 0: the default, 4
		fair     bool    // switch_queue: fair
	}{
		// 10 * (1/2) / (1/2 + 1/3) = 6; the window allows 80,640 B / 4 ms,
		// 20 MB/s. In flight at 6 MB/s it would take 13.4 ms against a
		// round trip of 4, so the core's queue grows for everyone until
		// the share and the window agree (above).
		{"the share limits the tree: its window queues", 1, queued, 0, false},
		// 1 + 1 + 2*100 ms: the window allows 80,640 B / 202 ms = 0.399
		// MB/s, under the share of 6.656.
		{"the window limits the tree", 100, window / 0.202 / 1e6, 0, false},
		// A ToR that may hold 32 jobs at once gives each 1024/32 = 32
		// slots, fewer than the link's 56.
		{"32 jobs per ToR: 32 slots", 100, 32 * INCSlotBytes / 0.202 / 1e6, 32, false},
		// Fair switch ports: TCP's standing queue waits in TCP's class at
		// the core ports, not in the tree's, so the tree's round trip is
		// 1 + 1 ms whatever q is (80,640 B / 2 ms = 40 MB/s), and with one
		// class each the two share the core max-min: 5 MB/s each. Nor does
		// the window queue for the TCP flow.
		{"fair switch ports, a deep TCP queue: max-min", 100, 5, 0, true},
		{"fair switch ports, a shallow TCP queue: max-min", 1, 5, 0, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			q := int64(tt.queueMs * 1e6)
			f := s.Fabric
			if tt.capacity > 0 {
				f.INC.Capacity = tt.capacity
			}
			if tt.fair {
				f.SwitchQueue = topo.QueueFair
			}
			sim := New(f, []plan.Job{tree, tcp}, Options{ASAP: true, TCP: &TCPModel{
				RTTExponent: 1, BaseRTTNs: 1e6, INCHopsNs: 1e6, QueueNs: func(scenario.Rate) int64 { return q }}})
			sim.RunUntil(1)
			var incRates []float64
			tcpRate := 0.0
			for _, fl := range sim.flows {
				if fl.done {
					continue
				}
				if fl.inc {
					incRates = append(incRates, fl.rate/1e6)
				} else {
					tcpRate = fl.rate / 1e6
				}
			}
			if len(incRates) != 6 {
				t.Fatalf("%d INC segments, want 6 (two up to the ToRs, tor1 <-> tor0, two down)", len(incRates))
			}
			tol := 1e-4
			if tt.queueMs == 1 && !tt.fair {
				tol = 1e-3 // the settled queue
			}
			for _, r := range incRates {
				if math.Abs(r-tt.inc) > tol {
					t.Errorf("INC segment rates %v MB/s, want every one %.6f", incRates, tt.inc)
					break
				}
			}
			if want := 10 - tt.inc; math.Abs(tcpRate-want) > tol {
				t.Errorf("TCP flow %.6f MB/s, want the rest of the core link, %.6f", tcpRate, want)
			}
		})
	}
}

// Every segment of every tree moves at its tree's one rate, also when
// two trees and TCP flows share the core and one tree is held back by
// its window while the other is not.
func TestINCTreesMoveAsOne(t *testing.T) {
	s := scen(t, "fabric: {kind: eps, racks: 3, servers_per_rack: 3, rates: {server: 80Mbit}, eps: {oversubscription: 3}}\n")
	jobs := []plan.Job{
		{Name: "a", Pattern: "ps", Workers: []string{"r0s0", "r1s0", "r2s0"}, INC: true, Aggregator: "tor0", Bytes: 50e6, Iterations: 1},
		{Name: "b", Pattern: "ps", Workers: []string{"r1s2", "r2s2"}, INC: true, Aggregator: "tor2", Bytes: 80e6, Iterations: 1},
		{Name: "t", Pattern: "ps", Workers: []string{"r0s1", "r2s1"}, PS: "r1s1", Bytes: 60e6, Iterations: 1},
	}
	for _, qMs := range []float64{0.5, 5, 50} {
		q := int64(qMs * 1e6)
		sim := New(s.Fabric, jobs, Options{ASAP: true, TCP: &TCPModel{
			RTTExponent: 1.5, BaseRTTNs: 100e3, QueueNs: func(scenario.Rate) int64 { return q }}})
		for _, at := range []int64{1, 1e9, 3e9, 6e9} {
			sim.RunUntil(at)
			rate := map[int]float64{}
			for _, fl := range sim.flows {
				if fl.done || !fl.inc {
					continue
				}
				r, ok := rate[fl.job]
				if !ok {
					rate[fl.job] = fl.rate
					continue
				}
				if math.Abs(fl.rate-r) > 1e-9*r {
					t.Errorf("queue %v ms, t %d ns: tree %s's segments at %.6f and %.6f MB/s", qMs, at, sim.jobs[fl.job].j.Name, r/1e6, fl.rate/1e6)
				}
			}
		}
	}
}

// A replay traces the hops the model put in an INC push's round trip:
// the full INCHopsNs while a TCP job queues the tree's links, none once
// the tree is alone (the setting of TestINCTreeSharesByHand).
func TestINCHopsTraced(t *testing.T) {
	s := scen(t, "fabric: {kind: eps, racks: 2, servers_per_rack: 2, rates: {server: 80Mbit}, eps: {oversubscription: 2}}\n")
	tree := plan.Job{Name: "inc", Pattern: "ps", Workers: []string{"r0s0", "r1s0"}, INC: true, Aggregator: "tor0", Bytes: 100e6, Iterations: 1}
	for _, tc := range []struct {
		name     string
		tcpBytes int64 // 0: no TCP job
		lo, hi   int64 // the push's mean hops, ns
	}{
		{"TCP outlasts the tree", 1000e6, 999_000, 1_000_000},
		{"TCP ends first", 2e6, 1, 999_000},
		{"no TCP", 0, 0, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			jobs := []plan.Job{tree}
			if tc.tcpBytes > 0 {
				jobs = append(jobs, plan.Job{Name: "tcp", Pattern: "ps", Workers: []string{"r0s1"}, PS: "r1s1", Bytes: tc.tcpBytes, Iterations: 1})
			}
			sim := New(s.Fabric, jobs, Options{ASAP: true, LinkShares: true, TCP: &TCPModel{
				RTTExponent: 1, BaseRTTNs: 1e6, INCHopsNs: 1e6, QueueNs: func(scenario.Rate) int64 { return 1e6 }}})
			sim.RunUntil(inf)
			run := sim.Result()
			sim.traceINCHops(run.Phases)
			for _, ph := range run.Phases {
				if ph.Job == "inc" && ph.Phase == "push" {
					t.Logf("push [%d, %d] ms: mean hops %d ns", ph.StartNs/1e6, ph.EndNs/1e6, ph.INCHopsNs)
					if ph.INCHopsNs < tc.lo || ph.INCHopsNs > tc.hi {
						t.Errorf("push [%d, %d] ms: mean hops %d ns, want %d-%d", ph.StartNs/1e6, ph.EndNs/1e6, ph.INCHopsNs, tc.lo, tc.hi)
					}
					return
				}
			}
			t.Fatalf("no INC push in %+v", run.Phases)
		})
	}
}

// The window: a ToR's pool over the jobs it may hold, at most 256 slots,
// and at most what the slowest link carries in 8 ms (in 1440 B slots).
func TestINCWindow(t *testing.T) {
	tests := []struct {
		fabric string
		want   int
	}{
		{"fabric: {kind: eps, racks: 2, servers_per_rack: 2}\n", 256}, // unlimited links
		{"fabric: {kind: eps, racks: 2, servers_per_rack: 2, inc: {capacity: 8}}\n", 128},
		{"fabric: {kind: eps, racks: 2, servers_per_rack: 2, rates: {server: 1Gbit}}\n", 256},
		{"fabric: {kind: eps, racks: 2, servers_per_rack: 2, rates: {server: 100Mbit}}\n", 70}, // 12.5 MB/s * 8 ms / 1440 B = 69.4
		{"fabric: {kind: ocs, racks: 2, servers_per_rack: 2, rates: {server: 100Mbit, uplink: 40Mbit}}\n", 28},
		{"fabric: {kind: eps, racks: 2, servers_per_rack: 2, rates: {server: 80Mbit}, eps: {oversubscription: 2}}\n", 56},
	}
	for _, tt := range tests {
		if got := INCWindow(scen(t, tt.fabric).Fabric); got != tt.want {
			t.Errorf("%s: INCWindow = %d, want %d", tt.fabric, got, tt.want)
		}
	}
}
