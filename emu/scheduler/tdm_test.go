package scheduler

import (
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/ocsemu/ocsemu/emu/flowmodel"
	"github.com/ocsemu/ocsemu/emu/plan"
	"github.com/ocsemu/ocsemu/emu/scenario"
	"github.com/ocsemu/ocsemu/ocsfabric/circuit"
)

// Algorithm 2 on cases worked by hand (1 GB/s links, times in s).
func TestOXCTopology(t *testing.T) {
	const G = 1e9
	// dem builds a 4-pod demand; nic[0] is one server link's bytes.
	dem := func(m map[[2]int]float64, nic ...float64) podDemand {
		d := newPodDemand(4, 1)
		for pr, b := range m {
			d.oxc[pr[0]*4+pr[1]] = b
		}
		copy(d.nic, nic)
		return d
	}
	oxc := func(m map[[2]int]float64) podDemand { return dem(m) }
	for _, tc := range []struct {
		name  string
		d     podDemand
		ports int
		half  bool
		links map[[2]int]int
		sec   float64
		err   string
	}{
		{
			// One link per demanded pair; the bottleneck 0-1 (4 GB) cannot
			// grow: pod 1's two ports are taken.
			name: "bottleneck without a port", d: oxc(map[[2]int]float64{{0, 1}: 4 * G, {1, 0}: G, {1, 2}: G}), ports: 2,
			links: map[[2]int]int{{0, 1}: 1, {1, 2}: 1}, sec: 4,
		},
		{
			// A third port lets 0-1 take a second link: 4 GB / 2 = 2 s;
			// then pod 1 is full again.
			name: "one more link at the bottleneck", d: oxc(map[[2]int]float64{{0, 1}: 4 * G, {1, 0}: G, {1, 2}: G}), ports: 3,
			links: map[[2]int]int{{0, 1}: 2, {1, 2}: 1}, sec: 2,
		},
		{
			// The pod side (3 GB through one 1 GB/s server link) dominates
			// once 0-1 has two links (2 s): no third link, though ports remain.
			name: "ToR side dominates", d: dem(map[[2]int]float64{{0, 1}: 4 * G, {1, 2}: G}, 3*G), ports: 4,
			links: map[[2]int]int{{0, 1}: 2, {1, 2}: 1}, sec: 3,
		},
		{
			// Half duplex: each direction its own link; 0->1 (4 GB) gets a
			// second; then pods 0 and 1 have used their 3 ports.
			name: "half duplex", d: oxc(map[[2]int]float64{{0, 1}: 4 * G, {1, 0}: 2 * G}), ports: 3, half: true,
			links: map[[2]int]int{{0, 1}: 2, {1, 0}: 1}, sec: 2,
		},
		{
			name: "more peers than ports", d: oxc(map[[2]int]float64{{0, 1}: G, {0, 2}: G, {0, 3}: G}), ports: 2,
			err: "pod 0 needs 3 OXC links",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			links, ns, err := oxcTopology(tc.d, oxcParams{Pods: 4, Ports: tc.ports, LinkBps: G, ServerBps: G, HalfDuplex: tc.half})
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err = %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(links, tc.links) {
				t.Errorf("links = %v, want %v", links, tc.links)
			}
			if got := ns / 1e9; got != tc.sec {
				t.Errorf("time = %v s, want %v s", got, tc.sec)
			}
		})
	}
}

// Algorithm 3 on cases worked by hand.
func TestRingOrder(t *testing.T) {
	e := func(prs ...[2]int) map[[2]int]bool {
		m := map[[2]int]bool{}
		for _, p := range prs {
			m[p] = true
		}
		return m
	}
	for _, tc := range []struct {
		name     string
		pods     []int
		existing map[[2]int]bool
		want     []int
	}{
		{"no links: pod order", []int{3, 1, 0, 2}, e(), []int{0, 1, 2, 3}},
		{"two paths joined", []int{0, 1, 2, 3}, e([2]int{0, 2}, [2]int{1, 3}), []int{0, 2, 1, 3}},
		// Pod 0 has degree 3: it drops its edge to pod 1 (all neighbours
		// have degree 1; the lowest goes); path 2-0-3, then pod 1.
		{"degree above two", []int{0, 1, 2, 3}, e([2]int{0, 1}, [2]int{0, 2}, [2]int{0, 3}), []int{2, 0, 3, 1}},
		{"a cycle over every pod is the ring", []int{0, 1, 2}, e([2]int{0, 1}, [2]int{1, 2}, [2]int{0, 2}), []int{0, 1, 2}},
		// The sub-ring 0-1-2 is cut at 0-2, then joined with pod 3.
		{"sub-ring cut", []int{0, 1, 2, 3}, e([2]int{0, 1}, [2]int{1, 2}, [2]int{0, 2}), []int{0, 1, 2, 3}},
		{"links outside the job ignored", []int{1, 4, 6}, e([2]int{1, 6}, [2]int{4, 9}), []int{1, 6, 4}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := ringOrder(tc.pods, tc.existing); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("ringOrder(%v, %v) = %v, want %v", tc.pods, tc.existing, got, tc.want)
			}
		})
	}
}

// tdmScenario: two pods, two ring jobs on the same pod pair, 100 ms of
// compute and 100 ms of transfer each (12.5 MB at 1 Gbit/s).
func tdmScenario(t *testing.T, duplex string, uplinks int) *scenario.Scenario {
	t.Helper()
	s, err := scenario.Parse([]byte(fmt.Sprintf(`name: tdm-hand
fabric: {kind: ocs, racks: 2, servers_per_rack: 2, uplinks_per_tor: %d, ocs: {switches: 1, reconfig_delay: 1ms, duplex: %s}, rates: {server: 1Gbit, uplink: 1Gbit}}
jobs:
  - {name: a, pattern: ring, workers: [r0s0, r1s0], bytes: 12.5MB, compute: 100ms, iterations: 4}
  - {name: b, pattern: ring, workers: [r0s1, r1s1], bytes: 12.5MB, compute: 100ms, iterations: 4}
scheduler: {name: tdm}
`, uplinks, duplex)), "tdm-hand")
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// By hand: without TDM both jobs send together, 25 MB each way over one
// circuit, 200 ms, then compute 100 ms: a 300 ms round. With TDM one job
// sends (100 ms) while the other computes (100 ms), twice: 200 ms, and the
// circuit never changes, so no reconfiguration. The flow model's stage
// times must equal Algorithm 2's.
func TestTDMHandCase(t *testing.T) {
	for _, tc := range []struct {
		duplex       string
		uplinks      int
		tdm, notdm   int64
		perRoundStgs int
	}{
		{"full", 1, 200e6, 300e6, 2},
		// Half duplex: a link per direction (two ports per pod); four
		// stages per round, each ring job reduces twice per round.
		{"half", 2, 400e6, 600e6, 4},
	} {
		t.Run(tc.duplex, func(t *testing.T) {
			s := tdmScenario(t, tc.duplex, tc.uplinks)
			tdm, notdm, inB, err := TDMRound(s)
			if err != nil {
				t.Fatal(err)
			}
			if tdm != tc.tdm || notdm != tc.notdm || inB != 1 {
				t.Errorf("round tdm %d notdm %d (group B %d jobs), want %d, %d, 1", tdm, notdm, inB, tc.tdm, tc.notdm)
			}
			for _, sched := range []string{"tdm", "notdm"} {
				s.Scheduler.Name = sched
				p, run := planAndSimulate(t, s)
				for si, st := range run.Stages {
					got := st.EndNs - st.StartNs
					want := p.Stages[si].PredictedNs
					// Stages where both jobs are busy must match exactly
					// (to the ns rounding); prologue and epilogue stages
					// may be shorter.
					full := len(p.Stages[si].Activities) == 2
					if d := got - want; full && (d > 2 || d < -2) || got > want+2 {
						t.Errorf("%s stage %d (%d activities): flow model %d ns, Algorithm 2 %d ns", sched, si, len(p.Stages[si].Activities), got, want)
					}
				}
			}
		})
	}
}

// TDM is never predicted worse than no TDM: Algorithm 1 starts from it.
func TestTDMNeverWorse(t *testing.T) {
	for seed := int64(1); seed <= 5; seed++ {
		s := TDMBench(12, 4, seed, 1.0, "full")
		tdm, notdm, _, err := TDMRound(s)
		if err != nil {
			t.Fatal(err)
		}
		if tdm > notdm {
			t.Errorf("seed %d: tdm round %d > notdm %d", seed, tdm, notdm)
		}
	}
}

// The strict half-duplex check: the example (one uplink per ToR,
// tor0:0->tor1:0, tor1:0->tor2:0, tor2:0->tor0:0) passes circuit.Validate
// but uses every port twice.
func TestStrictPorts(t *testing.T) {
	u := func(r, p int) circuit.Uplink { return circuit.Uplink{Rack: r, Port: p} }
	bad := []circuit.Circuit{{A: u(0, 0), B: u(1, 0), Simplex: true}, {A: u(1, 0), B: u(2, 0), Simplex: true}, {A: u(2, 0), B: u(0, 0), Simplex: true}}
	if err := strictPorts(bad); err == nil || !strings.Contains(err.Error(), "port tor1:0 is in circuits") {
		t.Errorf("err = %v, want port tor1:0 named", err)
	}
	good := []circuit.Circuit{{A: u(0, 0), B: u(1, 0), Simplex: true}, {A: u(1, 1), B: u(0, 1), Simplex: true}}
	if err := strictPorts(good); err != nil {
		t.Errorf("two circuits on four ports: %v", err)
	}
}

// TDMBench's mixed jobs (ring, all-to-all, PS) plan in both duplex modes;
// every plan checks (in half duplex with simplex circuits, each port in at
// most one circuit per stage) and the flow model runs it to the end.
func TestTDMPlansCheck(t *testing.T) {
	for _, duplex := range []string{"full", "half", scenario.DuplexHalfStrict} {
		for _, sched := range []string{"tdm", "notdm"} {
			s := TDMBench(24, 4, 7, 1, duplex)
			s.Scheduler.Name = sched
			p, err := Plan(s)
			if err != nil {
				t.Fatalf("%s %s: %v", duplex, sched, err)
			}
			if err := plan.Check(p, s); err != nil {
				t.Fatalf("%s %s: %v", duplex, sched, err)
			}
			for si, st := range p.Stages {
				if err := strictPorts(st.Circuits); err != nil {
					t.Errorf("%s %s stage %d: %v", duplex, sched, si, err)
				}
				for _, c := range st.Circuits {
					if c.Simplex != (duplex != "full") {
						t.Fatalf("%s %s stage %d: circuit %s", duplex, sched, si, c)
					}
				}
			}
			if _, err := flowmodel.Simulate(p, s); err != nil {
				t.Fatalf("%s %s: %v", duplex, sched, err)
			}
		}
	}
}

// Only tdm and notdm plan a half-duplex OCS; the others say so instead of
// failing their own plan's check as "a bug".
func TestDuplexSchedulersRefuseHalfDuplex(t *testing.T) {
	for _, duplex := range []string{"half", scenario.DuplexHalfStrict} {
		for _, name := range []string{"fcfs", "static", "ljf", "interleave", "oddl", "topox"} {
			s := TDMBench(8, 4, 1, 1, duplex)
			s.Scheduler.Name = name
			if _, err := Plan(s); err == nil || !strings.Contains(err.Error(), "plan it with tdm or notdm") {
				t.Errorf("%s on a %s OCS: %v, want a refusal naming tdm", name, duplex, err)
			}
		}
	}
}
