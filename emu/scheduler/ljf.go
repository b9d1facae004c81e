package scheduler

import (
	"math"
	"slices"
	"sort"
	"sync/atomic"
	"time"

	"github.com/ocsemu/ocsemu/emu/scenario"
	"github.com/ocsemu/ocsemu/ocsfabric/circuit"
	"github.com/ocsemu/ocsemu/ocsfabric/routing"
)

// circuits is paper 000's "re-optimise the AOI only where a bottleneck
// needs it". Starting from its base topology (baseCirculant on
// scheduler.base_uplinks ports: the base ring by default), built once per
// plan, it
//
//  1. keeps every circuit of the previous slot on the same ports (those
//     without demand left are idle, and give their ports up first when a
//     new circuit needs them);
//  2. routes the slot's demand (ActiveRackDemand) over those circuits,
//     split evenly over equal-cost next hops as ECMP does, and finds the
//     busiest circuit;
//  3. while a circuit cannot carry its load within a fraction of a slot
//     (scheduler.bottleneck, default half), adds a
//     circuit for the largest demand crossing it (a direct one, or one
//     more), for every such circuit at once, and routes again (at most
//     maxLJFRounds times per slot).
//
// So the circuit map changes only when a circuit would be a bottleneck
// for the slot: small cross-rack demands (INC's partial sums) ride the
// existing circuits over several hops, and circuits are never torn down
// for nothing; fcfs refits every slot.
func (b *ljfBase) circuits(l *loop) circuit.Config {
	defer func(t0 time.Time) { ljfNanos.Add(int64(time.Since(t0))) }(time.Now())
	f := l.s.Fabric
	if b.ports == nil {
		b.ports = newPorts(f)
		b.ports.baseCirculant(f.Racks, l.s.Scheduler.BaseUplinks)
		b.ring = make([]circuit.Circuit, f.Racks*f.UplinksPerToR)
		for _, c := range b.ports.cfg.Circuits {
			b.ring[c.A.Rack*f.UplinksPerToR+c.A.Port] = c
		}
		b.p = &ports{}
		b.idle.c = map[circuit.Circuit]bool{}
		b.stuck, b.done = map[[2]int]bool{}, map[[2]int]bool{}
	}
	p := b.p
	p.copyFrom(b.ports)
	inRing := func(c circuit.Circuit) bool {
		u := c.A.Rack*f.UplinksPerToR + c.A.Port
		return c.A.Port >= 0 && c.A.Port < f.UplinksPerToR && u >= 0 && u < len(b.ring) && b.ring[u] == c
	}
	dem := l.sim.ActiveRackDemand()
	load := func(pr [2]int) float64 {
		return max(dem[[2]int{pr[0], pr[1]}], dem[[2]int{pr[1], pr[0]}])
	}
	idle := &b.idle
	idle.reset(f.Racks)
	busy := l.sim.BusyUplinks() // circuits under flows in progress are never evicted
	for _, c := range l.prev.Circuits {
		if inRing(c) || !p.claim(c) {
			continue
		}
		if load(pair(c.A.Rack, c.B.Rack)) == 0 && !busy[c.A] && !busy[c.B] {
			idle.add(c)
		}
	}
	perSlot := bytesPerSlot(f, l.slot) * l.s.Scheduler.BottleneckOr()
	stuck := b.stuck // uplinks no new circuit can relieve
	clear(stuck)
	if b.er == nil {
		b.er = newEdgeRouter(f.Racks, f.UplinksPerToR)
	}
	er := b.er
	er.demand(dem)
	for iter := 0; iter < maxLJFRounds; iter++ {
		ljfRounds.Add(1)
		er.route(p.cfg)
		loads := func(e [2]int) float64 { return er.loads[e[0]*er.ups+e[1]] }
		over := b.over[:0]
		for _, id := range er.touched {
			if e := er.edge(id); er.loads[id] > perSlot && !stuck[e] {
				over = append(over, e)
			}
		}
		sort.Slice(over, func(i, j int) bool {
			if li, lj := loads(over[i]), loads(over[j]); li != lj {
				return li > lj
			}
			return less2(over[i], over[j])
		})
		// One new circuit per overloaded uplink and round, for the
		// largest demand crossing it; then route again.
		b.over = over
		added := 0
		done := b.done
		clear(done)
		for _, e := range over {
			us := er.users[e[0]*er.ups+e[1]]
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
	return circuit.Config{Circuits: slices.Clone(p.cfg.Circuits)} // p is reused
}

// ljfRounds counts ljf's route-and-add rounds, and ljfNanos the time
// spent choosing circuits, for the scale benchmark.
var ljfRounds, ljfNanos atomic.Int64

// ljfReplay lets edgeRouter replay spreads (fresh); tests turn it off to
// compare the plans.
var ljfReplay = true

// baseCirculant is ljf's base topology over uplinks ports per ToR: the
// base ring (offset 1), then circuits from every rack r to r+k for
// further offsets k growing geometrically up to racks/2, two ports per
// offset (one at racks/2). With 16 of paper 000's 24 ports on 64 racks
// the offsets are 1, 2, 3, 4, 7, 12, 20 and 32, and any rack reaches any
// other in at most three hops. uplinks <= 2 is the ring alone.
func (p *ports) baseCirculant(racks, uplinks int) {
	p.baseRing(racks)
	for _, k := range circulantOffsets(racks, uplinks)[1:] {
		for r := 0; r < racks; r++ {
			if 2*k == racks && r >= k {
				break // r and r+k are already joined
			}
			p.connect(r, (r+k)%racks)
		}
	}
}

// circulantOffsets picks the offsets of baseCirculant: 1, then up to
// uplinks/2 - 1 more, spread geometrically over 2..racks/2, each taking
// two ports (one for racks/2).
func circulantOffsets(racks, uplinks int) []int {
	offs := []int{1}
	half := racks / 2
	n := uplinks / 2
	if n <= 1 || half < 2 {
		return offs
	}
	used := 2
	for i := 1; i < n && used < uplinks; i++ {
		k := int(math.Round(math.Pow(float64(half), float64(i)/float64(n-1))))
		k = max(k, offs[len(offs)-1]+1)
		if k > half {
			break
		}
		ports := 2
		if 2*k == racks {
			ports = 1
		}
		if used+ports > uplinks {
			break
		}
		offs = append(offs, k)
		used += ports
	}
	return offs
}

// ljfBase is one ljf plan's base topology, built at its first slot:
// every slot starts from a copy (in p, whose storage slots reuse).
type ljfBase struct {
	ports *ports
	ring  []circuit.Circuit // the base's circuit on each uplink (rack*ups+port) its A end
	er    *edgeRouter       // kept from slot to slot: its searches carry over
	// scratch of one slot
	p           *ports
	idle        idleSet
	stuck, done map[[2]int]bool
	over        [][2]int
}

// copyFrom makes q a copy of p's state in q's storage. q's free keys are
// p's: every (rack, ocs) pair of the fabric, which newPorts lists and no
// change drops or adds.
func (q *ports) copyFrom(p *ports) {
	q.layout = p.layout
	if q.free == nil {
		q.free, q.count = make(map[[2]int][]int, len(p.free)), make(map[[2]int]int, len(p.count))
	}
	for k, v := range p.free {
		q.free[k] = append(q.free[k][:0], v...)
	}
	clear(q.count)
	for k, v := range p.count {
		q.count[k] = v
	}
	q.cfg.Circuits = append(q.cfg.Circuits[:0], p.cfg.Circuits...)
}

// maxLJFRounds bounds ljf's route-and-add rounds per slot.
const maxLJFRounds = 8

func less2(a, b [2]int) bool { return a[0] < b[0] || a[0] == b[0] && a[1] < b[1] }

// edgeRouter routes each directed rack pair's demand over a circuit map
// along shortest paths, splitting it evenly over equal-cost next hops (one
// per uplink) as ECMP does, and gives the bytes each directed uplink
// (rack, port) carries and the pairs that cross it. It follows the same
// paths as ocsfabric/routing (the flow model's), on flat slices instead
// of maps: ljf routes every slot's demand several times, and its buffers
// are kept from one round to the next.
type edgeRouter struct {
	racks, ups int
	pairs      [][2]int  // demanded pairs, sorted (the routing order)
	dem        []float64 // their bytes
	// the circuit graph, in cfg's order: out[outAt[r]:outAt[r+1]] are
	// rack r's hops; in lists, per rack, the racks with a circuit to it.
	outAt, inAt []int32
	out         []hop
	in          []int32
	dist        []routing.Search // per destination (Dist nil: not searched)
	searched    []int            // destinations with dist set
	spare       [][]int32
	// via is the rack each uplink sends to (-1: none) in the last cfg
	// routed, used the uplinks set; nvia and nused are scratch for the next.
	via, nvia   []int32
	used, nused []int32
	viaOff      bool // via is not the last cfg's graph
	carried     int  // searches carried over, for tests
	// results, per directed uplink rack*ups+port
	loads   []float64
	users   [][][2]int
	touched []int32 // uplinks with a load, in first-use order
	// scratch of one pair's spread
	share, next   []float64
	front, nfront []int32
	hops          []hop
	// A pair's spread, kept per pair (src*racks+dst) and replayed while
	// nothing it read changed: not its bytes, the search towards its
	// destination (distGen: the last route that started or dropped it)
	// nor the ways out of a rack it left (outGen: the last route that
	// changed them). ljf's rounds add a few circuits each.
	gen             int32
	spreads         []pairSpread
	distGen, outGen []int32
	prevOut         []hop
	prevOutAt       []int32
	replayed        int // spreads replayed, for tests
}

// pairSpread is one pair's spread: the bytes it put on each uplink, in
// order, and when (route gen) for how many bytes.
type pairSpread struct {
	gen  int32
	d    float64
	puts []put
}

type put struct {
	e   int32
	per float64
}

type hop struct{ port, via int32 }

func newEdgeRouter(racks, ups int) *edgeRouter {
	er := &edgeRouter{racks: racks, ups: ups, dist: make([]routing.Search, racks),
		loads: make([]float64, racks*ups), users: make([][][2]int, racks*ups),
		share: make([]float64, racks), next: make([]float64, racks),
		outAt: make([]int32, racks+1), inAt: make([]int32, racks+1),
		via: make([]int32, racks*ups), nvia: make([]int32, racks*ups),
		spreads: make([]pairSpread, racks*racks), distGen: make([]int32, racks), outGen: make([]int32, racks),
		prevOutAt: make([]int32, racks+1)}
	for i := range er.via {
		er.via[i], er.nvia[i] = -1, -1
	}
	return er
}

// demand sets the demand route routes.
func (er *edgeRouter) demand(dem map[[2]int]float64) {
	er.pairs, er.dem = er.pairs[:0], er.dem[:0]
	for pr, d := range dem {
		if d > 0 && pr[0] != pr[1] {
			er.pairs = append(er.pairs, pr)
		}
	}
	sort.Slice(er.pairs, func(i, j int) bool { return less2(er.pairs[i], er.pairs[j]) })
	for _, pr := range er.pairs {
		er.dem = append(er.dem, dem[pr])
	}
}

// route routes the demand over cfg; loads, users and touched hold the
// result until the next call. The searches of the last call that cfg
// leaves as they are (routing.Search.Carry) go on over cfg: ljf's rounds
// and slots change a few circuits at a time.
func (er *edgeRouter) route(cfg circuit.Config) {
	er.gen++
	for _, e := range er.touched {
		er.loads[e], er.users[e] = 0, er.users[e][:0]
	}
	er.touched = er.touched[:0]
	added, removed, ok := er.diff(cfg)
	er.graph(cfg)
	er.stampOut()
	keep := er.searched[:0]
	for _, d := range er.searched {
		sr := &er.dist[d]
		still := func(u, h int32) bool {
			for _, x := range er.out[er.outAt[u]:er.outAt[u+1]] {
				if sr.Dist[x.via] == h {
					return true
				}
			}
			return false
		}
		if ok && sr.Carry(added, removed, still) {
			keep = append(keep, d)
			er.carried++
			continue
		}
		er.spare = append(er.spare, sr.Dist)
		sr.Dist = nil
		er.distGen[d] = er.gen
	}
	er.searched = keep
	for i, pr := range er.pairs {
		ps := &er.spreads[pr[0]*er.racks+pr[1]]
		if ljfReplay && er.fresh(ps, pr[1], er.dem[i]) {
			er.replay(pr, ps.puts)
			er.replayed++
			continue
		}
		dist := er.distTo(pr[0], pr[1])
		if dist[pr[0]] < 0 {
			ps.gen = 0
			continue
		}
		ps.gen, ps.d, ps.puts = er.gen, er.dem[i], er.spread(pr, er.dem[i], dist, ps.puts[:0])
		er.replay(pr, ps.puts)
	}
}

// fresh reports whether ps is the spread of d bytes towards dst over the
// current graph: built since the search towards dst last changed, for
// the same bytes, and no rack it leaves has changed its ways out since.
// Every rack a spread leaves (all but dst) puts bytes on an uplink of
// its own, so puts names them all. A carried search keeps its hop counts,
// and a rack joining it (Carry) comes no nearer than the farthest rack
// queued, which was no nearer than the source when it was reached: never
// a next hop of the spread.
func (er *edgeRouter) fresh(ps *pairSpread, dst int, d float64) bool {
	if ps.gen == 0 || ps.d != d || er.distGen[dst] > ps.gen {
		return false
	}
	for _, p := range ps.puts {
		if er.outGen[int(p.e)/er.ups] > ps.gen {
			return false
		}
	}
	return true
}

// stampOut marks the racks whose ways out (port and rack, in order)
// differ from the last graph's, and keeps this graph for the next.
func (er *edgeRouter) stampOut() {
	for r := 0; r < er.racks; r++ {
		a := er.prevOut[er.prevOutAt[r]:er.prevOutAt[r+1]]
		b := er.out[er.outAt[r]:er.outAt[r+1]]
		if !slices.Equal(a, b) {
			er.outGen[r] = er.gen
		}
	}
	er.prevOut = append(er.prevOut[:0], er.out...)
	copy(er.prevOutAt, er.outAt)
}

// replay adds a pair's puts to the loads and users.
func (er *edgeRouter) replay(pr [2]int, puts []put) {
	for _, p := range puts {
		e := p.e
		u := er.users[e]
		if len(u) == 0 {
			er.touched = append(er.touched, e)
		}
		if len(u) == 0 || u[len(u)-1] != pr {
			er.users[e] = append(u, pr)
		}
		er.loads[e] += p.per
	}
}

// diff installs cfg's ways out per sending uplink (via) and returns the
// ways out it adds to and removes from the last cfg's; ok is false when
// that cannot be told (an uplink sending on two circuits, or one off the
// fabric).
func (er *edgeRouter) diff(cfg circuit.Config) (added, removed []routing.Edge, ok bool) {
	ok = true
	used := er.nused[:0]
	set := func(from circuit.Uplink, to int) {
		if from.Port < 0 || from.Port >= er.ups || from.Rack < 0 || from.Rack >= er.racks || to < 0 || to >= er.racks {
			ok = false // not a circuit of this fabric: search afresh (Carry would index past it)
			return
		}
		u := int32(from.Rack*er.ups + from.Port)
		if er.nvia[u] >= 0 {
			ok = false
		}
		er.nvia[u] = int32(to)
		used = append(used, u)
	}
	for _, c := range cfg.Circuits {
		set(c.A, c.B.Rack)
		if !c.Simplex {
			set(c.B, c.A.Rack)
		}
	}
	rack := func(u int32) int32 { return u / int32(er.ups) }
	for _, u := range used {
		if o, n := er.via[u], er.nvia[u]; o != n {
			if o >= 0 {
				removed = append(removed, routing.Edge{From: rack(u), To: o})
			}
			added = append(added, routing.Edge{From: rack(u), To: n})
		}
	}
	for _, u := range er.used {
		if o := er.via[u]; o >= 0 && er.nvia[u] < 0 {
			removed = append(removed, routing.Edge{From: rack(u), To: o})
		}
		er.via[u] = -1
	}
	er.via, er.nvia = er.nvia, er.via
	er.used, er.nused = used, er.used
	ok, er.viaOff = ok && !er.viaOff, !ok // via tells the next cfg's changes only if it told this one's
	return added, removed, ok
}

// graph builds the out and in lists of cfg (counting sort by rack, so
// each rack's hops keep cfg's order).
func (er *edgeRouter) graph(cfg circuit.Config) {
	clear(er.outAt)
	clear(er.inAt)
	for _, c := range cfg.Circuits {
		er.outAt[c.A.Rack+1]++
		er.inAt[c.B.Rack+1]++
		if !c.Simplex {
			er.outAt[c.B.Rack+1]++
			er.inAt[c.A.Rack+1]++
		}
	}
	for r := 0; r < er.racks; r++ {
		er.outAt[r+1] += er.outAt[r]
		er.inAt[r+1] += er.inAt[r]
	}
	n := int(er.outAt[er.racks])
	er.out = slices.Grow(er.out[:0], n)[:n]
	er.in = slices.Grow(er.in[:0], n)[:n]
	oc := append([]int32(nil), er.outAt[:er.racks]...)
	ic := append([]int32(nil), er.inAt[:er.racks]...)
	add := func(from, port, to int) {
		er.out[oc[from]] = hop{int32(port), int32(to)}
		oc[from]++
		er.in[ic[to]] = int32(from)
		ic[to]++
	}
	for _, c := range cfg.Circuits {
		add(c.A.Rack, c.A.Port, c.B.Rack)
		if !c.Simplex {
			add(c.B.Rack, c.B.Port, c.A.Rack)
		}
	}
}

// distTo returns the hops to d, known at least for s and every rack
// nearer d (-1 for s: no path). The search against the direction of light
// stops once s is reached and resumes for d's next source, which is
// enough: spreading s's bytes only asks about racks nearer d than s.
func (er *edgeRouter) distTo(s, d int) []int32 {
	sr := &er.dist[d]
	if sr.Dist == nil {
		var dist []int32
		if n := len(er.spare); n > 0 {
			dist, er.spare = er.spare[n-1], er.spare[:n-1]
		} else {
			dist = make([]int32, er.racks)
		}
		sr.Reset(dist, d)
		er.searched = append(er.searched, d)
	}
	return sr.Reach(s, er.in, er.inAt)
}

// spread sends d bytes of pair pr down the shortest paths, hop count by
// hop count, splitting evenly at every rack over its next hops, and
// appends what it puts on each uplink to puts.
func (er *edgeRouter) spread(pr [2]int, d float64, dist []int32, puts []put) []put {
	src, dst := int32(pr[0]), int32(pr[1])
	front := append(er.front[:0], src)
	nfront := er.nfront[:0]
	er.share[src] = d
	for len(front) > 0 {
		nfront = nfront[:0]
		for _, cur := range front {
			x := er.share[cur]
			er.share[cur] = 0
			if cur == dst {
				continue
			}
			hops := er.hops[:0]
			for _, h := range er.out[er.outAt[cur]:er.outAt[cur+1]] {
				if dist[h.via] == dist[cur]-1 {
					hops = append(hops, h)
				}
			}
			er.hops = hops
			per := x / float64(len(hops))
			for _, h := range hops {
				puts = append(puts, put{cur*int32(er.ups) + h.port, per})
				if er.next[h.via] == 0 {
					nfront = append(nfront, h.via)
				}
				er.next[h.via] += per
			}
		}
		for _, r := range nfront {
			er.share[r], er.next[r] = er.next[r], 0
		}
		front, nfront = nfront, front
	}
	er.front, er.nfront = front, nfront
	return puts
}

// edge is the (rack, port) of directed uplink e.
func (er *edgeRouter) edge(e int32) [2]int { return [2]int{int(e) / er.ups, int(e) % er.ups} }

// connectOrEvict adds a circuit between racks a and b, taking the ports of
// an idle circuit at a rack that has none free.
func (p *ports) connectOrEvict(a, b int, idle *idleSet) bool {
	if p.connect(a, b) {
		return true
	}
	for tries := 0; tries < 2; tries++ {
		evicted := false
		for _, r := range []int{a, b} {
			if idle.at[r] == 0 || p.hasFree(r) {
				continue
			}
			for i, c := range p.cfg.Circuits {
				if (c.A.Rack == r || c.B.Rack == r) && idle.c[c] {
					p.release(i)
					idle.remove(c)
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

// idleSet is a slot's idle circuits, and how many each rack has (a rack
// with none is not searched for one).
type idleSet struct {
	c  map[circuit.Circuit]bool
	at []int
}

func (s *idleSet) reset(racks int) {
	clear(s.c)
	s.at = append(s.at[:0], make([]int, racks)...)
}

func (s *idleSet) add(c circuit.Circuit) {
	if !s.c[c] {
		s.c[c] = true
		s.at[c.A.Rack]++
		s.at[c.B.Rack]++
	}
}

func (s *idleSet) remove(c circuit.Circuit) {
	delete(s.c, c)
	s.at[c.A.Rack]--
	s.at[c.B.Rack]--
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
	p.cfg.Circuits = slices.Delete(p.cfg.Circuits, i, i+1) // in place: p owns its map
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
	p.free[ka] = slices.Delete(p.free[ka], ia, ia+1)
	p.free[kb] = slices.Delete(p.free[kb], ib, ib+1)
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
