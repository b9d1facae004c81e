package fairq

import (
	"net/netip"
	"testing"

	"github.com/ocsemu/ocsemu/dataplane/topo"
)

func TestClasses(t *testing.T) {
	for _, tc := range []struct{ racks, perRack, want int }{
		{1, 1, 2}, {4, 2, 9}, {16, 1, 17}, {64, 4, MaxClasses},
	} {
		if got := Classes(tc.racks, tc.perRack); got != tc.want {
			t.Errorf("Classes(%d, %d) = %d, want %d", tc.racks, tc.perRack, got, tc.want)
		}
	}
}

func TestClass(t *testing.T) {
	const perRack, classes = 2, 9 // 4 racks x 2 servers
	for _, tc := range []struct {
		name string
		dst  netip.Addr
		len  int
		want uint32
	}{
		{"r0s0", topo.ServerAddr(0, 0), 1514, 1},
		{"r0s1", topo.ServerAddr(0, 1), 1514, 2},
		{"r3s1", topo.ServerAddr(3, 1), 1514, 8},
		{"a short frame", topo.ServerAddr(3, 1), 66, Sparse(classes)},
		{"just long enough", topo.ServerAddr(3, 1), SparseBytes, 8},
		{"the gateway", topo.GatewayAddr(2), 1514, classes},
		{"a ToR's router address", topo.ToRAddr(1), 1514, classes},
		{"the packet core", topo.CoreAddr, 1514, classes},
		{"a host beyond the rack", netip.MustParseAddr("10.0.1.3"), 1514, classes},
		{"host 0", netip.MustParseAddr("10.0.1.0"), 1514, classes},
		{"outside 10/8", netip.MustParseAddr("192.168.0.1"), 1514, classes},
		{"IPv6", netip.MustParseAddr("fd00::1"), 1514, classes},
	} {
		if got := Class(tc.dst, tc.len, perRack, classes); got != tc.want {
			t.Errorf("%s (%v, %d B): class %d, want %d", tc.name, tc.dst, tc.len, got, tc.want)
		}
	}
}

// Servers beyond MaxClasses-1 share classes, deterministically, and no
// server takes the last class (other destinations') or the sparse one.
func TestClassWraps(t *testing.T) {
	const racks, perRack = 40, 1
	classes := Classes(racks, perRack)
	for r := range racks {
		got := ServerClass(r, 0, perRack, classes)
		if want := uint32(1 + r%(classes-1)); got != want {
			t.Errorf("rack %d: class %d, want %d", r, got, want)
		}
	}
	if got := ServerClass(256, 0, perRack, classes); got != uint32(1+256%(classes-1)) {
		t.Errorf("rack 256 (10.1.0.1): class %d", got)
	}
}
