package flowmodel

import (
	"cmp"
	"math"
	"slices"

	"github.com/ocsemu/ocsemu/dataplane/names"
	"github.com/ocsemu/ocsemu/emu/plan"
	"github.com/ocsemu/ocsemu/workers/record"
)

// linkSeg is payload one flow carried over one physical link between t0
// and t1, at a constant rate.
type linkSeg struct {
	t0, t1 int64
	bytes  float64
	job, q int32 // the flow's job and phase
}

// step is a step function's value from t on: a link's standing queue in
// the TCP-aware model, or the hops in an INC tree's round trip (ns).
type step struct {
	t, q int64
}

// traceQueue records a link's standing queue now, when it changed
// (Options.LinkShares).
func (s *Sim) traceQueue(r int32, q int64) {
	if int(r) < len(s.queueTrace) {
		s.queueTrace[r] = traceStep(s.queueTrace[r], s.now, q)
	}
}

// traceStep adds value q from t on to a step function, when it changed.
func traceStep(steps []step, t, q int64) []step {
	n := len(steps)
	switch {
	case n > 0 && steps[n-1].q == q:
		return steps
	case n > 0 && steps[n-1].t == t:
		steps[n-1].q = q
		return steps
	}
	return append(steps, step{t: t, q: q})
}

// stepMean is a step function's mean between from and to (a link's
// standing queue, a tree's hops).
func stepMean(steps []step, from, to int64) int64 {
	if to <= from {
		return 0
	}
	var sum float64
	for i, st := range steps {
		end := int64(math.MaxInt64)
		if i+1 < len(steps) {
			end = steps[i+1].t
		}
		lo, hi := max(st.t, from), min(end, to)
		if hi > lo {
			sum += float64(st.q) * float64(hi-lo)
		}
	}
	return int64(sum / float64(to-from))
}

// traceLinks records, when Options.LinkShares is set, what a flow sent
// since it was last advanced on each physical link of its path.
func (s *Sim) traceLinks(fl *flow, sent float64) {
	for _, r := range fl.res {
		if int(r) < len(s.linkTrace) {
			s.linkTrace[r] = append(s.linkTrace[r], linkSeg{t0: fl.last, t1: s.now, bytes: sent, job: int32(fl.job), q: int32(fl.phase)})
		}
	}
}

// resName names a physical resource as the emulator names the shaped
// interface that sends onto it ("node:iface"), "" for none.
func (s *Sim) resName(r int32) string {
	f := s.f
	srv := int32(f.Racks * f.ServersPerRack)
	ups := int32(f.Racks * f.UplinksPerToR)
	racks := int32(f.Racks)
	switch {
	case r < 0:
		return ""
	case r < srv:
		return names.ServerName(int(r)/f.ServersPerRack, int(r)%f.ServersPerRack) + ":" + names.ServerIface
	case r < 2*srv:
		i := int(r - srv)
		return names.ToRName(i/f.ServersPerRack) + ":" + names.ToRServerIface(i%f.ServersPerRack)
	case r < 2*srv+ups:
		i := int(r - 2*srv)
		return names.ToRName(i/f.UplinksPerToR) + ":" + names.UplinkIface(i%f.UplinksPerToR)
	case r < 2*srv+ups+racks:
		return names.ToRName(int(r-2*srv-ups)) + ":" + names.CoreIface
	case r < 2*srv+ups+2*racks:
		return names.EPSName + ":" + names.ToRName(int(r-2*srv-ups-racks))
	}
	return ""
}

// traceINCHops sets every INC push's mean hop cost over its window
// (record.Phase.INCHopsNs) from the trace of its tree's round trip.
func (s *Sim) traceINCHops(phases []record.Phase) {
	if s.incHops == nil {
		return
	}
	mean := map[plan.Key][2]int64{} // summed hops x time, time
	for k, steps := range s.incHops {
		js := s.jobs[k[0]]
		pk := js.keys[k[1]]
		if s.keyName != nil {
			pk = s.keyName(pk)
		}
		from, to := js.Start[k[1]], js.End[k[1]]
		if from < 0 || to <= from {
			continue
		}
		m := mean[pk]
		m[0] += stepMean(steps, from, to) * (to - from)
		m[1] += to - from
		mean[pk] = m
	}
	for i, p := range phases {
		if m, ok := mean[plan.Key{Job: p.Job, Iteration: p.Iteration, Phase: p.Phase}]; ok && m[1] > 0 {
			phases[i].INCHopsNs = m[0] / m[1]
		}
	}
}

// phaseLinks is, for every phase in phases (original keys, windows as the
// run reports them) and every link its flows crossed, its own payload
// over the link and the others' payload during its window.
func (s *Sim) phaseLinks(phases []record.Phase) []record.PhaseLink {
	if s.linkTrace == nil {
		return nil
	}
	win := make(map[plan.Key][2]int64, len(phases))
	for _, p := range phases {
		win[plan.Key{Job: p.Job, Iteration: p.Iteration, Phase: p.Phase}] = [2]int64{p.StartNs, p.EndNs}
	}
	keyOf := func(sg linkSeg) plan.Key {
		k := s.jobs[sg.job].keys[sg.q]
		if s.keyName != nil {
			k = s.keyName(k)
		}
		return k
	}
	var out []record.PhaseLink
	for r, segs := range s.linkTrace {
		if len(segs) == 0 {
			continue
		}
		name := s.resName(int32(r))
		if name == "" || math.IsInf(s.res[r].capBps, 1) || s.res[r].capBps <= 0 {
			continue // an unlimited link: no shaper to compare with
		}
		own := map[plan.Key]float64{}
		keys := make([]plan.Key, len(segs))
		for i, sg := range segs {
			keys[i] = keyOf(sg)
			own[keys[i]] += sg.bytes
		}
		for k, b := range own {
			w, ok := win[k]
			if !ok {
				continue
			}
			var others float64
			for i, sg := range segs {
				if keys[i] != k {
					others += overlap(sg, w[0], w[1])
				}
			}
			out = append(out, record.PhaseLink{Job: k.Job, Iteration: k.Iteration, Phase: k.Phase, Link: name,
				OwnBytes: b, OtherBytes: others, RateBps: s.res[r].capBps, WindowNs: w[1] - w[0], QueueNs: stepMean(s.queueTrace[r], w[0], w[1])})
		}
	}
	slices.SortFunc(out, func(a, b record.PhaseLink) int {
		return cmp.Or(cmp.Compare(a.Job, b.Job), cmp.Compare(a.Iteration, b.Iteration), cmp.Compare(a.Phase, b.Phase), cmp.Compare(a.Link, b.Link))
	})
	return out
}

// overlap is the part of a segment's bytes sent between from and to (the
// segment sent at a constant rate).
func overlap(sg linkSeg, from, to int64) float64 {
	if sg.t1 <= sg.t0 {
		if sg.t0 >= from && sg.t0 < to {
			return sg.bytes
		}
		return 0
	}
	lo, hi := max(sg.t0, from), min(sg.t1, to)
	if hi <= lo {
		return 0
	}
	return sg.bytes * float64(hi-lo) / float64(sg.t1-sg.t0)
}
