package scheduler

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"

	"github.com/ocsemu/ocsemu/ocsfabric/circuit"
)

// TestEdgeRouterCarriesSearches routes random demand over chains of
// circuit maps, each a few circuits away from the last, with one router
// kept along the chain (its searches and, for demand kept from map to
// map as in ljf's rounds, pairs' spreads carried over) and a new router
// per map: loads and users must be the same to the bit.
func TestEdgeRouterCarriesSearches(t *testing.T) {
	const racks, ups = 14, 4
	tests := []struct {
		name    string
		changes int
		simplex bool
		shared  bool // an uplink may be on two circuits
		keep    int  // steps a demand is kept for
	}{
		{"one circuit at a time", 1, false, false, 1},
		{"a few circuits", 3, false, false, 1},
		{"simplex", 2, true, false, 1},
		{"many", 20, false, false, 1},
		{"uplinks on two circuits", 2, false, true, 1},
		{"demand kept, one circuit at a time", 1, false, false, 8},
		{"demand kept, a few circuits", 3, false, false, 8},
		{"demand kept, simplex", 2, true, false, 8},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(uint64(i), 11))
			kept := newEdgeRouter(racks, ups)
			var cs []circuit.Circuit
			var dem map[[2]int]float64
			used := func(u circuit.Uplink) bool {
				return slices.ContainsFunc(cs, func(c circuit.Circuit) bool { return c.A == u || c.B == u })
			}
			for step := 0; step < 60*tt.keep; step++ {
				for n := tt.changes; n > 0; n-- {
					if len(cs) > 0 && rng.IntN(3) == 0 {
						x := rng.IntN(len(cs))
						cs = slices.Delete(slices.Clone(cs), x, x+1)
						continue
					}
					a := circuit.Uplink{Rack: rng.IntN(racks), Port: rng.IntN(ups)}
					b := circuit.Uplink{Rack: rng.IntN(racks), Port: rng.IntN(ups)}
					if a.Rack != b.Rack && (tt.shared || !used(a) && !used(b)) {
						cs = append(slices.Clone(cs), circuit.Circuit{A: a, B: b, Simplex: tt.simplex && rng.IntN(2) == 0})
					}
				}
				if step%tt.keep == 0 {
					dem = map[[2]int]float64{}
					for k := rng.IntN(2 * racks); k > 0; k-- {
						dem[[2]int{rng.IntN(racks), rng.IntN(racks)}] = float64(1 + rng.IntN(100))
					}
				}
				cfg := circuit.Config{Circuits: cs}
				kept.demand(dem)
				kept.route(cfg)
				fresh := newEdgeRouter(racks, ups)
				fresh.demand(dem)
				fresh.route(cfg)
				if !reflect.DeepEqual(loadsOf(kept), loadsOf(fresh)) {
					t.Fatalf("step %d: loads %v with searches carried over, %v routed afresh", step, loadsOf(kept), loadsOf(fresh))
				}
			}
			if kept.carried == 0 {
				t.Fatal("no search carried over: the test compares nothing")
			}
			if tt.keep > 1 && kept.replayed == 0 {
				t.Fatal("no spread replayed: the test compares nothing")
			}
			t.Logf("%d searches carried over, %d spreads replayed", kept.carried, kept.replayed)
		})
	}
}

// loadsOf lists a router's loaded uplinks with their bytes and users.
func loadsOf(er *edgeRouter) []string {
	var out []string
	for e := range er.loads {
		if er.loads[e] != 0 || len(er.users[e]) > 0 {
			out = append(out, fmt.Sprint(e, er.loads[e], er.users[e]))
		}
	}
	return out
}

// TestLJFReplayKeepsPlans plans paper 000's setup (small) with ljf, its
// router replaying pairs' spreads and routing every pair afresh: the
// plans must be the same to the byte.
func TestLJFReplayKeepsPlans(t *testing.T) {
	for _, d := range Paper000Designs {
		if d.Scheduler != "ljf" {
			continue
		}
		for _, racks := range []int{16, 32} {
			t.Run(fmt.Sprintf("%s/%d racks", d.Name, racks), func(t *testing.T) {
				s := Paper000(Paper000Options{Jobs: 10 * racks, Racks: racks, ArrivalsPerSlot: float64(racks) / 3,
					Seed: 3, Scheduler: d.Scheduler, INC: d.INC})
				plans := map[bool][]byte{}
				for _, replay := range []bool{false, true} {
					ljfReplay = replay
					p, err := Plan(s)
					ljfReplay = true
					if err != nil {
						t.Fatal(err)
					}
					if plans[replay], err = json.Marshal(p); err != nil {
						t.Fatal(err)
					}
				}
				if !bytes.Equal(plans[false], plans[true]) {
					t.Fatal("plans differ with spreads replayed")
				}
			})
		}
	}
}
