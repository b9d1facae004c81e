package scheduler

import (
	"fmt"
	"math"
	"sort"
)

// This file holds papers 001/002's Algorithms 2 and 3 as pure functions
// over pods (racks); tdm.go builds plans with them and Algorithm 1.

// podDemand is one stage's traffic, dense: bytes per directed pod pair
// over the OXC layer (oxc[a*pods+b]), and bytes per server link direction
// inside the pods (the intra-pod plane; nic is indexed by the planner).
type podDemand struct {
	pods int
	oxc  []float64
	nic  []float64
}

func newPodDemand(pods, nics int) podDemand {
	return podDemand{pods: pods, oxc: make([]float64, pods*pods), nic: make([]float64, nics)}
}

func (d podDemand) reset() {
	clear(d.oxc)
	clear(d.nic)
}

// sparseDemand is one job phase's traffic, as the entries it adds.
type sparseDemand struct {
	oxc, nic []idxBytes
}

type idxBytes struct {
	i int
	b float64
}

func (d podDemand) add(o sparseDemand) {
	for _, e := range o.oxc {
		d.oxc[e.i] += e.b
	}
	for _, e := range o.nic {
		d.nic[e.i] += e.b
	}
}

// oxcParams are the fabric figures Algorithm 2 needs.
type oxcParams struct {
	Pods, Ports int     // pods and OXC ports per pod (N_link)
	LinkBps     float64 // bytes/s of one OXC link (B), one direction
	ServerBps   float64 // bytes/s of one server link direction
	HalfDuplex  bool    // paper 002: a link carries one direction
}

// oxcTopology is Algorithm 2: one link for every demanded pod pair, then
// one more link at the bottleneck pair at a time, until the pod side (the
// busiest server link, T_tor) takes at least as long as the OXC side or
// the bottleneck pair has no free port. Links are keyed by directed pair
// in half duplex and by (low, high) pair in full duplex. It returns the
// links and the predicted communication time max(T_tor, T_OXC) in ns.
//
// Where the paper is silent: T_tor is per server link (bytes through the
// busiest server link over its rate), which equals D_i/B_tor when traffic
// spreads evenly over a pod's servers and is what the flow model bounds.
func oxcTopology(d podDemand, p oxcParams) (map[[2]int]int, float64, error) {
	links := map[[2]int]int{}
	used := make([]int, p.Pods)
	key := func(pr [2]int) [2]int {
		if p.HalfDuplex {
			return pr
		}
		return pair(pr[0], pr[1])
	}
	// Demand per link key: the larger direction in full duplex.
	dem := map[[2]int]float64{}
	for i, b := range d.oxc {
		if a, c := i/d.pods, i%d.pods; b > 0 && a != c {
			k := key([2]int{a, c})
			dem[k] = max(dem[k], b)
		}
	}
	keys := make([][2]int, 0, len(dem))
	for k := range dem {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		return keys[i][0] < keys[j][0] || keys[i][0] == keys[j][0] && keys[i][1] < keys[j][1]
	})
	for _, k := range keys {
		links[k] = 1
		used[k[0]]++
		used[k[1]]++
	}
	for r, u := range used {
		if u > p.Ports {
			return nil, 0, fmt.Errorf("pod %d needs %d OXC links, one per pod it exchanges data with, but has %d ports", r, u, p.Ports)
		}
	}
	var tTor float64
	for _, b := range d.nic {
		tTor = max(tTor, b/p.ServerBps)
	}
	tOXC := func() (float64, [2]int) {
		var t float64
		var at [2]int
		for _, k := range keys {
			if x := dem[k] / (p.LinkBps * float64(links[k])); x > t {
				t, at = x, k
			}
		}
		return t, at
	}
	for {
		t, at := tOXC()
		if tTor >= t || used[at[0]] >= p.Ports || used[at[1]] >= p.Ports {
			return links, math.Ceil(max(tTor, t) * 1e9), nil
		}
		links[at]++
		used[at[0]]++
		used[at[1]]++
	}
}

// ringOrder is Algorithm 3: a ring over a job's pods (its master nodes)
// that reuses the links the stage already has (existing: undirected pod
// pairs with a link). Nodes of degree above 2 drop the edge to their
// highest-degree neighbour until every degree is at most 2; cycles that
// do not span all pods are cut; the remaining paths are joined in order.
// The result starts at the lowest pod; ties go to lower pod numbers, so
// the order is deterministic.
func ringOrder(pods []int, existing map[[2]int]bool) []int {
	ps := append([]int(nil), pods...)
	sort.Ints(ps)
	if len(ps) <= 2 {
		return ps
	}
	in := map[int]bool{}
	for _, p := range ps {
		in[p] = true
	}
	adj := map[int]map[int]bool{}
	for _, p := range ps {
		adj[p] = map[int]bool{}
	}
	for pr := range existing {
		a, b := pr[0], pr[1]
		if a != b && in[a] && in[b] {
			adj[a][b], adj[b][a] = true, true
		}
	}
	sortedNb := func(n int) []int {
		var out []int
		for m := range adj[n] {
			out = append(out, m)
		}
		sort.Ints(out)
		return out
	}
	for _, n := range ps {
		for len(adj[n]) > 2 {
			best, bestDeg := -1, -1
			for _, m := range sortedNb(n) {
				if len(adj[m]) > bestDeg {
					best, bestDeg = m, len(adj[m])
				}
			}
			delete(adj[n], best)
			delete(adj[best], n)
		}
	}
	// Components; a cycle is cut at its lowest node's higher neighbour,
	// unless it already spans every pod.
	seen := map[int]bool{}
	var paths [][]int
	for _, start := range ps {
		if seen[start] {
			continue
		}
		var comp []int
		stack := []int{start}
		seen[start] = true
		for len(stack) > 0 {
			n := stack[len(stack)-1]
			stack = stack[:len(stack)-1]
			comp = append(comp, n)
			for _, m := range sortedNb(n) {
				if !seen[m] {
					seen[m] = true
					stack = append(stack, m)
				}
			}
		}
		edges := 0
		for _, n := range comp {
			edges += len(adj[n])
		}
		if edges/2 == len(comp) && len(comp) > 2 { // a cycle
			if len(comp) == len(ps) {
				return walk(start, adj)
			}
			nb := sortedNb(start)
			cut := nb[len(nb)-1]
			delete(adj[start], cut)
			delete(adj[cut], start)
		}
		// Walk the path from an end (degree <= 1, lowest first).
		end := -1
		sort.Ints(comp)
		for _, n := range comp {
			if len(adj[n]) <= 1 {
				end = n
				break
			}
		}
		paths = append(paths, walk(end, adj))
	}
	var ring []int
	for _, p := range paths {
		ring = append(ring, p...)
	}
	return ring
}

// walk follows a path or cycle from start, lower neighbours first.
func walk(start int, adj map[int]map[int]bool) []int {
	out := []int{start}
	prev, cur := -1, start
	for {
		next := -1
		var nbs []int
		for m := range adj[cur] {
			nbs = append(nbs, m)
		}
		sort.Ints(nbs)
		for _, m := range nbs {
			if m != prev && m != start {
				next = m
				break
			}
		}
		if next < 0 {
			return out
		}
		out = append(out, next)
		prev, cur = cur, next
	}
}
