// Package routing makes ToR routes follow the circuit map. Every
// destination rack gets a route over all the direct circuits to it
// (multipath); a rack without a direct circuit is reached over the
// shortest multi-hop path through other ToRs (again over every uplink
// that starts a shortest path); a rack with no path at all is reported
// unreachable. The computation is pure and table-tested; the OCS process
// (ocsfabric/ocs, router_linux.go) installs it with netlink.
package routing

import (
	"cmp"
	"fmt"
	"math"
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
type Pair struct {
	Src int `json:"src"`
	Dst int `json:"dst"`
}

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
// The graph is kept as flat per-rack lists, and Switch carries the
// searches a reconfiguration leaves as they are over to the next
// configuration (the flow model switches once per slot). Not safe for
// concurrent use.
type Paths struct {
	racks int
	// out[outAt[r]:outAt[r+1]] are rack r's ways out, sorted by uplink;
	// in[inAt[r]:inAt[r+1]] the racks with a circuit to r.
	outAt, inAt []int32
	out         []Hop
	in          []int32
	dests       []*dest // per destination rack; nil: not asked for
	spare       []*dest // dropped ones, for reuse
	queue       []int32
	// moved says which racks' ways out differ from the Paths this one
	// was switched from; kept which destinations' searches carried over.
	// Both nil: nothing carried over (every rack counts as moved).
	moved, kept []bool
	// Storage: the scratch that builds the graph, room for moved and
	// kept, and the Paths before the one this was switched from, whose
	// storage the next Switch reuses.
	at, fill          []int32
	es                []portTo
	movedBuf, keptBuf []bool
	retired           *Paths
}

// dest is what a Paths knows towards one destination: the search, and
// the next hops asked for, per source rack.
type dest struct {
	sr    Search
	next  [][]Hop
	known []bool
}

// NewPaths prepares next-hop answers for a configuration over racks racks.
func NewPaths(racks int, cfg circuit.Config) *Paths { return newPaths(racks, cfg, nil) }

// portTo is a way out while the graph is built: uplink port to rack to.
type portTo struct{ port, to int }

// newPaths is NewPaths on the storage of a Paths no longer used (old,
// nil: none).
func newPaths(racks int, cfg circuit.Config, old *Paths) *Paths {
	p := old
	if p == nil {
		p = &Paths{}
	}
	*p = Paths{racks: racks, dests: zeroed(p.dests, racks), spare: p.spare[:0],
		outAt: zeroed(p.outAt, racks+1), inAt: zeroed(p.inAt, racks+1),
		at: zeroed(p.at, racks+1), es: p.es[:0], fill: p.fill[:0], out: p.out[:0], in: p.in[:0],
		movedBuf: p.movedBuf, keptBuf: p.keptBuf}
	// The directed edges, one per sending uplink (the last circuit on
	// it wins, as in circuit.Config.Edges), within the fabric's racks,
	// bucketed by sending rack in cfg's order, then sorted by uplink.
	at := p.at
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
	es := zeroed(p.es, int(at[racks]))
	fill := append(p.fill, at[:racks]...)
	each(func(from circuit.Uplink, to int) {
		es[fill[from.Rack]] = portTo{from.Port, to}
		fill[from.Rack]++
	})
	p.out = slices.Grow(p.out, len(es))
	for r := 0; r < racks; r++ {
		b := es[at[r]:at[r+1]]
		slices.SortStableFunc(b, func(x, y portTo) int { return x.port - y.port })
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
	p.in = zeroed(p.in, len(p.out))
	fill = append(fill[:0], p.inAt[:racks]...)
	for r := 0; r < racks; r++ {
		for _, h := range p.out[p.outAt[r]:p.outAt[r+1]] {
			p.in[fill[h.Via]] = int32(r)
			fill[h.Via]++
		}
	}
	p.at, p.es, p.fill = at, es, fill
	return p
}

// zeroed returns n zero values, in s's storage if it has room.
func zeroed[T any](s []T, n int) []T {
	if cap(s) < n {
		return make([]T, n)
	}
	s = s[:n]
	clear(s)
	return s
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

// dest returns what p knows towards d, starting a search if none is.
func (p *Paths) dest(d int) *dest {
	if dd := p.dests[d]; dd != nil {
		return dd
	}
	var dd *dest
	if n := len(p.spare); n > 0 {
		dd, p.spare = p.spare[n-1], p.spare[:n-1]
		clear(dd.next)
		clear(dd.known)
	} else {
		dd = &dest{next: make([][]Hop, p.racks), known: make([]bool, p.racks)}
		dd.sr.Dist = make([]int32, p.racks)
	}
	dd.sr.Reset(dd.sr.Dist, d)
	p.dests[d] = dd
	return dd
}

// distTo returns the hops to d, known at least for s (and for every rack
// nearer d than s); -1 for s means no path.
func (p *Paths) distTo(s, d int) []int32 {
	return p.dest(d).sr.Reach(s, p.in, p.inAt)
}

func (p *Paths) valid(s, d int) bool { return s >= 0 && d >= 0 && s < p.racks && d < p.racks }

// Next returns the next hops from rack s towards rack d, sorted by
// uplink, as Compute's Table[s][d]: nil if d is unreachable or s == d.
func (p *Paths) Next(s, d int) []Hop {
	if s == d || !p.valid(s, d) {
		return nil
	}
	dd := p.dest(d)
	if dd.known[s] {
		return dd.next[s]
	}
	var h []Hop
	if dist := dd.sr.Reach(s, p.in, p.inAt); dist[s] > 0 {
		h = p.hops(s, dist)
	}
	dd.next[s], dd.known[s] = h, true
	return h
}

// Switch returns the Paths of cfg, answering as NewPaths(racks, cfg)
// does, and gives p's searches away (p must not be used afterwards). A
// reconfiguration that changes a few circuits leaves most searches as
// they are: such a destination keeps its search, as far as it has run,
// and its next hops from every rack whose ways out did not change, so
// routing after a switch costs what the switch changed, not a new search
// per destination. Moved and Kept tell which racks and destinations
// changed.
func (p *Paths) Switch(cfg circuit.Config) *Paths {
	q := newPaths(p.racks, cfg, p.retired)
	q.spare = append(q.spare, p.spare...)
	defer func() {
		for d, dd := range p.dests {
			if dd != nil && (q.kept == nil || !q.kept[d]) {
				q.spare = append(q.spare, dd)
			}
		}
		clear(p.dests)
		p.spare, p.retired, q.retired = p.spare[:0], nil, p
	}()
	var added, removed []Edge
	moved := zeroed(q.movedBuf, p.racks)
	q.movedBuf = moved
	for r := 0; r < p.racks; r++ {
		a, b := p.out[p.outAt[r]:p.outAt[r+1]], q.out[q.outAt[r]:q.outAt[r+1]]
		if slices.Equal(a, b) {
			continue
		}
		moved[r] = true
		// Both sorted by uplink, one hop per uplink.
		i, j := 0, 0
		for i < len(a) || j < len(b) {
			switch {
			case j == len(b) || i < len(a) && a[i].Uplink < b[j].Uplink:
				removed = append(removed, Edge{int32(r), int32(a[i].Via)})
				i++
			case i == len(a) || b[j].Uplink < a[i].Uplink:
				added = append(added, Edge{int32(r), int32(b[j].Via)})
				j++
			default:
				if a[i].Via != b[j].Via {
					removed = append(removed, Edge{int32(r), int32(a[i].Via)})
					added = append(added, Edge{int32(r), int32(b[j].Via)})
				}
				i++
				j++
			}
		}
	}
	// Checking a destination costs the changed ways out, a new search
	// the fabric's: past racks changes, start afresh.
	if len(added)+len(removed) > p.racks {
		return q
	}
	q.keptBuf = zeroed(q.keptBuf, p.racks)
	q.moved, q.kept = moved, q.keptBuf
	for d, dd := range p.dests {
		if dd == nil {
			continue
		}
		still := func(u, h int32) bool {
			for _, x := range q.out[q.outAt[u]:q.outAt[u+1]] {
				if dd.sr.Dist[x.Via] == h {
					return true
				}
			}
			return false
		}
		if !dd.sr.Carry(added, removed, still) {
			continue
		}
		for r, m := range moved {
			if m {
				dd.next[r], dd.known[r] = nil, false
			}
		}
		q.dests[d], q.kept[d] = dd, true
	}
	return q
}

// Carry reports whether a search, as far as it has run, is one over a
// new graph too, which differs from the searched one by the ways out
// added and removed (still reports whether rack u has a way out onto a
// rack h hops from the destination in the new graph): then it goes on
// over the new graph (Reach with its in-lists). Its hop counts are exact
// for the racks it has reached; every rack nearer than level (the hop
// count of the next rack to expand; every rack reached, for a finished
// search) has been expanded, and only expanded racks' in-lists read. So
// it holds over the new graph if every way out u -> v added into a rack
// that may have been expanded (d(v) <= level) leaves a rack u reached
// with d(u) <= d(v)+1, and every reached rack u that lost a way out onto
// a rack one hop nearer still has one (hop counts up to level are all
// known). One exception: an added way out of a rack u not reached yet (a
// new circuit into the destination, for a search that has expanded only
// it) is what expanding v over the new graph would have found, and u
// joins the search at d(v)+1 if that is not nearer than level, nor than
// the racks waiting to be expanded.
func (sr *Search) Carry(added, removed []Edge, still func(u, h int32) bool) bool {
	dist := sr.Dist
	level := int32(math.MaxInt32)
	if sr.head < len(sr.queue) {
		level = dist[sr.queue[sr.head]]
	}
	var join []Edge // rack From joins at hop count To
	for _, e := range added {
		dv := dist[e.To]
		if dv < 0 || dv > level {
			continue
		}
		switch du := dist[e.From]; {
		case du < 0:
			join = append(join, Edge{e.From, dv + 1})
		case du > dv+1:
			return false
		}
	}
	for _, e := range removed {
		du, dv := dist[e.From], dist[e.To]
		if du > 0 && dv == du-1 && dv <= level && !still(e.From, du-1) {
			return false
		}
	}
	if len(join) == 0 {
		return true
	}
	// Nearest first, each rack once, at its nearest.
	slices.SortFunc(join, func(a, b Edge) int { return cmp.Or(cmp.Compare(a.To, b.To), cmp.Compare(a.From, b.From)) })
	last := dist[sr.queue[len(sr.queue)-1]]
	for _, j := range join {
		if j.To < level || j.To < last {
			return false
		}
	}
	for _, j := range join {
		if dist[j.From] < 0 {
			dist[j.From] = j.To
			sr.queue = append(sr.queue, j.From)
		}
	}
	return true
}

// Edge is a way out of rack From to rack To.
type Edge struct{ From, To int32 }

// Moved reports whether rack r's ways out differ from those of the Paths
// this one was switched from (true for every rack unless Switch carried
// searches over).
func (p *Paths) Moved(r int) bool { return p.moved == nil || p.moved[r] }

// Kept reports whether Switch carried the search towards d over: the hop
// count to d of every rack the search had reached (every rack a path
// towards d was asked from) is the previous configuration's, and so are
// the next hops towards d from every such rack that has not Moved.
func (p *Paths) Kept(d int) bool { return p.kept != nil && p.kept[d] }

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
