package inc

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"net/netip"
	"slices"
	"testing"
)

// sent is one packet an engine emitted.
type sent struct {
	to    netip.AddrPort
	h     Header
	elems []int32
}

func (s sent) String() string {
	return fmt.Sprintf("%s to %v slot %d set %d worker %d %v", s.h.Type, s.to, s.h.Slot, s.h.Set, s.h.Worker, s.elems)
}

// rig drives one engine with packets and collects what it emits.
type rig struct {
	t   *testing.T
	e   *Engine
	out []sent
}

func newRig(t *testing.T, cfg Config, jobs ...JobConfig) *rig {
	t.Helper()
	e, err := NewEngine(cfg)
	if err != nil {
		t.Fatal(err)
	}
	for _, j := range jobs {
		if err := e.Admit(j); err != nil {
			t.Fatal(err)
		}
	}
	return &rig{t: t, e: e}
}

func addr(i int) netip.AddrPort {
	return netip.AddrPortFrom(netip.AddrFrom4([4]byte{10, 0, 0, byte(i + 1)}), Port)
}

// send encodes and decodes a packet as the wire would, hands it to the
// engine, and returns what the engine emitted in answer.
func (r *rig) send(from netip.AddrPort, h Header, elems []int32) []sent {
	r.t.Helper()
	b := Append(nil, &h, elems)
	var d Header
	if err := d.DecodeFromBytes(b, nilFeedback{}); err != nil {
		r.t.Fatal(err)
	}
	var out []sent
	r.e.Handle(from, &d, func(to netip.AddrPort, h *Header, payload []byte) {
		out = append(out, sent{to: to, h: *h, elems: fromWire(payload)})
	})
	r.out = append(r.out, out...)
	return out
}

// fromWire decodes wire-order elements.
func fromWire(payload []byte) []int32 {
	out := make([]int32, len(payload)/4)
	for i := range out {
		out[i] = int32(binary.LittleEndian.Uint32(payload[4*i:]))
	}
	return out
}

type nilFeedback struct{}

func (nilFeedback) SetTruncated() {}

// data is worker w's block of a flat job of n workers.
func data(job, w, n, slot uint16, set uint8, packet uint32) Header {
	return Header{Type: TypeData, Job: job, Worker: w, Workers: n, Slot: slot, Set: set, Packet: packet}
}

func wantResults(t *testing.T, got []sent, to []netip.AddrPort, sum []int32) {
	t.Helper()
	if len(got) != len(to) {
		t.Fatalf("emitted %v, want one result to each of %v", got, to)
	}
	for i, s := range got {
		if s.h.Type != TypeResult || s.to != to[i] || !slices.Equal(s.elems, sum) {
			t.Fatalf("packet %d: %v, want result %v to %v", i, s, sum, to[i])
		}
	}
}

var flat = Config{Slots: 8, Capacity: 2}

// The tests below follow SwitchML's switch-side test list.

func TestBasicReduction(t *testing.T) {
	r := newRig(t, flat, JobConfig{ID: 1, ToRs: 1})
	for w := uint16(0); w < 2; w++ {
		if out := r.send(addr(int(w)), data(1, w, 3, 0, 0, 0), []int32{1, 2, int32(w)}); len(out) != 0 {
			t.Fatalf("slot not complete yet, emitted %v", out)
		}
	}
	out := r.send(addr(2), data(1, 2, 3, 0, 0, 0), []int32{1, 2, 2})
	wantResults(t, out, []netip.AddrPort{addr(0), addr(1), addr(2)}, []int32{3, 6, 3})
	st := r.e.Stats()
	if st.Packets != 3 || st.Completions != 1 || st.Elements != 9 || st.Duplicates != 0 || st.Results != 3 {
		t.Fatalf("stats %+v", st)
	}
}

func TestRetransmissionsIgnoredWhileFilling(t *testing.T) {
	r := newRig(t, flat, JobConfig{ID: 1, ToRs: 1})
	for range 3 {
		if out := r.send(addr(0), data(1, 0, 2, 0, 0, 0), []int32{5}); len(out) != 0 {
			t.Fatalf("a duplicate of a filling slot emitted %v", out)
		}
	}
	out := r.send(addr(1), data(1, 1, 2, 0, 0, 0), []int32{7})
	wantResults(t, out, []netip.AddrPort{addr(0), addr(1)}, []int32{12})
	if st := r.e.Stats(); st.Duplicates != 2 || st.Completions != 1 {
		t.Fatalf("stats %+v, want 2 duplicates and 1 completion", st)
	}
}

func TestRetransmissionAfterReductionIsUnicast(t *testing.T) {
	r := newRig(t, flat, JobConfig{ID: 1, ToRs: 1})
	r.send(addr(0), data(1, 0, 3, 2, 1, 9), []int32{1})
	r.send(addr(1), data(1, 1, 3, 2, 1, 9), []int32{2})
	r.send(addr(2), data(1, 2, 3, 2, 1, 9), []int32{3})
	out := r.send(addr(1), data(1, 1, 3, 2, 1, 9), []int32{2})
	wantResults(t, out, []netip.AddrPort{addr(1)}, []int32{6})
	if out[0].h.Slot != 2 || out[0].h.Set != 1 || out[0].h.Packet != 9 || out[0].h.Worker != 1 {
		t.Fatalf("unicast header %+v", out[0].h)
	}
	if st := r.e.Stats(); st.Unicasts != 1 || st.Completions != 1 || st.Elements != 3 {
		t.Fatalf("stats %+v", st)
	}
}

func TestRetransmissionFromPreviousSet(t *testing.T) {
	r := newRig(t, flat, JobConfig{ID: 1, ToRs: 1})
	for w := uint16(0); w < 3; w++ {
		r.send(addr(int(w)), data(1, w, 3, 0, 0, 0), []int32{10})
	}
	// Workers 0 and 1 got the result and moved to set 1 with the next
	// block; worker 2's result was lost and it retransmits into set 0.
	r.send(addr(0), data(1, 0, 3, 0, 1, 1), []int32{100})
	r.send(addr(1), data(1, 1, 3, 0, 1, 1), []int32{100})
	out := r.send(addr(2), data(1, 2, 3, 0, 0, 0), []int32{10})
	wantResults(t, out, []netip.AddrPort{addr(2)}, []int32{30})
	out = r.send(addr(2), data(1, 2, 3, 0, 1, 1), []int32{100})
	wantResults(t, out, []netip.AddrPort{addr(0), addr(1), addr(2)}, []int32{300})
}

func TestSlotReuseWithoutStaleData(t *testing.T) {
	r := newRig(t, flat, JobConfig{ID: 1, ToRs: 1})
	for round := 0; round < 6; round++ {
		var out []sent
		for w := uint16(0); w < 2; w++ {
			out = r.send(addr(int(w)), data(1, w, 2, 3, uint8(round%2), uint32(round)), []int32{int32(round), -1})
		}
		// Never zeroed: the first writer of each round overwrites.
		wantResults(t, out, []netip.AddrPort{addr(0), addr(1)}, []int32{int32(2 * round), -2})
	}
	if st := r.e.Stats(); st.Completions != 6 || st.Stale != 0 || st.Duplicates != 0 {
		t.Fatalf("stats %+v", st)
	}
}

func TestTwoJobsIsolated(t *testing.T) {
	r := newRig(t, flat, JobConfig{ID: 1, ToRs: 1}, JobConfig{ID: 2, ToRs: 1})
	r.send(addr(0), data(1, 0, 2, 0, 0, 0), []int32{1})
	r.send(addr(2), data(2, 0, 2, 0, 0, 0), []int32{1000})
	out2 := r.send(addr(3), data(2, 1, 2, 0, 0, 0), []int32{2000})
	out1 := r.send(addr(1), data(1, 1, 2, 0, 0, 0), []int32{2})
	wantResults(t, out1, []netip.AddrPort{addr(0), addr(1)}, []int32{3})
	wantResults(t, out2, []netip.AddrPort{addr(2), addr(3)}, []int32{3000})
	if out1[0].h.Job != 1 || out2[0].h.Job != 2 {
		t.Fatalf("result jobs %d and %d", out1[0].h.Job, out2[0].h.Job)
	}
}

func TestTailPacketShorterThanK(t *testing.T) {
	r := newRig(t, flat, JobConfig{ID: 1, ToRs: 1})
	full := make([]int32, MaxElems)
	for i := range full {
		full[i] = int32(i)
	}
	for w := uint16(0); w < 2; w++ {
		r.send(addr(int(w)), data(1, w, 2, 0, 0, 0), full)
	}
	r.send(addr(0), data(1, 0, 2, 0, 1, 1), []int32{1, 2, 3})
	out := r.send(addr(1), data(1, 1, 2, 0, 1, 1), []int32{4, 5, 6})
	wantResults(t, out, []netip.AddrPort{addr(0), addr(1)}, []int32{5, 7, 9})
	// A mismatched length in the same round is not added.
	r.send(addr(0), data(1, 0, 2, 1, 0, 2), []int32{1, 2, 3})
	if out := r.send(addr(1), data(1, 1, 2, 1, 0, 2), []int32{1, 2}); len(out) != 0 || r.e.Stats().Stale != 1 {
		t.Fatalf("a block of another length was counted: %v, %+v", out, r.e.Stats())
	}
}

func TestInt32SumsExact(t *testing.T) {
	const n, blocks = 5, 40
	r := newRig(t, Config{Slots: 4, Capacity: 1}, JobConfig{ID: 7, ToRs: 1})
	rng := rand.New(rand.NewPCG(1, 2))
	for b := 0; b < blocks; b++ {
		want := make([]int32, 1+rng.IntN(MaxElems))
		var out []sent
		for w := uint16(0); w < n; w++ {
			v := make([]int32, len(want))
			for i := range v {
				v[i] = rng.Int32N(math.MaxInt32/n) - math.MaxInt32/(2*n)
				want[i] += v[i]
			}
			out = r.send(addr(int(w)), data(7, w, n, uint16(b%4), uint8(b/4%2), uint32(b)), v)
		}
		if len(out) != n || !slices.Equal(out[0].elems, want) {
			t.Fatalf("block %d: sum differs", b)
		}
	}
}

func TestFloat32WithinBound(t *testing.T) {
	const n = 6
	r := newRig(t, flat, JobConfig{ID: 1, ToRs: 1})
	rng := rand.New(rand.NewPCG(3, 4))
	in := make([][]float32, n)
	exact := make([]float64, 64)
	var out []sent
	for w := range in {
		scale := math.Pow(10, float64(w-3)) // contributors of very different magnitudes
		in[w] = make([]float32, len(exact))
		for i := range in[w] {
			in[w][i] = float32((rng.Float64()*2 - 1) * scale)
			exact[i] += float64(in[w][i])
		}
		e := Exponent(MaxAbs(in[w]), n)
		q := make([]int32, len(exact))
		ToFixed(q, in[w], e)
		h := data(1, uint16(w), n, 0, 0, 0)
		h.Exp = e
		out = r.send(addr(w), h, q)
	}
	res := make([]float32, len(exact))
	FromFixed(res, out[0].elems, out[0].h.Exp)
	bound := ErrorBound(n, out[0].h.Exp)
	worst := 0.0
	for i := range res {
		worst = max(worst, math.Abs(float64(res[i])-exact[i]))
	}
	// float32 output adds its own rounding: half an ulp of the sum.
	if worst > bound+math.Abs(exact[0])*1e-7+1e-7 {
		t.Fatalf("error %g over the bound %g (exponent %d)", worst, bound, out[0].h.Exp)
	}
	t.Logf("worst error %.3g, bound %.3g", worst, bound)
}

func TestAdmission(t *testing.T) {
	r := newRig(t, Config{Slots: 10, Capacity: 2}, JobConfig{ID: 1, ToRs: 1}, JobConfig{ID: 2, ToRs: 1})
	if err := r.e.Admit(JobConfig{ID: 1, ToRs: 1}); err != nil {
		t.Fatalf("admitting a job again: %v", err)
	}
	err := r.e.Admit(JobConfig{ID: 3, ToRs: 1})
	if !errors.Is(err, ErrNoRoom) || r.e.Stats().Refusals != 1 {
		t.Fatalf("third job on a capacity-2 ToR: %v, %+v", err, r.e.Stats())
	}
	out := r.send(addr(0), data(3, 0, 1, 0, 0, 0), []int32{1})
	if len(out) != 1 || out[0].h.Type != TypeRefused || out[0].to != addr(0) || r.e.Stats().Unknown != 1 {
		t.Fatalf("a packet of a refused job got %v", out)
	}
	if out := r.send(addr(0), data(1, 0, 1, 5, 0, 0), []int32{1}); len(out) != 0 || r.e.Stats().Malformed != 1 {
		t.Fatalf("slot 5 is outside a 5-slot partition (0..4): %v", out)
	}
	r.e.Release(2)
	if err := r.e.Admit(JobConfig{ID: 3, ToRs: 1}); err != nil {
		t.Fatalf("after a release: %v", err)
	}
	if got := r.e.Jobs(); len(got) != 2 || got[0].ID != 1 || got[1].ID != 3 {
		t.Fatalf("jobs %v", got)
	}
	for _, bad := range []JobConfig{{ID: 4, ToRs: 0}, {ID: 4, ToRs: 2, Index: 2}, {ID: 4, ToRs: 1, Parent: addr(9)}, {ID: 4, ToRs: 1, FirstStage: 3, LastStage: 2},
		{ID: 4, ToRs: 2, Roots: []netip.AddrPort{addr(8)}}, {ID: 4, ToRs: 2, Parent: addr(8), Roots: []netip.AddrPort{addr(8), addr(9)}},
		{ID: 4, ToRs: 2, Roots: []netip.AddrPort{addr(8), {}}}, {ID: 4, ToRs: 1, Roots: []netip.AddrPort{addr(8)}}} {
		if err := r.e.Admit(bad); err == nil || errors.Is(err, ErrNoRoom) {
			t.Errorf("Admit(%+v) = %v, want a configuration error", bad, err)
		}
	}
}

func TestConfigValidate(t *testing.T) {
	for _, c := range []struct {
		cfg Config
		ok  bool
	}{
		{Config{Slots: 1024, Capacity: 4}, true},
		{Config{Slots: 1, Capacity: 1}, true},
		{Config{Slots: 3, Capacity: 4}, false},
		{Config{Slots: 8, Capacity: 0}, false},
		{Config{Slots: 1 << 21, Capacity: 4}, false},
	} {
		if err := c.cfg.Validate(); (err == nil) != c.ok {
			t.Errorf("%+v: %v", c.cfg, err)
		}
	}
}

// TestHierarchy wires a root ToR and a ToR below it by hand: partial sums
// go up, the result comes down to both racks' workers, and a lost result
// between the ToRs is recovered by a worker's retransmission (the lower
// ToR resends its partial, the root answers it alone).
func TestHierarchy(t *testing.T) {
	rootAddr, lowAddr := addr(100), addr(101)
	root := newRig(t, flat, JobConfig{ID: 1, ToRs: 2, Index: 0})
	low := newRig(t, flat, JobConfig{ID: 1, ToRs: 2, Index: 1, Parent: rootAddr})
	// Rack 0: one worker at the root; rack 1: two workers below.
	if out := root.send(addr(0), data(1, 0, 1, 0, 0, 0), []int32{1, 10}); len(out) != 0 {
		t.Fatalf("root completed with one ToR missing: %v", out)
	}
	low.send(addr(1), data(1, 0, 2, 0, 0, 0), []int32{2, 20})
	up := low.send(addr(2), data(1, 1, 2, 0, 0, 0), []int32{3, 30})
	if len(up) != 1 || up[0].h.Type != TypePartial || up[0].to != rootAddr || !slices.Equal(up[0].elems, []int32{5, 50}) || up[0].h.Worker != 1 || up[0].h.Workers != 2 {
		t.Fatalf("lower ToR sent %v, want its partial sum to the root", up)
	}
	down := root.send(lowAddr, up[0].h, up[0].elems)
	sum := []int32{6, 60}
	// One result to the lower ToR, one to the root's own worker.
	if len(down) != 2 || down[0].to != lowAddr || down[1].to != addr(0) || !slices.Equal(down[0].elems, sum) || !slices.Equal(down[1].elems, sum) {
		t.Fatalf("root sent %v", down)
	}
	// The result to the lower ToR is lost; worker 1 retransmits.
	again := low.send(addr(2), data(1, 1, 2, 0, 0, 0), []int32{3, 30})
	if len(again) != 1 || again[0].h.Type != TypePartial || !slices.Equal(again[0].elems, []int32{5, 50}) {
		t.Fatalf("retransmission below a missing result sent %v, want the partial again", again)
	}
	uni := root.send(lowAddr, again[0].h, again[0].elems)
	if len(uni) != 1 || uni[0].to != lowAddr || !slices.Equal(uni[0].elems, sum) {
		t.Fatalf("root answered a repeated partial with %v, want the sum to that ToR only", uni)
	}
	res := low.send(rootAddr, uni[0].h, uni[0].elems)
	wantResults(t, res, []netip.AddrPort{addr(1), addr(2)}, sum)
	// A second copy of the result changes nothing.
	if out := low.send(rootAddr, uni[0].h, uni[0].elems); len(out) != 0 {
		t.Fatalf("a duplicate result was sent on: %v", out)
	}
	if st := root.e.Stats(); st.Completions != 1 || st.Duplicates != 1 || st.Unicasts != 1 {
		t.Errorf("root stats %+v", st)
	}
	if st := low.e.Stats(); st.Partials != 2 || st.Completions != 1 || st.Stale != 1 {
		t.Errorf("lower ToR stats %+v", st)
	}
}

// TestSpreadRoots: with roots spread by slot, each ToR completes the
// slots s with s mod ToRs equal to its index and sends its partials of
// the others to their roots; a partial for a slot it does not root is
// refused as malformed.
func TestSpreadRoots(t *testing.T) {
	roots := []netip.AddrPort{addr(100), addr(101)}
	tor := []*rig{newRig(t, flat, JobConfig{ID: 1, ToRs: 2, Index: 0, Roots: roots}),
		newRig(t, flat, JobConfig{ID: 1, ToRs: 2, Index: 1, Roots: roots})}
	for slot := uint16(0); slot < 4; slot++ {
		home, other := int(slot%2), 1-int(slot%2)
		// One worker under each ToR: worker 0 at ToR 0 (addr 0), at ToR 1 (addr 1).
		if out := tor[home].send(addr(home), data(1, 0, 1, slot, 0, uint32(slot)), []int32{1, int32(slot)}); len(out) != 0 {
			t.Fatalf("slot %d: its root ToR %d sent %v with the other ToR missing", slot, home, out)
		}
		up := tor[other].send(addr(other), data(1, 0, 1, slot, 0, uint32(slot)), []int32{2, 10})
		if len(up) != 1 || up[0].h.Type != TypePartial || up[0].to != roots[home] || up[0].h.Worker != uint16(other) {
			t.Fatalf("slot %d: ToR %d sent %v, want its partial to root %d", slot, other, up, home)
		}
		down := tor[home].send(roots[other], up[0].h, up[0].elems)
		sum := []int32{3, int32(slot) + 10}
		if len(down) != 2 || down[0].to != roots[other] || down[1].to != addr(home) || !slices.Equal(down[0].elems, sum) {
			t.Fatalf("slot %d: root %d sent %v", slot, home, down)
		}
		wantResults(t, tor[other].send(roots[home], down[0].h, down[0].elems), []netip.AddrPort{addr(other)}, sum)
	}
	// ToR 1 roots odd slots only.
	tor[1].send(roots[0], Header{Type: TypePartial, Job: 1, Worker: 0, Workers: 2, Slot: 2, Packet: 9, Count: 2}, []int32{1, 1})
	for i, r := range tor {
		if st := r.e.Stats(); st.Completions != 4 || st.Partials != 2 || (i == 1) != (st.Malformed == 1) {
			t.Errorf("ToR %d stats %+v", i, st)
		}
	}
}

// TestAdmissionByStage: capacity counts the jobs active in one stage, as
// the plan check and the scheduler do.
func TestAdmissionByStage(t *testing.T) {
	r := newRig(t, Config{Slots: 8, Capacity: 2},
		JobConfig{ID: 1, ToRs: 1, FirstStage: 0, LastStage: 4},
		JobConfig{ID: 2, ToRs: 1, FirstStage: 3, LastStage: 6})
	if err := r.e.Admit(JobConfig{ID: 3, ToRs: 1, FirstStage: 5, LastStage: 9}); err != nil {
		t.Fatalf("job active in stages 5-9 beside one other: %v", err)
	}
	if err := r.e.Admit(JobConfig{ID: 4, ToRs: 1, FirstStage: 4, LastStage: 5}); !errors.Is(err, ErrNoRoom) {
		t.Fatalf("stage 4 holds jobs 1 and 2 already: %v", err)
	}
	if err := r.e.Admit(JobConfig{ID: 5, ToRs: 1, FirstStage: 10, LastStage: 12}); err != nil {
		t.Fatalf("a later job after the others: %v", err)
	}
	if n := len(r.e.Jobs()); n != 4 {
		t.Fatalf("%d jobs admitted, want 4 (capacity counts per stage)", n)
	}
}

// TestCongestionMark: a retransmission anywhere in a job marks the next
// sum that completes, and every copy of that sum, at every ToR, carries
// the mark (ATP's ECN in the aggregated result); the sum after it is
// clean again.
func TestCongestionMark(t *testing.T) {
	rootAddr, lowAddr := addr(100), addr(101)
	root := newRig(t, flat, JobConfig{ID: 1, ToRs: 2, Index: 0})
	low := newRig(t, flat, JobConfig{ID: 1, ToRs: 2, Index: 1, Parent: rootAddr})
	rtx := data(1, 0, 1, 0, 0, 0)
	rtx.Flags = FlagRetransmit
	for round, h := range []Header{rtx, data(1, 0, 1, 0, 1, 1)} {
		marked := round == 0
		root.send(addr(0), data(1, 0, 1, 0, h.Set, h.Packet), []int32{1})
		up := low.send(addr(1), h, []int32{2}) // the lower ToR's worker timed out
		if len(up) != 1 || (up[0].h.Flags == FlagCongestion) != marked {
			t.Fatalf("round %d: the lower ToR sent %v flags %v, want marked %v", round, up, up[0].h.Flags, marked)
		}
		down := root.send(lowAddr, up[0].h, up[0].elems)
		res := low.send(rootAddr, down[0].h, down[0].elems)
		for _, o := range append(down, res...) {
			if (o.h.Flags == FlagCongestion) != marked {
				t.Errorf("round %d: %v with flags %v, want marked %v", round, o, o.h.Flags, marked)
			}
		}
		// A lost result's unicast copy carries the same mark.
		uni := low.send(lowAddr, Header{Type: TypeResult, Job: 1, Workers: 2, Slot: 0, Set: h.Set, Packet: h.Packet, Count: 1}, []int32{3})
		if len(uni) != 0 {
			t.Fatalf("round %d: a second result was passed on: %v", round, uni)
		}
		again := low.send(addr(1), data(1, 0, 1, 0, h.Set, h.Packet), []int32{2})
		if len(again) != 1 || (again[0].h.Flags == FlagCongestion) != marked {
			t.Errorf("round %d: unicast %v, want marked %v", round, again, marked)
		}
	}
}

// A late copy of an old round must not restart it. The root's upper
// table, slot 0: rounds 0 (set 0) and 1 (set 1) complete; then a copy of
// the lower ToR's round-0 partial, resent while the result was on its way
// and held in a queue, arrives. It used to restart set 0 with block 0
// (the set was complete and the lower ToR's bit cleared by its move to
// set 1), so the root's own round-2 partial and the lower ToR's were both
// stale there, and the job hung (seen on paper000 at 40 Mbit/s circuits,
// 27 Nov). Now it is a copy of round 0, answered by unicast, and round 2
// completes.
func TestLateCopyOfOldRound(t *testing.T) {
	lowAddr := addr(101)
	root := newRig(t, flat, JobConfig{ID: 1, ToRs: 2, Index: 0})
	partial := func(set uint8, packet uint32) Header {
		return Header{Type: TypePartial, Job: 1, Worker: 1, Workers: 2, Slot: 0, Set: set, Packet: packet}
	}
	for round := range uint32(2) {
		set := uint8(round % 2)
		root.send(addr(0), data(1, 0, 1, 0, set, round), []int32{int32(round)})
		out := root.send(lowAddr, partial(set, round), []int32{10})
		if len(out) != 2 {
			t.Fatalf("round %d: root sent %v, want the sum to the lower ToR and its worker", round, out)
		}
	}
	late := root.send(lowAddr, partial(0, 0), []int32{10})
	if len(late) != 1 || late[0].to != lowAddr || !slices.Equal(late[0].elems, []int32{10}) {
		t.Fatalf("late copy of round 0: root sent %v, want round 0's sum to the lower ToR only", late)
	}
	root.send(addr(0), data(1, 0, 1, 0, 0, 2), []int32{2})
	out := root.send(lowAddr, partial(0, 2), []int32{20})
	if len(out) != 2 || !slices.Equal(out[0].elems, []int32{22}) || out[0].h.Packet != 2 {
		t.Fatalf("round 2: root sent %v, want the sum 22 of block 2 to the lower ToR and its worker", out)
	}
	// A copy from two rounds back is stale and changes nothing.
	if out := root.send(lowAddr, partial(0, 0), []int32{10}); len(out) != 0 {
		t.Fatalf("a copy of round 0 after round 2: %v", out)
	}
	if st := root.e.Stats(); st.Completions != 3 || st.Unicasts != 1 || st.Stale != 1 {
		t.Errorf("root stats %+v, want 3 completions, 1 unicast, 1 stale", st)
	}
}

// A late copy of a worker's block from the round before must not clear
// its bit in the round it has moved on to: its next retransmission there
// would be counted twice, and the round complete without the other
// worker (flat job, workers 0 and 1, slot 0).
func TestLateCopyDoesNotClearNewerRound(t *testing.T) {
	r := newRig(t, flat, JobConfig{ID: 1, ToRs: 1})
	r.send(addr(0), data(1, 0, 2, 0, 0, 0), []int32{1})
	wantResults(t, r.send(addr(1), data(1, 1, 2, 0, 0, 0), []int32{2}), []netip.AddrPort{addr(0), addr(1)}, []int32{3})
	if out := r.send(addr(0), data(1, 0, 2, 0, 1, 1), []int32{10}); len(out) != 0 {
		t.Fatalf("round 1 completed with one of two workers: %v", out)
	}
	// The late copy of worker 0's round-0 block gets round 0's sum again.
	wantResults(t, r.send(addr(0), data(1, 0, 2, 0, 0, 0), []int32{1}), []netip.AddrPort{addr(0)}, []int32{3})
	// Worker 0 resends its round-1 block: still counted once.
	if out := r.send(addr(0), data(1, 0, 2, 0, 1, 1), []int32{10}); len(out) != 0 {
		t.Fatalf("worker 0's resend completed round 1 alone: %v", out)
	}
	wantResults(t, r.send(addr(1), data(1, 1, 2, 0, 1, 1), []int32{20}), []netip.AddrPort{addr(0), addr(1)}, []int32{30})
}
