package torpath

import (
	"encoding/binary"
	"net"
	"net/netip"
	"os"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"

	"github.com/ocsemu/ocsemu/dataplane/monoclock"
	"github.com/ocsemu/ocsemu/dataplane/topo"
	"github.com/ocsemu/ocsemu/ocsfabric/fastpath"
	"github.com/ocsemu/ocsemu/ocsfabric/routing"
)

// newToR loads a ToR program with a generation switch of its own.
func newToR(t *testing.T, cfg Config) (*ToR, *fastpath.Gen) {
	t.Helper()
	gen, err := fastpath.NewGen()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(gen.Close)
	tor, err := New(cfg, gen)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(tor.Close)
	return tor, gen
}

// install writes routes and switches to them at once.
func install(t *testing.T, tor *ToR, gen *fastpath.Gen, rs map[int]Route) {
	t.Helper()
	g, _, ok := gen.Free()
	if !ok {
		t.Fatal("no free generation")
	}
	if err := tor.Write(g, rs); err != nil {
		t.Fatal(err)
	}
	if err := gen.Arm(g, 0); err != nil {
		t.Fatal(err)
	}
	gen.Commit(fastpath.Monotonic())
}

func skipUnlessRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root to load BPF programs")
	}
}

// frame builds an Ethernet + IPv4 + UDP frame with a valid header checksum.
func frame(src, dst netip.Addr, ttl byte) []byte {
	b := make([]byte, 14+20+8+18)
	copy(b[0:6], []byte{0x02, 2, 0, 0, 0, 0})
	copy(b[6:12], []byte{0x02, 1, 0, 0, 0, 0})
	binary.BigEndian.PutUint16(b[12:], 0x0800)
	ip := b[14:34]
	ip[0] = 0x45
	binary.BigEndian.PutUint16(ip[2:], uint16(len(b)-14))
	ip[8] = ttl
	ip[9] = 17
	s, d := src.As4(), dst.As4()
	copy(ip[12:], s[:])
	copy(ip[16:], d[:])
	binary.BigEndian.PutUint16(ip[10:], csum(ip))
	return b
}

func csum(h []byte) uint16 {
	var s uint32
	for i := 0; i+1 < len(h); i += 2 {
		if i == 10 {
			continue
		}
		s += uint32(binary.BigEndian.Uint16(h[i:]))
	}
	for s > 0xffff {
		s = s&0xffff + s>>16
	}
	return ^uint16(s)
}

// TestProgramPicksModelHop runs the program on frames (BPF_PROG_TEST_RUN)
// for many address pairs and checks that it picks the hop routing.Pick
// picks, writes the MACs, decrements the TTL with a valid checksum, and
// leaves to the kernel what it must.
func TestProgramPicksModelHop(t *testing.T) {
	skipUnlessRoot(t)
	const racks, self = 6, 1
	tor, gen := newToR(t, Config{Rack: self, Racks: racks, MaxHops: 3})
	// Rack 0 over 3 hops (vias 0, 2, 3: the written MAC tells which),
	// rack 2 over 2, rack 3 over 1, rack 4 unreachable, rack 5 left to
	// the kernel.
	next := map[int][]routing.Hop{
		0: {{Uplink: 0, Via: 0}, {Uplink: 1, Via: 2}, {Uplink: 2, Via: 3}},
		2: {{Uplink: 0, Via: 2}, {Uplink: 2, Via: 3}},
		3: {{Uplink: 1, Via: 3}},
	}
	rs, err := Routes(racks, Choices(next), []uint32{11, 12, 13}, topo.ToRMAC, self, nil)
	if err != nil {
		t.Fatal(err)
	}
	delete(rs, 5)
	install(t, tor, gen, rs)
	run := func(pkt []byte) (uint32, []byte) {
		t.Helper()
		out := make([]byte, len(pkt)+64)
		ret, err := tor.prog.Run(&ebpf.RunOptions{Data: pkt, DataOut: out})
		if err != nil {
			t.Fatalf("test run: %v", err)
		}
		return ret, out[:len(pkt)]
	}
	picked := 0
	for s := range 12 {
		for _, d := range []int{0, 2, 3} {
			for _, dstHost := range []netip.Addr{topo.ServerAddr(d, s%3), topo.ToRAddr(d)} {
				src := topo.ServerAddr(self, s)
				want, _ := routing.Pick(next[d], routing.AddrHash(src, dstHost))
				ret, out := run(frame(src, dstHost, 64))
				if ret != actRedirect {
					t.Fatalf("%s -> %s: action %d, want redirect", src, dstHost, ret)
				}
				if got, w := net.HardwareAddr(out[0:6]).String(), topo.ToRMAC(want.Via).String(); got != w {
					t.Errorf("%s -> %s: dst MAC %s, want %s (hop %+v)", src, dstHost, got, w, want)
				}
				if got := net.HardwareAddr(out[6:12]).String(); got != topo.ToRMAC(self).String() {
					t.Errorf("src MAC %s", got)
				}
				if out[14+8] != 63 || binary.BigEndian.Uint16(out[24:]) != csum(out[14:34]) {
					t.Errorf("%s -> %s: TTL %d, checksum %#x, want 63 and %#x", src, dstHost, out[22], binary.BigEndian.Uint16(out[24:]), csum(out[14:34]))
				}
				picked++
			}
		}
	}
	t.Logf("%d frames took the model's hop", picked)
	// A server of the own rack, its port slow: the kernel forwards.
	srvMAC, downMAC := net.HardwareAddr{0x02, 1, 0, self, 1, 0}, net.HardwareAddr{0x02, 2, 0, self, 1, 0}
	if err := tor.WriteLocal(map[byte]Hop{2: {Dst: srvMAC, Src: downMAC, Ifindex: 21}}); err != nil {
		t.Fatal(err)
	}
	if ret, _ := run(frame(topo.ServerAddr(0, 0), topo.ServerAddr(self, 1), 64)); ret != actOK {
		t.Errorf("own server behind a slow port: action %d, want %d (the kernel)", ret, actOK)
	}
	// Its port fast: the program delivers, with IP forwarding's MACs and TTL.
	if err := tor.fast.Put(uint32(21), uint32(1)); err != nil {
		t.Fatal(err)
	}
	for _, src := range []netip.Addr{topo.ServerAddr(0, 0), topo.ServerAddr(self, 0)} {
		ret, out := run(frame(src, topo.ServerAddr(self, 1), 64))
		if ret != actRedirect || net.HardwareAddr(out[0:6]).String() != srvMAC.String() || net.HardwareAddr(out[6:12]).String() != downMAC.String() {
			t.Errorf("%s -> own server: action %d, MACs %v <- %v; want redirect to %v <- %v", src, ret, net.HardwareAddr(out[0:6]), net.HardwareAddr(out[6:12]), srvMAC, downMAC)
		}
		if out[14+8] != 63 || binary.BigEndian.Uint16(out[24:]) != csum(out[14:34]) {
			t.Errorf("%s -> own server: TTL %d, checksum %#x, want 63 and %#x", src, out[22], binary.BigEndian.Uint16(out[24:]), csum(out[14:34]))
		}
		picked++
	}
	pass := []struct {
		name string
		pkt  []byte
		want uint32
	}{
		{"own rack, no such server", frame(topo.ServerAddr(0, 0), topo.ServerAddr(self, 4), 64), actOK},
		{"own gateway address", frame(topo.ServerAddr(0, 0), topo.GatewayAddr(self), 64), actOK},
		{"own server, TTL expiring", frame(topo.ServerAddr(0, 0), topo.ServerAddr(self, 1), 1), actOK},
		{"own router address", frame(topo.ServerAddr(0, 0), topo.ToRAddr(self), 64), actOK},
		{"packet core", frame(topo.ServerAddr(0, 0), topo.CoreAddr, 64), actOK},
		{"outside 10/8", frame(topo.ServerAddr(0, 0), netip.MustParseAddr("192.168.0.1"), 64), actOK},
		{"rack beyond the lab", frame(topo.ServerAddr(0, 0), topo.ServerAddr(racks, 0), 64), actOK},
		{"TTL expiring", frame(topo.ServerAddr(self, 0), topo.ServerAddr(0, 0), 1), actOK},
		{"no entry: kernel", frame(topo.ServerAddr(self, 0), topo.ServerAddr(5, 0), 64), actOK},
		{"unreachable", frame(topo.ServerAddr(self, 0), topo.ServerAddr(4, 0), 64), actShot},
	}
	for _, c := range pass {
		if ret, _ := run(c.pkt); ret != c.want {
			t.Errorf("%s: action %d, want %d", c.name, ret, c.want)
		}
	}
	arp := frame(topo.ServerAddr(0, 0), topo.ServerAddr(2, 0), 64)
	binary.BigEndian.PutUint16(arp[12:], 0x0806)
	if ret, _ := run(arp); ret != actOK {
		t.Errorf("ARP: action %d, want ok", ret)
	}
	c, err := tor.Counters()
	if err != nil {
		t.Fatal(err)
	}
	if c.RedirectedPackets != uint64(picked) || c.UnreachablePackets != 1 {
		t.Errorf("counters %+v, want %d redirected and 1 unreachable", c, picked)
	}
	// Every TTL and every low byte of the IP ID: the checksum takes both
	// of its bytes' every value, so the incremental update meets its
	// end-around carry.
	for ttl := 2; ttl < 256; ttl++ {
		for id := range 256 {
			f := frame(topo.ServerAddr(self, 0), topo.ServerAddr(0, 1), byte(ttl))
			f[14+5] = byte(id)
			binary.BigEndian.PutUint16(f[24:], csum(f[14:34]))
			ret, out := run(f)
			if ret != actRedirect || int(out[22]) != ttl-1 || binary.BigEndian.Uint16(out[24:]) != csum(out[14:34]) {
				t.Fatalf("TTL %d, ID %d: action %d, TTL %d, checksum %#x, want redirect, %d and %#x", ttl, id, ret, out[22], binary.BigEndian.Uint16(out[24:]), ttl-1, csum(out[14:34]))
			}
		}
	}
}

// TestGenerationSwitchesAtInstant: two generations staged ahead take
// effect, each when the kernel clock passes its instant, not before.
func TestGenerationSwitchesAtInstant(t *testing.T) {
	skipUnlessRoot(t)
	tor, gen := newToR(t, Config{Rack: 0, Racks: 3, MaxHops: 1})
	first, _ := Routes(3, Choices(map[int][]routing.Hop{1: {{Uplink: 0, Via: 1}}}), []uint32{5}, topo.ToRMAC, 0, nil)
	second, _ := Routes(3, Choices(map[int][]routing.Hop{1: {{Uplink: 0, Via: 2}}, 2: {{Uplink: 0, Via: 2}}}), []uint32{5}, topo.ToRMAC, 0, nil)
	third, _ := Routes(3, Choices(nil), []uint32{5}, topo.ToRMAC, 0, nil) // rack 1 unreachable
	install(t, tor, gen, first)
	at1 := monoclock.Now() + int64(150*time.Millisecond)
	at2 := at1 + int64(100*time.Millisecond)
	for _, s := range []struct {
		rs map[int]Route
		at int64
	}{{second, at1}, {third, at2}} {
		g, _, ok := gen.Free()
		if !ok {
			t.Fatal("no free generation")
		}
		if err := tor.Write(g, s.rs); err != nil {
			t.Fatal(err)
		}
		if err := gen.Arm(g, uint64(s.at)); err != nil {
			t.Fatal(err)
		}
	}
	if err := tor.Write(fastpath.Generations, second); err == nil {
		t.Error("a Write to a generation out of range was accepted")
	}
	via := func() string {
		out := make([]byte, 128)
		pkt := frame(topo.ServerAddr(0, 0), topo.ServerAddr(1, 0), 64)
		ret, err := tor.prog.Run(&ebpf.RunOptions{Data: pkt, DataOut: out})
		if err != nil {
			t.Fatal(err)
		}
		if ret == actShot {
			return "drop"
		}
		return net.HardwareAddr(out[0:6]).String()
	}
	got := via()
	if monoclock.Now() >= at1 {
		t.Skip("staging and the first frame ran past the first instant (150 ms): the machine was too slow to test before it")
	}
	if got != topo.ToRMAC(1).String() {
		t.Fatalf("before the first instant: via %s, want tor1's MAC", got)
	}
	_ = monoclock.SleepUntil(t.Context(), at1)
	if got := via(); got != topo.ToRMAC(2).String() && monoclock.Now() < at2 {
		t.Errorf("after the first instant: via %s, want tor2's MAC", got)
	}
	gen.Commit(fastpath.Monotonic())
	if got := via(); got != topo.ToRMAC(2).String() && monoclock.Now() < at2 {
		t.Errorf("after commit: via %s, want tor2's MAC", got)
	}
	_ = monoclock.SleepUntil(t.Context(), at2)
	if got := via(); got != "drop" {
		t.Errorf("after the second instant: via %s, want a drop (unreachable)", got)
	}
}

func TestConfigRefused(t *testing.T) {
	for _, c := range []Config{{Rack: 3, Racks: 3, MaxHops: 1}, {Rack: 0, Racks: 0, MaxHops: 1}, {Rack: 0, Racks: 2, MaxHops: 0}, {Rack: 0, Racks: 5000, MaxHops: 1}} {
		if err := c.check(); err == nil {
			t.Errorf("config %+v accepted", c)
		}
	}
}

// TestMakeBeforeBreak: until LitUntil frames take only the lit hops
// (routing.Choice.Pick), then every hop.
func TestMakeBeforeBreak(t *testing.T) {
	skipUnlessRoot(t)
	tor, gen := newToR(t, Config{Rack: 0, Racks: 4, MaxHops: 3})
	all := []routing.Hop{{Uplink: 0, Via: 1}, {Uplink: 1, Via: 2}, {Uplink: 2, Via: 3}}
	now := monoclock.Now()
	darkUntil := map[int]int64{0: now + int64(300*time.Millisecond), 2: now + int64(200*time.Millisecond)}
	ch := routing.Choose(all, now, func(u int) int64 { return darkUntil[u] })
	rs, err := Routes(4, map[int]routing.Choice{1: ch}, []uint32{11, 12, 13}, topo.ToRMAC, 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	install(t, tor, gen, rs)
	check := func(when string, at int64) {
		t.Helper()
		for s := range 20 {
			src, dst := topo.ServerAddr(0, s), topo.ServerAddr(1, 0)
			want, _ := ch.Pick(routing.AddrHash(src, dst), at)
			out := make([]byte, 128)
			if _, err := tor.prog.Run(&ebpf.RunOptions{Data: frame(src, dst, 64), DataOut: out}); err != nil {
				t.Fatal(err)
			}
			if got := net.HardwareAddr(out[0:6]).String(); got != topo.ToRMAC(want.Via).String() {
				t.Errorf("%s: %s took %s, want via tor%d", when, src, got, want.Via)
			}
		}
	}
	// check runs 20 frames against one instant: leave them 50 ms before
	// the lit hops' end, so that none runs past it.
	if monoclock.Now()+int64(50*time.Millisecond) >= ch.LitUntil {
		t.Skip("the machine was too slow to test inside the dark period")
	}
	check("dark period", monoclock.Now())
	_ = monoclock.SleepUntil(t.Context(), ch.LitUntil)
	check("after it", monoclock.Now())
}

// TestParseEdgeCases runs both variants on frames at the edges of the
// parse: truncated, not IPv4 (VLAN tag, IPv6, ARP), IPv4 with options
// or of another version, TTL at its limit. What goes to the kernel must
// leave the program unchanged.
func TestParseEdgeCases(t *testing.T) {
	skipUnlessRoot(t)
	const racks, self = 4, 1
	tor, gen := newToR(t, Config{Rack: self, Racks: racks, MaxHops: 2})
	next := map[int][]routing.Hop{2: {{Uplink: 0, Via: 2}, {Uplink: 1, Via: 3}}}
	rs, err := Routes(racks, Choices(next), []uint32{11, 12}, topo.ToRMAC, self, nil)
	if err != nil {
		t.Fatal(err)
	}
	install(t, tor, gen, rs) // rack 0 and 3: unreachable
	src, dst := topo.ServerAddr(self, 3), topo.ServerAddr(2, 1)
	want, _ := routing.Pick(next[2], routing.AddrHash(src, dst))
	base := func() []byte { return frame(src, dst, 64) }
	with := func(f func([]byte) []byte) []byte { return f(base()) }
	vlan := with(func(b []byte) []byte {
		tagged := append([]byte{}, b[:12]...)
		tagged = append(tagged, 0x81, 0x00, 0, 5)
		return append(tagged, b[12:]...)
	})
	options := with(func(b []byte) []byte {
		b[14] = 0x46
		return b
	})
	cases := []struct {
		name        string
		pkt         []byte
		in, eg      uint32
		redirection bool // the frame takes want's hop
	}{
		{"IPv4 to another rack", base(), actRedirect, actRedirect, true},
		{"headers only", base()[:hdrLen], actRedirect, actRedirect, true},
		// BPF_PROG_TEST_RUN refuses IPv4 frames shorter than their
		// header: short frames of other types.
		{"ARP, one byte short", with(func(b []byte) []byte { b[12], b[13] = 0x08, 0x06; return b[:hdrLen-1] }), actOK, actOK, false},
		{"Ethernet only", with(func(b []byte) []byte { b[12], b[13] = 0x88, 0xb5; return b[:14] }), actOK, actOK, false},
		{"ARP", with(func(b []byte) []byte { b[12], b[13] = 0x08, 0x06; return b }), actOK, actOK, false},
		{"short ARP", with(func(b []byte) []byte { b[12], b[13] = 0x08, 0x06; return b[:20] }), actOK, actOK, false},
		{"VLAN-tagged IPv4", vlan, actOK, actOK, false},
		{"IPv6 ethertype", with(func(b []byte) []byte { b[12], b[13] = 0x86, 0xdd; return b }), actOK, actOK, false},
		{"IHL 6", options, actOK, actOK, false},
		{"IHL 15", with(func(b []byte) []byte { b[14] = 0x4f; return b }), actOK, actOK, false},
		{"version 6 in an IPv4 frame", with(func(b []byte) []byte { b[14] = 0x65; return b }), actOK, actOK, false},
		{"TTL 1", frame(src, dst, 1), actOK, actOK, false},
		{"TTL 0", frame(src, dst, 0), actOK, actOK, false},
		{"TTL 2", frame(src, dst, 2), actRedirect, actRedirect, true},
		{"own rack", frame(src, topo.ServerAddr(self, 0), 64), actOK, actOK, false},
		{"unreachable rack", frame(src, topo.ServerAddr(3, 0), 64), actShot, actShot, false},
	}
	for _, c := range cases {
		for _, v := range []struct {
			name string
			prog *ebpf.Program
			want uint32
		}{{"ingress", tor.prog, c.in}, {"egress", tor.egress, c.eg}} {
			out := make([]byte, len(c.pkt)+64)
			ret, err := v.prog.Run(&ebpf.RunOptions{Data: c.pkt, DataOut: out})
			if err != nil {
				t.Fatalf("%s, %s: test run: %v", c.name, v.name, err)
			}
			out = out[:len(c.pkt)]
			if ret != v.want {
				t.Errorf("%s, %s: action %d, want %d", c.name, v.name, ret, v.want)
				continue
			}
			switch {
			case c.redirection:
				if got := net.HardwareAddr(out[0:6]).String(); got != topo.ToRMAC(want.Via).String() {
					t.Errorf("%s, %s: dst MAC %s, want via tor%d", c.name, v.name, got, want.Via)
				}
			case ret == actOK && string(out) != string(c.pkt):
				t.Errorf("%s, %s: frame changed on its way to the kernel:\n% x\n% x", c.name, v.name, c.pkt, out)
			}
		}
	}
}

// BenchmarkProgram times the programs per frame (BPF_PROG_TEST_RUN, the
// kernel's own loop over one skb) on a frame the egress variant
// redirects to another rack (the ingress one would decrement the TTL
// of that skb down to 1 and leave it), on one the ingress program leaves
// to the kernel (not IPv4), and a program that only returns: what the
// test run itself costs.
func BenchmarkProgram(b *testing.B) {
	if os.Geteuid() != 0 {
		b.Skip("needs root to load BPF programs")
	}
	gen, err := fastpath.NewGen()
	if err != nil {
		b.Fatal(err)
	}
	defer gen.Close()
	const racks, self = 4, 1
	tor, err := New(Config{Rack: self, Racks: racks, MaxHops: 2}, gen)
	if err != nil {
		b.Fatal(err)
	}
	defer tor.Close()
	next := map[int][]routing.Hop{2: {{Uplink: 0, Via: 2}, {Uplink: 1, Via: 3}}}
	rs, err := Routes(racks, Choices(next), []uint32{11, 12}, topo.ToRMAC, self, nil)
	if err != nil {
		b.Fatal(err)
	}
	g, _, _ := gen.Free()
	if err := tor.Write(g, rs); err != nil {
		b.Fatal(err)
	}
	if err := gen.Arm(g, 0); err != nil {
		b.Fatal(err)
	}
	gen.Commit(fastpath.Monotonic())
	for _, ifi := range []uint32{11, 12} {
		if err := tor.fast.Put(ifi, uint32(1)); err != nil {
			b.Fatal(err)
		}
	}
	empty, err := ebpf.NewProgram(&ebpf.ProgramSpec{Type: ebpf.SchedCLS, License: "GPL",
		Instructions: asm.Instructions{asm.Mov.Imm(asm.R0, actOK), asm.Return()}})
	if err != nil {
		b.Fatal(err)
	}
	defer empty.Close()
	fwd := frame(topo.ServerAddr(self, 0), topo.ServerAddr(2, 0), 64)
	arp := frame(topo.ServerAddr(self, 0), topo.ServerAddr(2, 0), 64)
	arp[12], arp[13] = 0x08, 0x06
	for _, c := range []struct {
		name string
		prog *ebpf.Program
		pkt  []byte
		want uint32
	}{{"egress redirect", tor.egress, fwd, actRedirect}, {"ingress to kernel", tor.prog, arp, actOK}, {"empty", empty, fwd, actOK}} {
		b.Run(c.name, func(b *testing.B) {
			ret, d, err := c.prog.Benchmark(c.pkt, b.N, nil)
			if err != nil || ret != c.want {
				b.Fatalf("action %d, want %d: %v", ret, c.want, err)
			}
			b.ReportMetric(float64(d.Nanoseconds()), "ns/frame")
		})
	}
}
