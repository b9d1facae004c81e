package flowmodel

import (
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/ocsemu/ocsemu/emu/plan"
	"github.com/ocsemu/ocsemu/emu/scenario"
	"github.com/ocsemu/ocsemu/ocsfabric/circuit"
	"github.com/ocsemu/ocsemu/workers/record"
)

// a2aPlan: an all-to-all job x of ranks a=r0s0, b=r1s0 and c=r2s0, one
// circuit between each pair of racks, flows of S (1 s alone at 1 Gbit/s),
// two iterations after 100 ms of compute; with background, job bg
// exchanges 10 S each way between r1s1 and r2s1, over the circuit b and c
// use, so b<->c get half of it.
func a2aPlan(background bool) *plan.Plan {
	p := &plan.Plan{Mode: plan.ModeClock,
		Jobs: []plan.Job{{Name: "x", Pattern: "alltoall", Workers: []string{"r0s0", "r1s0", "r2s0"}, Bytes: 3 * S, ComputeNs: 100 * ms, Iterations: 2}},
		Stages: []plan.Stage{{DurationNs: 100_000 * ms, Circuits: []circuit.Circuit{c("tor0:0", "tor1:0"), c("tor0:1", "tor2:0"), c("tor1:1", "tor2:1")},
			Activities: []plan.Activity{act("x", 0, "compute"), act("x", 0, "alltoall"), act("x", 1, "compute"), act("x", 1, "alltoall")}}},
	}
	if background {
		p.Jobs = append(p.Jobs, plan.Job{Name: "bg", Pattern: "alltoall", Workers: []string{"r1s1", "r2s1"}, Bytes: 20 * S, Iterations: 1})
		p.Stages[0].Activities = append(p.Stages[0].Activities, act("bg", 0, "compute"), act("bg", 0, "alltoall"))
	}
	return p
}

func phasesOf(t *testing.T, run *record.Run, job string) map[string]record.Phase {
	t.Helper()
	out := map[string]record.Phase{}
	for _, ph := range run.Phases {
		if ph.Job == job {
			out[ph.Phase+string(rune('0'+ph.Iteration))] = ph
		}
	}
	return out
}

func TestPerRankAllToAll(t *testing.T) {
	s := scen(t, "fabric: {kind: ocs, racks: 3, servers_per_rack: 2, uplinks_per_tor: 2, rates: {server: 10Gbit, uplink: 1Gbit}}\n")
	simulateBoth := func(p *plan.Plan) (lock, per map[string]record.Phase) {
		if err := plan.Check(p, s); err != nil {
			t.Fatal(err)
		}
		l, err := simulate(p, s, Options{}, Ideal)
		if err != nil {
			t.Fatal(err)
		}
		r, err := simulate(p, s, Options{PerRank: true}, Ideal)
		if err != nil {
			t.Fatal(err)
		}
		return phasesOf(t, l, "x"), phasesOf(t, r, "x")
	}
	type span struct{ start, end, dur int64 } // ms
	check := func(name string, got map[string]record.Phase, want map[string]span) {
		t.Helper()
		for k, w := range want {
			g, ok := got[k]
			if !ok || !near(g.StartNs, w.start*ms) || !near(g.EndNs, w.end*ms) || !near(g.DurationNs, w.dur*ms) && !(g.DurationNs == 0 && near(g.EndNs-g.StartNs, w.dur*ms)) {
				t.Errorf("%s %s: [%d, %d] ms, duration %d ms; want [%d, %d], %d", name, k, g.StartNs/ms, g.EndNs/ms, g.DurationNs/ms, w.start, w.end, w.dur)
			}
		}
	}
	// Alone, every flow has its circuit: each exchange takes 1 s, and
	// ranks on their own do what ranks in lockstep do.
	lock, per := simulateBoth(a2aPlan(false))
	alone := map[string]span{"compute0": {0, 100, 100}, "alltoall0": {100, 1100, 1000}, "compute1": {1100, 1200, 100}, "alltoall1": {1200, 2200, 1000}}
	check("alone, lockstep", lock, alone)
	check("alone, per rank", per, alone)
	// With the background exchange, b<->c take 2 s, a's four flows 1 s.
	// Lockstep: everyone waits for b and c (exchange 0 ends at 2.1 s) and
	// exchange 1 runs 2.2-4.2 s. Per rank: a is done at 1.1 s, computes,
	// and from 1.2 s sends to b and c (done at 2.2 s); b and c start at
	// 2.2 s, b->a and c->a end at 3.2 s, b<->c at 4.2 s. Each rank spent
	// 2 s in exchange 1 (a: 1.2-3.2, waiting for b and c's flows to it).
	lock, per = simulateBoth(a2aPlan(true))
	check("background, lockstep", lock, map[string]span{"alltoall0": {100, 2100, 2000}, "compute1": {2100, 2200, 100}, "alltoall1": {2200, 4200, 2000}})
	check("background, per rank", per, map[string]span{"alltoall0": {100, 2100, 2000}, "compute1": {1100, 2200, 100}, "alltoall1": {1200, 4200, 2000}})
	if got := per["alltoall1"].SkewNs; !near(got, 1000*ms) {
		t.Errorf("per-rank exchange 1: ranks started %d ms apart, want 1000 (a at 1.2 s, b and c at 2.2 s)", got/ms)
	}
}

// A phase never released is named as the plan names it, not by a task.
func TestPerRankStallNamesThePhase(t *testing.T) {
	s := scen(t, "fabric: {kind: ocs, racks: 3, servers_per_rack: 2, uplinks_per_tor: 2, rates: {server: 10Gbit, uplink: 1Gbit}}\n")
	p := a2aPlan(false)
	p.Stages[0].Activities = p.Stages[0].Activities[:3] // no second exchange
	_, err := simulate(p, s, Options{PerRank: true}, Ideal)
	if err == nil || !strings.Contains(err.Error(), "x iteration 1 phase alltoall cannot finish") {
		t.Errorf("got %v, want the second exchange named", err)
	}
}

// BenchmarkPerRankAllToAll: one exchange of 48 ranks released in a later
// stage than their compute ends, so every task can start at its release.
func BenchmarkPerRankAllToAll(b *testing.B) {
	s, err := scenario.Parse([]byte("name: t\nfabric: {kind: ocs, racks: 48, servers_per_rack: 1, uplinks_per_tor: 1, rates: {server: 1Gbit, uplink: 1Gbit}}\n"), "bench")
	if err != nil {
		b.Fatal(err)
	}
	var workers []string
	for r := range 48 {
		workers = append(workers, fmt.Sprintf("r%ds0", r))
	}
	p := &plan.Plan{Mode: plan.ModeClock,
		Jobs: []plan.Job{{Name: "x", Pattern: "alltoall", Workers: workers, Bytes: 48 << 20, ComputeNs: ms, Iterations: 1}},
		Stages: []plan.Stage{{DurationNs: 10 * ms, Activities: []plan.Activity{act("x", 0, "compute")}},
			{StartNs: 10 * ms, DurationNs: 100_000 * ms, Activities: []plan.Activity{act("x", 0, "alltoall")}}},
	}
	// One circuit ring is enough: the flows route over it.
	for r := range 48 {
		p.Stages[0].Circuits = append(p.Stages[0].Circuits, simplex(fmt.Sprintf("tor%d:0", r), fmt.Sprintf("tor%d:0", (r+1)%48)))
	}
	p.Stages[1].Circuits = p.Stages[0].Circuits
	for _, perRank := range []bool{false, true} {
		b.Run(fmt.Sprintf("perRank=%v", perRank), func(b *testing.B) {
			for b.Loop() {
				if _, err := simulate(p, s, Options{PerRank: perRank}, Ideal); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// ringPlan: a ring all-reduce job x over a=r0s0 -> b=r1s0 -> c=r2s0 -> a,
// one circuit between each pair of racks, chunks of u (1 s on a link),
// two iterations after 100 ms of compute. With late, job bg sends u each
// way between r1s1 and r2s1 from 3.1 s, sharing link b->c in the ring's
// last step of iteration 0 (so b and c end it 1 s after a), and job slow
// sends 20 u each way between r0s1 and r1s1 from 4.2 s, halving link a->b.
func ringPlan(late bool, u int64) *plan.Plan {
	p := &plan.Plan{Mode: plan.ModeClock,
		Jobs: []plan.Job{{Name: "x", Pattern: "ring", Workers: []string{"r0s0", "r1s0", "r2s0"}, Bytes: 3 * u, ComputeNs: 100 * ms, Iterations: 2}},
		Stages: []plan.Stage{{DurationNs: 100_000 * ms, Circuits: []circuit.Circuit{c("tor0:0", "tor1:0"), c("tor0:1", "tor2:0"), c("tor1:1", "tor2:1")},
			Activities: []plan.Activity{act("x", 0, "compute"), act("x", 0, "allreduce"), act("x", 1, "compute"), act("x", 1, "allreduce")}}},
	}
	if late {
		p.Jobs = append(p.Jobs,
			plan.Job{Name: "bg", Pattern: "alltoall", Workers: []string{"r1s1", "r2s1"}, Bytes: 2 * u, ComputeNs: 3100 * ms, Iterations: 1},
			plan.Job{Name: "slow", Pattern: "alltoall", Workers: []string{"r0s1", "r1s1"}, Bytes: 40 * u, ComputeNs: 4200 * ms, Iterations: 1})
		p.Stages[0].Activities = append(p.Stages[0].Activities, act("bg", 0, "compute"), act("bg", 0, "alltoall"), act("slow", 0, "compute"), act("slow", 0, "alltoall"))
	}
	return p
}

func TestPerRankRing(t *testing.T) {
	// At 1 Gbit/s a chunk (1 s) is 125 MB, at 10 Mbit/s 1.25 MB.
	gbit := scen(t, "fabric: {kind: ocs, racks: 3, servers_per_rack: 2, uplinks_per_tor: 2, rates: {server: 10Gbit, uplink: 1Gbit}}\n")
	mbit := scen(t, "fabric: {kind: ocs, racks: 3, servers_per_rack: 2, uplinks_per_tor: 2, rates: {server: 100Mbit, uplink: 10Mbit}}\n")
	type span struct{ start, end, dur int64 } // ms
	for _, tc := range []struct {
		name    string
		s       *scenario.Scenario
		u       int64
		late    bool
		perRank bool
		want    map[string]span
	}{
		// Alone, every link carries its 4 chunks in 4 s, piece after
		// piece, in lockstep or not.
		{"alone, lockstep", gbit, S, false, false, map[string]span{"allreduce0": {100, 4100, 4000}, "compute1": {4100, 4200, 100}, "allreduce1": {4200, 8200, 4000}}},
		{"alone, per rank", gbit, S, false, true, map[string]span{"allreduce0": {100, 4100, 4000}, "compute1": {4100, 4200, 100}, "allreduce1": {4200, 8200, 4000}}},
		// bg halves b->c in step 3 (3.1-5.1 s): a is done at 4.1 s, b and
		// c at 5.1 s. In lockstep the ring restarts at 5.2 s with a->b at
		// half rate: 8 s.
		{"late rank, lockstep", gbit, S, true, false, map[string]span{"allreduce0": {100, 5100, 5000}, "compute1": {5100, 5200, 100}, "allreduce1": {5200, 13200, 8000}}},
		// Per rank, a starts at 4.2 s, but its first piece (7.8 MB) is
		// more than b's receive window (RingWindowBytes): it waits for b,
		// and the ring runs as in lockstep.
		{"late rank, per rank, window full", gbit, S, true, true, map[string]span{"allreduce0": {100, 5100, 5000}, "compute1": {4100, 5200, 100}, "allreduce1": {5200, 13200, 8000}}},
		// At 10 Mbit/s a sends b 0.625 MB by 5.2 s, within the window: its
		// first chunk is with b by 6.2 s, its three others follow at half
		// rate (c's pieces reach a in time) and b has the last at 12.2 s:
		// timed from the last rank's start (5.2 s), 7 s.
		{"late rank, per rank", mbit, S / 100, true, true, map[string]span{"allreduce0": {100, 5100, 5000}, "compute1": {4100, 5200, 100}, "allreduce1": {5200, 12200, 7000}}},
	} {
		p := ringPlan(tc.late, tc.u)
		if err := plan.Check(p, tc.s); err != nil {
			t.Fatal(err)
		}
		run, err := simulate(p, tc.s, Options{PerRank: tc.perRank}, Ideal)
		if err != nil {
			t.Fatal(err)
		}
		got := phasesOf(t, run, "x")
		for k, w := range tc.want {
			g, ok := got[k]
			dur := g.DurationNs
			if dur == 0 {
				dur = g.EndNs - g.StartNs
			}
			if !ok || !near(g.StartNs, w.start*ms) || !near(g.EndNs, w.end*ms) || !near(dur, w.dur*ms) {
				t.Errorf("%s %s: [%d, %d] ms, duration %d ms; want [%d, %d], %d", tc.name, k, g.StartNs/ms, g.EndNs/ms, dur/ms, w.start, w.end, w.dur)
			}
		}
	}
}

func TestRingPieces(t *testing.T) {
	for _, tc := range []struct {
		bytes int64
		ranks int
		want  []int64
	}{
		{16 << 20, 4, []int64{256 << 10, 256 << 10, 256 << 10, 256 << 10, 256 << 10, 256 << 10, 256 << 10, 256 << 10, 256 << 10, 256 << 10, 256 << 10, 256 << 10, 256 << 10, 256 << 10, 256 << 10, 256 << 10}},
		{8 << 20, 4, []int64{256 << 10, 256 << 10, 256 << 10, 256 << 10, 256 << 10, 256 << 10, 256 << 10, 256 << 10}},
		{1000, 3, []int64{333}},                             // smaller than a piece: one
		{(1 << 20) + 2, 2, []int64{174763, 174763, 174763}}, // a byte over two pieces: three, summing to the chunk
		{1 << 30, 2, nil},                                   // more than maxRingPieces: checked below
	} {
		got := ringPieces(tc.bytes, tc.ranks)
		var sum int64
		for _, b := range got {
			sum += b
		}
		chunk := int64(math.Round(float64(tc.bytes) / float64(tc.ranks)))
		if sum != chunk || len(got) > maxRingPieces {
			t.Errorf("ringPieces(%d, %d) = %d pieces summing to %d, want at most %d summing to %d", tc.bytes, tc.ranks, len(got), sum, maxRingPieces, chunk)
		}
		if tc.want != nil && !slices.Equal(got, tc.want) {
			t.Errorf("ringPieces(%d, %d) = %v, want %v", tc.bytes, tc.ranks, got, tc.want)
		}
	}
}

// BenchmarkPerRankRing: one all-reduce of a 32-rank ring of 64 MiB (8
// pieces a step, 62 steps: 15,872 piece flows) on a ring of circuits.
func BenchmarkPerRankRing(b *testing.B) {
	const n = 32
	s, err := scenario.Parse([]byte(fmt.Sprintf("name: t\nfabric: {kind: ocs, racks: %d, servers_per_rack: 1, uplinks_per_tor: 1, rates: {server: 1Gbit, uplink: 1Gbit}}\n", n)), "bench")
	if err != nil {
		b.Fatal(err)
	}
	var workers []string
	for r := range n {
		workers = append(workers, fmt.Sprintf("r%ds0", r))
	}
	p := &plan.Plan{Mode: plan.ModeClock,
		Jobs:   []plan.Job{{Name: "x", Pattern: "ring", Workers: workers, Bytes: 64 << 20, ComputeNs: ms, Iterations: 1}},
		Stages: []plan.Stage{{DurationNs: 100_000 * ms, Activities: []plan.Activity{act("x", 0, "compute"), act("x", 0, "allreduce")}}},
	}
	for r := range n {
		p.Stages[0].Circuits = append(p.Stages[0].Circuits, simplex(fmt.Sprintf("tor%d:0", r), fmt.Sprintf("tor%d:0", (r+1)%n)))
	}
	for _, m := range []struct {
		name string
		opt  Options
	}{{"lockstep", Options{}}, {"perRank", Options{PerRank: true}}, {"perRank-tcp-aware", modelOptions(s, TCPAware, true)}} {
		b.Run(m.name, func(b *testing.B) {
			for b.Loop() {
				if _, err := simulate(p, s, m.opt, Ideal); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// Which jobs the per-rank models run rank by rank.
func TestExpandedJobs(t *testing.T) {
	capped := act("capped", 0, "allreduce")
	capped.RateCapBps = 1e9
	p := &plan.Plan{Mode: plan.ModeClock,
		Jobs: []plan.Job{
			{Name: "a2a", Pattern: "alltoall", Workers: []string{"r0s0", "r1s0"}},
			{Name: "ring", Pattern: "ring", Workers: []string{"r0s0", "r1s0", "r2s0"}, Ring: []string{"r2s0", "r1s0", "r0s0"}},
			{Name: "shared", Pattern: "ring", Workers: []string{"r0s0", "r0s0", "r1s0"}},
			{Name: "ps", Pattern: "ps", Workers: []string{"r0s0"}, PS: "r1s0"},
			{Name: "hd", Pattern: "hd", Workers: []string{"r0s0", "r1s0"}},
			{Name: "steps", Pattern: "ring", Workers: []string{"r0s0", "r1s0"}, Steps: true},
			{Name: "capped", Pattern: "ring", Workers: []string{"r0s0", "r1s0"}},
			{Name: "one", Pattern: "ring", Workers: []string{"r0s0"}},
		},
		Stages: []plan.Stage{{Activities: []plan.Activity{capped}}},
	}
	got := slices.Sorted(maps.Keys(expandedJobs(p)))
	if want := []string{"a2a", "ring"}; !slices.Equal(got, want) {
		t.Errorf("expanded %v, want %v", got, want)
	}
}

// A ring in an order other than its workers' runs in that order: ranks
// are ring positions, and alone it takes lockstep's time.
func TestPerRankRingOrder(t *testing.T) {
	s := scen(t, "fabric: {kind: ocs, racks: 3, servers_per_rack: 2, uplinks_per_tor: 2, rates: {server: 10Gbit, uplink: 1Gbit}}\n")
	p := ringPlan(false, S)
	p.Jobs[0].Ring = []string{"r0s0", "r2s0", "r1s0"}
	_, jobs := newPerRank(p)
	var srcDst []string
	for _, tk := range jobs[0].Tasks {
		if tk.Kind == plan.TaskTransfer && !slices.Contains(srcDst, tk.Src+">"+tk.Dst) {
			srcDst = append(srcDst, tk.Src+">"+tk.Dst)
		}
	}
	if want := []string{"r0s0>r2s0", "r2s0>r1s0", "r1s0>r0s0"}; !slices.Equal(srcDst, want) {
		t.Errorf("ring links %v, want %v", srcDst, want)
	}
	run, err := simulate(p, s, Options{PerRank: true}, Ideal)
	if err != nil {
		t.Fatal(err)
	}
	if ph := phasesOf(t, run, "x")["allreduce1"]; !near(ph.StartNs, 4200*ms) || !near(ph.DurationNs, 4000*ms) {
		t.Errorf("all-reduce 1 from %d ms for %d ms, want 4200 for 4000", ph.StartNs/ms, ph.DurationNs/ms)
	}
}
