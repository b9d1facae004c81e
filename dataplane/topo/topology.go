// Package topo computes the blueprint of a lab from its fabric Spec: nodes,
// veth links, interface names, MACs, addresses, routes, neighbours and
// shaping rates. It is pure Go and deterministic; dataplane/fabric
// deploys the blueprint in the kernel.
//
// Addressing. Rack r owns 10.(r>>8).(r&255).0/24; server s of the rack is
// host s+1 and its ToR answers as .254 on every server port. ToRs carry a
// router address 10.255.(r>>8).(r&255) on their uplinks and core port; the
// packet core answers as 10.255.255.254. Every neighbour entry is permanent,
// so no ARP ever races a rewiring, and every uplink of a ToR has the ToR's
// own MAC (see DESIGN.md, "Routing on a fabric that rewires itself").
package topo

import (
	"net"
	"net/netip"
	"sort"

	"github.com/ocsemu/ocsemu/dataplane/names"
	"github.com/ocsemu/ocsemu/dataplane/units"
)

// Node kinds.
const (
	KindServer = "server"
	KindToR    = "tor"
	KindOCS    = "ocs"
	KindEPS    = "eps"
)

// Link kinds.
const (
	LinkServer = "server" // server <-> ToR
	LinkUplink = "uplink" // ToR <-> OCS port
	LinkCore   = "core"   // ToR <-> EPS core
)

// Node is one namespace of the fabric.
type Node struct {
	Name  string `json:"name"` // short name: r0s1, tor0, ocs0, eps
	Kind  string `json:"kind"`
	Rack  int    `json:"rack"`  // -1 for OCS and EPS
	Index int    `json:"index"` // server index in rack, OCS number; 0 otherwise
	NS    string `json:"netns"` // namespace name under /run/netns
	// Addr is the node's main address: the server's address, or the ToR's
	// router address. Invalid for OCS.
	Addr netip.Addr `json:"addr,omitzero"`
}

// Endpoint is one end of a veth link.
type Endpoint struct {
	Node  string           `json:"node"`
	Iface string           `json:"iface"`
	MAC   net.HardwareAddr `json:"-"`
	Addr  netip.Addr       `json:"addr,omitzero"` // /32 on the interface; invalid for none
}

// Link is a veth pair, shaped at Rate (both directions) unless unlimited.
type Link struct {
	Kind string     `json:"kind"`
	A    Endpoint   `json:"a"`
	B    Endpoint   `json:"b"`
	Rate units.Rate `json:"rate"`
	// OCS and Port locate the OCS end of an uplink; -1 otherwise.
	OCS  int `json:"ocs"`
	Port int `json:"port"`
}

// Route is one route in a node. Via unset means an on-link /32 route to Dst.
type Route struct {
	Dst   netip.Prefix
	Via   netip.Addr
	Iface string
}

// Neighbor is a permanent neighbour entry.
type Neighbor struct {
	Iface string
	IP    netip.Addr
	MAC   net.HardwareAddr
}

// Topology is the full blueprint of a lab.
type Topology struct {
	Lab       string
	Spec      Spec
	Nodes     []Node
	Links     []Link
	Routes    map[string][]Route    // by node name
	Neighbors map[string][]Neighbor // by node name
	byName    map[string]int
}

// RackPrefix is the /24 of rack r.
func RackPrefix(r int) netip.Prefix {
	return netip.PrefixFrom(netip.AddrFrom4([4]byte{10, byte(r >> 8), byte(r), 0}), 24)
}

// ServerAddr is the address of server s in rack r.
func ServerAddr(r, s int) netip.Addr {
	return netip.AddrFrom4([4]byte{10, byte(r >> 8), byte(r), byte(s + 1)})
}

// GatewayAddr is the ToR's address on its server ports.
func GatewayAddr(r int) netip.Addr { return netip.AddrFrom4([4]byte{10, byte(r >> 8), byte(r), 254}) }

// ToRAddr is rack r's router address, used on uplinks and the core port.
func ToRAddr(r int) netip.Addr { return netip.AddrFrom4([4]byte{10, 255, byte(r >> 8), byte(r)}) }

// CoreAddr is the packet core's address on every port.
var CoreAddr = netip.AddrFrom4([4]byte{10, 255, 255, 254})

// MAC kinds, byte 1 of a locally administered address.
const (
	macServer   = 1
	macToRDown  = 2
	macToR      = 3 // every uplink and the core port of a ToR
	macOCSPort  = 4
	macCorePort = 5
)

func mac(kind byte, rack, idx, port int) net.HardwareAddr {
	return net.HardwareAddr{0x02, kind, byte(rack >> 8), byte(rack), byte(idx), byte(port)}
}

// ToRMAC is the MAC shared by all uplinks of rack r's ToR.
func ToRMAC(r int) net.HardwareAddr { return mac(macToR, r, 0, 0) }

// Build computes the blueprint of a validated fabric.
func Build(f Spec) *Topology {
	t := &Topology{
		Lab:       f.Lab,
		Spec:      f,
		Routes:    map[string][]Route{},
		Neighbors: map[string][]Neighbor{},
		byName:    map[string]int{},
	}
	add := func(n Node) {
		n.NS = names.NSName(f.Lab, n.Name)
		t.byName[n.Name] = len(t.Nodes)
		t.Nodes = append(t.Nodes, n)
	}
	host32 := func(a netip.Addr) netip.Prefix { return netip.PrefixFrom(a, 32) }

	for r := 0; r < f.Racks; r++ {
		tor := names.ToRName(r)
		add(Node{Name: tor, Kind: KindToR, Rack: r, Addr: ToRAddr(r)})
		for i := 0; i < f.ServersPerRack; i++ {
			srv := names.ServerName(r, i)
			add(Node{Name: srv, Kind: KindServer, Rack: r, Index: i, Addr: ServerAddr(r, i)})
			down := names.ToRServerIface(i)
			l := Link{Kind: LinkServer, Rate: f.ServerRate, OCS: -1, Port: -1,
				A: Endpoint{Node: srv, Iface: names.ServerIface, MAC: mac(macServer, r, i, 0), Addr: ServerAddr(r, i)},
				B: Endpoint{Node: tor, Iface: down, MAC: mac(macToRDown, r, i, 0), Addr: GatewayAddr(r)},
			}
			t.Links = append(t.Links, l)
			gw := GatewayAddr(r)
			t.Routes[srv] = append(t.Routes[srv],
				Route{Dst: host32(gw), Iface: names.ServerIface},
				Route{Dst: netip.PrefixFrom(netip.IPv4Unspecified(), 0), Via: gw, Iface: names.ServerIface})
			t.Neighbors[srv] = append(t.Neighbors[srv], Neighbor{Iface: names.ServerIface, IP: gw, MAC: l.B.MAC})
			t.Routes[tor] = append(t.Routes[tor], Route{Dst: host32(ServerAddr(r, i)), Iface: down})
			t.Neighbors[tor] = append(t.Neighbors[tor], Neighbor{Iface: down, IP: ServerAddr(r, i), MAC: l.A.MAC})
		}
	}
	if f.HasOCS() {
		for k := 0; k < f.OCSSwitches; k++ {
			add(Node{Name: names.OCSName(k), Kind: KindOCS, Rack: -1, Index: k})
		}
		for r := 0; r < f.Racks; r++ {
			for u := 0; u < f.UplinksPerToR; u++ {
				sw, port := f.UplinkSwitch(r, u)
				t.Links = append(t.Links, Link{Kind: LinkUplink, Rate: f.UplinkRate, OCS: sw, Port: port,
					A: Endpoint{Node: names.ToRName(r), Iface: names.UplinkIface(u), MAC: ToRMAC(r), Addr: ToRAddr(r)},
					B: Endpoint{Node: names.OCSName(sw), Iface: names.OCSPortIface(r, u), MAC: mac(macOCSPort, r, u, sw)},
				})
			}
		}
	}
	if f.HasEPS() {
		add(Node{Name: names.EPSName, Kind: KindEPS, Rack: -1})
		coreRate := f.CoreRate
		for r := 0; r < f.Racks; r++ {
			tor := names.ToRName(r)
			corePort := names.ToRName(r)
			l := Link{Kind: LinkCore, Rate: coreRate, OCS: -1, Port: -1,
				A: Endpoint{Node: tor, Iface: names.CoreIface, MAC: ToRMAC(r), Addr: ToRAddr(r)},
				B: Endpoint{Node: names.EPSName, Iface: corePort, MAC: mac(macCorePort, r, 0, 0), Addr: CoreAddr},
			}
			t.Links = append(t.Links, l)
			// The ToR sends everything off-rack to the core. On a hybrid
			// fabric the routing controller adds more specific circuit
			// routes, so the core stays the fallback.
			t.Routes[tor] = append(t.Routes[tor],
				Route{Dst: host32(CoreAddr), Iface: names.CoreIface},
				Route{Dst: netip.PrefixFrom(netip.IPv4Unspecified(), 0), Via: CoreAddr, Iface: names.CoreIface})
			t.Neighbors[tor] = append(t.Neighbors[tor], Neighbor{Iface: names.CoreIface, IP: CoreAddr, MAC: l.B.MAC})
			t.Routes[names.EPSName] = append(t.Routes[names.EPSName],
				Route{Dst: host32(ToRAddr(r)), Iface: corePort},
				Route{Dst: RackPrefix(r), Via: ToRAddr(r), Iface: corePort})
			t.Neighbors[names.EPSName] = append(t.Neighbors[names.EPSName], Neighbor{Iface: corePort, IP: ToRAddr(r), MAC: l.A.MAC})
		}
	}
	return t
}

// Node returns a node by short name.
func (t *Topology) Node(name string) (Node, bool) {
	i, ok := t.byName[name]
	if !ok {
		return Node{}, false
	}
	return t.Nodes[i], true
}

// Ifaces returns the interfaces of a node, sorted, from the links.
func (t *Topology) Ifaces(node string) []string {
	var out []string
	for _, l := range t.Links {
		for _, e := range []Endpoint{l.A, l.B} {
			if e.Node == node {
				out = append(out, e.Iface)
			}
		}
	}
	sort.Strings(out)
	return out
}

// Servers returns the server nodes in rack-major order.
func (t *Topology) Servers() []Node {
	var out []Node
	for _, n := range t.Nodes {
		if n.Kind == KindServer {
			out = append(out, n)
		}
	}
	return out
}
