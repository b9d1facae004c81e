package fidelity

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/ocsemu/ocsemu/workers/job"
)

// HyStartEarlySegs is HyStart's first chance to end slow start
// (hystart_low_window is 16 segments; from an initial window of 10 the
// window is 20-31 when HyStart first looks). It is the early-exit
// threshold when a flow's share of its path cannot be computed (no link
// rate, RTT or MSS recorded).
const HyStartEarlySegs = 32

// earlyExitCost is how much longer the phase's flows whose slow start
// ended early took than its other flows: the longest such flow's time
// minus the longest other flow's, each timed from when both its ranks
// had started. 0 when the phase has no per-flow marks (s is nil), or no
// flow (or every flow) was cut.
func (s *SlowStarts) earlyExitCost() int64 {
	if s == nil || len(s.Cut) == 0 || s.Others == 0 {
		return 0
	}
	return max(0, s.CutNs()-s.OthersNs)
}

// SlowStarts is how a phase's flows left slow start: the flows whose
// slow start ended early, each with its threshold and time, and the
// longest time of the others. A flow ended early when its connection's
// threshold is below its share of the path (shareSegs); where every
// flow's is (an upper bound, which then tells the flows nothing), the
// flows cut at HyStart's first chance (HyStartEarlySegs, by HyStart or
// a loss) count instead, and ByHyStart says so.
type SlowStarts struct {
	Flows     int        `json:"flows"`
	Cut       []FlowExit `json:"cut,omitempty"`
	Others    int        `json:"others"`
	OthersNs  int64      `json:"others_max_ns"`
	ByHyStart bool       `json:"by_hystart_first_chance,omitempty"`
}

// FlowExit is one flow cut early: its ranks, its connection's slow-start
// threshold (segments) and its time.
type FlowExit struct {
	Src  int    `json:"src"`
	Dst  int    `json:"dst"`
	Segs uint32 `json:"ssthresh_segments"`
	Ns   int64  `json:"ns"`
}

// CutNs is the longest cut flow's time (0 with none).
func (s SlowStarts) CutNs() int64 {
	var m int64
	for _, f := range s.Cut {
		m = max(m, f.Ns)
	}
	return m
}

// FirstChanceNs is the longest time of a cut flow whose threshold is
// below HyStart's first chance (HyStartEarlySegs); 0 with none.
func (s SlowStarts) FirstChanceNs() int64 {
	var m int64
	for _, f := range s.Cut {
		if f.Segs < HyStartEarlySegs {
			m = max(m, f.Ns)
		}
	}
	return m
}

// Text says it in one line.
func (s SlowStarts) Text() string {
	switch {
	case len(s.Cut) == 0 && s.ByHyStart:
		return fmt.Sprintf("slow start: every one of %d flows left it below its share (an upper bound), none at HyStart's first chance (below %d segments); the slowest took %.1f ms",
			s.Flows, HyStartEarlySegs, ms(s.OthersNs))
	case len(s.Cut) == 0:
		return fmt.Sprintf("slow start: none of %d flows left it below its share; the slowest took %.1f ms", s.Flows, ms(s.OthersNs))
	}
	var cut []string
	for _, f := range s.Cut {
		cut = append(cut, fmt.Sprintf("%s at %d segments took %.1f ms", ConnName(f.Src, f.Dst), f.Segs, ms(f.Ns)))
	}
	below := "below its share"
	if s.ByHyStart {
		below = fmt.Sprintf("at HyStart's first chance (below %d segments; every flow was below its share)", HyStartEarlySegs)
	}
	others := "no other flow"
	if s.Others > 0 {
		others = fmt.Sprintf("the other %d at most %.1f ms", s.Others, ms(s.OthersNs))
	}
	return fmt.Sprintf("slow start left %s by %d of %d flows: %s; %s", below, len(s.Cut), s.Flows, strings.Join(cut, ", "), others)
}

// slowStarts classifies the phase's flows; ok is false when it has no
// finished flow with per-flow marks.
func (in *Inputs) slowStarts(k job.Key) (SlowStarts, bool) {
	if k.Phase == job.PhaseAllReduce {
		// A ring's or halving-doubling's connections are coupled: one
		// waits for the data another delivers, and they end staggered
		// whatever their slow start did (the per-rank model's ring ends
		// its connections up to 86 ms apart on plan-demo), so a cut
		// connection's longer time is not early_exit's to take.
		return SlowStarts{}, false
	}
	fromSrc := map[int]int{} // the phase's flows each rank sends at once
	var flows []Flow
	for _, f := range in.Flows {
		if f.Job == k.Job && f.Iteration == k.Iteration && f.Phase == k.Phase {
			fromSrc[f.Src]++
			if f.EndNs > f.StartNs {
				flows = append(flows, f)
			}
		}
	}
	if len(flows) == 0 {
		return SlowStarts{}, false
	}
	classify := func(byShare bool) SlowStarts {
		out := SlowStarts{Flows: len(flows), ByHyStart: !byShare}
		for _, f := range flows {
			d := f.EndNs - f.StartNs
			segs, rttUs, ok := in.slowStartExit(f)
			share := float64(HyStartEarlySegs)
			if byShare {
				share = in.shareSegs(rttUs, fromSrc[f.Src])
			}
			if ok && float64(segs) < share {
				out.Cut = append(out.Cut, FlowExit{Src: f.Src, Dst: f.Dst, Segs: segs, Ns: d})
			} else {
				out.Others++
				out.OthersNs = max(out.OthersNs, d)
			}
		}
		return out
	}
	out := classify(true)
	if len(out.Cut) > 0 && out.Others == 0 {
		out = classify(false)
	}
	return out, true
}

// slowStartExit is where the flow's sending connection had left slow
// start by the time the flow ended, and its smoothed RTT then: the first
// TCP sample at or after its end (the last one before when there is
// none). ok is false when no threshold was recorded or slow start never
// ended. HyStart sets the threshold where it ends slow start, a loss
// where it struck; either way the connection then grows its window by
// about half a segment per RTT (cubic's TCP-friendly region, with no
// earlier maximum) and, if the threshold is below its share of a busy
// path (shareSegs), stays below it for the rest of a short transfer: on
// plan-demo's all-to-all, flows cut at 18-30 segments took 85-123 ms,
// flows whose threshold was above their share 15-60 ms
// (docs/fidelity.md).
func (in *Inputs) slowStartExit(f Flow) (segs, rttUs uint32, ok bool) {
	s, found := in.sampleAt(f.Job, f.Src, f.Dst, f.EndNs)
	if !found || s.Ssthresh == 0 || s.Ssthresh >= 1<<31-1 {
		return 0, 0, false // not recorded, or slow start never ended
	}
	return s.Ssthresh, s.RTTUs, true
}

// sampleAt is the connection's first TCP sample at or after t, or its
// last one before when there is none after.
func (in *Inputs) sampleAt(jobName string, rank, peer int, t int64) (TCPSample, bool) {
	best, after := -1, false
	for i, s := range in.TCP {
		if s.Job != jobName || s.Rank != rank || s.Peer != peer {
			continue
		}
		isAfter := s.TNs >= t
		switch {
		case best < 0,
			isAfter && (!after || s.TNs < in.TCP[best].TNs),
			!isAfter && !after && s.TNs > in.TCP[best].TNs:
			best, after = i, isAfter
		}
	}
	if best < 0 {
		return TCPSample{}, false
	}
	return in.TCP[best], true
}

// ConnStarts is, for a phase without per-flow marks (a ring, a parameter
// server's push or pull), which of the job's connections that moved bytes
// in it run with a slow-start threshold below HyStart's first chance
// (HyStartEarlySegs): a connection cut there grows its window by about
// half a segment per RTT, and a pipelined ring waits for its slowest
// link. A diagnosis, not a part: such a phase's flows have no times of
// their own to compare.
type ConnStarts struct {
	Conns       int        `json:"connections"`
	FirstChance []ConnExit `json:"first_chance,omitempty"`
	// Last is the connection that delivered the phase's last byte, where
	// the phase marks each connection's (a pipelined ring or
	// halving-doubling all-reduce since 27 Nov): with a ring's coupling,
	// the one its end waited for.
	Last *ConnLast `json:"last,omitempty"`
}

// ConnLast is the connection that delivered last: how long after the
// one before it (AfterNs), and whether it ran below HyStart's first
// chance.
type ConnLast struct {
	Src         int   `json:"src"`
	Dst         int   `json:"dst"`
	AfterNs     int64 `json:"after_ns"`
	FirstChance bool  `json:"first_chance,omitempty"`
}

// ConnExit is one connection (sender rank -> receiver rank) and its
// slow-start threshold (segments).
type ConnExit struct {
	Src  int    `json:"src"`
	Dst  int    `json:"dst"`
	Segs uint32 `json:"ssthresh_segments"`
}

// Text says it in one line.
func (c ConnStarts) Text() string {
	if len(c.FirstChance) == 0 {
		return fmt.Sprintf("slow start: none of its %d connections below HyStart's first chance (%d segments)%s", c.Conns, HyStartEarlySegs, c.lastText())
	}
	var cs []string
	for _, x := range c.FirstChance {
		cs = append(cs, fmt.Sprintf("%s at %d", ConnName(x.Src, x.Dst), x.Segs))
	}
	return fmt.Sprintf("slow start: %d of its %d connections below HyStart's first chance (%d segments): %s%s", len(c.FirstChance), c.Conns, HyStartEarlySegs, strings.Join(cs, ", "), c.lastText())
}

func (c ConnStarts) lastText() string {
	if c.Last == nil {
		return ""
	}
	below := ""
	if c.Last.FirstChance {
		below = ", one of those"
	}
	return fmt.Sprintf("; the last byte came over %s, %.1f ms after the connection before it%s", ConnName(c.Last.Src, c.Last.Dst), ms(c.Last.AfterNs), below)
}

// connStarts finds the job's connections whose acknowledged bytes grew
// between the samples that bracket the phase (windowSamples: samples are
// periodic, so neighbouring phases' bytes may count), and each one's
// threshold at the phase's end; ok is false when none moved bytes.
func (in *Inputs) connStarts(k job.Key, from, to int64) (ConnStarts, bool) {
	var out ConnStarts
	below := map[[2]int]bool{}
	for _, w := range in.windowSamples(k.Job, from, to) {
		if w.last.BytesAcked <= w.first.BytesAcked {
			continue // moved nothing in the phase
		}
		out.Conns++
		if s := w.last.Ssthresh; s > 0 && s < HyStartEarlySegs {
			out.FirstChance = append(out.FirstChance, ConnExit{Src: w.rank, Dst: w.peer, Segs: s})
			below[[2]int{w.rank, w.peer}] = true
		}
	}
	var last, before *Flow
	for i := range in.Flows {
		f := &in.Flows[i]
		if f.Job != k.Job || f.Iteration != k.Iteration || f.Phase != k.Phase {
			continue
		}
		switch {
		case last == nil || f.EndNs > last.EndNs:
			last, before = f, last
		case before == nil || f.EndNs > before.EndNs:
			before = f
		}
	}
	if last != nil && before != nil {
		out.Last = &ConnLast{Src: last.Src, Dst: last.Dst, AfterNs: last.EndNs - before.EndNs, FirstChance: below[[2]int{last.Src, last.Dst}]}
	}
	return out, out.Conns > 0
}

// shareSegs is a flow's share of its path's window in segments: the
// server link's payload rate x the connection's smoothed RTT (which holds
// the queues it crossed) over the flows its rank sends at once, an upper
// bound (flows of other jobs from the same server are not counted); or
// HyStartEarlySegs when that cannot be computed.
func (in *Inputs) shareSegs(rttUs uint32, flows int) float64 {
	if in.LinkPayloadBps <= 0 || in.MSS <= 0 || rttUs == 0 || flows <= 0 {
		return HyStartEarlySegs
	}
	return in.LinkPayloadBps * float64(rttUs) / 1e6 / float64(in.MSS) / float64(flows)
}

// ConnName is a connection as sender->receiver ranks; a negative rank is
// the job's parameter server (workers.PSRank), "ps".
func ConnName(src, dst int) string {
	name := func(r int) string {
		if r < 0 {
			return "ps"
		}
		return strconv.Itoa(r)
	}
	return name(src) + "->" + name(dst)
}
