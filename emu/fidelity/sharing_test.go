package fidelity

import (
	"testing"

	"github.com/ocsemu/ocsemu/workers/job"
	"github.com/ocsemu/ocsemu/workers/record"
)

// Sharing by hand. A push ran 1 s on its busiest link, "tor0:up0", whose
// shaper allows 1 MB/s (0.95 MB/s of payload at a goodput of 0.95). In
// the replayed model the others took half the link (475 kB of payload in
// the phase's 1 s window) and the phase its own 475 kB. The phase used
// "r0s0:eth0" alone, where the shaper counted 500 kB for its 475 kB: 1/0.95
// counted byte per payload byte. On the busiest link the shaper counted
// its own 500 kB and, in the rows below, the others'. With the others at
// share s, sharing = 1 s x (0.5 / (1 - s) - 1).
func TestSharingCostByHand(t *testing.T) {
	const ms = int64(1e6)
	k := job.Key{Job: "j", Iteration: 0, Phase: "push"}
	model := []record.PhaseLink{
		{Job: "j", Phase: "push", Link: "tor0:up0", OwnBytes: 475e3, OtherBytes: 475e3, RateBps: 0.95e6, WindowNs: 1000 * ms},
		{Job: "j", Phase: "push", Link: "r0s0:eth0", OwnBytes: 475e3, OtherBytes: 0, RateBps: 9.5e6, WindowNs: 1000 * ms},
		{Job: "other", Phase: "push", Link: "tor0:up0", OwnBytes: 1e6, OtherBytes: 1e6, RateBps: 0.95e6, WindowNs: 1000 * ms},
	}
	link := func(name string, rate uint64, count uint64) Link {
		return Link{Name: name, RateBps: rate, Samples: []LinkSample{{TNs: -100 * ms, Bytes: 0}, {TNs: 0, Bytes: 1000}, {TNs: 1000 * ms, Bytes: 1000 + count}, {TNs: 1100 * ms, Bytes: 2000 + count}}}
	}
	for _, tc := range []struct {
		name     string
		others   uint64 // the others' count on the busiest link
		alone    uint64 // the count on the link the phase used alone; 0: no such figure
		model    []record.PhaseLink
		from, to int64
		wantMs   float64
		wantOK   bool
	}{
		{name: "the model's share", others: 500e3, alone: 500e3, model: model, to: 1000 * ms, wantMs: 0, wantOK: true},
		{name: "a quarter", others: 250e3, alone: 500e3, model: model, to: 1000 * ms, wantMs: -1000.0 / 3, wantOK: true},
		{name: "three quarters", others: 750e3, alone: 500e3, model: model, to: 1000 * ms, wantMs: 1000, wantOK: true},
		// The phase's own count per payload byte comes from the link it
		// used alone: there 1.1 x 1/0.95, so 550 kB of the busiest link's
		// 1,050 kB are its own, and the others took half.
		{name: "own framing measured", others: 500e3, alone: 550e3, model: model, to: 1000 * ms, wantMs: 0, wantOK: true},
		// Beyond MaxOthersShare the share is taken at it: 1 s x (0.5/0.05 - 1).
		{name: "others took it all", others: 5e6, alone: 500e3, model: model, to: 1000 * ms, wantMs: 9000, wantOK: true},
		// Without a link it used alone, 1/Goodput counted bytes per
		// payload byte.
		{name: "no link alone", others: 250e3, model: model[:1], to: 1000 * ms, wantMs: -1000.0 / 3, wantOK: true},
		{name: "window outside the samples", others: 500e3, alone: 500e3, model: model, from: -200 * ms, to: 1000 * ms},
		{name: "no replay figures", others: 500e3, alone: 500e3, to: 1000 * ms},
	} {
		t.Run(tc.name, func(t *testing.T) {
			own := uint64(500e3) // 475 kB at 1/0.95
			if tc.alone > 0 {
				own = tc.alone
			}
			in := &Inputs{Goodput: 0.95, ModelLinks: tc.model, Links: []Link{link("tor0:up0", 1e6, own+tc.others)}}
			if tc.alone > 0 {
				in.Links = append(in.Links, link("r0s0:eth0", 10e6, tc.alone))
			}
			ns, ok := in.sharingCost(k, tc.from, tc.to)
			if ok != tc.wantOK || ok && (float64(ns)/1e6 < tc.wantMs-0.01 || float64(ns)/1e6 > tc.wantMs+0.01) {
				t.Errorf("sharing %.3f ms, ok %v; want %.3f ms, ok %v", float64(ns)/1e6, ok, tc.wantMs, tc.wantOK)
			}
		})
	}
}
