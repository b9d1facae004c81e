package fairq

import (
	"encoding/binary"
	"net/netip"
	"os"
	"testing"

	"github.com/cilium/ebpf"

	"github.com/ocsemu/ocsemu/dataplane/topo"
)

// frame builds an Ethernet + IPv4 (+ TCP or UDP) frame to dst with
// payload bytes of payload and the TCP flags given.
func frame(dst netip.Addr, proto byte, flags byte, payload int) []byte {
	ip := make([]byte, 20)
	ip[0] = 0x45
	ip[8] = 64
	ip[9] = proto
	copy(ip[12:16], netip.MustParseAddr("10.0.0.1").AsSlice())
	copy(ip[16:20], dst.AsSlice())
	var l4 []byte
	switch proto {
	case 6:
		l4 = make([]byte, 32) // with the timestamp option
		l4[12] = 8 << 4
		l4[13] = flags
	case 17:
		l4 = make([]byte, 8)
	}
	total := len(ip) + len(l4) + payload
	binary.BigEndian.PutUint16(ip[2:4], uint16(total))
	f := make([]byte, 14, 14+total)
	binary.BigEndian.PutUint16(f[12:14], 0x0800)
	f = append(f, ip...)
	f = append(f, l4...)
	return append(f, make([]byte, payload)...)
}

// skbOut holds the whole __sk_buff the kernel copies out after a test
// run (it refuses a smaller buffer).
const skbOut = 512

// TestProgramMatchesClass runs the kernel classifier on frames
// (BPF_PROG_TEST_RUN) and checks the class it writes into skb->priority
// against Class.
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
	const ack, syn, fin, psh = 0x10, 0x02, 0x01, 0x08
	r1s1, rack256 := topo.ServerAddr(1, 1), topo.ServerAddr(256, 0)
	for _, tc := range []struct {
		name   string
		frame  []byte
		sparse bool
	}{
		{"a pure ACK", frame(r1s1, 6, ack, 0), true},
		{"a pure ACK to the gateway", frame(topo.GatewayAddr(0), 6, ack, 0), true},
		{"a 1-byte segment", frame(r1s1, 6, ack|psh, 1), true},
		{"an 8-byte segment", frame(r1s1, 6, ack|psh, 8), true},
		{"a 9-byte segment", frame(r1s1, 6, ack|psh, 9), false},
		{"an RST", frame(r1s1, 6, 0x04, 0), false},
		{"a FIN", frame(r1s1, 6, ack|fin, 0), false},
		{"a SYN", frame(r1s1, 6, syn, 0), false},
		{"a full segment", frame(r1s1, 6, ack, 1448), false},
		{"a short datagram", frame(r1s1, 17, 0, 10), false},
		{"a datagram to rack 256", frame(rack256, 17, 0, 1000), false},
		{"to host 0", frame(netip.MustParseAddr("10.0.1.0"), 17, 0, 100), false},
		{"to a host beyond the rack", frame(netip.MustParseAddr("10.0.1.3"), 17, 0, 100), false},
		{"to a ToR's router address", frame(topo.ToRAddr(1), 17, 0, 100), false},
		{"to the packet core", frame(topo.CoreAddr, 6, ack|psh, 100), false},
		{"outside 10/8", frame(netip.MustParseAddr("192.168.1.2"), 17, 0, 100), false},
	} {
		dst, _ := netip.AddrFromSlice(tc.frame[30:34])
		want := Major<<16 | Class(dst, tc.sparse, perRack, classes)
		ctx := make([]byte, skbOut)
		ret, err := prog.Run(&ebpf.RunOptions{Data: tc.frame, DataOut: make([]byte, len(tc.frame)+256), Context: ctx[:48], ContextOut: ctx})
		if err != nil {
			t.Fatalf("%s: test run: %v", tc.name, err)
		}
		if int32(ret) != actUnspec {
			t.Errorf("%s: returned %d, want TC_ACT_UNSPEC", tc.name, int32(ret))
		}
		if got := binary.NativeEndian.Uint32(ctx[skbPriority:]); got != want {
			t.Errorf("%s: priority %#x, want %#x", tc.name, got, want)
		}
	}
	// Not IPv4 (ARP): the last data class.
	arp := make([]byte, 60)
	binary.BigEndian.PutUint16(arp[12:14], 0x0806)
	ctx := make([]byte, skbOut)
	if _, err := prog.Run(&ebpf.RunOptions{Data: arp, DataOut: make([]byte, 512), Context: ctx[:48], ContextOut: ctx}); err != nil {
		t.Fatal(err)
	}
	if got, want := binary.NativeEndian.Uint32(ctx[skbPriority:]), uint32(Major<<16|classes); got != want {
		t.Errorf("ARP: priority %#x, want %#x", got, want)
	}
}
