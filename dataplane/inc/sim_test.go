package inc

import (
	"math/rand/v2"
	"net/netip"
	"testing"
)

// TestSimulatedLoss runs a 3-ToR job (2+1+3 workers) through engines
// wired by an in-memory network that drops packets at random, with
// synchronous retransmission rounds: every worker without its result
// resends. Sums must be exact, and loss must cost few rounds; with the
// root at ToR 0 and with roots spread over the ToRs by slot.
func TestSimulatedLoss(t *testing.T) {
	for _, spread := range []bool{false, true} {
		t.Run(map[bool]string{false: "one root", true: "spread roots"}[spread], func(t *testing.T) { simulateLoss(t, spread) })
	}
}

func simulateLoss(t *testing.T, spread bool) {
	rng := rand.New(rand.NewPCG(9, 9))
	const p = 0.05
	type msg struct {
		from, to netip.AddrPort
		h        Header
		elems    []int32
	}
	torAddr := []netip.AddrPort{addr(100), addr(101), addr(102)}
	engines := make([]*Engine, 3)
	for i := range engines {
		e, _ := NewEngine(Config{Slots: 4, Capacity: 1})
		cfg := JobConfig{ID: 1, ToRs: 3, Index: i}
		switch {
		case spread:
			cfg.Roots = torAddr
		case i > 0:
			cfg.Parent = torAddr[0]
		}
		if err := e.Admit(cfg); err != nil {
			t.Fatal(err)
		}
		engines[i] = e
	}
	racks := []int{2, 1, 3}
	type worker struct {
		rack, idx int
		addr      netip.AddrPort
		got       bool
		sum       int32
	}
	var ws []*worker
	for r, n := range racks {
		for i := 0; i < n; i++ {
			ws = append(ws, &worker{rack: r, idx: i, addr: addr(len(ws))})
		}
	}
	maxRounds, totalRounds := 0, 0
	var completions uint64
	for block := 0; block < 400; block++ {
		slot, set := uint16(block%4), uint8(block/4%2)
		for _, w := range ws {
			w.got = false
		}
		rounds := 0
		for ; ; rounds++ {
			var queue []msg
			for _, w := range ws {
				if !w.got {
					queue = append(queue, msg{from: w.addr, to: torAddr[w.rack], h: Header{Type: TypeData, Job: 1, Worker: uint16(w.idx), Workers: uint16(racks[w.rack]), Slot: slot, Set: set, Packet: uint32(block)}, elems: []int32{int32(block + w.rack)}})
				}
			}
			for len(queue) > 0 {
				m := queue[0]
				queue = queue[1:]
				if rng.Float64() < p { // lost on the way
					continue
				}
				delivered := false
				for i, a := range torAddr {
					if m.to == a {
						b := Append(nil, &m.h, m.elems)
						var d Header
						if err := d.DecodeFromBytes(b, nilFeedback{}); err != nil {
							t.Fatal(err)
						}
						engines[i].Handle(m.from, &d, func(to netip.AddrPort, h *Header, payload []byte) {
							queue = append(queue, msg{from: a, to: to, h: *h, elems: fromWire(payload)})
						})
						delivered = true
					}
				}
				if !delivered {
					for _, w := range ws {
						if w.addr == m.to && m.h.Type == TypeResult && m.h.Packet == uint32(block) {
							w.got, w.sum = true, m.elems[0]
						}
					}
				}
			}
			done := true
			for _, w := range ws {
				done = done && w.got
			}
			if done {
				break
			}
		}
		var want int32
		for _, w := range ws {
			want += int32(block + w.rack)
		}
		for _, w := range ws {
			if w.sum != want {
				t.Fatalf("block %d: worker sum %d, want %d", block, w.sum, want)
			}
		}
		maxRounds = max(maxRounds, rounds)
		totalRounds += rounds
	}
	for _, e := range engines {
		completions += e.Stats().Completions
	}
	// Every ToR completes each block once: the root by summing, the
	// others when the result arrives.
	if completions != 3*400 {
		t.Errorf("%d completions over the ToRs, want %d", completions, 3*400)
	}
	avg := float64(totalRounds) / 400
	t.Logf("5%% loss: %.2f retransmission rounds per block on average, at most %d", avg, maxRounds)
	// About 30 packets decide a block here (12 worker hops, 4 partial, 4
	// result and 12 delivery hops, 5% each): one round in four to five
	// loses one. A protocol that recovered only part of a loss per round
	// (or lost a count) would need many more rounds, or never finish.
	if avg > 1.5 || maxRounds > 10 {
		t.Errorf("%.2f rounds per block on average, at most %d: recovery is not local", avg, maxRounds)
	}
}
