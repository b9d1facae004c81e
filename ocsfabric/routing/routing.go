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
func Compute(racks int, cfg circuit.Config) (Table, []Pair) {
	g := cfg.RackGraph() // g[a][b] = a's uplinks reaching b
	// Reverse adjacency for a BFS towards each destination.
	rev := map[int][]int{}
	for a, m := range g {
		for b := range m {
			rev[b] = append(rev[b], a)
		}
	}
	t := Table{}
	var unreachable []Pair
	dist := make([]int, racks)
	for d := 0; d < racks; d++ {
		for i := range dist {
			dist[i] = -1
		}
		dist[d] = 0
		queue := []int{d}
		for len(queue) > 0 {
			x := queue[0]
			queue = queue[1:]
			for _, p := range rev[x] {
				if p < racks && dist[p] < 0 {
					dist[p] = dist[x] + 1
					queue = append(queue, p)
				}
			}
		}
		for s := 0; s < racks; s++ {
			if s == d {
				continue
			}
			if dist[s] < 0 {
				unreachable = append(unreachable, Pair{s, d})
				continue
			}
			var hops []Hop
			for n, ups := range g[s] {
				if n < racks && dist[n] == dist[s]-1 {
					for _, u := range ups {
						hops = append(hops, Hop{Uplink: u.Port, Via: n})
					}
				}
			}
			sort.Slice(hops, func(i, j int) bool { return hops[i].Uplink < hops[j].Uplink })
			if t[s] == nil {
				t[s] = map[int][]Hop{}
			}
			t[s][d] = hops
		}
	}
	return t, unreachable
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
