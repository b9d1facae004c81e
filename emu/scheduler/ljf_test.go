package scheduler

import (
	"math"
	"slices"
	"strings"

	"testing"

	"github.com/ocsemu/ocsemu/ocsfabric/routing"

	"github.com/ocsemu/ocsemu/emu/plan"
	"github.com/ocsemu/ocsemu/emu/scenario"
)

// With scheduler.exclusive_servers (paper 000's generator sets it), two
// jobs that share a server never run at the same time, whatever the
// scheduler.
func TestExclusiveServers(t *testing.T) {
	for _, d := range Paper000Designs {
		s := Paper000(Paper000Options{Jobs: 150, Seed: 2, Scheduler: d.Scheduler, INC: d.INC})
		p, run := planAndSimulate(t, s)
		span := map[string][2]int64{}
		for _, j := range run.Jobs {
			span[j.Job] = [2]int64{j.StartNs, j.EndNs}
		}
		users := map[string][]string{}
		for _, j := range p.Jobs {
			for _, w := range j.Workers {
				users[w] = append(users[w], j.Name)
			}
		}
		shared := 0
		for w, js := range users {
			for a := 0; a < len(js); a++ {
				for b := a + 1; b < len(js); b++ {
					shared++
					x, y := span[js[a]], span[js[b]]
					if x[0] < y[1] && y[0] < x[1] {
						t.Errorf("%s: jobs %s %v and %s %v both use %s at once", d.Name, js[a], x, js[b], y, w)
					}
				}
			}
		}
		if shared == 0 {
			t.Fatalf("%s: no two jobs share a server: the case tests nothing", d.Name)
		}
	}
}

// scheduler.inc: false (emu plan --inc=false) plans every job without
// INC; left unset, jobs that ask get it.
func TestINCSwitch(t *testing.T) {
	for _, off := range []bool{false, true} {
		s := Paper000(Paper000Options{Jobs: 60, Seed: 1, Scheduler: "ljf", INC: !off})
		p, err := Plan(s)
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, j := range p.Jobs {
			if j.INC {
				n++
			}
		}
		if off && n > 0 || !off && n == 0 {
			t.Errorf("inc off = %v: %d of %d jobs got INC", off, n, len(p.Jobs))
		}
	}
}

// ljf changes the circuits only where a circuit would be a bottleneck:
// fewer reconfigurations than fcfs, which refits every slot.
func TestLJFReconfiguresLessThanFCFS(t *testing.T) {
	for _, inc := range []bool{true, false} {
		count := map[string]int{}
		for _, sched := range []string{"ljf", "fcfs"} {
			s := Paper000(Paper000Options{Jobs: 300, Seed: 3, Scheduler: sched, INC: inc})
			_, run := planAndSimulate(t, s)
			count[sched] = run.Reconfigurations
		}
		t.Logf("INC %v: reconfigurations ljf %d, fcfs %d", inc, count["ljf"], count["fcfs"])
		if count["ljf"] >= count["fcfs"] {
			t.Errorf("INC %v: ljf reconfigured %d times, fcfs %d", inc, count["ljf"], count["fcfs"])
		}
	}
}

// With one INC slot per ToR and two jobs arriving in the same slot on the
// same rack, fcfs gives INC to the first to arrive, ljf to the larger;
// alone, a 2-worker job gets INC from ljf too (paper 000's CPU PS is for
// the jobs left when INC is exhausted).
func TestINCOrder(t *testing.T) {
	s, err := scenario.Parse([]byte(`name: inc-order
fabric: {kind: ocs, racks: 2, servers_per_rack: 8, uplinks_per_tor: 2, inc: {capacity: 1}, rates: {server: 1Gbit, uplink: 1Gbit}}
jobs:
  - {name: two, pattern: ps, workers: [r0s0, r0s1], bytes: 1MB, compute: 1ms, iterations: 1, inc: true}
  - {name: small, pattern: ps, workers: [r0s2, r0s3, r0s4], bytes: 1MB, compute: 1ms, iterations: 1, inc: true, arrival: 1ms}
  - {name: big, pattern: ps, workers: [r0s5, r0s6, r0s7, r1s0], bytes: 1MB, compute: 1ms, iterations: 1, inc: true, arrival: 2ms}
scheduler: {name: fcfs, slot: 100ms}
`), "inc-order")
	if err != nil {
		t.Fatal(err)
	}
	for sched, want := range map[string]string{"fcfs": "two", "ljf": "big"} {
		s.Scheduler.Name = sched
		p, err := Plan(s)
		if err != nil {
			t.Fatal(err)
		}
		if err := plan.Check(p, s); err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, j := range p.Jobs {
			if j.INC {
				got = append(got, j.Name)
			}
		}
		if len(got) != 1 || got[0] != want {
			t.Errorf("%s gave INC to %v, want [%s]", sched, got, want)
		}
	}
	s.Jobs = s.Jobs[:1]
	s.Scheduler.Name = "ljf"
	p, err := Plan(s)
	if err != nil {
		t.Fatal(err)
	}
	if !p.Jobs[0].INC {
		t.Errorf("ljf gave no INC to a lone 2-worker job with a free INC slot")
	}
}

// interleave deals jobs of equal ratio into two cohorts and admits cohort
// B one communication time (of cohort A) late: here two identical ring
// jobs on the same racks, 100 ms of compute and 80 ms of transfer (10 MB
// at 1 Gbit/s), so the second starts 80 ms after it arrives.
func TestInterleaveDelaysCohortB(t *testing.T) {
	s, err := scenario.Parse([]byte(`name: inter
fabric: {kind: ocs, racks: 2, servers_per_rack: 2, uplinks_per_tor: 2, rates: {server: 1Gbit, uplink: 1Gbit}}
jobs:
  - {name: a, pattern: ring, workers: [r0s0, r1s0], bytes: 10MB, compute: 100ms, iterations: 3}
  - {name: b, pattern: ring, workers: [r0s1, r1s1], bytes: 10MB, compute: 100ms, iterations: 3}
scheduler: {name: interleave, slot: 10ms}
`), "inter")
	if err != nil {
		t.Fatal(err)
	}
	_, run := planAndSimulate(t, s)
	starts := map[string]int64{}
	for _, j := range run.Jobs {
		starts[j.Job] = j.StartNs
	}
	if starts["a"] != 0 || starts["b"] != 80e6 {
		t.Errorf("starts = %v, want a at 0 and b at 80 ms", starts)
	}
	// Their all-reduces never overlap: each is alone on the racks' links.
	var ar [][2]int64
	for _, ph := range run.Phases {
		if ph.Phase == scenario.PhaseAllReduce {
			ar = append(ar, [2]int64{ph.StartNs, ph.EndNs})
		}
	}
	for i := range ar {
		for k := i + 1; k < len(ar); k++ {
			if ar[i][0] < ar[k][1] && ar[k][0] < ar[i][1] {
				t.Errorf("all-reduces %v and %v overlap", ar[i], ar[k])
			}
		}
	}
}

// Paper 000's generator: the knobs do what they say.
func TestPaper000Generator(t *testing.T) {
	s := Paper000(Paper000Options{Jobs: 2000, Seed: 5, Scheduler: "fcfs", INC: false, Iterations: 2, TwoRacks: -1})
	if err := s.Validate(); err != nil {
		t.Fatal(err)
	}
	if len(s.Jobs) != 2000 || !s.Scheduler.ExclusiveServers || !s.Scheduler.INCOff() || s.Scheduler.Name != "fcfs" {
		t.Fatalf("jobs %d, exclusive %v, inc off %v, scheduler %s", len(s.Jobs), s.Scheduler.ExclusiveServers, s.Scheduler.INCOff(), s.Scheduler.Name)
	}
	sizes := map[int]int{}
	for _, j := range s.Jobs {
		sizes[len(j.Workers)]++
		if j.Iterations != 2 || len(plan.JobsFromScenario(&scenario.Scenario{Jobs: []scenario.Job{j}})[0].ToRs()) != 1 {
			t.Fatalf("job %s: %d iterations, workers %v (want 2 iterations, one rack)", j.Name, j.Iterations, j.Workers)
		}
	}
	for w := range sizes {
		if w != 2 && w != 4 && w != 8 && w != 16 {
			t.Errorf("a job with %d workers", w)
		}
	}
	// Poisson, 20 a second: 2,000 arrivals take about 100 s.
	last := s.Jobs[len(s.Jobs)-1].Arrival.D().Seconds()
	if last < 90 || last > 110 {
		t.Errorf("last arrival at %.1f s, want about 100 s", last)
	}
	// The default: 30% of jobs over two racks.
	s = Paper000(Paper000Options{Jobs: 2000, Seed: 5})
	two := 0
	for _, j := range s.Jobs {
		if len(plan.JobsFromScenario(&scenario.Scenario{Jobs: []scenario.Job{j}})[0].ToRs()) == 2 {
			two++
		}
	}
	if f := float64(two) / 2000; f < 0.27 || f > 0.33 {
		t.Errorf("%.2f of jobs over two racks, want about 0.3", f)
	}
}

func TestCirculantOffsets(t *testing.T) {
	tests := []struct {
		racks, uplinks int
		want           []int
	}{
		{64, 2, []int{1}},
		{64, 3, []int{1}},
		{64, 16, []int{1, 2, 3, 4, 7, 12, 20, 32}}, // paper 000's generator
		{256, 16, []int{1, 2, 4, 8, 16, 32, 64, 128}},
		{4, 4, []int{1, 2}},        // offset 2 = racks/2 takes one port
		{8, 24, []int{1, 2, 3, 4}}, // every other rack: a full mesh
	}
	for _, tt := range tests {
		if got := circulantOffsets(tt.racks, tt.uplinks); !slices.Equal(got, tt.want) {
			t.Errorf("circulantOffsets(%d, %d) = %v, want %v", tt.racks, tt.uplinks, got, tt.want)
		}
	}
}

// ljf's base topology on 16 of 24 ports (scheduler.base_uplinks) uses at
// most 16 ports of every ToR and joins any two of 64 racks in at most
// three hops; the default is the ring.
func TestLJFBaseTopology(t *testing.T) {
	f := scenario.Fabric{Kind: scenario.KindOCS, Racks: 64, ServersPerRack: 1, UplinksPerToR: 24, OCS: scenario.OCS{Switches: 1}}
	for _, tt := range []struct{ base, ports, diameter int }{{0, 2, 32}, {16, 15, 3}} {
		p := newPorts(f)
		p.baseCirculant(f.Racks, tt.base)
		used := map[int]int{}
		for _, c := range p.cfg.Circuits {
			used[c.A.Rack]++
			used[c.B.Rack]++
		}
		for r := 0; r < f.Racks; r++ {
			if used[r] != tt.ports {
				t.Errorf("base %d: rack %d uses %d ports, want %d", tt.base, r, used[r], tt.ports)
			}
		}
		paths := routing.NewPaths(f.Racks, p.cfg)
		worst := 0
		for a := 0; a < f.Racks; a++ {
			for b := 0; b < f.Racks; b++ {
				worst = max(worst, paths.Hops(a, b))
			}
		}
		if worst != tt.diameter {
			t.Errorf("base %d: farthest racks %d hops apart, want %d", tt.base, worst, tt.diameter)
		}
	}
}

// scheduler.order: largest admits, among jobs waiting for the same
// servers, the larger first; the default admits in arrival order.
func TestLJFOrderLargest(t *testing.T) {
	for _, order := range []string{"", scenario.OrderLargest} {
		s, err := scenario.Parse([]byte(`name: order
fabric: {kind: ocs, racks: 2, servers_per_rack: 4, uplinks_per_tor: 2, rates: {server: 1Gbit, uplink: 1Gbit}}
jobs:
  - {name: first, pattern: ps, workers: [r0s0, r1s0], bytes: 100MB, compute: 10ms, iterations: 1}
  - {name: small, pattern: ps, workers: [r0s0, r1s0], bytes: 1MB, compute: 10ms, iterations: 1, arrival: 150ms}
  - {name: large, pattern: ps, workers: [r0s0, r1s0, r0s1, r1s1], bytes: 1MB, compute: 10ms, iterations: 1, arrival: 160ms}
scheduler: {name: ljf, slot: 100ms, exclusive_servers: true, order: `+order+`}
`), "order")
		if err != nil {
			t.Fatal(err)
		}
		_, run := planAndSimulate(t, s)
		start := map[string]int64{}
		for _, j := range run.Jobs {
			start[j.Job] = j.StartNs
		}
		if start["first"] != 0 || start["small"] == start["large"] {
			t.Fatalf("order %q: starts %v: the case tests nothing", order, start)
		}
		if got := start["large"] < start["small"]; got != (order == scenario.OrderLargest) {
			t.Errorf("order %q: small starts at %d ns, large at %d ns", order, start["small"], start["large"])
		}
	}
}

// base_uplinks and order are ljf's: another scheduler refuses them rather
// than planning as if they were not there.
func TestLJFOnlySettingsRefused(t *testing.T) {
	for _, tt := range []struct{ sched, want string }{
		{"{name: fcfs, base_uplinks: 2}", "read by the ljf scheduler only, not by fcfs"},
		{"{name: static, order: largest}", "read by the ljf scheduler only, not by static"},
		{"{name: ljf, base_uplinks: 2, order: largest}", ""},
	} {
		s, err := scenario.Parse([]byte(`name: only
fabric: {kind: ocs, racks: 2, servers_per_rack: 2, uplinks_per_tor: 2, rates: {server: 1Gbit, uplink: 1Gbit}}
jobs:
  - {name: a, pattern: ps, workers: [r0s0, r1s0], bytes: 1MB, compute: 10ms, iterations: 1}
scheduler: `+tt.sched+"\n"), "only")
		if err != nil {
			t.Fatal(err)
		}
		_, err = Plan(s)
		switch {
		case tt.want == "" && err != nil:
			t.Errorf("%s: %v", tt.sched, err)
		case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
			t.Errorf("%s: %v, want an error containing %q", tt.sched, err, tt.want)
		}
	}
}

// commAlone bounds a phase by its racks' uplinks as well as its servers'
// links: a cross-rack ring over one 40 Gbit/s uplink takes 2.5 times as
// long as over a 100 Gbit/s one (servers at 100), a same-rack ring the
// same whatever the uplinks.
func TestCommAloneBoundsByUplinks(t *testing.T) {
	fab := func(uplink scenario.Rate) scenario.Fabric {
		return scenario.Fabric{Kind: scenario.KindOCS, Racks: 2, ServersPerRack: 2, UplinksPerToR: 1,
			Rates: scenario.Rates{Server: 100e9, Uplink: uplink}}
	}
	cross := &plan.Job{Name: "x", Pattern: scenario.PatternRing, Workers: []string{"r0s0", "r1s0"}, Bytes: 1e9}
	local := &plan.Job{Name: "l", Pattern: scenario.PatternRing, Workers: []string{"r0s0", "r0s1"}, Bytes: 1e9}
	for _, tc := range []struct {
		name  string
		job   *plan.Job
		ratio float64 // at 40 Gbit/s uplinks over at 100
	}{
		{"cross-rack", cross, 2.5},
		{"same rack", local, 1},
	} {
		slow, fast := commAlone(fab(40e9), tc.job), commAlone(fab(100e9), tc.job)
		if fast <= 0 || math.Abs(slow/fast-tc.ratio) > 1e-9 {
			t.Errorf("%s: %.0f ns at 40 Gbit/s, %.0f at 100: ratio %.3f, want %.3f", tc.name, slow, fast, slow/fast, tc.ratio)
		}
	}
}
