package fidelity

import (
	"fmt"
	"io"
	"math"
	"strings"
	"text/tabwriter"

	"github.com/ocsemu/ocsemu/workers/job"
	"github.com/ocsemu/ocsemu/workers/record"
)

// AttributeAbove is the |error| against the TCP-aware model (the
// calibrated one when there is none) above which a phase is explained.
const AttributeAbove = 0.05

// The parts of a phase's time beyond the ideal model's, in the order
// they are assigned: the models' own figures (framing, ranks, tcp,
// drift), then measured figures, each capped so that the parts never
// claim more than the difference (inc_round alone may be negative: a
// round trip shorter than the model's); what no part explains is the
// residual.
const (
	PartFraming   = "framing"    // the calibrated model's time - the ideal's (TCP headers), ranks in lockstep in both
	PartRanks     = "ranks"      // the calibrated model's time with all-to-all ranks on their own - in lockstep
	PartTCP       = "tcp"        // the TCP-aware model's time - the calibrated's (slow start, RTT-biased sharing, reconfiguration recovery)
	PartDrift     = "drift"      // the TCP-aware model's time with every phase started when it really did - as planned (what ran beside it changed)
	PartINCRound  = "inc_round"  // an INC push's time at its workers' measured round trip - the replay's (a worker moves one window per round trip); signed
	PartLateness  = "lateness"   // the latest rank's start after it could start, inside the timed phase
	PartSkew      = "skew"       // the rest of the spread of the ranks' starts, beyond the spread the TCP-aware model predicts
	PartEarlyExit = "early_exit" // how much longer the flows whose slow start ended below their share of the path took than the others
	PartRTO       = "rto"        // time in RTO recovery on the job's connections (TCP_INFO)
	PartINCStall  = "inc_stall"  // the time an INC push's worker went without any result while a retransmission timeout was due (the largest over workers)
	PartLoss      = "loss"       // retransmitted bytes at the link's payload rate (reconfiguration loss and recovery included)
	PartGC        = "gc"         // the longest a rank's garbage collector held it inside the phase (assists and pauses: the ranks' own stall)
	PartCPU       = "cpu"        // wall time x the share of all CPUs other processes held
	PartResidual  = "residual"
)

// Parts lists the parts in order.
var Parts = []string{PartFraming, PartRanks, PartTCP, PartDrift, PartINCRound, PartLateness, PartSkew, PartRTO, PartINCStall, PartLoss, PartEarlyExit, PartGC, PartCPU, PartResidual}

// Attribution is one phase's decomposition: measured - ideal = the sum of
// Parts (ns). DataWaitNs and VerifyNs are outside the measured time (a
// pull is timed from when its data exist, and results are checked after
// the phase); they are shown so nothing is hidden.
type Attribution struct {
	Job          string `json:"job"`
	Iteration    int    `json:"iteration"`
	Phase        string `json:"phase"`
	IdealNs      int64  `json:"ideal_ns"`
	CalibratedNs int64  `json:"calibrated_ns"`
	TCPAwareNs   int64  `json:"tcp_aware_ns,omitempty"`
	// ReplayNs is the TCP-aware model's time for the phase with every
	// phase started when the emulation started it (Inputs.Replay).
	ReplayNs   int64            `json:"replay_ns,omitempty"`
	MeasuredNs int64            `json:"measured_ns"`
	RelErr     float64          `json:"rel_err_calibrated"`
	RelErrTCP  float64          `json:"rel_err_tcp_aware,omitempty"`
	Parts      map[string]int64 `json:"parts_ns"`
	DataWaitNs int64            `json:"data_wait_ns"`
	VerifyNs   int64            `json:"verify_ns"`
	// Link is how the phase's busiest link spent its window, measured and
	// in the replay: where a residual went (sharing.go); nil without
	// replay link figures or shaper samples.
	Link *LinkUse `json:"busiest_link,omitempty"`
	// INC splits an INC push's round trip into hops and network, measured
	// and in the model (incround.go).
	INC *INCRound `json:"inc_round_trip,omitempty"`
	// SlowStart is how the phase's flows left slow start (phases with
	// per-flow marks: all-to-all): which ended it early, as early_exit
	// counts them.
	SlowStart *SlowStarts `json:"slow_start,omitempty"`
}

// Attribute decomposes every communication phase whose |error| against
// the TCP-aware model (the calibrated model when the inputs have none)
// exceeds AttributeAbove. t0 is time zero (CLOCK_MONOTONIC), to place TCP
// and host samples against the phases.
func Attribute(in *Inputs, t0 int64) []Attribution {
	meas := map[job.Key]record.Phase{}
	if in.Measurement != nil {
		for _, p := range in.Measurement.Phases {
			meas[job.Key{Job: p.Job, Iteration: p.Iteration, Phase: p.Phase}] = p
		}
	}
	ideal, tcp, replay, lock := byKey(in.Ideal), byKey(in.TCPAware), byKey(in.Replay), byKey(in.CalibratedLockstep)
	var out []Attribution
	for _, c := range in.Calibrated {
		k := job.Key{Job: c.Job, Iteration: c.Iteration, Phase: c.Phase}
		id, ok := ideal[k]
		if c.Phase == job.PhaseCompute || !ok {
			continue
		}
		tc, hasTCP := tcp[k]
		judged := c.RelErr
		if hasTCP {
			judged = tc.RelErr
		}
		if math.Abs(judged) <= AttributeAbove {
			continue
		}
		m := meas[k]
		a := Attribution{Job: c.Job, Iteration: c.Iteration, Phase: c.Phase, IdealNs: id.PredictedNs, CalibratedNs: c.PredictedNs,
			MeasuredNs: c.MeasuredNs, RelErr: c.RelErr, Parts: map[string]int64{}, DataWaitNs: m.WaitDataNs, VerifyNs: m.VerifyNs}
		modelTCP, drift := int64(0), int64(0)
		if hasTCP {
			a.TCPAwareNs, a.RelErrTCP = tc.PredictedNs, tc.RelErr
			modelTCP = tc.PredictedNs - c.PredictedNs
			if r, ok := replay[k]; ok && r.PredictedNs > 0 {
				a.ReplayNs = r.PredictedNs
				drift = r.PredictedNs - tc.PredictedNs
			}
		}
		from, to := t0+m.StartNs, t0+m.EndNs
		rto, retrans := in.tcpDuring(c.Job, from, to)
		var lossNs int64
		if in.LinkPayloadBps > 0 {
			lossNs = int64(float64(retrans) / in.LinkPayloadBps * 1e9)
		}
		if u, ok := in.busiestLink(k, from, to); ok {
			a.Link = &u
		}
		if r, ok := in.incRound(k, m, from, to, a.ReplayNs); ok {
			a.INC = &r
		}
		if ss, ok := in.slowStarts(k); ok {
			a.SlowStart = &ss
		}
		gap := a.MeasuredNs - a.IdealNs
		framing, ranks := a.CalibratedNs-a.IdealNs, int64(0)
		if l, ok := lock[k]; ok && l.PredictedNs > 0 {
			framing, ranks = l.PredictedNs-a.IdealNs, a.CalibratedNs-l.PredictedNs
		}
		parts := []struct {
			name string
			ns   int64
		}{
			{PartFraming, framing},
			{PartRanks, ranks},
			{PartTCP, modelTCP},
			{PartDrift, drift},
			// Before lateness and stalls: a late worker or a stalled
			// window lengthens the round trip too, and they then only
			// take what it left.
			{PartINCRound, in.incRoundCost(k, m, a.ReplayNs)},
			{PartLateness, m.LateInNs},
			{PartSkew, max(0, m.SkewNs-m.LateInNs-in.ModelPhases[k].SkewNs)},
			{PartRTO, rto},
			{PartINCStall, m.INCStallNs},
			{PartLoss, lossNs},
			// After rto and loss: a cut flow's extra time holds its own
			// recovery, which they measure directly.
			{PartEarlyExit, a.SlowStart.earlyExitCost()},
			{PartGC, m.GCNs},
			{PartCPU, in.foreignDuring(from, to)},
		}
		left := gap
		for _, p := range parts {
			v := p.ns
			switch p.name {
			case PartFraming, PartRanks, PartTCP, PartDrift: // the models' own figures, never capped
			case PartINCRound: // signed: a shorter round trip than the model's made the push faster
				if v > 0 {
					v = min(v, max(0, left))
				}
			default:
				v = max(0, min(v, left))
			}
			a.Parts[p.name] = v
			left -= v
		}
		a.Parts[PartResidual] = left
		out = append(out, a)
	}
	return out
}

// partHyStartBefore27Nov is early_exit's name in run directories written
// before it counted losses too.
const partHyStartBefore27Nov = "hystart"

// RenameOldParts renames the parts earlier versions wrote under other
// names, so that old run directories still report: "hystart" is read as
// early_exit.
func RenameOldParts(as []Attribution) {
	for _, a := range as {
		if v, ok := a.Parts[partHyStartBefore27Nov]; ok {
			a.Parts[PartEarlyExit] += v
			delete(a.Parts, partHyStartBefore27Nov)
		}
	}
}

func byKey(cs []record.Comparison) map[job.Key]record.Comparison {
	out := make(map[job.Key]record.Comparison, len(cs))
	for _, c := range cs {
		out[job.Key{Job: c.Job, Iteration: c.Iteration, Phase: c.Phase}] = c
	}
	return out
}

// tcpDuring sums, over a job's connections, the time spent in RTO
// recovery and the bytes retransmitted between from and to (differences
// of the samples nearest before and at the end of the window).
func (in *Inputs) tcpDuring(jobName string, from, to int64) (rtoNs int64, retrans uint64) {
	type conn struct{ rank, peer int }
	first, last := map[conn]int{}, map[conn]int{}
	for i, s := range in.TCP {
		if s.Job != jobName {
			continue
		}
		c := conn{s.Rank, s.Peer}
		if s.TNs <= from {
			if j, ok := first[c]; !ok || in.TCP[j].TNs < s.TNs {
				first[c] = i
			}
		}
		if s.TNs <= to+int64(50e6) { // the sample after the end still belongs to it at 50 ms sampling
			if j, ok := last[c]; !ok || in.TCP[j].TNs < s.TNs {
				last[c] = i
			}
		}
	}
	var worstRTO int64
	for c, li := range last {
		l := in.TCP[li]
		var f = l
		f.RTOTimeMs, f.BytesRetrans = 0, 0
		if fi, ok := first[c]; ok {
			f = in.TCP[fi]
		}
		if l.RTOTimeMs > f.RTOTimeMs {
			worstRTO = max(worstRTO, int64(l.RTOTimeMs-f.RTOTimeMs)*1e6)
		}
		if l.BytesRetrans > f.BytesRetrans {
			retrans += l.BytesRetrans - f.BytesRetrans
		}
	}
	return worstRTO, retrans
}

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
		cut = append(cut, fmt.Sprintf("%d->%d at %d segments took %.1f ms", f.Src, f.Dst, f.Segs, ms(f.Ns)))
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
	best, after := -1, false
	for i, s := range in.TCP {
		if s.Job != f.Job || s.Rank != f.Src || s.Peer != f.Dst {
			continue
		}
		isAfter := s.TNs >= f.EndNs
		switch {
		case best < 0,
			isAfter && (!after || s.TNs < in.TCP[best].TNs),
			!isAfter && !after && s.TNs > in.TCP[best].TNs:
			best, after = i, isAfter
		}
	}
	if best < 0 {
		return 0, 0, false
	}
	s := in.TCP[best]
	if s.Ssthresh == 0 || s.Ssthresh >= 1<<31-1 {
		return 0, 0, false // not recorded, or slow start never ended
	}
	return s.Ssthresh, s.RTTUs, true
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

// foreignDuring is the wall time between from and to, weighted by the
// share of all CPUs other processes held in each host sample.
func (in *Inputs) foreignDuring(from, to int64) int64 {
	var ns float64
	for i, s := range in.Host {
		start := s.TNs - int64(100e6)
		if i > 0 {
			start = in.Host[i-1].TNs
		}
		lo, hi := max(start, from), min(s.TNs, to)
		if hi > lo {
			ns += float64(hi-lo) * s.Foreign
		}
	}
	return int64(ns)
}

// PrintAttribution writes one row per attributed phase, ms.
func PrintAttribution(w io.Writer, as []Attribution) {
	if len(as) == 0 {
		fmt.Fprintf(w, "== attribution: every communication phase is within %.0f%% of the TCP-aware model\n", 100*AttributeAbove)
		return
	}
	fmt.Fprintf(w, "== attribution of phases off the TCP-aware model by more than %.0f%% (ms; measured - ideal = the parts)\n", 100*AttributeAbove)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprint(tw, "job\titer\tphase\tideal\tcalibrated\ttcp-aware\tmeasured\terror\t")
	for _, p := range Parts {
		fmt.Fprintf(tw, "%s\t", p)
	}
	fmt.Fprint(tw, "data wait*\tverify*\t\n")
	for _, a := range as {
		rel := a.JudgedErr()
		fmt.Fprintf(tw, "%s\t%d\t%s\t%.2f\t%.2f\t%.2f\t%.2f\t%+.1f%%\t", a.Job, a.Iteration, a.Phase, ms(a.IdealNs), ms(a.CalibratedNs), ms(a.TCPAwareNs), ms(a.MeasuredNs), 100*rel)
		for _, p := range Parts {
			v := ms(a.Parts[p])
			if math.Abs(v) < 0.005 {
				v = 0 // not "-0.00"
			}
			fmt.Fprintf(tw, "%.2f\t", v)
		}
		fmt.Fprintf(tw, "%.2f\t%.2f\t\n", ms(a.DataWaitNs), ms(a.VerifyNs))
	}
	tw.Flush()
	fmt.Fprintln(w, "   error: against the TCP-aware model; * outside the measured time: a pull is timed from when its data exist; results are checked after the phase")
	if ds := Diagnoses(as); len(ds) > 0 {
		fmt.Fprintln(w, "   busiest links (the busiest its shapers measured), shares of the phase's window measured (the model's), INC round trips and slow-start exits (flows as rank->rank): where a residual went, not parts")
		for _, d := range ds {
			fmt.Fprintf(w, "   %s\n", d)
		}
	}
}

func ms(ns int64) float64 { return float64(ns) / 1e6 }

// Diagnoses are the attribution's diagnoses, a line each: every phase's
// busiest link, then every INC push's round trip, then how every
// all-to-all's flows left slow start.
func Diagnoses(as []Attribution) []string {
	var out []string
	for _, a := range as {
		if u := a.Link; u != nil {
			out = append(out, fmt.Sprintf("%s %d %s on %s: %s", a.Job, a.Iteration, a.Phase, u.Link, u.ShareText()))
		}
	}
	for _, a := range as {
		if r := a.INC; r != nil {
			out = append(out, fmt.Sprintf("%s %d %s: %s", a.Job, a.Iteration, a.Phase, r.Text()))
		}
	}
	for _, a := range as {
		if ss := a.SlowStart; ss != nil {
			out = append(out, fmt.Sprintf("%s %d %s: %s", a.Job, a.Iteration, a.Phase, ss.Text()))
		}
	}
	return out
}

// The bar for an attribution: every phase more than JudgedAbove
// off the TCP-aware model is accounted for to within ExplainedWithin of
// its prediction (the residual's share).
const (
	JudgedAbove     = 0.10
	ExplainedWithin = 0.05
)

// Tally counts, over runs, how far the attribution explains the phases
// more than JudgedAbove off the TCP-aware model (the calibrated model
// without one).
type Tally struct {
	Runs   int `json:"runs"`
	Phases int `json:"phases"` // more than JudgedAbove off
	// Explained phases have a residual within ExplainedWithin of the
	// prediction. Of the others, Under took less time than the models and
	// the measured parts give them (a negative residual: the phase beat
	// the model by more than inc_round, the one signed measured part,
	// says), Over more.
	Explained int `json:"explained"`
	Under     int `json:"under"`
	Over      int `json:"over"`
	// Worst is the phase with the largest residual share left, and its
	// share (signed).
	Worst      string  `json:"worst,omitempty"`
	WorstShare float64 `json:"worst_share,omitempty"`
}

// Add counts one run's attribution.
func (t *Tally) Add(as []Attribution) {
	t.Runs++
	for _, a := range as {
		if math.Abs(a.JudgedErr()) <= JudgedAbove {
			continue
		}
		share, ok := a.ResidualShare()
		if !ok {
			continue
		}
		t.Phases++
		switch {
		case math.Abs(share) <= ExplainedWithin:
			t.Explained++
			continue
		case share < 0:
			t.Under++
		default:
			t.Over++
		}
		if math.Abs(share) > math.Abs(t.WorstShare) {
			t.Worst, t.WorstShare = fmt.Sprintf("%s iteration %d %s", a.Job, a.Iteration, a.Phase), share
		}
	}
}

// Lines says the tally in one or two sentences: `emu run`, the repeat
// summary and both pages print them.
func (t Tally) Lines() []string {
	runs := fmt.Sprintf("%d runs", t.Runs)
	if t.Runs == 1 {
		runs = "the run"
	}
	if t.Phases == 0 {
		return []string{fmt.Sprintf("no communication phase was more than %.0f%% off the TCP-aware model in %s", 100*JudgedAbove, runs)}
	}
	phases := fmt.Sprintf("%d phases", t.Phases)
	if t.Phases == 1 {
		phases = "1 phase"
	}
	out := []string{fmt.Sprintf("%s more than %.0f%% off the TCP-aware model in %s; the parts explain all but <= %.0f points of %d",
		phases, 100*JudgedAbove, runs, 100*ExplainedWithin, t.Explained)}
	if left := t.Under + t.Over; left > 0 {
		out = append(out, fmt.Sprintf("%d left: %d faster than the models and the measured parts say (a negative residual: only inc_round, of the measured parts, can be negative), %d slower; worst %s, %+.1f points",
			left, t.Under, t.Over, t.Worst, 100*t.WorstShare))
	}
	return out
}

// Print writes the tally's lines, indented.
func (t Tally) Print(w io.Writer) {
	for _, l := range t.Lines() {
		fmt.Fprintf(w, "   %s\n", l)
	}
}

// ResidualShare is the residual's share of the prediction the phase is
// judged by (the TCP-aware model's, else the calibrated model's); ok is
// false without one.
func (a Attribution) ResidualShare() (share float64, ok bool) {
	pred := a.TCPAwareNs
	if pred <= 0 {
		pred = a.CalibratedNs
	}
	if pred <= 0 {
		return 0, false
	}
	return float64(a.Parts[PartResidual]) / float64(pred), true
}

// JudgedErr is the relative error the attribution is judged by: against
// the TCP-aware model where the run has one, else the calibrated model.
func (a Attribution) JudgedErr() float64 {
	if a.TCPAwareNs > 0 {
		return a.RelErrTCP
	}
	return a.RelErr
}
