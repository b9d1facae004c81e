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
	"sort"

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
// Not safe for concurrent use.
type Paths struct {
	racks int
	g     map[int]map[int][]circuit.Uplink // g[a][b] = a's uplinks reaching b
	rev   map[int][]int                    // rev[b] = racks with a circuit to b
	dist  map[int][]int32                  // destination -> hops from every rack, -1: none
	next  map[[2]int][]Hop                 // (src, dst) -> next hops
}

// NewPaths prepares next-hop answers for a configuration over racks racks.
func NewPaths(racks int, cfg circuit.Config) *Paths {
	p := &Paths{racks: racks, g: cfg.RackGraph(), rev: map[int][]int{}, dist: map[int][]int32{}, next: map[[2]int][]Hop{}}
	for a, m := range p.g {
		for b := range m {
			p.rev[b] = append(p.rev[b], a)
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
	queue := []int{d}
	for len(queue) > 0 {
		x := queue[0]
		queue = queue[1:]
		for _, q := range p.rev[x] {
			if q < p.racks && dist[q] < 0 {
				dist[q] = dist[x] + 1
				queue = append(queue, q)
			}
		}
	}
}

// hops lists s's ways out onto a shortest path, given the distances to
// the destination, sorted by uplink.
func (p *Paths) hops(s int, dist []int32) []Hop {
	var hops []Hop
	for n, ups := range p.g[s] {
		if n < p.racks && dist[n] == dist[s]-1 {
			for _, u := range ups {
				hops = append(hops, Hop{Uplink: u.Port, Via: n})
			}
		}
	}
	sort.Slice(hops, func(i, j int) bool { return hops[i].Uplink < hops[j].Uplink })
	return hops
}

func (p *Paths) distTo(d int) []int32 {
	dist, ok := p.dist[d]
	if !ok {
		dist = make([]int32, p.racks)
		p.bfs(d, dist)
		p.dist[d] = dist
	}
	return dist
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
	if dist := p.distTo(d); dist[s] > 0 {
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
	return int(p.distTo(d)[s])
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
