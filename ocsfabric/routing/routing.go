// Package routing makes ToR routes follow the circuit map. Every
// destination rack gets a route over all the direct circuits to it
// (multipath); a rack without a direct circuit is reached over the
// shortest multi-hop path through other ToRs (again over every uplink
// that starts a shortest path); a rack with no path at all is reported
// unreachable. The computation is pure and table-tested; the OCS process
// (ocsfabric/ocs, router_linux.go) installs it with netlink.
package routing

import (
	"fmt"
	"slices"

	"github.com/ocsemu/ocsemu/ocsfabric/circuit"
)

// Hop is one way out of a ToR towards a destination: send on Uplink, the
// frame arrives at the ToR of rack Via.
type Hop struct {
	Uplink int `json:"uplink"`
	Via    int `json:"via"`
}

// Table holds next hops: Table[src][dst]. A missing entry means
// unreachable (or, on a hybrid fabric, "use the packet core").
type Table map[int]map[int][]Hop

// Pair is an unordered (src, dst) rack pair without any path.
type Pair struct{ Src, Dst int }

// Compute builds the routing table of a configuration over racks racks.
// Paths follow the direction of light, so simplex circuits are honoured.
// It holds every rack pair; a caller that routes a few pairs of a large
// fabric asks Paths instead, which gives the same next hops.
func Compute(racks int, cfg circuit.Config) (Table, []Pair) {
	p := NewPaths(racks, cfg)
	t := Table{}
	var unreachable []Pair
	dist := make([]int32, racks)
	for d := 0; d < racks; d++ {
		p.bfs(d, dist)
		for s := 0; s < racks; s++ {
			if s == d {
				continue
			}
			if dist[s] < 0 {
				unreachable = append(unreachable, Pair{s, d})
				continue
			}
			if t[s] == nil {
				t[s] = map[int][]Hop{}
			}
			t[s][d] = p.hops(s, dist)
		}
	}
	return t, unreachable
}

// Paths answers next-hop questions over one configuration on demand: the
// search towards a destination runs the first time that destination is
// asked for, so the cost follows the rack pairs a caller routes (the flow
// model, plan checks), not the fabric's size. Its answers are Compute's.
// The graph is kept as flat per-rack lists (the flow model builds one
// Paths per circuit change). Not safe for concurrent use.
type Paths struct {
	racks int
	// out[outAt[r]:outAt[r+1]] are rack r's ways out, sorted by uplink;
	// in[inAt[r]:inAt[r+1]] the racks with a circuit to r.
	outAt, inAt []int32
	out         []Hop
	in          []int32
	dist        map[int]*Search  // destination -> hops to it, searched as far as asked
	next        map[[2]int][]Hop // (src, dst) -> next hops
	queue       []int32
}

// NewPaths prepares next-hop answers for a configuration over racks racks.
func NewPaths(racks int, cfg circuit.Config) *Paths {
	p := &Paths{racks: racks, dist: map[int]*Search{}, next: map[[2]int][]Hop{},
		outAt: make([]int32, racks+1), inAt: make([]int32, racks+1)}
	// The directed edges, one per sending uplink (the last circuit on
	// it wins, as in circuit.Config.Edges), within the fabric's racks,
	// bucketed by sending rack in cfg's order, then sorted by uplink.
	type edge struct{ port, to int }
	at := make([]int32, racks+1)
	inFabric := func(r int) bool { return r >= 0 && r < racks }
	each := func(fn func(from circuit.Uplink, to int)) {
		for _, c := range cfg.Circuits {
			if inFabric(c.A.Rack) {
				fn(c.A, c.B.Rack)
			}
			if !c.Simplex && inFabric(c.B.Rack) {
				fn(c.B, c.A.Rack)
			}
		}
	}
	each(func(from circuit.Uplink, _ int) { at[from.Rack+1]++ })
	for r := 0; r < racks; r++ {
		at[r+1] += at[r]
	}
	es := make([]edge, at[racks])
	fill := append([]int32(nil), at[:racks]...)
	each(func(from circuit.Uplink, to int) {
		es[fill[from.Rack]] = edge{from.Port, to}
		fill[from.Rack]++
	})
	p.out = make([]Hop, 0, len(es))
	for r := 0; r < racks; r++ {
		b := es[at[r]:at[r+1]]
		slices.SortStableFunc(b, func(x, y edge) int { return x.port - y.port })
		for i, e := range b {
			if i+1 < len(b) && b[i+1].port == e.port || !inFabric(e.to) {
				continue
			}
			p.out = append(p.out, Hop{Uplink: e.port, Via: e.to})
			p.inAt[e.to+1]++
		}
		p.outAt[r+1] = int32(len(p.out))
	}
	for r := 0; r < racks; r++ {
		p.inAt[r+1] += p.inAt[r]
	}
	p.in = make([]int32, len(p.out))
	fill = append(fill[:0], p.inAt[:racks]...)
	for r := 0; r < racks; r++ {
		for _, h := range p.out[p.outAt[r]:p.outAt[r+1]] {
			p.in[fill[h.Via]] = int32(r)
			fill[h.Via]++
		}
	}
	return p
}

// bfs fills dist with the hops from every rack to d, against the
// direction of light (-1: no path).
func (p *Paths) bfs(d int, dist []int32) {
	for i := range dist {
		dist[i] = -1
	}
	dist[d] = 0
	queue := append(p.queue[:0], int32(d))
	for i := 0; i < len(queue); i++ {
		x := queue[i]
		for _, q := range p.in[p.inAt[x]:p.inAt[x+1]] {
			if dist[q] < 0 {
				dist[q] = dist[x] + 1
				queue = append(queue, q)
			}
		}
	}
	p.queue = queue
}

// hops lists s's ways out onto a shortest path, given the distances to
// the destination, sorted by uplink.
func (p *Paths) hops(s int, dist []int32) []Hop {
	var hops []Hop
	for _, h := range p.out[p.outAt[s]:p.outAt[s+1]] {
		if dist[h.Via] == dist[s]-1 {
			hops = append(hops, h)
		}
	}
	return hops
}

// Search is a breadth-first search towards one destination against the
// direction of light, over a graph kept as in-edge lists (in[inAt[x]:
// inAt[x+1]] are the racks with a circuit into x), run only as far as
// asked: the flow model's paths and ljf's demand routing share it. It
// stops as soon as the rack asked about is reached and resumes for the
// next: a rack's next hops need only the racks one hop nearer, which the
// search has all labelled by the time it reaches the rack. So routing a
// pair with a direct circuit reads the destination's in-list, not the
// fabric.
type Search struct {
	Dist  []int32 // hops to the destination, -1: not reached (yet)
	queue []int32
	head  int
}

// Reset starts a search towards d in dist (one entry per rack), which it
// takes over.
func (sr *Search) Reset(dist []int32, d int) {
	for i := range dist {
		dist[i] = -1
	}
	dist[d] = 0
	sr.Dist = dist
	sr.queue = append(sr.queue[:0], int32(d))
	sr.head = 0
}

// Reach runs the search until it has reached s or every rack it can, and
// returns Dist: known at least for s and every rack nearer the
// destination (-1 for s: no path).
func (sr *Search) Reach(s int, in, inAt []int32) []int32 {
	for sr.Dist[s] < 0 && sr.head < len(sr.queue) {
		x := sr.queue[sr.head]
		sr.head++
		for _, q := range in[inAt[x]:inAt[x+1]] {
			if sr.Dist[q] < 0 {
				sr.Dist[q] = sr.Dist[x] + 1
				sr.queue = append(sr.queue, q)
			}
		}
	}
	return sr.Dist
}

// distTo returns the hops to d, known at least for s (and for every rack
// nearer d than s); -1 for s means no path.
func (p *Paths) distTo(s, d int) []int32 {
	sr, ok := p.dist[d]
	if !ok {
		sr = &Search{}
		sr.Reset(make([]int32, p.racks), d)
		p.dist[d] = sr
	}
	return sr.Reach(s, p.in, p.inAt)
}

func (p *Paths) valid(s, d int) bool { return s >= 0 && d >= 0 && s < p.racks && d < p.racks }

// Next returns the next hops from rack s towards rack d, sorted by
// uplink, as Compute's Table[s][d]: nil if d is unreachable or s == d.
func (p *Paths) Next(s, d int) []Hop {
	if s == d || !p.valid(s, d) {
		return nil
	}
	k := [2]int{s, d}
	if h, ok := p.next[k]; ok {
		return h
	}
	var h []Hop
	if dist := p.distTo(s, d); dist[s] > 0 {
		h = p.hops(s, dist)
	}
	p.next[k] = h
	return h
}

// Hops returns the number of circuit hops of the path from s to d, or -1.
func (p *Paths) Hops(s, d int) int {
	if s == d {
		return 0
	}
	if !p.valid(s, d) {
		return -1
	}
	return int(p.distTo(s, d)[s])
}

// Hops returns the number of circuit hops of the path from s to d, or -1.
func (t Table) Hops(s, d int) int {
	n := 0
	for cur := s; cur != d; n++ {
		hs := t[cur][d]
		if len(hs) == 0 || n > len(t)+1 {
			return -1
		}
		cur = hs[0].Via
	}
	return n
}

func (p Pair) String() string { return fmt.Sprintf("rack %d -> rack %d", p.Src, p.Dst) }
