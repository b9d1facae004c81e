package routing

import (
	"math/rand/v2"
	"net/netip"
	"reflect"
	"slices"
	"testing"

	"github.com/ocsemu/ocsemu/ocsfabric/circuit"
)

func c(a, b string, simplex bool) circuit.Circuit {
	ua, _ := circuit.ParseUplink(a)
	ub, _ := circuit.ParseUplink(b)
	return circuit.Circuit{A: ua, B: ub, Simplex: simplex}
}

func TestCompute(t *testing.T) {
	tests := []struct {
		name        string
		racks       int
		cfg         []circuit.Circuit
		src, dst    int
		want        []Hop
		hops        int
		unreachable int
	}{
		{"direct", 2, []circuit.Circuit{c("tor0:0", "tor1:0", false)}, 0, 1, []Hop{{0, 1}}, 1, 0},
		{"multipath over two circuits", 2, []circuit.Circuit{c("tor0:0", "tor1:0", false), c("tor0:1", "tor1:1", false)}, 0, 1, []Hop{{0, 1}, {1, 1}}, 1, 0},
		{"two hops", 3, []circuit.Circuit{c("tor0:0", "tor1:0", false), c("tor1:1", "tor2:0", false)}, 0, 2, []Hop{{0, 1}}, 2, 0},
		{"chain of four", 4, []circuit.Circuit{c("tor0:0", "tor1:0", false), c("tor1:1", "tor2:1", false), c("tor2:0", "tor3:0", false)}, 3, 0, []Hop{{0, 2}}, 3, 0},
		{"shortest wins", 4, []circuit.Circuit{c("tor0:0", "tor1:0", false), c("tor1:1", "tor2:1", false), c("tor2:0", "tor3:0", false), c("tor0:1", "tor3:1", false)}, 0, 3, []Hop{{1, 3}}, 1, 0},
		{"equal-cost multi-hop", 4, []circuit.Circuit{c("tor0:0", "tor1:0", false), c("tor0:1", "tor2:0", false), c("tor1:1", "tor3:0", false), c("tor2:1", "tor3:1", false)}, 0, 3, []Hop{{0, 1}, {1, 2}}, 2, 0},
		{"unreachable", 4, []circuit.Circuit{c("tor0:0", "tor1:0", false)}, 0, 2, nil, -1, 10},
		{"simplex one way", 2, []circuit.Circuit{c("tor0:0", "tor1:0", true)}, 0, 1, []Hop{{0, 1}}, 1, 1},
		{"simplex no way back", 2, []circuit.Circuit{c("tor0:0", "tor1:0", true)}, 1, 0, nil, -1, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tab, un := Compute(tt.racks, circuit.Config{Circuits: tt.cfg})
			if got := tab[tt.src][tt.dst]; !reflect.DeepEqual(got, tt.want) {
				t.Errorf("next hops %d->%d = %v, want %v", tt.src, tt.dst, got, tt.want)
			}
			if h := tab.Hops(tt.src, tt.dst); h != tt.hops {
				t.Errorf("hops = %d, want %d", h, tt.hops)
			}
			if len(un) != tt.unreachable {
				t.Errorf("unreachable pairs = %v, want %d", un, tt.unreachable)
			}
		})
	}
}

// Paths, asked pair by pair, gives Compute's next hops and hop counts,
// on the table cases and on random configurations (simplex ones too).
func TestPathsMatchesCompute(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	var cfgs []circuit.Config
	for i := 0; i < 200; i++ {
		racks, uplinks := 2+rng.IntN(9), 1+rng.IntN(3)
		used := map[circuit.Uplink]bool{}
		var cs []circuit.Circuit
		for k := 0; k < racks*uplinks; k++ {
			a := circuit.Uplink{Rack: rng.IntN(racks), Port: rng.IntN(uplinks)}
			b := circuit.Uplink{Rack: rng.IntN(racks), Port: rng.IntN(uplinks)}
			if a == b || used[a] || used[b] {
				continue
			}
			used[a], used[b] = true, true
			cs = append(cs, circuit.Circuit{A: a, B: b, Simplex: rng.IntN(4) == 0})
		}
		cfgs = append(cfgs, circuit.Config{Circuits: cs})
	}
	for i, cfg := range cfgs {
		racks := 11
		tab, _ := Compute(racks, cfg)
		p := NewPaths(racks, cfg)
		for d := racks - 1; d >= -1; d-- { // any order, and out of range
			for s := -1; s <= racks; s++ {
				var want []Hop
				if s >= 0 && d >= 0 {
					want = tab[s][d]
				}
				if got := p.Next(s, d); !reflect.DeepEqual(got, want) {
					t.Fatalf("config %d: Next(%d, %d) = %v, Compute says %v", i, s, d, got, want)
				}
				if got, want := p.Hops(s, d), tab.Hops(s, d); got != want && s != d {
					t.Fatalf("config %d: Hops(%d, %d) = %d, Compute says %d", i, s, d, got, want)
				}
			}
		}
	}
}

func TestFlowHash(t *testing.T) {
	// Pinned values (computed independently, in Python): the BPF program
	// (ocsfabric/torpath) computes the same function; a change here must
	// change both.
	for _, c := range []struct {
		src, dst string
		want     uint32
	}{
		{"10.0.0.1", "10.0.1.1", 0x7ba6ea1b},
		{"10.0.1.1", "10.0.0.1", 0x0ea439bc},
		{"10.0.0.2", "10.0.3.2", 0x0f14e97f},
		{"10.255.0.0", "10.255.0.2", 0x94e55581},
		{"0.0.0.0", "0.0.0.0", 0},
	} {
		got := AddrHash(netip.MustParseAddr(c.src), netip.MustParseAddr(c.dst))
		if got != c.want {
			t.Errorf("AddrHash(%s, %s) = %#x, want %#x", c.src, c.dst, got, c.want)
		}
	}
}

func TestPickSpreadsPairs(t *testing.T) {
	hops := []Hop{{Uplink: 0, Via: 1}, {Uplink: 1, Via: 1}, {Uplink: 2, Via: 1}}
	count := make([]int, len(hops))
	for s := range 8 {
		for d := range 8 {
			src := netip.AddrFrom4([4]byte{10, 0, byte(s), 1})
			dst := netip.AddrFrom4([4]byte{10, 0, byte(d), 2})
			h, ok := Pick(hops, AddrHash(src, dst))
			if !ok {
				t.Fatal("Pick over 3 hops gave none")
			}
			count[h.Uplink]++
		}
	}
	for u, c := range count {
		if c < 10 { // 64 pairs over 3 uplinks: about 21 each
			t.Errorf("uplink %d took %d of 64 pairs: %v", u, c, count)
		}
	}
	if _, ok := Pick(nil, 7); ok {
		t.Error("Pick over no hops gave one")
	}
}

func TestChooseMakeBeforeBreak(t *testing.T) {
	hops := []Hop{{Uplink: 0, Via: 1}, {Uplink: 1, Via: 1}, {Uplink: 2, Via: 1}}
	dark := func(m map[int]int64) func(int) int64 { return func(u int) int64 { return m[u] } }
	for _, c := range []struct {
		name     string
		dark     map[int]int64
		lit      []int // uplinks of Lit; nil: none
		litUntil int64
	}{
		{"all lit", nil, nil, 0},
		{"dark before the switch ended", map[int]int64{1: 90}, nil, 0},
		{"one dark", map[int]int64{1: 150}, []int{0, 2}, 150},
		{"two dark, earliest end", map[int]int64{0: 300, 2: 200}, []int{1}, 200},
		{"all dark: wait", map[int]int64{0: 150, 1: 150, 2: 150}, nil, 0},
	} {
		ch := Choose(hops, 100, dark(c.dark))
		var lit []int
		for _, h := range ch.Lit {
			lit = append(lit, h.Uplink)
		}
		if !reflect.DeepEqual(lit, c.lit) || ch.LitUntil != c.litUntil || len(ch.All) != 3 {
			t.Errorf("%s: lit %v until %d, want %v until %d", c.name, lit, ch.LitUntil, c.lit, c.litUntil)
		}
		// Before LitUntil every hash lands on a lit hop; at it, on All's.
		for h := uint32(0); h < 30; h++ {
			got, _ := ch.Pick(h, 100)
			if c.lit != nil && !slices.Contains(c.lit, got.Uplink) {
				t.Errorf("%s: hash %d took dark uplink %d", c.name, h, got.Uplink)
			}
			after, _ := ch.Pick(h, max(ch.LitUntil, 100))
			if want, _ := Pick(hops, h); c.lit != nil && after != want {
				t.Errorf("%s: hash %d after the dark period took %v, want %v", c.name, h, after, want)
			}
		}
	}
}

// Paths' next hops are the shortest-path ones read off
// circuit.Config.RackGraph, a plain reference: on random configurations
// with ports used twice (the last circuit on a port wins) and racks
// beyond the fabric (ignored).
func TestPathsMatchesRackGraph(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for i := 0; i < 300; i++ {
		racks, uplinks := 2+rng.IntN(8), 1+rng.IntN(3)
		var cfg circuit.Config
		for k := rng.IntN(3 * racks * uplinks); k > 0; k-- {
			a := circuit.Uplink{Rack: rng.IntN(racks + 2), Port: rng.IntN(uplinks)}
			b := circuit.Uplink{Rack: rng.IntN(racks + 2), Port: rng.IntN(uplinks)}
			if a.Rack != b.Rack {
				cfg.Circuits = append(cfg.Circuits, circuit.Circuit{A: a, B: b, Simplex: rng.IntN(4) == 0})
			}
		}
		g := cfg.RackGraph()
		p := NewPaths(racks, cfg)
		for d := 0; d < racks; d++ {
			dist := map[int]int{d: 0} // hops to d, by relaxation
			for changed := true; changed; {
				changed = false
				for a, m := range g {
					for b := range m {
						if db, ok := dist[b]; ok && a < racks && b < racks {
							if da, ok := dist[a]; !ok || db+1 < da {
								dist[a], changed = db+1, true
							}
						}
					}
				}
			}
			for s := 0; s < racks; s++ {
				var want []Hop
				if ds, ok := dist[s]; ok && s != d {
					for n, ups := range g[s] {
						if dn, ok := dist[n]; ok && n < racks && dn == ds-1 {
							for _, u := range ups {
								want = append(want, Hop{Uplink: u.Port, Via: n})
							}
						}
					}
					slices.SortFunc(want, func(x, y Hop) int { return x.Uplink - y.Uplink })
				}
				if got := p.Next(s, d); !reflect.DeepEqual(got, want) {
					t.Fatalf("config %d (%d racks) %v: Next(%d, %d) = %v, want %v", i, racks, cfg.Circuits, s, d, got, want)
				}
			}
		}
	}
}

// TestPathsSwitch follows chains of configurations, each a few circuits
// away from the last (and now and then a new one), and checks that the
// Paths Switch gives answers as NewPaths does, that it keeps exactly the
// searched destinations whose hop counts stay, and that a kept
// destination's next hops from a rack that did not move are the old ones.
func TestPathsSwitch(t *testing.T) {
	const racks, uplinks = 16, 3
	rng := rand.New(rand.NewPCG(3, 4))
	random := func(cs []circuit.Circuit, changes int) []circuit.Circuit {
		cs = slices.Clone(cs)
		for k := 0; k < changes; k++ {
			if len(cs) > 0 && rng.IntN(2) == 0 {
				i := rng.IntN(len(cs))
				cs = slices.Delete(cs, i, i+1)
				continue
			}
			a := circuit.Uplink{Rack: rng.IntN(racks), Port: rng.IntN(uplinks)}
			b := circuit.Uplink{Rack: rng.IntN(racks), Port: rng.IntN(uplinks)}
			cs = append(cs, circuit.Circuit{A: a, B: b, Simplex: rng.IntN(5) == 0})
		}
		return cs
	}
	kept, keptPartial, dropped := 0, 0, 0
	for chain := 0; chain < 100; chain++ {
		cs := random(nil, racks*uplinks)
		p := NewPaths(racks, circuit.Config{Circuits: cs})
		for step := 0; step < 20; step++ {
			// Ask some pairs (searches partly run), note the answers.
			old := map[[2]int][]Hop{}
			oldHops := make([][]int, racks)
			now := NewPaths(racks, circuit.Config{Circuits: cs})
			for d := 0; d < racks; d++ {
				oldHops[d] = make([]int, racks)
				for s := 0; s < racks; s++ {
					oldHops[d][s] = now.Hops(s, d)
					if rng.IntN(racks/3) == 0 { // few: searches stop part way
						old[[2]int{s, d}] = p.Next(s, d)
					}
				}
			}
			asked := map[int]bool{}    // searched, now or at an earlier step
			finished := map[int]bool{} // searched to the end
			reached := make([][]bool, racks)
			for d, dd := range p.dests {
				asked[d] = dd != nil
				if dd != nil {
					finished[d] = dd.sr.head == len(dd.sr.queue)
					reached[d] = make([]bool, racks)
					for s, h := range dd.sr.Dist {
						reached[d][s] = h >= 0
					}
				}
			}
			changes := 1 + rng.IntN(3)
			if rng.IntN(10) == 0 {
				changes = 3 * racks // past racks changes: afresh
			}
			cs = random(cs, changes)
			cfg := circuit.Config{Circuits: cs}
			q := p.Switch(cfg)
			p, q = q, clonePaths(q) // q is checked all over, which runs its searches to the end
			fresh := NewPaths(racks, cfg)
			for d := 0; d < racks; d++ {
				same, sameReached := true, true
				for s := 0; s < racks; s++ {
					if got, want := q.Next(s, d), fresh.Next(s, d); !reflect.DeepEqual(got, want) {
						t.Fatalf("chain %d step %d: Next(%d, %d) = %v after Switch, NewPaths says %v", chain, step, s, d, got, want)
					}
					if got, want := q.Hops(s, d), fresh.Hops(s, d); got != want {
						t.Fatalf("chain %d step %d: Hops(%d, %d) = %d after Switch, NewPaths says %d", chain, step, s, d, got, want)
					}
					same = same && q.Hops(s, d) == oldHops[d][s]
					sameReached = sameReached && (reached[d] == nil || !reached[d][s] || q.Hops(s, d) == oldHops[d][s])
				}
				// A finished search is kept exactly when no hop count
				// changed; one partly run, only if those of the racks
				// it reached did not.
				if q.moved != nil && finished[d] && q.Kept(d) != same {
					t.Fatalf("chain %d step %d: Kept(%d) = %v for a finished search; hop counts the same %v", chain, step, d, q.Kept(d), same)
				}
				if q.Kept(d) && (!asked[d] || !sameReached) {
					t.Fatalf("chain %d step %d: Kept(%d), but searched %v, hop counts of the racks reached the same %v", chain, step, d, asked[d], sameReached)
				}
				if q.Kept(d) {
					kept++
					if !finished[d] {
						keptPartial++
					}
				} else if asked[d] {
					dropped++
				}
			}
			for k, h := range old {
				if q.Kept(k[1]) && !q.Moved(k[0]) && !reflect.DeepEqual(q.Next(k[0], k[1]), h) {
					t.Fatalf("chain %d step %d: kept destination %d, unmoved rack %d: Next %v, was %v", chain, step, k[1], k[0], q.Next(k[0], k[1]), h)
				}
			}
		}
	}
	if keptPartial == 0 || kept == keptPartial || dropped == 0 {
		t.Fatalf("kept %d searches (%d partly run), dropped %d: the test needs each", kept, keptPartial, dropped)
	}
	t.Logf("kept %d searches (%d partly run), dropped %d", kept, keptPartial, dropped)
}

// clonePaths copies p and its searches.
func clonePaths(p *Paths) *Paths {
	q := *p
	q.dests = make([]*dest, len(p.dests))
	for d, dd := range p.dests {
		if dd != nil {
			c := &dest{sr: Search{Dist: slices.Clone(dd.sr.Dist), queue: slices.Clone(dd.sr.queue), head: dd.sr.head},
				next: slices.Clone(dd.next), known: slices.Clone(dd.known)}
			q.dests[d] = c
		}
	}
	q.spare = nil
	return &q
}
