package scheduler

import (
	"sort"

	"github.com/ocsemu/ocsemu/emu/scenario"
	"github.com/ocsemu/ocsemu/ocsfabric/circuit"
)

// ljfCircuits is paper 000's "re-optimise the AOI only where a bottleneck
// needs it". Starting from the base ring it
//
//  1. keeps every circuit of the previous slot on the same ports (those
//     without demand left are idle, and give their ports up first when a
//     new circuit needs them);
//  2. routes the slot's demand (ActiveRackDemand) over those circuits,
//     split evenly over equal-cost next hops as ECMP does, and finds the
//     busiest circuit;
//  3. while a circuit cannot carry its load within half a slot
//     (scheduler.bottleneck, a fraction of the slot), adds a
//     circuit for the largest demand crossing it (a direct one, or one
//     more), for every such circuit at once, and routes again (at most
//     maxLJFRounds times per slot).
//
// So the circuit map changes only when a circuit would be a bottleneck
// for the slot: small cross-rack demands (INC's partial sums) ride the
// existing circuits over several hops, and circuits are never torn down
// for nothing; fcfs refits every slot.
func ljfCircuits(l *loop) circuit.Config {
	f := l.s.Fabric
	p := newPorts(f)
	p.baseRing(f.Racks)
	ring := map[circuit.Circuit]bool{}
	for _, c := range p.cfg.Circuits {
		ring[c] = true
	}
	dem := l.sim.ActiveRackDemand()
	load := func(pr [2]int) float64 {
		return max(dem[[2]int{pr[0], pr[1]}], dem[[2]int{pr[1], pr[0]}])
	}
	idle := map[circuit.Circuit]bool{}
	busy := l.sim.BusyUplinks() // circuits under flows in progress are never evicted
	for _, c := range l.prev.Circuits {
		if ring[c] || !p.claim(c) {
			continue
		}
		if load(pair(c.A.Rack, c.B.Rack)) == 0 && !busy[c.A] && !busy[c.B] {
			idle[c] = true
		}
	}
	perSlot := bytesPerSlot(f, l.slot) * l.s.Scheduler.BottleneckOr()
	stuck := map[[2]int]bool{} // uplinks no new circuit can relieve
	for iter := 0; iter < maxLJFRounds; iter++ {
		loads, users := edgeLoads(f.Racks, p.cfg, dem)
		var over [][2]int
		for e, x := range loads {
			if x > perSlot && !stuck[e] {
				over = append(over, e)
			}
		}
		sort.Slice(over, func(i, j int) bool {
			if loads[over[i]] != loads[over[j]] {
				return loads[over[i]] > loads[over[j]]
			}
			return less2(over[i], over[j])
		})
		// One new circuit per overloaded uplink and round, for the
		// largest demand crossing it; then route again.
		added := 0
		done := map[[2]int]bool{}
		for _, e := range over {
			us := users[e]
			sort.Slice(us, func(i, j int) bool {
				if di, dj := dem[us[i]], dem[us[j]]; di != dj {
					return di > dj
				}
				return less2(us[i], us[j])
			})
			ok := false
			for _, pr := range us {
				if done[pr] {
					ok = true // relieved by this round's circuit already
					break
				}
				if p.connectOrEvict(pr[0], pr[1], idle) {
					done[pr], ok = true, true
					added++
					break
				}
			}
			if !ok {
				stuck[e] = true
			}
		}
		if added == 0 {
			break
		}
	}
	return p.cfg
}

// maxLJFRounds bounds ljf's route-and-add rounds per slot.
const maxLJFRounds = 8

func less2(a, b [2]int) bool { return a[0] < b[0] || a[0] == b[0] && a[1] < b[1] }

// edgeLoads routes each directed rack pair's demand over cfg along
// shortest paths, splitting it evenly over equal-cost next hops (one per
// uplink) as ECMP does, and returns the bytes each directed uplink (rack,
// port) carries and the pairs that cross it. It follows the same paths as
// ocsfabric/routing (the flow model's), on slices instead of maps, since
// ljf routes every slot's demand several times.
func edgeLoads(racks int, cfg circuit.Config, dem map[[2]int]float64) (map[[2]int]float64, map[[2]int][][2]int) {
	type hop struct{ port, via int }
	adj := make([][]hop, racks)
	for _, c := range cfg.Circuits {
		adj[c.A.Rack] = append(adj[c.A.Rack], hop{c.A.Port, c.B.Rack})
		if !c.Simplex {
			adj[c.B.Rack] = append(adj[c.B.Rack], hop{c.B.Port, c.A.Rack})
		}
	}
	rev := make([][]int, racks)
	for a, hs := range adj {
		for _, h := range hs {
			rev[h.via] = append(rev[h.via], a)
		}
	}
	dists := map[int][]int32{}
	distTo := func(d int) []int32 {
		if dist, ok := dists[d]; ok {
			return dist
		}
		dist := make([]int32, racks)
		for i := range dist {
			dist[i] = -1
		}
		dist[d] = 0
		queue := []int{d}
		for len(queue) > 0 {
			x := queue[0]
			queue = queue[1:]
			for _, q := range rev[x] {
				if dist[q] < 0 {
					dist[q] = dist[x] + 1
					queue = append(queue, q)
				}
			}
		}
		dists[d] = dist
		return dist
	}
	loads := map[[2]int]float64{}
	users := map[[2]int][][2]int{}
	share := make([]float64, racks) // bytes at each rack on the current hop count
	next := make([]float64, racks)
	var front, nfront []int
	var hops []hop
	for pr, d := range dem {
		if d <= 0 || pr[0] == pr[1] {
			continue
		}
		dist := distTo(pr[1])
		if dist[pr[0]] < 0 {
			continue
		}
		front = append(front[:0], pr[0])
		share[pr[0]] = d
		for len(front) > 0 {
			nfront = nfront[:0]
			for _, cur := range front {
				x := share[cur]
				share[cur] = 0
				if cur == pr[1] {
					continue
				}
				hops = hops[:0]
				for _, h := range adj[cur] {
					if dist[h.via] == dist[cur]-1 {
						hops = append(hops, h)
					}
				}
				per := x / float64(len(hops))
				for _, h := range hops {
					e := [2]int{cur, h.port}
					if u := users[e]; len(u) == 0 || u[len(u)-1] != pr {
						users[e] = append(u, pr)
					}
					loads[e] += per
					if next[h.via] == 0 {
						nfront = append(nfront, h.via)
					}
					next[h.via] += per
				}
			}
			for _, r := range nfront {
				share[r], next[r] = next[r], 0
			}
			front, nfront = nfront, front
		}
	}
	return loads, users
}

// connectOrEvict adds a circuit between racks a and b, taking the ports of
// an idle circuit at a rack that has none free.
func (p *ports) connectOrEvict(a, b int, idle map[circuit.Circuit]bool) bool {
	if p.connect(a, b) {
		return true
	}
	for tries := 0; tries < 2; tries++ {
		evicted := false
		for _, r := range []int{a, b} {
			if p.hasFree(r) {
				continue
			}
			for i, c := range p.cfg.Circuits {
				if idle[c] && (c.A.Rack == r || c.B.Rack == r) {
					p.release(i)
					delete(idle, c)
					evicted = true
					break
				}
			}
		}
		if !evicted {
			return false
		}
		if p.connect(a, b) {
			return true
		}
	}
	return false
}

func (p *ports) hasFree(r int) bool {
	for sw := 0; sw < p.layout.Switches; sw++ {
		if len(p.free[[2]int{r, sw}]) > 0 {
			return true
		}
	}
	return false
}

// release removes circuit i and frees its ports.
func (p *ports) release(i int) {
	c := p.cfg.Circuits[i]
	p.cfg.Circuits = append(p.cfg.Circuits[:i:i], p.cfg.Circuits[i+1:]...)
	for _, u := range []circuit.Uplink{c.A, c.B} {
		sw, _ := p.layout.Switch(u)
		k := [2]int{u.Rack, sw}
		p.free[k] = append(p.free[k], u.Port)
	}
	p.count[pair(c.A.Rack, c.B.Rack)]--
}

// bytesPerSlot is what one circuit carries in one slot, in one direction.
func bytesPerSlot(f scenario.Fabric, slot int64) float64 {
	if f.Rates.Uplink == scenario.Unlimited {
		return 1e300
	}
	return float64(f.Rates.Uplink) / 8 * float64(slot) / 1e9
}

// claim adds circuit c on exactly its ports, if both are free.
func (p *ports) claim(c circuit.Circuit) bool {
	sa, _ := p.layout.Switch(c.A)
	sb, _ := p.layout.Switch(c.B)
	if sa < 0 || sa != sb || c.A.Rack == c.B.Rack {
		return false
	}
	ka, kb := [2]int{c.A.Rack, sa}, [2]int{c.B.Rack, sb}
	ia, ib := indexOf(p.free[ka], c.A.Port), indexOf(p.free[kb], c.B.Port)
	if ia < 0 || ib < 0 {
		return false
	}
	p.free[ka] = append(p.free[ka][:ia:ia], p.free[ka][ia+1:]...)
	p.free[kb] = append(p.free[kb][:ib:ib], p.free[kb][ib+1:]...)
	p.cfg.Circuits = append(p.cfg.Circuits, c)
	p.count[pair(c.A.Rack, c.B.Rack)]++
	return true
}

func indexOf(xs []int, x int) int {
	for i, v := range xs {
		if v == x {
			return i
		}
	}
	return -1
}
