package fairq

import (
	"encoding/binary"
	"net/netip"
	"os"
	"testing"

	"github.com/cilium/ebpf"

	"github.com/ocsemu/ocsemu/dataplane/topo"
)

// pkt describes a frame for the classifier: IPv4 to or from addr (frame
// puts it where asked, and r1s1 as the other end), carrying proto
// (6 TCP, 17 UDP) with payload bytes; ihl and doff are header lengths in
// 32-bit words (0: 5 and 8, TCP with the timestamp option); fragOff is
// the IPv4 flags and fragment offset field; totLenDelta is added to the
// IPv4 total length; cut drops that many bytes off the frame's end.
type pkt struct {
	addr, other      netip.Addr // other: r1s1 if not set
	proto, flags     byte
	payload          int
	ihl, doff        int
	fragOff          uint16
	totLenDelta, cut int
}

func (p pkt) frame(asSource bool) []byte {
	ihl, doff := max(p.ihl, 5), p.doff
	if doff == 0 {
		doff = 8
	}
	ip := make([]byte, 4*ihl)
	ip[0] = 0x40 | byte(ihl)
	binary.BigEndian.PutUint16(ip[6:8], p.fragOff)
	ip[8] = 64
	ip[9] = p.proto
	other := r1s1.AsSlice()
	if p.other.IsValid() {
		other = p.other.AsSlice()
	}
	if asSource {
		copy(ip[12:16], p.addr.AsSlice())
		copy(ip[16:20], other)
	} else {
		copy(ip[12:16], other)
		copy(ip[16:20], p.addr.AsSlice())
	}
	var l4 []byte
	switch p.proto {
	case 6:
		l4 = make([]byte, 4*doff)
		l4[12] = byte(doff) << 4
		l4[13] = p.flags
	case 17:
		l4 = make([]byte, 8)
	}
	total := len(ip) + len(l4) + p.payload
	binary.BigEndian.PutUint16(ip[2:4], uint16(total+p.totLenDelta))
	f := make([]byte, 14, 14+total)
	binary.BigEndian.PutUint16(f[12:14], 0x0800)
	f = append(f, ip...)
	f = append(f, l4...)
	f = append(f, make([]byte, p.payload)...)
	return f[:len(f)-p.cut]
}

// skbOut holds the whole __sk_buff the kernel copies out after a test
// run (it refuses a smaller buffer).
const skbOut = 512

// run returns the priority the program gives a frame.
func run(t *testing.T, prog *ebpf.Program, frame []byte) uint32 {
	t.Helper()
	ctx := make([]byte, skbOut)
	ret, err := prog.Run(&ebpf.RunOptions{Data: frame, DataOut: make([]byte, len(frame)+256), Context: ctx[:48], ContextOut: ctx})
	if err != nil {
		t.Fatalf("test run: %v", err)
	}
	if int32(ret) != actUnspec {
		t.Errorf("returned %d, want TC_ACT_UNSPEC", int32(ret))
	}
	return binary.NativeEndian.Uint32(ctx[skbPriority:])
}

// r1s1 is every test frame's other end: server index 3, so a pair's
// class depends on both indexes.
var r1s1 = topo.ServerAddr(1, 1)

// TestProgramMatchesClass runs the kernel classifier, keyed by
// destination and by pair, on frames (BPF_PROG_TEST_RUN) and checks the
// class it writes into skb->priority against Class or PairClass, with
// SparseSegment deciding what is sparse. Keyed by pair, each frame goes
// both ways.
func TestProgramMatchesClass(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("loading a BPF program needs root")
	}
	for _, key := range []Key{ByDestination, ByPair} {
		t.Run(key.String(), func(t *testing.T) { testProgram(t, key) })
	}
}

func testProgram(t *testing.T, key Key) {
	const racks, perRack = 300, 2
	classes := ClassesFor(key, racks, perRack, 0)
	prog, err := program(key, racks, perRack, classes)
	if err != nil {
		t.Fatal(err)
	}
	defer prog.Close()
	const ack, syn, fin, rst, psh, ece, cwr = 0x10, 0x02, 0x01, 0x04, 0x08, 0x40, 0x80
	const moreFragments = 0x2000
	r2s1, rack256 := topo.ServerAddr(2, 1), topo.ServerAddr(256, 0)
	for _, tc := range []struct {
		name string
		p    pkt
		// unparsed: the frame is too short or malformed for the
		// classifier to read as a sparse segment.
		unparsed bool
	}{
		{name: "a pure ACK", p: pkt{addr: r2s1, proto: 6, flags: ack}},
		{name: "a pure ACK to the gateway", p: pkt{addr: topo.GatewayAddr(0), proto: 6, flags: ack}},
		{name: "a pure ACK without options", p: pkt{addr: r2s1, proto: 6, flags: ack, doff: 5}},
		{name: "a pure ACK with an IPv4 option", p: pkt{addr: r2s1, proto: 6, flags: ack, ihl: 6}},
		{name: "IPv4 and TCP options: 134 bytes", p: pkt{addr: r2s1, proto: 6, flags: ack, ihl: 15, doff: 15}},
		{name: "an ACK with ECE and CWR", p: pkt{addr: r2s1, proto: 6, flags: ack | ece | cwr}},
		{name: "a 1-byte segment", p: pkt{addr: r2s1, proto: 6, flags: ack | psh, payload: 1}},
		{name: "an 8-byte segment", p: pkt{addr: r2s1, proto: 6, flags: ack | psh, payload: 8}},
		{name: "a 9-byte segment", p: pkt{addr: r2s1, proto: 6, flags: ack | psh, payload: 9}},
		{name: "an RST", p: pkt{addr: r2s1, proto: 6, flags: rst}},
		{name: "a FIN", p: pkt{addr: r2s1, proto: 6, flags: ack | fin}},
		{name: "a SYN", p: pkt{addr: r2s1, proto: 6, flags: syn}},
		{name: "a full segment", p: pkt{addr: r2s1, proto: 6, flags: ack, payload: 1448}},
		{name: "a first fragment", p: pkt{addr: r2s1, proto: 6, flags: ack, fragOff: moreFragments}, unparsed: true},
		{name: "a later fragment", p: pkt{addr: r2s1, proto: 6, flags: ack, fragOff: 185}, unparsed: true},
		{name: "a total length shorter than the headers", p: pkt{addr: r2s1, proto: 6, flags: ack, totLenDelta: -4}, unparsed: true},
		{name: "a TCP header cut short", p: pkt{addr: r2s1, proto: 6, flags: ack, doff: 5, cut: 10}, unparsed: true},
		{name: "a short datagram", p: pkt{addr: r2s1, proto: 17, payload: 10}},
		{name: "a datagram to rack 256", p: pkt{addr: rack256, proto: 17, payload: 1000}},
		{name: "an aggregator's datagram", p: pkt{addr: topo.GatewayAddr(2), proto: 17, payload: 1000}},
		{name: "rack 256's aggregator", p: pkt{addr: topo.GatewayAddr(256), proto: 17, payload: 1000}},
		{name: "between two aggregators", p: pkt{addr: topo.GatewayAddr(2), other: topo.GatewayAddr(1), proto: 17, payload: 1000}},
		{name: "between two servers of other racks", p: pkt{addr: r2s1, other: topo.ServerAddr(3, 0), proto: 6, flags: ack, payload: 1448}},
		{name: "to host 0", p: pkt{addr: netip.MustParseAddr("10.0.1.0"), proto: 17, payload: 100}},
		{name: "to a host beyond the rack", p: pkt{addr: netip.MustParseAddr("10.0.1.3"), proto: 17, payload: 100}},
		{name: "to a ToR's router address", p: pkt{addr: topo.ToRAddr(1), proto: 17, payload: 100}},
		{name: "to the packet core", p: pkt{addr: topo.CoreAddr, proto: 6, flags: ack | psh, payload: 100}},
		{name: "outside 10/8", p: pkt{addr: netip.MustParseAddr("192.168.1.2"), proto: 17, payload: 100}},
	} {
		ways := []bool{false}
		if key == ByPair {
			ways = append(ways, true)
		}
		other := r1s1
		if tc.p.other.IsValid() {
			other = tc.p.other
		}
		for _, asSource := range ways {
			f := tc.p.frame(asSource)
			sparse := tc.p.proto == 6 && !tc.unparsed &&
				SparseSegment(len(f), tc.p.payload, tc.p.flags)
			want := Major<<16 | Class(tc.p.addr, sparse, perRack, classes)
			switch {
			case key == ByPair && asSource:
				want = Major<<16 | PairClass(tc.p.addr, other, sparse, racks, perRack, classes)
			case key == ByPair:
				want = Major<<16 | PairClass(other, tc.p.addr, sparse, racks, perRack, classes)
			}
			if got := run(t, prog, f); got != want {
				dir := "to"
				if asSource {
					dir = "from"
				}
				t.Errorf("%s (%d B, %s %v): priority %#x, want %#x", tc.name, len(f), dir, tc.p.addr, got, want)
			}
		}
	}
	// Not IPv4 (ARP): the last data class. (A test run refuses a frame too
	// short for an IPv4 header.)
	arp := make([]byte, 60)
	binary.BigEndian.PutUint16(arp[12:14], 0x0806)
	if got, want := run(t, prog, arp), uint32(Major<<16|classes); got != want {
		t.Errorf("ARP: priority %#x, want %#x", got, want)
	}
}
