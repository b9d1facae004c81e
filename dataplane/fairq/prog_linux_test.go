package fairq

import (
	"encoding/binary"
	"net/netip"
	"os"
	"testing"

	"github.com/cilium/ebpf"

	"github.com/ocsemu/ocsemu/dataplane/topo"
)

// pkt describes a frame for the classifier: IPv4 to dst carrying proto
// (6 TCP, 17 UDP) with payload bytes; ihl and doff are header lengths in
// 32-bit words (0: 5 and 8, TCP with the timestamp option); fragOff is
// the IPv4 flags and fragment offset field; totLenDelta is added to the
// IPv4 total length; cut drops that many bytes off the frame's end.
type pkt struct {
	dst              netip.Addr
	proto, flags     byte
	payload          int
	ihl, doff        int
	fragOff          uint16
	totLenDelta, cut int
}

func (p pkt) frame() []byte {
	ihl, doff := max(p.ihl, 5), p.doff
	if doff == 0 {
		doff = 8
	}
	ip := make([]byte, 4*ihl)
	ip[0] = 0x40 | byte(ihl)
	binary.BigEndian.PutUint16(ip[6:8], p.fragOff)
	ip[8] = 64
	ip[9] = p.proto
	copy(ip[12:16], netip.MustParseAddr("10.0.0.1").AsSlice())
	copy(ip[16:20], p.dst.AsSlice())
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

// TestProgramMatchesClass runs the kernel classifier on frames
// (BPF_PROG_TEST_RUN) and checks the class it writes into skb->priority
// against Class, with SparseSegment deciding what is sparse.
func TestProgramMatchesClass(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("loading a BPF program needs root")
	}
	const perRack = 2
	classes := Classes(300, perRack)
	prog, err := program(perRack, classes)
	if err != nil {
		t.Fatal(err)
	}
	defer prog.Close()
	const ack, syn, fin, rst, psh, ece, cwr = 0x10, 0x02, 0x01, 0x04, 0x08, 0x40, 0x80
	const moreFragments = 0x2000
	r1s1, rack256 := topo.ServerAddr(1, 1), topo.ServerAddr(256, 0)
	for _, tc := range []struct {
		name string
		p    pkt
		// unparsed: the frame is too short or malformed for the
		// classifier to read as a sparse segment.
		unparsed bool
	}{
		{name: "a pure ACK", p: pkt{dst: r1s1, proto: 6, flags: ack}},
		{name: "a pure ACK to the gateway", p: pkt{dst: topo.GatewayAddr(0), proto: 6, flags: ack}},
		{name: "a pure ACK without options", p: pkt{dst: r1s1, proto: 6, flags: ack, doff: 5}},
		{name: "a pure ACK with an IPv4 option", p: pkt{dst: r1s1, proto: 6, flags: ack, ihl: 6}},
		{name: "IPv4 and TCP options: 134 bytes", p: pkt{dst: r1s1, proto: 6, flags: ack, ihl: 15, doff: 15}},
		{name: "an ACK with ECE and CWR", p: pkt{dst: r1s1, proto: 6, flags: ack | ece | cwr}},
		{name: "a 1-byte segment", p: pkt{dst: r1s1, proto: 6, flags: ack | psh, payload: 1}},
		{name: "an 8-byte segment", p: pkt{dst: r1s1, proto: 6, flags: ack | psh, payload: 8}},
		{name: "a 9-byte segment", p: pkt{dst: r1s1, proto: 6, flags: ack | psh, payload: 9}},
		{name: "an RST", p: pkt{dst: r1s1, proto: 6, flags: rst}},
		{name: "a FIN", p: pkt{dst: r1s1, proto: 6, flags: ack | fin}},
		{name: "a SYN", p: pkt{dst: r1s1, proto: 6, flags: syn}},
		{name: "a full segment", p: pkt{dst: r1s1, proto: 6, flags: ack, payload: 1448}},
		{name: "a first fragment", p: pkt{dst: r1s1, proto: 6, flags: ack, fragOff: moreFragments}, unparsed: true},
		{name: "a later fragment", p: pkt{dst: r1s1, proto: 6, flags: ack, fragOff: 185}, unparsed: true},
		{name: "a total length shorter than the headers", p: pkt{dst: r1s1, proto: 6, flags: ack, totLenDelta: -4}, unparsed: true},
		{name: "a TCP header cut short", p: pkt{dst: r1s1, proto: 6, flags: ack, doff: 5, cut: 10}, unparsed: true},
		{name: "a short datagram", p: pkt{dst: r1s1, proto: 17, payload: 10}},
		{name: "a datagram to rack 256", p: pkt{dst: rack256, proto: 17, payload: 1000}},
		{name: "to host 0", p: pkt{dst: netip.MustParseAddr("10.0.1.0"), proto: 17, payload: 100}},
		{name: "to a host beyond the rack", p: pkt{dst: netip.MustParseAddr("10.0.1.3"), proto: 17, payload: 100}},
		{name: "to a ToR's router address", p: pkt{dst: topo.ToRAddr(1), proto: 17, payload: 100}},
		{name: "to the packet core", p: pkt{dst: topo.CoreAddr, proto: 6, flags: ack | psh, payload: 100}},
		{name: "outside 10/8", p: pkt{dst: netip.MustParseAddr("192.168.1.2"), proto: 17, payload: 100}},
	} {
		f := tc.p.frame()
		sparse := tc.p.proto == 6 && !tc.unparsed &&
			SparseSegment(len(f), tc.p.payload, tc.p.flags)
		want := Major<<16 | Class(tc.p.dst, sparse, perRack, classes)
		if got := run(t, prog, f); got != want {
			t.Errorf("%s (%d B): priority %#x, want %#x", tc.name, len(f), got, want)
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
