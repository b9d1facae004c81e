package fidelity

import "github.com/ocsemu/ocsemu/workers/job"

// window is a phase's measured start and end (absolute ns).
type window struct{ from, to int64 }

// beside gives each phase that beat the models and its measured parts (a
// negative residual) the part of it a phase beside it explains: on the
// phase's busiest link the others took less time than in the replay
// (their measured link time below the model's), and phases that crossed
// that link while it ran were held back by their own measured parts (a
// flow cut early, a late rank, an INC round trip longer than the
// model's, a loss). The link time they left is what the phase gained. It
// is the smallest of three figures:
//   - the others' deficit on the busiest link (ModelOthersNs - OthersNs);
//   - what the phases beside it were held back, each's measured parts
//     times the share of its window that overlapped this phase's (an
//     upper bound: a flow held back still sends some of its share);
//   - the residual left.
//
// Without a phase beside it held back by something measured, a deficit
// of the others is TCP sharing the link otherwise than the model, which
// stays in the residual (the busiest link's line says so). cpu is not
// counted as holding a phase back: the other processes' share slows
// every phase alike.
func (in *Inputs) beside(as []Attribution, ws []window) {
	for i := range as {
		a := &as[i]
		left := a.Parts[PartResidual]
		a.Parts[PartBeside] = 0
		if left >= 0 || a.Link == nil {
			continue
		}
		deficit := a.Link.ModelOthersNs - a.Link.OthersNs
		if deficit <= 0 {
			continue
		}
		var held float64
		for j := range as {
			q, wq := &as[j], ws[j]
			overlap := min(ws[i].to, wq.to) - max(ws[i].from, wq.from)
			if j == i || overlap <= 0 || wq.to <= wq.from || !in.crosses(q.key(), a.Link.Link) {
				continue
			}
			held += float64(q.heldBack()) * float64(overlap) / float64(wq.to-wq.from)
		}
		v := min(deficit, int64(held), -left)
		if v <= 0 {
			continue
		}
		a.Parts[PartBeside] = -v
		a.Parts[PartResidual] = left + v
	}
}

// heldBack is the time the phase's measured parts say it was held back:
// the positive measured parts but cpu (which slows every phase alike)
// and beside itself.
func (a *Attribution) heldBack() int64 {
	var ns int64
	for _, p := range []string{PartINCRound, PartLateness, PartSkew, PartRTO, PartINCStall, PartLoss, PartEarlyExit, PartGC} {
		ns += max(0, a.Parts[p])
	}
	return ns
}

func (a *Attribution) key() job.Key {
	return job.Key{Job: a.Job, Iteration: a.Iteration, Phase: a.Phase}
}

// crosses says whether the replay put any of the phase's payload on the
// link.
func (in *Inputs) crosses(k job.Key, link string) bool {
	for _, pl := range in.ModelLinks {
		if pl.Link == link && pl.OwnBytes > 0 && pl.Job == k.Job && pl.Iteration == k.Iteration && pl.Phase == k.Phase {
			return true
		}
	}
	return false
}
