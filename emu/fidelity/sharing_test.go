package fidelity

import (
	"slices"
	"strings"
	"testing"

	"github.com/ocsemu/ocsemu/workers/job"
	"github.com/ocsemu/ocsemu/workers/record"
)

// The busiest link by hand. A push ran 1 s. In the replayed model its
// busiest link, "tor0:up0" (0.95 MB/s of payload: a 1 MB/s shaper at a
// goodput of 0.95), carried its 475 kB (500 ms) and 427.5 kB of others'
// (450 ms) in a 1 s window: 50 ms idle. "tor1:s0" carried less, and
// "r0s0:eth0" only the push, where the shaper counted 500 kB for its 475
// kB (1/0.95 counted byte per payload byte, unless a row says otherwise).
// On the busiest link the shaper counted the push's own bytes and 300 kB
// of others': 300 ms, so the link stood idle 200 ms.
func TestBusiestLinkByHand(t *testing.T) {
	const ms = int64(1e6)
	k := job.Key{Job: "j", Iteration: 0, Phase: "push"}
	model := []record.PhaseLink{
		{Job: "j", Phase: "push", Link: "tor0:up0", OwnBytes: 475e3, OtherBytes: 427.5e3, RateBps: 0.95e6, WindowNs: 1000 * ms, QueueNs: 2500_000},
		{Job: "j", Phase: "push", Link: "tor1:s0", OwnBytes: 475e3, OtherBytes: 100e3, RateBps: 0.95e6, WindowNs: 1000 * ms},
		// More payload than the busiest link's, on a link ten times as
		// fast: less busy.
		{Job: "j", Phase: "push", Link: "r9s9:eth0", OwnBytes: 475e3, OtherBytes: 1e6, RateBps: 9.5e6, WindowNs: 1000 * ms},
		{Job: "j", Phase: "push", Link: "r0s0:eth0", OwnBytes: 475e3, OtherBytes: 0, RateBps: 9.5e6, WindowNs: 1000 * ms},
		{Job: "other", Phase: "push", Link: "tor0:up0", OwnBytes: 1e6, OtherBytes: 1e6, RateBps: 0.95e6, WindowNs: 1000 * ms},
	}
	link := func(name string, rate, count uint64) Link {
		// The shaper's queue: 2 and 4 kB at the samples inside the window
		// (2 and 4 ms at 1 MB/s), 9 kB outside it.
		return Link{Name: name, RateBps: rate, Samples: []LinkSample{{TNs: -100 * ms, Bytes: 0, BacklogBytes: 9000}, {TNs: 0, Bytes: 1000, BacklogBytes: 2000},
			{TNs: 1000 * ms, Bytes: 1000 + count, BacklogBytes: 4000}, {TNs: 1100 * ms, Bytes: 2000 + count, BacklogBytes: 9000}}}
	}
	modelUse := LinkUse{Link: "tor0:up0", ModelOwnNs: 500 * ms, ModelOthersNs: 450 * ms, ModelIdleNs: 50 * ms, QueueNs: 3 * ms, QueueSamples: 2, ModelQueueNs: 2500_000}
	with := func(own, others, idle int64) LinkUse {
		u := modelUse
		u.OwnNs, u.OthersNs, u.IdleNs = own*ms, others*ms, idle*ms
		return u
	}
	for _, tc := range []struct {
		name     string
		alone    uint64 // the count on the link the push used alone; 0: no such figure
		busiest  uint64 // the busiest link's count; 0: its own plus 300 kB
		model    []record.PhaseLink
		from, to int64
		want     LinkUse
		wantOK   bool
	}{
		{name: "framing from the link used alone", alone: 500e3, model: model, to: 1000 * ms, want: with(500, 300, 200), wantOK: true},
		// 1.1 counted bytes per payload byte where it was alone: 550 kB
		// of the busiest link's count are its own.
		{name: "more counted per payload byte", alone: 550e3, model: model, to: 1000 * ms, want: with(550, 300, 150), wantOK: true},
		{name: "no link alone: 1/goodput", model: model[:3], to: 1000 * ms, want: with(500, 300, 200), wantOK: true},
		// The shaper counted 450 kB, less than the 500 kB the push's own
		// payload would take: all of it is the push's, none the others'.
		{name: "count below the own estimate", alone: 500e3, busiest: 450e3, model: []record.PhaseLink{model[0], model[3]}, to: 1000 * ms, want: with(450, 0, 550), wantOK: true},
		{name: "window outside the samples", alone: 500e3, model: model, from: -200 * ms, to: 1000 * ms},
		{name: "no replay figures", alone: 500e3, to: 1000 * ms},
	} {
		t.Run(tc.name, func(t *testing.T) {
			own := uint64(500e3)
			if tc.alone > 0 {
				own = tc.alone
			}
			busiest := own + 300e3
			if tc.busiest > 0 {
				busiest = tc.busiest
			}
			in := &Inputs{Goodput: 0.95, ModelLinks: tc.model, Links: []Link{link("tor0:up0", 1e6, busiest), link("tor1:s0", 1e6, own+100e3), link("r9s9:eth0", 10e6, own+1e6)}}
			if tc.alone > 0 {
				in.Links = append(in.Links, link("r0s0:eth0", 10e6, tc.alone))
			}
			got, ok := in.busiestLink(k, tc.from, tc.to)
			near := func(a, b int64) bool { return a-b < 1000 && b-a < 1000 } // 1 µs of rounding
			if ok != tc.wantOK || ok && (got.Link != tc.want.Link || !near(got.OwnNs, tc.want.OwnNs) || !near(got.OthersNs, tc.want.OthersNs) || !near(got.IdleNs, tc.want.IdleNs) ||
				!near(got.ModelOwnNs, tc.want.ModelOwnNs) || !near(got.ModelOthersNs, tc.want.ModelOthersNs) || !near(got.ModelIdleNs, tc.want.ModelIdleNs) ||
				!near(got.QueueNs, tc.want.QueueNs) || got.QueueSamples != tc.want.QueueSamples || got.ModelQueueNs != tc.want.ModelQueueNs) {
				t.Errorf("got %+v, ok %v; want %+v, ok %v", got, ok, tc.want, tc.wantOK)
			}
		})
	}
}

// The busiest link is the one the shapers found busiest, not the
// model's. The model puts the phase's 475 kB and 427.5 kB of others on
// "tor0:up0" (950 ms of its 1 s window) and 95 kB of others on "tor1:s0"
// (600 ms). Measured, tor0:up0 counted 800 kB in the second (80% busy)
// and tor1:s0 990 kB (99%): tor1:s0 is named, with its own model
// figures (own 500 ms, others 100 ms, idle 400 ms) and its own queue.
// Where the two links are within a point of each other (tor0:up0 at 985
// kB) the deeper queue names it: tor0:up0's 6 ms against tor1:s0's 3 ms,
// with tor0:up0's own model figures (others 450 ms, idle 50).
func TestBusiestLinkIsMeasured(t *testing.T) {
	const ms = int64(1e6)
	k := job.Key{Job: "j", Phase: "alltoall"}
	model := []record.PhaseLink{
		{Job: "j", Phase: "alltoall", Link: "tor0:up0", OwnBytes: 475e3, OtherBytes: 427.5e3, RateBps: 0.95e6, WindowNs: 1000 * ms, QueueNs: 2500_000},
		{Job: "j", Phase: "alltoall", Link: "tor1:s0", OwnBytes: 475e3, OtherBytes: 95e3, RateBps: 0.95e6, WindowNs: 1000 * ms},
	}
	link := func(name string, count uint64, backlog uint32) Link {
		return Link{Name: name, RateBps: 1e6, Samples: []LinkSample{{TNs: 0, Bytes: 0, BacklogBytes: backlog}, {TNs: 1000 * ms, Bytes: count, BacklogBytes: backlog}}}
	}
	for _, tc := range []struct {
		name           string
		up, down       uint64 // the two links' counts
		want           string
		queue, mqueue  int64
		own, oth, idle int64
		moth, midle    int64 // the model's others and idle (own: 500 ms on both)
	}{
		{"the shapers' busiest", 800e3, 990e3, "tor1:s0", 3 * ms, 0, 500, 490, 10, 100, 400},
		{"a tie: the deeper queue", 985e3, 990e3, "tor0:up0", 6 * ms, 2500_000, 500, 485, 15, 450, 50},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := &Inputs{Goodput: 0.95, ModelLinks: model, Links: []Link{link("tor0:up0", tc.up, 6000), link("tor1:s0", tc.down, 3000)}}
			got, ok := in.busiestLink(k, 0, 1000*ms)
			near := func(a, b int64) bool { return a-b < 1000 && b-a < 1000 }
			if !ok || got.Link != tc.want || !near(got.QueueNs, tc.queue) || got.ModelQueueNs != tc.mqueue ||
				!near(got.OwnNs, tc.own*ms) || !near(got.OthersNs, tc.oth*ms) || !near(got.IdleNs, tc.idle*ms) ||
				!near(got.ModelOwnNs, 500*ms) || !near(got.ModelOthersNs, tc.moth*ms) || !near(got.ModelIdleNs, tc.midle*ms) {
				t.Errorf("got %+v, %v; want %s, queue %d (model %d), own/others/idle %d/%d/%d ms", got, ok, tc.want, tc.queue, tc.mqueue, tc.own, tc.oth, tc.idle)
			}
		})
	}
}

// Ties do not chain and the links' order does not matter: four links
// 100.0, 99.2, 98.4 and 97.6% busy with queues of 0, 1, 2 and 3 ms.
// Within a point of the busiest are the first two: the second, with the
// deeper queue, in either order. Two links as busy, with the same
// queue: the busier.
func TestBusiestLinkTies(t *testing.T) {
	const ms = int64(1e6)
	k := job.Key{Job: "j", Phase: "alltoall"}
	type l struct {
		name    string
		count   uint64
		backlog uint32
	}
	pick := func(ls []l) string {
		in := &Inputs{Goodput: 0.95}
		for _, x := range ls {
			in.ModelLinks = append(in.ModelLinks, record.PhaseLink{Job: "j", Phase: "alltoall", Link: x.name, OwnBytes: 100e3, OtherBytes: 100e3, RateBps: 0.95e6, WindowNs: 1000 * ms})
			in.Links = append(in.Links, Link{Name: x.name, RateBps: 1e6, Samples: []LinkSample{{TNs: 0, BacklogBytes: x.backlog}, {TNs: 1000 * ms, Bytes: x.count, BacklogBytes: x.backlog}}})
		}
		u, ok := in.busiestLink(k, 0, 1000*ms)
		if !ok {
			return ""
		}
		return u.Link
	}
	chain := []l{{"a", 1000e3, 0}, {"b", 992e3, 1000}, {"c", 984e3, 2000}, {"d", 976e3, 3000}}
	if got := pick(chain); got != "b" {
		t.Errorf("in order: %s, want b", got)
	}
	if got := pick([]l{chain[3], chain[2], chain[1], chain[0]}); got != "b" {
		t.Errorf("reversed: %s, want b", got)
	}
	if got := pick([]l{{"x", 995e3, 1000}, {"y", 999e3, 1000}}); got != "y" {
		t.Errorf("same queue: %s, want the busier y", got)
	}
}

// The attribution table names each phase's busiest link and its shares
// under the table.
func TestPrintAttributionNamesBusiestLink(t *testing.T) {
	u := &LinkUse{Link: "tor1:up1", OwnNs: 135e6, OthersNs: 156e6, IdleNs: 9e6, ModelOwnNs: 140e6, ModelOthersNs: 186e6, ModelIdleNs: 21e6}
	var b strings.Builder
	PrintAttribution(&b, []Attribution{{Job: "vgg", Phase: "push", TCPAwareNs: 347e6, MeasuredNs: 300e6, RelErrTCP: -0.135, Parts: map[string]int64{}, Link: u}})
	want := "   vgg 0 push on tor1:up1: own 45% (40), others 52% (54), idle 3% (6)\n"
	if !strings.Contains(b.String(), want) {
		t.Errorf("table lacks %q:\n%s", want, b.String())
	}
	// With shaper samples in the window, the queue too.
	u.QueueNs, u.QueueSamples, u.ModelQueueNs = 3e6, 14, 2.5e6
	if got, want := u.ShareText(), "own 45% (40), others 52% (54), idle 3% (6), queue 3.0 ms (2.5)"; got != want {
		t.Errorf("ShareText %q, want %q", got, want)
	}
	// A share a hair below zero (the own part's estimate) prints as 0.
	u = &LinkUse{Link: "l", OwnNs: 30e6, OthersNs: 70.2e6, IdleNs: -0.2e6, ModelOwnNs: 1, ModelOthersNs: 1}
	if got, want := u.ShareText(), "own 30% (50), others 70% (50), idle 0% (0)"; got != want {
		t.Errorf("ShareText %q, want %q", got, want)
	}
}

// Counts between samples are interpolated within each interval, and
// nothing is made up outside the samples.
func TestCountBetween(t *testing.T) {
	ss := []LinkSample{{TNs: 0, Bytes: 0}, {TNs: 100, Bytes: 1000}, {TNs: 200, Bytes: 5000}}
	for _, tc := range []struct {
		from, to int64
		want     float64
		ok       bool
	}{
		{50, 150, 2500, true}, // 500 to 3000
		{0, 200, 5000, true},
		{120, 180, 2400, true}, // 1800 to 4200
		{-1, 100, 0, false},
		{100, 201, 0, false},
	} {
		if got, ok := countBetween(ss, tc.from, tc.to); ok != tc.ok || ok && got != tc.want {
			t.Errorf("countBetween(%d, %d) = %v, %v; want %v, %v", tc.from, tc.to, got, ok, tc.want, tc.ok)
		}
	}
}

// Over runs, each diagnosis is the median of its figures, in the order
// the runs first had them; a phase counts in the runs that attributed it.
func TestDiagnosisSet(t *testing.T) {
	const ms = int64(1e6)
	use := func(own, others, idle, queue int64) *LinkUse {
		return &LinkUse{Link: "tor1:up1", OwnNs: own * ms, OthersNs: others * ms, IdleNs: idle * ms, ModelOwnNs: 40 * ms, ModelOthersNs: 55 * ms, ModelIdleNs: 5 * ms,
			QueueNs: queue * ms / 10, QueueSamples: 5, ModelQueueNs: 23 * ms / 10}
	}
	push := func(u *LinkUse, rtt, hops int64) Attribution {
		return Attribution{Job: "vgg", Phase: "push", Link: u, INC: &INCRound{RTTNs: rtt * ms / 100, HopsNs: hops * ms / 100, ModelRTTNs: 760 * ms / 100, ModelHopsNs: 90 * ms / 100}}
	}
	moe := Attribution{Job: "moe", Iteration: 1, Phase: "alltoall", Link: &LinkUse{Link: "tor1:up1", OwnNs: 24 * ms, OthersNs: 76 * ms, ModelOwnNs: 35 * ms, ModelOthersNs: 65 * ms}}
	// moe's first all-to-all: a flow cut in two runs, none in one.
	a2a := func(cut []FlowExit, others int64) Attribution {
		return Attribution{Job: "moe", Phase: "alltoall", SlowStart: &SlowStarts{Flows: 6, Cut: cut, Others: 6 - len(cut), OthersNs: others * ms}}
	}
	// gpt's all-reduce: ring link 2->1 below HyStart's first chance in two
	// of three runs, 1->3 in one.
	ring := func(cut ...ConnExit) Attribution {
		return Attribution{Job: "gpt", Phase: "allreduce", Conns: &ConnStarts{Conns: 4, FirstChance: cut}}
	}
	var d DiagnosisSet
	d.Add([]Attribution{push(use(44, 53, 3, 30), 690, 90), a2a([]FlowExit{{Src: 1, Dst: 2, Segs: 27, Ns: 105 * ms}}, 48), ring(ConnExit{Src: 2, Dst: 1, Segs: 30})})
	d.Add([]Attribution{moe, push(use(46, 52, 2, 33), 680, 80), a2a(nil, 72), ring()})
	d.Add([]Attribution{push(use(43, 54, 3, 25), 700, 100), a2a([]FlowExit{{Src: 0, Dst: 1, Segs: 27, Ns: 96 * ms}, {Src: 1, Dst: 2, Segs: 30, Ns: 117 * ms}}, 61), ring(ConnExit{Src: 1, Dst: 3, Segs: 27}, ConnExit{Src: 2, Dst: 1, Segs: 27})})
	want := []string{
		"vgg 0 push on tor1:up1, medians of 3 runs: own 44% (40), others 53% (55), idle 3% (5), queue 3.0 ms (2.3)",
		"vgg 0 push, medians of 3 runs: round trip 6.90 ms = hops 0.90 + network 6.00; model 7.60 = hops 0.90 + network 6.70",
		"moe 0 alltoall slow start, 3 runs: a flow cut early in 2 (cut flows 105.0-117.0 ms, the others at most 48.0-61.0), none in 1 (slowest flow 72.0 ms); at HyStart's first chance (below 32 segments) in 2 (those flows 105.0-117.0 ms)",
		"gpt 0 allreduce slow start, 3 runs: a connection below HyStart's first chance (32 segments) in 2 of them (2->1 in 2, 1->3 in 1)",
		"moe 1 alltoall on tor1:up1, 1 run: own 24% (35), others 76% (65), idle 0% (0)",
	}
	if got := d.Lines(); !slices.Equal(got, want) {
		t.Errorf("lines:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
