package fastpath

import (
	"encoding/binary"
	"os"
	"testing"
	"time"

	"github.com/cilium/ebpf"
)

// skbCtxSize is the size of the __sk_buff given to BPF_PROG_TEST_RUN; only
// ingress_ifindex is set.
const skbCtxSize = 192

func newSwitch(t *testing.T) *Switch {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root to load BPF programs")
	}
	gen, err := NewGen()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(gen.Close)
	s, err := New(gen, []uint32{5, 6, 7})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return s
}

// apply writes one configuration and switches to it at once.
func apply(t *testing.T, s *Switch, entries map[uint32]Entry) {
	t.Helper()
	g, _, ok := s.gen.Free()
	if !ok {
		t.Fatal("no free generation")
	}
	if err := s.Write(g, entries); err != nil {
		t.Fatal(err)
	}
	if err := s.gen.Arm(g, 0); err != nil {
		t.Fatal(err)
	}
	s.gen.Commit(Monotonic())
	if s.gen.Cur() != g || s.gen.Pending() != 0 {
		t.Fatalf("after commit: generation %d in use (%d pending), want %d", s.gen.Cur(), s.gen.Pending(), g)
	}
}

// run hands the program one frame that entered port ifindex.
func run(t *testing.T, s *Switch, ifindex uint32) uint32 {
	t.Helper()
	ctx := make([]byte, skbCtxSize)
	binary.NativeEndian.PutUint32(ctx[skbIngressIfindex:], ifindex)
	frame := make([]byte, 64)
	binary.BigEndian.PutUint16(frame[12:], 0x0800)
	ret, err := s.prog.Run(&ebpf.RunOptions{Data: frame, Context: ctx})
	if err != nil {
		t.Fatalf("test run: %v", err)
	}
	return ret
}

// TestDarkTimes runs the program on frames through a dark period and
// checks the kernel's timestamps and counters of the port they entered.
func TestDarkTimes(t *testing.T) {
	s := newSwitch(t)
	const port, peer = 5, 6
	times := func() DarkTimes {
		t.Helper()
		m, err := s.DarkTimes([]uint32{port})
		if err != nil {
			t.Fatal(err)
		}
		return m[port]
	}
	apply(t, s, map[uint32]Entry{port: {Peer: peer}, peer: {Peer: port}})
	if ret := run(t, s, port); ret != actRedirect {
		t.Fatalf("lit port: action %d, want redirect", ret)
	}
	lit := times()
	if lit.LastFwd == 0 || lit.Periods != 0 {
		t.Fatalf("after one forwarded frame: %+v", lit)
	}

	apply(t, s, map[uint32]Entry{port: {Peer: peer, DarkUntil: Monotonic() + uint64(time.Hour)}, peer: {Peer: port}})
	for range 3 {
		if ret := run(t, s, port); ret != actShot {
			t.Fatalf("dark port: action %d, want drop", ret)
		}
	}
	dark := times()
	if dark.FirstDark <= lit.LastFwd || dark.LastDark < dark.FirstDark || dark.LastFwd != lit.LastFwd || dark.Periods != 0 {
		t.Fatalf("after three dark drops: %+v (before them %+v)", dark, lit)
	}

	apply(t, s, map[uint32]Entry{port: {Peer: peer}, peer: {Peer: port}})
	if ret := run(t, s, port); ret != actRedirect {
		t.Fatalf("port lit again: action %d, want redirect", ret)
	}
	after := times()
	want := DarkTimes{LastFwd: after.After, LastDark: dark.LastDark, FirstDark: dark.FirstDark,
		Before: lit.LastFwd, DarkFrom: dark.FirstDark, DarkTo: dark.LastDark, After: after.After, Periods: 1}
	if after != want || after.After <= dark.LastDark {
		t.Errorf("after the dark period: %+v, want %+v with after > last dark drop", after, want)
	}

	// Unpatched drops are not dark: the record stays.
	apply(t, s, map[uint32]Entry{port: {}, peer: {}})
	if ret := run(t, s, port); ret != actShot {
		t.Fatalf("unpatched port: action %d, want drop", ret)
	}
	if got := times(); got != after {
		t.Errorf("an unpatched drop changed the times: %+v, was %+v", got, after)
	}
	c, err := s.Counters([]uint32{port})
	if err != nil {
		t.Fatal(err)
	}
	if got := c[port]; got.FwdPackets != 2 || got.DarkPackets != 3 || got.UnpatchedPackets != 1 {
		t.Errorf("counters %+v, want 2 forwarded, 3 dark, 1 unpatched", got)
	}
}

// BenchmarkProgram times the switch program per frame
// (BPF_PROG_TEST_RUN repeating it in the kernel; ns/op) on a frame of a
// lit circuit whose peer port is fast, and of a dark one.
func BenchmarkProgram(b *testing.B) {
	if os.Geteuid() != 0 {
		b.Skip("needs root to load BPF programs")
	}
	gen, err := NewGen()
	if err != nil {
		b.Fatal(err)
	}
	defer gen.Close()
	s, err := New(gen, []uint32{5, 6, 7})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	g, _, _ := gen.Free()
	if err := s.Write(g, map[uint32]Entry{5: {Peer: 6}, 6: {Peer: 5}, 7: {Peer: 7, DarkUntil: Monotonic() + uint64(time.Hour)}}); err != nil {
		b.Fatal(err)
	}
	if err := gen.Arm(g, 0); err != nil {
		b.Fatal(err)
	}
	gen.Commit(Monotonic())
	if err := s.fast.Put(uint32(6), uint32(1)); err != nil {
		b.Fatal(err)
	}
	frame := make([]byte, 64)
	binary.BigEndian.PutUint16(frame[12:], 0x0800)
	for _, c := range []struct {
		name    string
		ifindex uint32
		want    uint32
	}{{"lit", 5, actRedirect}, {"dark", 7, actShot}} {
		b.Run(c.name, func(b *testing.B) {
			ctx := make([]byte, skbCtxSize)
			binary.NativeEndian.PutUint32(ctx[skbIngressIfindex:], c.ifindex)
			ret, err := s.prog.Run(&ebpf.RunOptions{Data: frame, Context: ctx, Repeat: uint32(b.N)})
			if err != nil || ret != c.want {
				b.Fatalf("action %d, want %d: %v", ret, c.want, err)
			}
		})
	}
}
