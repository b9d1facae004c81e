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
		name   string
		dst    netip.Addr
		sparse bool
		want   uint32
	}{
		{"r0s0", topo.ServerAddr(0, 0), false, 1},
		{"r0s1", topo.ServerAddr(0, 1), false, 2},
		{"r3s1", topo.ServerAddr(3, 1), false, 8},
		{"a sparse segment", topo.ServerAddr(3, 1), true, Sparse(classes)},
		{"a sparse segment to the core", topo.CoreAddr, true, Sparse(classes)},
		{"the gateway", topo.GatewayAddr(2), false, classes},
		{"a ToR's router address", topo.ToRAddr(1), false, classes},
		{"the packet core", topo.CoreAddr, false, classes},
		{"a host beyond the rack", netip.MustParseAddr("10.0.1.3"), false, classes},
		{"host 0", netip.MustParseAddr("10.0.1.0"), false, classes},
		{"outside 10/8", netip.MustParseAddr("192.168.0.1"), false, classes},
		{"IPv6", netip.MustParseAddr("fd00::1"), false, classes},
	} {
		if got := Class(tc.dst, tc.sparse, perRack, classes); got != tc.want {
			t.Errorf("%s (%v, sparse %v): class %d, want %d", tc.name, tc.dst, tc.sparse, got, tc.want)
		}
	}
}

func TestQuantum(t *testing.T) {
	for _, tc := range []struct {
		rate uint64 // bytes/s
		want uint32
	}{
		{125_000, 3028},       // 1 Mbit/s: the bucket's two frames
		{12_500_000, 12_500},  // 100 Mbit/s: 1 ms
		{125_000_000, 69_644}, // 1 Gbit/s: a 64 KiB GSO packet of 46 segments, each with its headers
		{1_250_000_000, 69_644},
	} {
		if got := Quantum(tc.rate, 1500); got != tc.want {
			t.Errorf("Quantum(%d B/s) = %d, want %d", tc.rate, got, tc.want)
		}
	}
}

// Servers beyond MaxClasses-1 share classes, deterministically, and no
// server takes the last class (other destinations') or the sparse one.
func TestClassWraps(t *testing.T) {
	const racks, perRack = 40, 1
	classes := Classes(racks, perRack)
	for r := range racks {
		got := Class(topo.ServerAddr(r, 0), false, perRack, classes)
		if want := uint32(1 + r%(classes-1)); got != want {
			t.Errorf("rack %d: class %d, want %d", r, got, want)
		}
	}
	if got := Class(topo.ServerAddr(256, 0), false, perRack, classes); got != uint32(1+256%(classes-1)) {
		t.Errorf("rack 256 (10.1.0.1): class %d", got)
	}
}

func TestSparseSegment(t *testing.T) {
	const ack, psh, fin, syn, rst, ece = 0x10, 0x08, 0x01, 0x02, 0x04, 0x40
	for _, tc := range []struct {
		frameLen, payload int
		flags             byte
		want              bool
	}{
		{66, 0, ack, true}, {67, 1, ack | psh, true}, {74, SparsePayload, ack | psh, true},
		{75, SparsePayload + 1, ack | psh, false}, {66, 0, ack | fin, false}, {66, 0, syn, false},
		{66, 0, ack | syn, false}, {66, 0, rst, false}, {1514, 1448, ack, false},
		{66, 0, ack | ece, true}, {134, 0, ack, false}, // IP and TCP options: too long
	} {
		if got := SparseSegment(tc.frameLen, tc.payload, tc.flags); got != tc.want {
			t.Errorf("SparseSegment(%d, %d, %#x) = %v, want %v", tc.frameLen, tc.payload, tc.flags, got, tc.want)
		}
	}
}

func TestClassesFor(t *testing.T) {
	for _, tc := range []struct {
		key                         Key
		racks, perRack, ports, want int
	}{
		{ByDestination, 4, 2, 20, 9},
		{ByPair, 4, 2, 20, 145},                  // the quickstart: 8 servers and 4 aggregators, 144 pairs and the rest
		{ByPair, 5, 2, 0, 226},                   // 15 endpoints: every pair
		{ByPair, 4, 4, 0, 252},                   // 20 endpoints: 251 data classes, a prime
		{ByPair, 4, 4, 24, 252},                  // 24 fair ports: 8192/24 = 341 a port, at most 251
		{ByPair, 16, 4, 96, 84},                  // 96 fair ports: 85 a port, the prime 83
		{ByPair, 64, 4, 384, minPairClasses + 1}, // 384 fair ports: 21 a port, at least 31
		{ByPair, 64, 4, 0, MaxPairClasses},
	} {
		if got := ClassesFor(tc.key, tc.racks, tc.perRack, tc.ports); got != tc.want {
			t.Errorf("ClassesFor(%v, %d, %d, %d) = %d, want %d", tc.key, tc.racks, tc.perRack, tc.ports, got, tc.want)
		}
	}
}

func TestPrimeAtMost(t *testing.T) {
	for n, want := range map[int]int{2: 2, 3: 3, 4: 3, 31: 31, 85: 83, 251: 251, 255: 251} {
		if got := primeAtMost(n); got != want {
			t.Errorf("primeAtMost(%d) = %d, want %d", n, got, want)
		}
	}
}

func TestPairClass(t *testing.T) {
	const racks, perRack = 4, 2
	classes := ClassesFor(ByPair, racks, perRack, 0)
	s := topo.ServerAddr
	for _, tc := range []struct {
		name     string
		src, dst netip.Addr
		sparse   bool
		want     uint32
	}{
		{"r0s0 -> r0s1", s(0, 0), s(0, 1), false, 2},
		{"r0s1 -> r0s0", s(0, 1), s(0, 0), false, 13},
		{"r3s1 -> r2s0", s(3, 1), s(2, 0), false, 1 + 7*12 + 4},
		{"r3s1 -> r3s1", s(3, 1), s(3, 1), false, 1 + 7*12 + 7},
		{"rack 1's aggregator -> r1s0", topo.GatewayAddr(1), s(1, 0), false, 1 + 9*12 + 2},
		{"rack 3's aggregator -> rack 0's", topo.GatewayAddr(3), topo.GatewayAddr(0), false, 1 + 11*12 + 8},
		{"a sparse segment", s(3, 1), s(2, 0), true, Sparse(classes)},
		{"from the packet core", topo.CoreAddr, s(2, 0), false, uint32(classes)},
		{"to a ToR's router address", s(1, 0), topo.ToRAddr(1), false, uint32(classes)},
		{"beyond the rack", netip.MustParseAddr("10.0.1.3"), s(0, 0), false, uint32(classes)},
	} {
		if got := PairClass(tc.src, tc.dst, tc.sparse, racks, perRack, classes); got != tc.want {
			t.Errorf("%s: class %d, want %d", tc.name, got, tc.want)
		}
	}
	// Every pair of the fabric's endpoints, servers and aggregators, has a
	// class of its own.
	var ends []netip.Addr
	for r := range racks {
		for h := range perRack {
			ends = append(ends, s(r, h))
		}
		ends = append(ends, topo.GatewayAddr(r))
	}
	seen := map[uint32]bool{}
	for _, a := range ends {
		for _, b := range ends {
			seen[PairClass(a, b, false, racks, perRack, classes)] = true
		}
	}
	if len(seen) != len(ends)*len(ends) {
		t.Errorf("%d classes for %d pairs", len(seen), len(ends)*len(ends))
	}
	// Beyond 15 servers pairs share classes, but the sources of one
	// destination still spread: 85 and 255 servers share factors with 255.
	for _, tc := range []struct{ n, ports int }{{16, 0}, {30, 0}, {85, 0}, {255, 0}, {16, 384}, {31, 384}, {62, 384}} {
		n := tc.n
		classes := ClassesFor(ByPair, n, 1, tc.ports)
		spread := map[uint32]bool{}
		for i := range n {
			spread[PairClass(s(i, 0), s(0, 0), false, n, 1, classes)] = true
		}
		if want := min(n, classes-1); len(spread) != want {
			t.Errorf("%d servers, %d fair ports: their frames to r0s0 take %d classes, want %d", n, tc.ports, len(spread), want)
		}
	}
}

func TestLeafPackets(t *testing.T) {
	for _, tc := range []struct {
		rate uint64 // bytes/s
		want int
	}{
		{125_000, 130},       // 1 Mbit/s: two times three 64 KiB GSO packets' worth, split by the tbf into frames (a 2-frame bucket)
		{12_500_000, 32},     // 100 Mbit/s: two times 196,608 B over a 12,500 B bucket
		{125_000_000, 36},    // 1 Gbit/s: two times 10 ms over a 64 KiB GSO packet (69,644 B)
		{1_250_000_000, 360}, // 10 Gbit/s
	} {
		if got := LeafPackets(tc.rate, 1500); got != tc.want {
			t.Errorf("LeafPackets(%d B/s) = %d, want %d", tc.rate, got, tc.want)
		}
	}
}
