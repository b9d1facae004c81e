package ocs

import (
	"errors"
	"fmt"
	"net"
	"slices"
	"sync"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/ocsemu/ocsemu/dataplane/fabric"
	"github.com/ocsemu/ocsemu/dataplane/names"
	"github.com/ocsemu/ocsemu/dataplane/topo"
	"github.com/ocsemu/ocsemu/ocsfabric/routing"
)

// Router installs routing tables (computed by ocsfabric/routing) into the ToR namespaces of a lab and
// remembers what it installed, so that each change touches only the
// destinations whose next hops changed.
type Router struct {
	lab       *fabric.Lab
	racks     int
	mu        sync.Mutex
	installed routing.Table
	neigh     map[[3]int]bool // (rack, uplink, via rack) permanent entries
	uplink    map[[2]int]int  // (rack, uplink) -> ifindex in the ToR namespace
}

// NewRouter prepares a router for a deployed lab.
func NewRouter(lab *fabric.Lab) (*Router, error) {
	f := lab.Topo.Spec
	r := &Router{lab: lab, racks: f.Racks, installed: routing.Table{}, neigh: map[[3]int]bool{}, uplink: map[[2]int]int{}}
	for rack := 0; rack < f.Racks; rack++ {
		for u := 0; u < f.UplinksPerToR; u++ {
			i, err := lab.Ifindex(names.ToRName(rack), names.UplinkIface(u))
			if err != nil {
				return nil, fmt.Errorf("tor%d uplink %d: %w", rack, u, err)
			}
			r.uplink[[2]int{rack, u}] = i
		}
	}
	return r, nil
}

// Apply makes the ToRs' routes equal to t and returns how many routes it
// changed. ToRs are updated in parallel.
func (r *Router) Apply(t routing.Table) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	var wg sync.WaitGroup
	var mu sync.Mutex
	var errs []error
	changed := 0
	for src := 0; src < r.racks; src++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			n, err := r.applyToR(src, t[src])
			mu.Lock()
			changed += n
			if err != nil {
				errs = append(errs, err)
			}
			mu.Unlock()
		}()
	}
	wg.Wait()
	return changed, errors.Join(errs...)
}

func (r *Router) applyToR(src int, want map[int][]routing.Hop) (int, error) {
	h, err := r.lab.Handle(names.ToRName(src))
	if err != nil {
		return 0, err
	}
	have := r.installedFor(src)
	changed := 0
	for dst := 0; dst < r.racks; dst++ {
		if dst == src {
			continue
		}
		hops := want[dst]
		if slices.Equal(hops, have[dst]) {
			continue
		}
		dstNet := ipnet(topo.RackPrefix(dst).Addr().AsSlice(), 24)
		if len(hops) == 0 {
			err := h.RouteDel(&netlink.Route{Dst: dstNet})
			if err != nil && !errors.Is(err, unix.ESRCH) {
				return changed, fmt.Errorf("tor%d: remove route to rack %d: %w", src, dst, err)
			}
		} else {
			rt := &netlink.Route{Dst: dstNet}
			for _, hop := range hops {
				idx := r.uplink[[2]int{src, hop.Uplink}]
				if err := r.ensureNeigh(h, src, hop, idx); err != nil {
					return changed, err
				}
				gw := topo.ToRAddr(hop.Via).AsSlice()
				if len(hops) == 1 {
					rt.LinkIndex, rt.Gw, rt.Flags = idx, gw, int(netlink.FLAG_ONLINK)
				} else {
					rt.MultiPath = append(rt.MultiPath, &netlink.NexthopInfo{LinkIndex: idx, Gw: gw, Flags: int(netlink.FLAG_ONLINK)})
				}
			}
			if err := h.RouteReplace(rt); err != nil {
				return changed, fmt.Errorf("tor%d: route to rack %d over %v: %w", src, dst, hops, err)
			}
		}
		r.setInstalled(src, dst, hops)
		changed++
	}
	return changed, nil
}

// tableMu guards installed and neigh across the per-ToR goroutines of Apply.
var tableMu sync.Mutex

func (r *Router) installedFor(src int) map[int][]routing.Hop {
	tableMu.Lock()
	defer tableMu.Unlock()
	m := r.installed[src]
	cp := make(map[int][]routing.Hop, len(m))
	for k, v := range m {
		cp[k] = v
	}
	return cp
}

func (r *Router) setInstalled(src, dst int, hops []routing.Hop) {
	tableMu.Lock()
	defer tableMu.Unlock()
	if r.installed[src] == nil {
		r.installed[src] = map[int][]routing.Hop{}
	}
	if len(hops) == 0 {
		delete(r.installed[src], dst)
		return
	}
	r.installed[src][dst] = hops
}

// ensureNeigh installs the permanent neighbour entry for the far ToR on
// an uplink: its router address maps to its MAC, which every uplink of
// that ToR shares, so no ARP runs when a circuit moves.
func (r *Router) ensureNeigh(h *netlink.Handle, src int, hop routing.Hop, idx int) error {
	key := [3]int{src, hop.Uplink, hop.Via}
	tableMu.Lock()
	done := r.neigh[key]
	tableMu.Unlock()
	if done {
		return nil
	}
	if err := h.NeighSet(&netlink.Neigh{LinkIndex: idx, Family: unix.AF_INET, State: netlink.NUD_PERMANENT,
		IP: topo.ToRAddr(hop.Via).AsSlice(), HardwareAddr: topo.ToRMAC(hop.Via)}); err != nil {
		return fmt.Errorf("tor%d: neighbour tor%d on up%d: %w", src, hop.Via, hop.Uplink, err)
	}
	tableMu.Lock()
	r.neigh[key] = true
	tableMu.Unlock()
	return nil
}

func ipnet(ip net.IP, bits int) *net.IPNet {
	return &net.IPNet{IP: ip, Mask: net.CIDRMask(bits, 32)}
}
