package fidelity

import (
	"github.com/ocsemu/ocsemu/workers/job"
	"github.com/ocsemu/ocsemu/workers/record"
)

// Sharing's limits: a link counts as the phase's own where the model puts
// at most AloneBelow of its payload there from other phases, and the
// others' share of a link is taken at most MaxOthersShare (beyond it the
// phase's time would be unbounded).
const (
	AloneBelow     = 0.05
	MaxOthersShare = 0.95
)

// sharingCost is how much longer the phase took in the replayed TCP-aware
// model's terms because the other traffic took a larger share of its
// busiest link than the model gave it (signed: a smaller share is
// negative).
//
// The busiest link is the model's: of the links the phase's flows
// crossed, the one that carried the most payload (the phase's own and
// everybody else's) during the phase's window in the replay. On that
// link the phase's time is (own + idle) / (1 - others' share), in link
// time; sharing keeps the model's own and idle time and puts in the
// measured share of the others: T_model x ((1 - share_model) / (1 -
// share_measured) - 1). What the link left idle, more or less than in
// the model (the model's ramps, or a bottleneck elsewhere), stays in the
// residual.
//
// The measured share is the link's shaper count between the phase's
// measured start and end (interpolated between samples), less the
// phase's own bytes, over the shaper's rate and the window. The phase's
// own count is its payload over the link times its bytes counted per
// payload byte on the links it used alone (AloneBelow), which holds its
// framing as the shaper counts it and the part of its payload that fell
// outside the window; 1/Goodput when it used no link alone. ok is false
// where the run has no replay link figures or no shaper samples around
// the window.
func (in *Inputs) sharingCost(k job.Key, from, to int64) (ns int64, ok bool) {
	if in.Goodput <= 0 || to <= from {
		return 0, false
	}
	var busiest *record.PhaseLink
	var aloneCount, aloneOwn float64
	for i := range in.ModelLinks {
		pl := &in.ModelLinks[i]
		if pl.Job != k.Job || pl.Iteration != k.Iteration || pl.Phase != k.Phase || pl.RateBps <= 0 || pl.WindowNs <= 0 {
			continue
		}
		l := in.link(pl.Link)
		if l == nil {
			continue
		}
		if busiest == nil || pl.OwnBytes+pl.OtherBytes > busiest.OwnBytes+busiest.OtherBytes {
			busiest = pl
		}
		if pl.OtherBytes <= AloneBelow*pl.OwnBytes {
			if c, ok := countBetween(l.Samples, from, to); ok {
				aloneCount += c
				aloneOwn += pl.OwnBytes
			}
		}
	}
	if busiest == nil {
		return 0, false
	}
	perPayload := 1 / in.Goodput
	if aloneOwn > 0 {
		perPayload = aloneCount / aloneOwn
	}
	l := in.link(busiest.Link)
	count, okC := countBetween(l.Samples, from, to)
	if !okC || l.RateBps == 0 {
		return 0, false
	}
	others := max(0, count-busiest.OwnBytes*perPayload)
	measured := min(MaxOthersShare, others/float64(l.RateBps)/(float64(to-from)/1e9))
	model := min(MaxOthersShare, busiest.OtherBytes/busiest.RateBps/(float64(busiest.WindowNs)/1e9))
	return int64(float64(busiest.WindowNs) * ((1-model)/(1-measured) - 1)), true
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
