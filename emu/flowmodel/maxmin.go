package flowmodel

import (
	"container/heap"
	"math"
)

// recompute gives new max-min fair rates to every flow connected (through
// shared resources) to a dirty flow or resource, and reschedules their
// completions.
func (s *Sim) recompute() {
	if len(s.dirty) == 0 && len(s.dirtyF) == 0 {
		return
	}
	s.mark++
	m := s.mark
	var comp []*flow
	var rq []int32
	addRes := func(r int32) {
		if s.res[r].mark != m {
			s.res[r].mark = m
			rq = append(rq, r)
		}
	}
	addFlow := func(fl *flow) {
		if fl.done || fl.mark == m {
			return
		}
		fl.mark = m
		comp = append(comp, fl)
		for _, r := range fl.res {
			addRes(r)
		}
	}
	for _, fl := range s.dirtyF {
		addFlow(fl)
	}
	for _, r := range s.dirty {
		addRes(r)
	}
	s.dirty, s.dirtyF = s.dirty[:0], s.dirtyF[:0]
	for i := 0; i < len(rq); i++ {
		for _, fl := range s.res[rq[i]].flows {
			addFlow(fl)
		}
	}
	if len(comp) == 0 {
		if s.queueTrace != nil {
			for _, r := range rq {
				s.traceQueue(r, 0) // its last flow left: no queue stands
			}
		}
		return
	}
	s.Stats.RateComputations++
	for _, fl := range comp {
		s.advance(fl)
	}
	s.waterfill(comp, rq)
	for _, fl := range comp {
		fl.version++
		if fl.rate <= 0 {
			continue
		}
		dt := int64(math.Ceil(fl.remaining / fl.rate * 1e9))
		t := s.now + dt
		if c := s.opt.CoalesceNs; c > 0 {
			t = (t + c - 1) / c * c
		}
		heap.Push(&s.events, event{t: t, kind: evFlowDone, id: fl.id, version: fl.version})
	}
}

// shareItem is a heap entry: a resource and its fair share when pushed.
type shareItem struct {
	share float64
	r     int32
}

type shareHeap []shareItem

func (h shareHeap) Len() int           { return len(h) }
func (h shareHeap) Less(i, j int) bool { return h[i].share < h[j].share }
func (h shareHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *shareHeap) Push(x any)        { *h = append(*h, x.(shareItem)) }
func (h *shareHeap) Pop() any {
	old := *h
	e := old[len(old)-1]
	*h = old[:len(old)-1]
	return e
}

// waterfill is progressive filling: repeatedly take the resource with the
// smallest fair share of its remaining capacity, fix every open flow
// through it at that share, and take it off the other resources. Flows
// without a path, or through a dark port, get 0.
func (s *Sim) waterfill(comp []*flow, rq []int32) {
	if s.opt.TCP != nil && s.opt.TCP.RTTExponent != 0 {
		s.shareByRTT(comp, rq) // the TCP-aware model (tcpshare.go)
		return
	}
	s.fill(comp, rq, nil)
}

// fill is progressive filling with per-flow weights (1 unless the
// TCP-aware model set them): repeatedly take the resource with the
// smallest remaining capacity per unit of open weight, fix every open flow
// through it at its weight times that level, and take those rates off the
// other resources. With every weight 1 that level is the fair share, and
// the arithmetic is max-min's exactly. Flows in fixed get their rate
// there (if startFill leaves them open) before the others share what is
// left.
func (s *Sim) fill(comp []*flow, rq []int32, fixed map[*flow]float64) {
	open := s.startFill(comp, rq)
	for _, fl := range comp { // comp's order: the sums below stay deterministic
		rate, ok := fixed[fl]
		if !ok {
			fl.bneck = -1 // a flow fixed here keeps the bottleneck of the fill before
		}
		if !ok || fl.frozen {
			continue
		}
		fl.frozen, fl.rate = true, rate
		open--
		for _, r := range fl.res {
			o := &s.res[r]
			o.open--
			if !math.IsInf(o.remCap, 1) {
				o.remCap = math.Max(0, o.remCap-rate)
			}
		}
	}
	for _, r := range rq {
		s.res[r].openW = 0
	}
	for _, fl := range comp {
		if fl.frozen {
			continue
		}
		for _, r := range fl.res {
			s.res[r].openW += fl.weight
		}
	}
	level := func(r int32) float64 { return s.res[r].remCap / s.res[r].openW }
	h := shareHeap{}
	for _, r := range rq {
		if res := &s.res[r]; res.open > 0 && !math.IsInf(res.remCap, 1) {
			h = append(h, shareItem{level(r), r})
		}
	}
	heap.Init(&h)
	for open > 0 && h.Len() > 0 {
		it := heap.Pop(&h).(shareItem)
		res := &s.res[it.r]
		if res.open == 0 {
			continue
		}
		lv := level(it.r)
		if lv > it.share*(1+1e-12)+1e-9 { // stale entry
			heap.Push(&h, shareItem{lv, it.r})
			continue
		}
		lv = math.Max(lv, 0)
		for _, fl := range res.flows {
			if fl.mark != s.mark || fl.frozen {
				continue
			}
			fl.frozen = true
			fl.bneck = it.r
			fl.rate = lv * fl.weight
			open--
			for _, r2 := range fl.res {
				o := &s.res[r2]
				o.open--
				o.openW -= fl.weight
				if !math.IsInf(o.remCap, 1) {
					o.remCap -= fl.rate
					if o.open > 0 && r2 != it.r {
						heap.Push(&h, shareItem{level(r2), r2})
					}
				}
			}
		}
	}
	// Flows limited by nothing finite (all resources unlimited).
	for _, fl := range comp {
		if !fl.frozen {
			fl.rate = math.Inf(1)
			fl.frozen = true
		}
	}
}

// startFill readies a progressive filling over comp: every resource in rq
// at its full (or, dark, zero) capacity with no open flow; flows without a
// path, through a dark port, or limited by nothing are fixed at once (0, 0,
// unlimited). It counts the open flows per resource and returns how many
// flows are left open.
func (s *Sim) startFill(comp []*flow, rq []int32) int {
	for _, r := range rq {
		res := &s.res[r]
		res.open = 0
		res.remCap = res.capBps
		if s.now < res.darkUntil {
			res.remCap = 0
		}
	}
	open := 0
	for _, fl := range comp {
		fl.frozen = false
		fl.rate = 0
		if fl.noPath {
			fl.frozen = true
			continue
		}
		dark := false
		for _, r := range fl.res {
			if s.res[r].remCap == 0 {
				dark = true
				break
			}
		}
		if dark {
			fl.frozen = true
			continue
		}
		if len(fl.res) == 0 { // nothing limits it: local, instant
			fl.rate = math.Inf(1)
			fl.frozen = true
			continue
		}
		for _, r := range fl.res {
			s.res[r].open++
		}
		open++
	}
	return open
}
