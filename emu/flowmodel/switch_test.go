package flowmodel

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"

	"github.com/ocsemu/ocsemu/emu/plan"
	"github.com/ocsemu/ocsemu/ocsfabric/circuit"
	"github.com/ocsemu/ocsemu/workers/record"
)

// TestSwitchSkipsOnlyUnmovedFlows runs random jobs under random chains of
// circuit maps, each a few circuits away from the last, switched while
// earlier dark periods may still run, once as SetCircuits does (looking
// only at the flows mayMove names) and once looking at every flow: phase
// times, counters and disruptions must be the same to the bit.
func TestSwitchSkipsOnlyUnmovedFlows(t *testing.T) {
	const servers = 2
	tests := []struct {
		kind           string
		racks, uplinks int
		delayMs        int64 // reconfiguration delay
		gapMs          int64 // between switches
		tcp            bool
	}{
		{"ocs", 10, 3, 5, 20, false},
		{"ocs", 10, 3, 30, 20, false}, // dark periods overlap the next switch
		{"ocs", 10, 3, 0, 20, false},
		{"ocs", 5, 8, 30, 20, false}, // parallel circuits: make-before-break
		{"hybrid", 10, 3, 10, 15, false},
		{"ocs", 10, 3, 10, 20, true},
	}
	for i, tt := range tests {
		racks, uplinks := tt.racks, tt.uplinks
		t.Run(fmt.Sprintf("%s/%dx%d/delay%dms/gap%dms/tcp%v", tt.kind, racks, uplinks, tt.delayMs, tt.gapMs, tt.tcp), func(t *testing.T) {
			s := scen(t, fmt.Sprintf("fabric: {kind: %s, racks: %d, servers_per_rack: %d, uplinks_per_tor: %d, rates: {server: 10Gbit, uplink: 1Gbit}}\n", tt.kind, racks, servers, uplinks))
			rng := rand.New(rand.NewPCG(uint64(i), 7))
			server := func() string { return fmt.Sprintf("r%ds%d", rng.IntN(racks), rng.IntN(servers)) }
			var jobs []plan.Job
			for j := 0; j < 30; j++ {
				ws := map[string]bool{}
				for len(ws) < 2+rng.IntN(3) {
					ws[server()] = true
				}
				var workers []string
				for w := range ws {
					workers = append(workers, w)
				}
				slices.Sort(workers)
				pattern := []string{"ps", "ring", "alltoall"}[rng.IntN(3)]
				job := plan.Job{Name: fmt.Sprint("j", j), Pattern: pattern, Workers: workers, Bytes: int64(1+rng.IntN(8)) * 1e6,
					Iterations: 1 + rng.IntN(3), ArrivalNs: int64(rng.IntN(200)) * ms}
				if pattern == "ps" {
					job.PS = workers[0]
				}
				jobs = append(jobs, job)
			}
			// A chain of maps: each changes a few circuits of the last.
			var cfgs []circuit.Config
			var cs []circuit.Circuit
			for k := 0; k < 25; k++ {
				for n := 1 + rng.IntN(3); n > 0 || len(cs) == 0; n-- {
					if len(cs) > 0 && rng.IntN(3) == 0 {
						x := rng.IntN(len(cs))
						cs = append(cs[:x:x], cs[x+1:]...)
					}
					a := circuit.Uplink{Rack: rng.IntN(racks), Port: rng.IntN(uplinks)}
					b := circuit.Uplink{Rack: rng.IntN(racks), Port: rng.IntN(uplinks)}
					if a.Rack == b.Rack || usesUplink(cs, a) || usesUplink(cs, b) {
						continue
					}
					cs = append(cs, circuit.Circuit{A: a, B: b, Simplex: rng.IntN(5) == 0})
				}
				cfgs = append(cfgs, circuit.Config{Circuits: append([]circuit.Circuit(nil), cs...)})
			}
			run := func(all bool) (*Sim, []Disruption) {
				scanAll = all
				defer func() { scanAll = false }()
				var ds []Disruption
				opt := Options{ASAP: true, DelayNs: tt.delayMs * ms, OnDisrupt: func(d Disruption) { ds = append(ds, d) }}
				if tt.tcp {
					opt.Goodput = Framing(s.Fabric.MTU).Goodput()
					opt.SlowStart, opt.TCP = SlowStartFor(s.Fabric), TCPModelFor(s.Fabric)
				}
				sim := New(s.Fabric, jobs, opt)
				for k, cfg := range cfgs {
					sim.SetCircuits(cfg, k == 0)
					sim.RunUntil(int64(k+1)*tt.gapMs*ms - 1)
				}
				sim.RunUntil(inf)
				return sim, ds
			}
			got, gotDs := run(false)
			want, wantDs := run(true)
			if got.unmoved == 0 {
				t.Fatal("no switch skipped a flow: the test compares nothing")
			}
			for ji, js := range want.jobs {
				if !reflect.DeepEqual(got.jobs[ji].Start, js.Start) || !reflect.DeepEqual(got.jobs[ji].End, js.End) {
					t.Fatalf("job %d: phases %v-%v skipping unmoved flows, %v-%v looking at every flow", ji, got.jobs[ji].Start, got.jobs[ji].End, js.Start, js.End)
				}
			}
			if !reflect.DeepEqual(got.Stats, want.Stats) {
				t.Errorf("stats %+v skipping unmoved flows, %+v looking at every flow", got.Stats, want.Stats)
			}
			if !reflect.DeepEqual(gotDs, wantDs) {
				t.Errorf("%d disruptions skipping unmoved flows, %d looking at every flow (or they differ)", len(gotDs), len(wantDs))
			}
			t.Logf("%d flows, %d left alone by switches", len(got.flows), got.unmoved)
		})
	}
}

func usesUplink(cs []circuit.Circuit, u circuit.Uplink) bool {
	for _, c := range cs {
		if c.A == u || c.B == u {
			return true
		}
	}
	return false
}

// byStart orders phases by start and keeps ties in their order, as the
// stable sort it replaces did.
func TestByStart(t *testing.T) {
	ph := func(job string, start int64) record.Phase { return record.Phase{Job: job, StartNs: start} }
	tests := []struct {
		name string
		in   []record.Phase
		want []string
	}{
		{"empty", nil, nil},
		{"sorted", []record.Phase{ph("a", 1), ph("b", 2)}, []string{"a", "b"}},
		{"reversed", []record.Phase{ph("b", 2), ph("a", 1)}, []string{"a", "b"}},
		{"ties keep their order", []record.Phase{ph("c", 5), ph("x", 1), ph("a", 5), ph("b", 5), ph("y", 1)}, []string{"x", "y", "c", "a", "b"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got []string
			for _, p := range byStart(tt.in) {
				got = append(got, p.Job)
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("byStart: %v, want %v", got, tt.want)
			}
		})
	}
}
