package ocs

import (
	"fmt"

	"github.com/vishvananda/netlink"
	"golang.org/x/sync/errgroup"

	"github.com/ocsemu/ocsemu/dataplane/names"
	"github.com/ocsemu/ocsemu/dataplane/topo"
	"github.com/ocsemu/ocsemu/ocsfabric/circuit"
	"github.com/ocsemu/ocsemu/ocsfabric/fastpath"
	"github.com/ocsemu/ocsemu/ocsfabric/routing"
	"github.com/ocsemu/ocsemu/ocsfabric/torpath"
)

// torPaths holds the kernel path program of every ToR of a lab: the
// uplink choice per destination rack, staged with the circuits for the
// same kernel-timed instant (ocsfabric/torpath).
type torPaths struct {
	racks   int
	tors    []*torpath.ToR
	uplinks [][]uint32     // [rack][uplink] ifindex in the ToR's namespace
	core    []*torpath.Hop // [rack] the packet core, on hybrid fabrics
}

// newTorPaths loads a program per ToR, writes the routes of table t into
// its generation in use, and attaches it to the ingress of every server
// port and uplink, replacing an earlier OCS process's.
func newTorPaths(c *Controller, table routing.Table) (*torPaths, error) {
	t := c.lab.Topo
	f := t.Spec
	p := &torPaths{racks: f.Racks, uplinks: make([][]uint32, f.Racks), core: make([]*torpath.Hop, f.Racks)}
	maxHops := f.UplinksPerToR
	if f.HasEPS() {
		maxHops++
	}
	p.tors = make([]*torpath.ToR, f.Racks)
	// ToRs are independent: loading their programs (the verifier) on one
	// core overlaps with attaching another's (netlink) on the other.
	g := new(errgroup.Group)
	g.SetLimit(4)
	for rack := 0; rack < f.Racks; rack++ {
		g.Go(func() error { return p.setupToR(c, table, rack, maxHops) })
	}
	if err := g.Wait(); err != nil {
		p.close()
		return nil, err
	}
	return p, nil
}

// setupToR loads rack's program, writes its routes and attaches it.
func (p *torPaths) setupToR(c *Controller, table routing.Table, rack, maxHops int) error {
	t := c.lab.Topo
	f := t.Spec
	tor, err := torpath.New(torpath.Config{Rack: rack, Racks: f.Racks, MaxHops: maxHops}, c.gen)
	if err != nil {
		return err
	}
	p.tors[rack] = tor
	node := names.ToRName(rack)
	h, err := c.lab.Handle(node)
	if err != nil {
		return err
	}
	var attach, egress []netlink.Link
	servers := map[byte]torpath.Hop{}
	for _, l := range t.Links {
		if l.B.Node != node && l.A.Node != node {
			continue
		}
		e := l.A
		if l.B.Node == node {
			e = l.B
		}
		link, err := c.lab.Port(node, e.Iface)
		if err != nil {
			return fmt.Errorf("%s:%s: %w", node, e.Iface, err)
		}
		switch l.Kind {
		case topo.LinkServer:
			attach = append(attach, link)
			a := l.A.Addr.As4()
			servers[a[3]] = torpath.Hop{Dst: l.A.MAC, Src: l.B.MAC, Ifindex: uint32(link.Attrs().Index)}
		case topo.LinkUplink:
			attach = append(attach, link)
			egress = append(egress, link)
		case topo.LinkCore:
			egress = append(egress, link)
			p.core[rack] = &torpath.Hop{Dst: l.B.MAC, Src: topo.ToRMAC(rack), Ifindex: uint32(link.Attrs().Index)}
		}
	}
	p.uplinks[rack] = make([]uint32, f.UplinksPerToR)
	for u := range p.uplinks[rack] {
		idx, ok := c.router.uplink[[2]int{rack, u}]
		if !ok {
			return fmt.Errorf("tor%d: no uplink %d", rack, u)
		}
		p.uplinks[rack][u] = uint32(idx)
	}
	// Routes first, into the generation in use, then the program on
	// the ports: it forwards correctly from its first frame.
	rs, err := p.routesFor(rack, table[rack], fastpath.Monotonic(), c.dark)
	if err != nil {
		return err
	}
	if err := tor.WriteCurrent(rs); err != nil {
		return err
	}
	if err := tor.WriteLocal(servers); err != nil {
		return err
	}
	for _, l := range attach {
		if err := tor.Attach(h, l); err != nil {
			return err
		}
	}
	// Server ports and uplinks without shaper, loss rule or capture take
	// frames straight into their peers (dataplane/fastport). Only once
	// the program is on the ports, whose fresh flag map says slow:
	// fastport.Off finds the flags through the attached program.
	n, _ := t.Node(node)
	why, err := tor.SyncFast(h, n.NS, attach)
	if err != nil {
		return err
	}
	c.countFast(node, attach, why)
	for _, l := range egress {
		if err := tor.AttachEgress(h, l); err != nil {
			return err
		}
	}
	return nil
}

// write puts every ToR's routes of table t into generation gen, for a
// switch at monotonic instant at; the lab's Gen arms it.
func (p *torPaths) write(gen uint32, t routing.Table, at uint64, dark map[circuit.Uplink]uint64) error {
	for rack, tor := range p.tors {
		rs, err := p.routesFor(rack, t[rack], at, dark)
		if err != nil {
			return err
		}
		if err := tor.Write(gen, rs); err != nil {
			return err
		}
	}
	return nil
}

// routesFor turns one ToR's next hops into its kernel routes for a switch
// at instant at. dark tells until when each uplink is dark from then on:
// flows avoid dark hops while a lit one leads to the same place
// (routing.Choose, make-before-break).
func (p *torPaths) routesFor(rack int, next map[int][]routing.Hop, at uint64, dark map[circuit.Uplink]uint64) (map[int]torpath.Route, error) {
	ch := make(map[int]routing.Choice, len(next))
	for d, hops := range next {
		ch[d] = routing.Choose(hops, int64(at), func(u int) int64 { return int64(dark[circuit.Uplink{Rack: rack, Port: u}]) })
	}
	return torpath.Routes(p.racks, ch, p.uplinks[rack], topo.ToRMAC, rack, p.core[rack])
}

// counters sums the ToRs' path counters.
func (p *torPaths) counters() ([]torpath.Counters, error) {
	out := make([]torpath.Counters, len(p.tors))
	for i, tor := range p.tors {
		c, err := tor.Counters()
		if err != nil {
			return nil, err
		}
		out[i] = c
	}
	return out, nil
}

func (p *torPaths) close() {
	for _, tor := range p.tors {
		if tor != nil {
			tor.Close()
		}
	}
}

// PathCounters are one ToR's kernel path counters (ocsfabric/torpath):
// frames redirected onto an uplink (or the packet core), and frames
// dropped because their rack had no path. A GSO super-packet counts once.
type PathCounters struct {
	ToR                string `json:"tor"`
	RedirectedPackets  uint64 `json:"redirected_packets"`
	RedirectedBytes    uint64 `json:"redirected_bytes"`
	UnreachablePackets uint64 `json:"unreachable_packets"`
	UnreachableBytes   uint64 `json:"unreachable_bytes"`
}

// PathCounters reads every ToR's kernel path counters, by rack.
func (c *Controller) PathCounters() ([]PathCounters, error) {
	cs, err := c.paths.counters()
	if err != nil {
		return nil, err
	}
	out := make([]PathCounters, len(cs))
	for r, x := range cs {
		out[r] = PathCounters{ToR: names.ToRName(r), RedirectedPackets: x.RedirectedPackets, RedirectedBytes: x.RedirectedBytes,
			UnreachablePackets: x.UnreachablePackets, UnreachableBytes: x.UnreachableBytes}
	}
	return out, nil
}
