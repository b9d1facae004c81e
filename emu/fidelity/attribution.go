package fidelity

import (
	"cmp"
	"fmt"
	"io"
	"maps"
	"math"
	"slices"
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
// claim more than the difference (inc_round and beside may be negative:
// a round trip shorter than the model's, link time left by a phase
// beside that was held back); what no part explains is the residual.
const (
	PartFraming   = "framing"    // the calibrated model's time - the ideal's (TCP headers), ranks in lockstep in both
	PartRanks     = "ranks"      // the calibrated model's time with all-to-all and ring ranks on their own - in lockstep
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
	PartBeside    = "beside"     // a faster phase: the link time others left on its busiest link while phases beside it were held back by their own measured parts (beside.go); never positive
	PartResidual  = "residual"
)

// Parts lists the parts in order.
var Parts = []string{PartFraming, PartRanks, PartTCP, PartDrift, PartINCRound, PartLateness, PartSkew, PartRTO, PartINCStall, PartLoss, PartEarlyExit, PartGC, PartCPU, PartBeside, PartResidual}

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
	// Conns is, for a phase without per-flow marks, which of its job's
	// connections run below HyStart's first chance.
	Conns *ConnStarts `json:"slow_start_connections,omitempty"`
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
	var windows []window
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
		} else if cs, ok := in.connStarts(k, from, to); ok {
			a.Conns = &cs
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
		windows = append(windows, window{from, to})
	}
	in.beside(out, windows)
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
// of the samples that bracket the window, windowSamples).
func (in *Inputs) tcpDuring(jobName string, from, to int64) (rtoNs int64, retrans uint64) {
	var worstRTO int64
	for _, w := range in.windowSamples(jobName, from, to) {
		l, f := w.last, w.first
		if !w.hasFirst {
			f = l
			f.RTOTimeMs, f.BytesRetrans = 0, 0
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

// connWindow is one connection's samples around a window: the latest at
// or before its start (hasFirst false: none; first is then zero) and the
// latest at or before its end plus one sampling period.
type connWindow struct {
	rank, peer        int
	first, last       TCPSample
	hasFirst, hasLast bool
}

// tcpSamplePeriodNs is how often emu run samples TCP_INFO: the sample
// after a window's end still belongs to it.
const tcpSamplePeriodNs = 50e6

// windowSamples brackets the window [from, to] on each of the job's
// connections that has a sample by to + tcpSamplePeriodNs, in (rank,
// peer) order.
func (in *Inputs) windowSamples(jobName string, from, to int64) []connWindow {
	type conn struct{ rank, peer int }
	ws := map[conn]*connWindow{}
	for _, s := range in.TCP {
		if s.Job != jobName {
			continue
		}
		c := conn{s.Rank, s.Peer}
		w := ws[c]
		if w == nil {
			w = &connWindow{rank: s.Rank, peer: s.Peer}
			ws[c] = w
		}
		if s.TNs <= from && (!w.hasFirst || s.TNs > w.first.TNs) {
			w.first, w.hasFirst = s, true
		}
		if s.TNs <= to+tcpSamplePeriodNs && (!w.hasLast || s.TNs > w.last.TNs) {
			w.last, w.hasLast = s, true
		}
	}
	out := make([]connWindow, 0, len(ws))
	for _, w := range ws {
		if w.hasLast {
			out = append(out, *w)
		}
	}
	slices.SortFunc(out, func(a, b connWindow) int { return cmp.Or(cmp.Compare(a.rank, b.rank), cmp.Compare(a.peer, b.peer)) })
	return out
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
		fmt.Fprintln(w, "   busiest links (the busiest its shapers measured), shares of the phase's window measured (the model's), INC round trips and slow-start exits (rank->rank; ps: the parameter server): where a residual went, not parts")
		for _, d := range ds {
			fmt.Fprintf(w, "   %s\n", d)
		}
	}
}

func ms(ns int64) float64 { return float64(ns) / 1e6 }

// Diagnoses are the attribution's diagnoses, a line each: every phase's
// busiest link, then every INC push's round trip, then how every
// all-to-all's flows left slow start, or which of another phase's
// connections run below HyStart's first chance.
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
		switch {
		case a.SlowStart != nil:
			out = append(out, fmt.Sprintf("%s %d %s: %s", a.Job, a.Iteration, a.Phase, a.SlowStart.Text()))
		case a.Conns != nil:
			out = append(out, fmt.Sprintf("%s %d %s: %s", a.Job, a.Iteration, a.Phase, a.Conns.Text()))
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
	// the model by more than inc_round and beside, the measured parts
	// that can be negative, say), Over more.
	Explained int `json:"explained"`
	Under     int `json:"under"`
	Over      int `json:"over"`
	// Worst is the phase with the largest residual share left, and its
	// share (signed).
	Worst      string  `json:"worst,omitempty"`
	WorstShare float64 `json:"worst_share,omitempty"`
	// Left counts the phases left (not explained) by phase, for where
	// the model or the parts fall short over a set.
	Left map[string]int `json:"left,omitempty"`
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
		name := fmt.Sprintf("%s iteration %d %s", a.Job, a.Iteration, a.Phase)
		if t.Left == nil {
			t.Left = map[string]int{}
		}
		t.Left[name]++
		if math.Abs(share) > math.Abs(t.WorstShare) {
			t.Worst, t.WorstShare = name, share
		}
	}
}

// LeftByPhaseShown is how many phases the "left by phase" line names,
// most left first; a task graph's hundreds of tasks would make it a page.
const LeftByPhaseShown = 10

// Lines says the tally in a few sentences (what is left, by phase, over
// more than one run): `emu run`, the repeat
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
	out := []string{fmt.Sprintf("%s more than %.0f%% off the TCP-aware model in %s; the parts explain %d of them to within %.0f points",
		phases, 100*JudgedAbove, runs, t.Explained, 100*ExplainedWithin)}
	if left := t.Under + t.Over; left > 0 {
		out = append(out, fmt.Sprintf("%d left: %d faster than the models and the measured parts say (a negative residual: only inc_round and beside, of the measured parts, can be negative), %d slower; worst %s, %+.1f points",
			left, t.Under, t.Over, t.Worst, 100*t.WorstShare))
		if t.Runs > 1 {
			var by []string
			names := slices.SortedFunc(maps.Keys(t.Left), func(a, b string) int { return cmp.Or(cmp.Compare(t.Left[b], t.Left[a]), strings.Compare(a, b)) })
			for _, name := range names[:min(len(names), LeftByPhaseShown)] {
				by = append(by, fmt.Sprintf("%s %d", name, t.Left[name]))
			}
			switch more := len(names) - LeftByPhaseShown; {
			case more == 1:
				by = append(by, "and 1 more phase")
			case more > 1:
				by = append(by, fmt.Sprintf("and %d more phases", more))
			}
			out = append(out, "left by phase: "+strings.Join(by, ", "))
		}
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
