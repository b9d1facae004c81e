package fastpath

import (
	"os"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

func newGen(t *testing.T) *Gen {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root to create BPF maps")
	}
	g, err := NewGen()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(g.Close)
	return g
}

// words reads the meta value through the syscall, as a program sees it.
func words(t *testing.T, g *Gen) []uint64 {
	t.Helper()
	w := make([]uint64, Generations)
	if err := g.meta.Lookup(uint32(0), &w); err != nil {
		t.Fatal(err)
	}
	return w
}

func ahead(d time.Duration) uint64 { return uint64(int64(Monotonic()) + int64(d)) }

// TestArmedSwitchesResolve runs the program with several switches armed
// at once: the latest whose instant has passed decides, whatever the
// order they were armed in, before and after Commit.
func TestArmedSwitchesResolve(t *testing.T) {
	const port, peer = 5, 6
	type sw struct {
		cfg string // "fwd", "dark" or "unpatched"
		at  time.Duration
	}
	ms := func(n int) time.Duration { return time.Duration(n) * time.Millisecond }
	// Every switch word armed: 14 passed switches, then the latest
	// passed in word 15.
	var lastWins []sw
	for i := range Generations - 2 {
		lastWins = append(lastWins, sw{[]string{"fwd", "dark"}[i%2], -ms(30 - i)})
	}
	lastWins = append(lastWins, sw{"unpatched", -ms(1)})
	// Every word armed, the latest passed in word 1, the higher words
	// earlier or ahead, word 15 the earliest.
	firstWins := []sw{{"unpatched", -ms(1)}}
	for i := range Generations - 2 {
		if i%3 == 2 {
			firstWins = append(firstWins, sw{"fwd", time.Hour + ms(i)})
		} else {
			firstWins = append(firstWins, sw{"dark", -ms(2 + i)})
		}
	}
	cases := []struct {
		name  string
		armed []sw
		want  string
	}{
		{"none armed", nil, "fwd"},
		{"one ahead", []sw{{"dark", time.Hour}}, "fwd"},
		{"one passed", []sw{{"dark", -time.Millisecond}}, "dark"},
		{"latest passed wins", []sw{{"dark", -2 * time.Millisecond}, {"unpatched", -time.Millisecond}}, "unpatched"},
		{"armed out of order", []sw{{"unpatched", -time.Millisecond}, {"dark", -2 * time.Millisecond}}, "unpatched"},
		{"passed then ahead", []sw{{"dark", -time.Millisecond}, {"unpatched", time.Hour}}, "dark"},
		{"seven armed, two ahead", []sw{{"dark", -6 * time.Millisecond}, {"unpatched", -5 * time.Millisecond}, {"fwd", -4 * time.Millisecond},
			{"unpatched", -3 * time.Millisecond}, {"dark", -2 * time.Millisecond}, {"fwd", time.Hour}, {"unpatched", 2 * time.Hour}}, "dark"},
		{"every word armed, latest in word 15", lastWins, "unpatched"},
		{"every word armed, higher words earlier", firstWins, "unpatched"},
	}
	cfgs := map[string]map[uint32]Entry{
		"fwd":       {port: {Peer: peer}, peer: {Peer: port}},
		"dark":      {port: {Peer: peer, DarkUntil: ahead(24 * time.Hour)}, peer: {Peer: port}},
		"unpatched": {port: {}, peer: {}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := newSwitch(t)
			apply(t, s, cfgs["fwd"])
			// One base for every instant: their order must not depend on
			// how long arming the earlier ones took.
			base := int64(Monotonic())
			for _, a := range tc.armed {
				g := free(t, s.gen)
				if err := s.Write(g, cfgs[a.cfg]); err != nil {
					t.Fatal(err)
				}
				if err := s.gen.Arm(g, uint64(base+int64(a.at))); err != nil {
					t.Fatal(err)
				}
			}
			outcome := func() string {
				c0, err := s.Counters([]uint32{port})
				if err != nil {
					t.Fatal(err)
				}
				ret := run(t, s, port)
				c1, err := s.Counters([]uint32{port})
				if err != nil {
					t.Fatal(err)
				}
				switch {
				case ret == actRedirect:
					return "fwd"
				case c1[port].DarkPackets > c0[port].DarkPackets:
					return "dark"
				case c1[port].UnpatchedPackets > c0[port].UnpatchedPackets:
					return "unpatched"
				}
				return "?"
			}
			if got := outcome(); got != tc.want {
				t.Errorf("frame was %s, want %s", got, tc.want)
			}
			s.gen.Commit(Monotonic())
			if got := outcome(); got != tc.want {
				t.Errorf("after commit: frame was %s, want %s", got, tc.want)
			}
			if w := words(t, s.gen); w[0]&(Generations-1) != uint64(s.gen.Cur()) {
				t.Errorf("word 0 is %d, generation in use %d", w[0], s.gen.Cur())
			}
		})
	}
}

// free returns a Free generation, waiting out a reuse guard if need be.
func free(t *testing.T, g *Gen) uint32 {
	t.Helper()
	x, _, ok := g.Free()
	if !ok {
		time.Sleep(time.Duration(reuseGuard))
		x, _, ok = g.Free()
	}
	if !ok {
		t.Fatal("no free generation")
	}
	return x
}

// TestCommitSeenMidway runs the program on the words as a frame may read
// them while Commit records two passed switches: the earlier one's word
// read before Commit cleared it, the later one's after, and word 0, read
// last, holding the later switch. The frame must take the later one.
func TestCommitSeenMidway(t *testing.T) {
	const port, peer = 5, 6
	s := newSwitch(t)
	apply(t, s, map[uint32]Entry{port: {Peer: peer}, peer: {Peer: port}})
	early := free(t, s.gen)
	if err := s.Write(early, map[uint32]Entry{port: {Peer: peer}, peer: {Peer: port}}); err != nil {
		t.Fatal(err)
	}
	if err := s.gen.Arm(early, ahead(-2*time.Millisecond)); err != nil {
		t.Fatal(err)
	}
	late := free(t, s.gen)
	if err := s.Write(late, map[uint32]Entry{port: {}, peer: {}}); err != nil {
		t.Fatal(err)
	}
	if err := s.gen.Arm(late, ahead(-time.Millisecond)); err != nil {
		t.Fatal(err)
	}
	w := words(t, s.gen)
	s.gen.Commit(Monotonic())
	if s.gen.Cur() != late {
		t.Fatalf("generation %d in use after commit, want %d", s.gen.Cur(), late)
	}
	for i := 1; i < Generations; i++ {
		if w[i]&(Generations-1) == uint64(early) {
			s.gen.store(i, w[i]) // the earlier switch's word, as read before its clear
		}
	}
	if ret := run(t, s, port); ret == actRedirect {
		t.Error("frame forwarded by the earlier switch's generation, want the later switch's (unpatched)")
	}
}

// TestGenRing walks the generations: Free hands them out in turn, every
// slot can be armed, a committed switch frees the generation it replaced
// only after the reuse guard, Cancel disarms what lies ahead, and the
// words the programs read follow.
func TestGenRing(t *testing.T) {
	g := newGen(t)
	far := ahead(time.Hour)
	for want := uint32(1); want < Generations; want++ {
		x, _, ok := g.Free()
		if y, _, _ := g.Free(); !ok || x != want || y != x {
			t.Fatalf("free: %d, %d (ok %v), want %d twice", x, y, ok, want)
		}
		if err := g.Arm(x, far+uint64(x)); err != nil {
			t.Fatal(err)
		}
		if w := words(t, g); w[x] != (far+uint64(x))<<genBits|uint64(x) {
			t.Fatalf("word %d is %#x after arming generation %d", x, w[x], x)
		}
	}
	if _, retry, ok := g.Free(); ok || retry != far+1+reuseGuard {
		t.Fatalf("all armed: free ok=%v retry %d, want none until %d", ok, retry, far+1+reuseGuard)
	}
	if err := g.Arm(0, far); err == nil {
		t.Fatal("arming the generation in use succeeded")
	}
	g.Commit(Monotonic())
	if g.Pending() != Generations-1 || g.Cur() != 0 {
		t.Fatalf("commit before any instant: %d pending, generation %d in use", g.Pending(), g.Cur())
	}
	if cut := g.Cancel(uint64(time.Second)); cut >= far || g.Pending() != 0 {
		t.Fatalf("cancel: cut %d, %d still pending", cut, g.Pending())
	}
	for i, w := range words(t, g)[1:] {
		if w != 0 {
			t.Fatalf("word %d is %#x after cancel", i+1, w)
		}
	}

	// Two passed switches commit in order; the newest is in use. The
	// second was armed late: x, which it replaces, counts as used until
	// the commit, not until the switch's nominal instant.
	x, _, _ := g.Free()
	_ = g.Arm(x, ahead(-2*time.Millisecond))
	y, _, _ := g.Free()
	_ = g.Arm(y, ahead(-time.Millisecond))
	before := Monotonic()
	g.Commit(before)
	at := Monotonic()
	if g.Cur() != y || g.Pending() != 0 || words(t, g)[0]&(Generations-1) != uint64(y) {
		t.Fatalf("after two passed switches: generation %d in use, want %d", g.Cur(), y)
	}
	// Fill every other generation: only 0 and x, replaced by the
	// commit, are left, from the commit+reuseGuard on.
	for {
		z, _, ok := g.Free()
		if !ok {
			break
		}
		if z == x || z == 0 {
			if Monotonic() < at+reuseGuard {
				t.Fatalf("generation %d handed out %v after it was replaced", z, time.Duration(Monotonic()-at))
			}
			t.Skip("the machine was too slow to test the reuse guard")
		}
		_ = g.Arm(z, far)
	}
	if _, retry, _ := g.Free(); retry < before+reuseGuard || retry > at+reuseGuard {
		t.Fatalf("retry %d, want the replaced generation's guard from the commit, %d..%d", retry, before+reuseGuard, at+reuseGuard)
	}
	time.Sleep(time.Duration(at + reuseGuard - Monotonic()))
	if z, _, ok := g.Free(); !ok || z != x && z != 0 {
		t.Fatalf("after the guard: free %d (ok %v), want 0 or %d", z, ok, x)
	}
}

// TestGenClosed: after Close the meta value is unmapped; Arm fails and
// Commit and Cancel leave it alone instead of touching freed memory.
func TestGenClosed(t *testing.T) {
	g := newGen(t)
	x, _, _ := g.Free()
	if err := g.Arm(x, ahead(time.Hour)); err != nil {
		t.Fatal(err)
	}
	g.Close()
	if err := g.Arm((x+1)%Generations, ahead(-time.Millisecond)); err == nil {
		t.Error("arm after close succeeded")
	}
	g.Commit(Monotonic())
	g.Cancel(0)
}

// TestRecoverGen: a restarted process takes over the newest switch whose
// instant has passed and disarms the ones ahead.
func TestRecoverGen(t *testing.T) {
	g := newGen(t)
	for _, d := range []time.Duration{-2 * time.Millisecond, -time.Millisecond, time.Hour} {
		x, _, _ := g.Free()
		if err := g.Arm(x, ahead(d)); err != nil {
			t.Fatal(err)
		}
	}
	r, err := recoverGen(g.meta)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Munmap(r.mem) // the map itself is g's
	if r.Cur() != 2 || r.Pending() != 0 {
		t.Errorf("recovered: generation %d in use, %d pending; want 2, 0", r.Cur(), r.Pending())
	}
	if w := words(t, g); w[0]&(Generations-1) != 2 || w[1] != 0 || w[2] != 0 || w[3] != 0 {
		t.Errorf("words after recovery: %v", w)
	}
}
