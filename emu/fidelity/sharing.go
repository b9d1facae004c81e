package fidelity

import (
	"fmt"
	"math"

	"github.com/ocsemu/ocsemu/workers/job"
	"github.com/ocsemu/ocsemu/workers/record"
)

// AloneBelow: a link counts as the phase's own where the model puts at
// most this share of its payload there from other phases.
const AloneBelow = 0.05

// LinkUse is how the phase's busiest link spent the phase's window, in
// link time (ns), measured and in the replayed TCP-aware model: the
// phase's own traffic, everybody else's, and idle. Own + Others + Idle is
// the window in each, so the three differences sum to the difference of
// the windows. It is a diagnosis beside the attribution's parts, not one
// of them: on one link, others that took more and a phase that left room
// for them look the same, and an all-to-all's slowest flow may cross
// another link. Only where a phase beside it was held back by its own
// measured parts does the others' deficit become a part (beside.go).
type LinkUse struct {
	Link          string `json:"link"`
	OwnNs         int64  `json:"own_ns"`
	OthersNs      int64  `json:"others_ns"`
	IdleNs        int64  `json:"idle_ns"`
	ModelOwnNs    int64  `json:"model_own_ns"`
	ModelOthersNs int64  `json:"model_others_ns"`
	ModelIdleNs   int64  `json:"model_idle_ns"`
	// QueueNs is the link's mean queue over the window, as delay: the
	// shaper's backlog over its rate, averaged over the samples in the
	// window (QueueSamples of them; 0: none); ModelQueueNs the standing
	// queue the model kept there on average.
	QueueNs      int64 `json:"queue_ns"`
	QueueSamples int   `json:"queue_samples"`
	ModelQueueNs int64 `json:"model_queue_ns"`
}

// busiestLink is the phase's busiest link's use between its measured
// start and end (absolute ns), against the replay.
//
// The busiest link is the measured one: of the links the phase's flows
// crossed in the replay, the one whose shaper was busiest over the
// phase's measured window (its count over its rate), and of the links
// within BusyTie of the busiest the one with the deepest mean queue: the link
// where the phase contended, which need not be the model's busiest
// (plan-demo's fast first all-to-alls: the model's busiest, tor2:up0,
// ran 65-89% busy with no queue while tor1:up1 stood full). In the model
// a payload's link time is bytes / the link's payload rate. Measured, it
// is the shaper's count between the phase's start and end (interpolated
// between samples) over the shaper's rate; the phase's own count is its
// payload over the link times its count per payload byte on the links it
// used alone (AloneBelow), which holds its framing as the shaper counts
// it and the part of its payload that fell outside the window (1/Goodput
// when it used no link alone); the rest of the count is the others'.
// false where the run has no replay link figures or no shaper samples
// around the window.
func (in *Inputs) busiestLink(k job.Key, from, to int64) (LinkUse, bool) {
	if in.Goodput <= 0 || to <= from {
		return LinkUse{}, false
	}
	type candidate struct {
		pl          *record.PhaseLink
		l           *Link
		count, busy float64
		queue       float64
		queued      int
	}
	var cands []candidate
	var aloneCount, aloneOwn, busiestShare float64
	for i := range in.ModelLinks {
		pl := &in.ModelLinks[i]
		if pl.Job != k.Job || pl.Iteration != k.Iteration || pl.Phase != k.Phase || pl.RateBps <= 0 || pl.WindowNs <= 0 {
			continue
		}
		l := in.link(pl.Link)
		if l == nil || l.RateBps == 0 {
			continue
		}
		c, ok := countBetween(l.Samples, from, to)
		if !ok {
			continue
		}
		q, n := meanQueue(l, from, to)
		cands = append(cands, candidate{pl: pl, l: l, count: c, busy: c / float64(l.RateBps) / (float64(to-from) / 1e9), queue: q, queued: n})
		busiestShare = max(busiestShare, cands[len(cands)-1].busy)
		if pl.OtherBytes <= AloneBelow*pl.OwnBytes {
			aloneCount += c
			aloneOwn += pl.OwnBytes
		}
	}
	// Of the links within BusyTie of the busiest, the deepest queue, then
	// the busier: the same whatever the links' order.
	var best *candidate
	for i := range cands {
		c := &cands[i]
		if c.busy < busiestShare-BusyTie {
			continue
		}
		if best == nil || c.queue > best.queue || c.queue == best.queue && c.busy > best.busy {
			best = c
		}
	}
	if best == nil {
		return LinkUse{}, false
	}
	busiest, l, count := best.pl, best.l, best.count
	perPayload := 1 / in.Goodput
	if aloneOwn > 0 {
		perPayload = aloneCount / aloneOwn
	}
	linkNs := func(bytes, rate float64) int64 { return int64(bytes / rate * 1e9) }
	u := LinkUse{Link: busiest.Link,
		OwnNs:         linkNs(busiest.OwnBytes*perPayload, float64(l.RateBps)),
		ModelOwnNs:    linkNs(busiest.OwnBytes, busiest.RateBps),
		ModelOthersNs: linkNs(busiest.OtherBytes, busiest.RateBps),
	}
	// The own share is an estimate (the model's payload at the measured
	// count per payload byte); where the shaper counted less in the
	// window, the count is all the phase's own.
	total := linkNs(count, float64(l.RateBps))
	u.OwnNs = min(u.OwnNs, total)
	u.OthersNs = total - u.OwnNs
	// A shaper passes its bucket beyond its rate, so a link may have
	// counted more than its window held at the rate: then it was never idle.
	u.IdleNs = max(0, to-from-u.OwnNs-u.OthersNs)
	u.ModelIdleNs = busiest.WindowNs - u.ModelOwnNs - u.ModelOthersNs
	u.ModelQueueNs = busiest.QueueNs
	u.QueueNs, u.QueueSamples = int64(best.queue), best.queued
	return u, true
}

// BusyTie: links whose measured busy shares are within it of the
// busiest's are as busy; the deepest queue then names the busiest.
const BusyTie = 0.01

// meanQueue is a link's mean queue between from and to as delay (ns):
// the shaper's backlog over its rate, averaged over the n samples in the
// window (0, 0 without any).
func meanQueue(l *Link, from, to int64) (ns float64, n int) {
	var q float64
	for _, smp := range l.Samples {
		if smp.TNs >= from && smp.TNs <= to {
			q += float64(smp.BacklogBytes) / float64(l.RateBps) * 1e9
			n++
		}
	}
	if n == 0 {
		return 0, 0
	}
	return q / float64(n), n
}

// Shares are the own, others' and idle shares of the window, measured and
// in the model.
func (u LinkUse) Shares() (own, others, idle, modelOwn, modelOthers, modelIdle float64) {
	w := float64(u.OwnNs + u.OthersNs + u.IdleNs)
	mw := float64(u.ModelOwnNs + u.ModelOthersNs + u.ModelIdleNs)
	if w <= 0 || mw <= 0 {
		return
	}
	return float64(u.OwnNs) / w, float64(u.OthersNs) / w, float64(u.IdleNs) / w,
		float64(u.ModelOwnNs) / mw, float64(u.ModelOthersNs) / mw, float64(u.ModelIdleNs) / mw
}

// ShareText is the three shares and the queue as "own 45% (41), others
// 52% (53), idle 3% (6), queue 3.0 ms (2.5)": measured, the model's in
// brackets (no queue without shaper samples in the window).
func (u LinkUse) ShareText() string {
	o, x, i, mo, mx, mi := u.Shares()
	return sharesText([6]float64{o, x, i, mo, mx, mi}, u.QueueSamples > 0, ms(u.QueueNs), ms(u.ModelQueueNs))
}

// sharesText writes own, others' and idle shares, measured then the
// model's, and the queues (ms) when there are any: ShareText's format,
// for one run or the medians of a set.
func sharesText(v [6]float64, hasQueue bool, queueMs, modelQueueMs float64) string {
	p := func(v float64) float64 { return math.Round(100*v) + 0 } // + 0: "0", not "-0"
	t := fmt.Sprintf("own %.0f%% (%.0f), others %.0f%% (%.0f), idle %.0f%% (%.0f)", p(v[0]), p(v[3]), p(v[1]), p(v[4]), p(v[2]), p(v[5]))
	if hasQueue {
		t += fmt.Sprintf(", queue %.1f ms (%.1f)", queueMs, modelQueueMs)
	}
	return t
}

func (in *Inputs) link(name string) *Link {
	for i := range in.Links {
		if in.Links[i].Name == name {
			return &in.Links[i]
		}
	}
	return nil
}

// countBetween is a link's byte count from one instant to another,
// interpolated between the samples around them; false when either is
// outside the samples.
func countBetween(ss []LinkSample, from, to int64) (float64, bool) {
	a, okA := bytesAt(ss, from)
	b, okB := bytesAt(ss, to)
	return b - a, okA && okB && b >= a
}

// bytesAt is a link's byte counter at t, interpolated between the
// samples around it; false when t is outside the samples.
func bytesAt(ss []LinkSample, t int64) (float64, bool) {
	for i := 1; i < len(ss); i++ {
		p, n := ss[i-1], ss[i]
		if t < p.TNs || t > n.TNs {
			continue
		}
		if n.TNs == p.TNs {
			return float64(n.Bytes), true
		}
		f := float64(t-p.TNs) / float64(n.TNs-p.TNs)
		return float64(p.Bytes) + f*(float64(n.Bytes)-float64(p.Bytes)), true
	}
	return 0, false
}
