package topo

import (
	"net/netip"
	"testing"

	"github.com/ocsemu/ocsemu/dataplane/units"
)

func spec(kind string, racks, servers, uplinks, switches int) Spec {
	return Spec{Lab: "t", Kind: kind, Racks: racks, ServersPerRack: servers, UplinksPerToR: uplinks, OCSSwitches: switches,
		Spread: SpreadRoundRobin, ServerRate: 1e9, UplinkRate: 1e9, CoreRate: units.Rate(uint64(servers) * 1e9), MTU: 1500}
}

func TestBuildCounts(t *testing.T) {
	for _, tc := range []struct {
		name         string
		s            Spec
		nodes, links int
	}{
		{"eps 4x2", spec(FabricEPS, 4, 2, 0, 0), 4 + 8 + 1, 8 + 4},
		{"ocs 3x1 2 uplinks 2 switches", spec(FabricOCS, 3, 1, 2, 2), 3 + 3 + 2, 3 + 6},
		{"hybrid 2x2 1 uplink", spec(FabricHybrid, 2, 2, 1, 1), 2 + 4 + 1 + 1, 4 + 2 + 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			top := Build(tc.s)
			if len(top.Nodes) != tc.nodes || len(top.Links) != tc.links {
				t.Errorf("%d nodes, %d links; want %d, %d", len(top.Nodes), len(top.Links), tc.nodes, tc.links)
			}
			if got := len(top.Servers()); got != tc.s.Racks*tc.s.ServersPerRack {
				t.Errorf("%d servers", got)
			}
			seen := map[string]bool{}
			for _, n := range top.Nodes {
				if seen[n.NS] {
					t.Errorf("namespace %s twice", n.NS)
				}
				seen[n.NS] = true
				if got, ok := top.Node(n.Name); !ok || got.NS != n.NS {
					t.Errorf("Node(%q) = %+v, %v", n.Name, got, ok)
				}
			}
			if _, ok := top.Node("nosuch"); ok {
				t.Error("Node found a node that does not exist")
			}
			for _, l := range top.Links {
				if len(l.A.Iface) > 15 || len(l.B.Iface) > 15 {
					t.Errorf("interface name over 15 bytes: %s / %s", l.A.Iface, l.B.Iface)
				}
			}
		})
	}
}

// The addressing plan and the permanent neighbours of a ToR and a server.
func TestBuildAddressing(t *testing.T) {
	top := Build(spec(FabricHybrid, 300, 2, 2, 1))
	srv, _ := top.Node("r257s1")
	if srv.Addr != netip.MustParseAddr("10.1.1.2") || srv.NS != "emu-t.r257s1" || srv.Rack != 257 || srv.Index != 1 {
		t.Errorf("server r257s1 = %+v", srv)
	}
	tor, _ := top.Node("tor257")
	if tor.Addr != netip.MustParseAddr("10.255.1.1") || tor.Kind != KindToR {
		t.Errorf("tor257 = %+v", tor)
	}
	if RackPrefix(257) != netip.MustParsePrefix("10.1.1.0/24") || GatewayAddr(257) != netip.MustParseAddr("10.1.1.254") {
		t.Errorf("rack 257: prefix %v gateway %v", RackPrefix(257), GatewayAddr(257))
	}
	// Every uplink and the core port of a ToR carry the ToR's own MAC.
	for _, l := range top.Links {
		if l.A.Node == "tor3" && (l.Kind == LinkUplink || l.Kind == LinkCore) && l.A.MAC.String() != ToRMAC(3).String() {
			t.Errorf("tor3 %s has MAC %v, want %v", l.A.Iface, l.A.MAC, ToRMAC(3))
		}
		if l.Kind == LinkCore && l.Rate != 2e9 {
			t.Errorf("core link rate %v, want the spec's 2Gbit", l.Rate)
		}
	}
	// A server routes everything through its gateway, whose MAC it knows.
	rs := top.Routes["r0s0"]
	if len(rs) != 2 || rs[1].Via != GatewayAddr(0) || top.Neighbors["r0s0"][0].IP != GatewayAddr(0) {
		t.Errorf("r0s0 routes %v neighbours %v", rs, top.Neighbors["r0s0"])
	}
	// The core reaches every rack through its ToR.
	if n := len(top.Routes["eps"]); n != 2*300 {
		t.Errorf("eps has %d routes, want %d", n, 600)
	}
}

func TestUplinkSwitch(t *testing.T) {
	for _, tc := range []struct {
		spread             string
		uplinks, switches  int
		r, u, wantSw, port int
	}{
		{SpreadRoundRobin, 4, 2, 0, 0, 0, 0},
		{SpreadRoundRobin, 4, 2, 0, 1, 1, 0},
		{SpreadRoundRobin, 4, 2, 1, 2, 0, 3},
		{SpreadRoundRobin, 3, 2, 1, 2, 0, 3},
		{SpreadRoundRobin, 3, 2, 1, 1, 1, 1},
		{SpreadBlock, 4, 2, 0, 3, 1, 1},
		{SpreadBlock, 4, 2, 2, 0, 0, 4},
	} {
		s := Spec{Racks: 3, UplinksPerToR: tc.uplinks, OCSSwitches: tc.switches, Spread: tc.spread}
		sw, port := s.UplinkSwitch(tc.r, tc.u)
		if sw != tc.wantSw || port != tc.port {
			t.Errorf("%s %d uplinks %d switches: rack %d uplink %d -> ocs%d port %d, want ocs%d port %d",
				tc.spread, tc.uplinks, tc.switches, tc.r, tc.u, sw, port, tc.wantSw, tc.port)
		}
	}
}
