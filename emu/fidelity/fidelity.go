// Package fidelity judges whether a run's emulation can be trusted, and
// explains where each phase's time went. Every line of the verdict is a
// measured figure with pass, warn or fail (or n/a with the reason it
// cannot be measured yet); the run's verdict is its worst line. It is
// pure: the inputs are what the run recorded (hoststat samples, shaper
// counters, TCP_INFO samples, OCS counters and events, the measurement
// and the calibrated model's comparison).
package fidelity

import (
	"fmt"
	"io"
	"math"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/ocsemu/ocsemu/emu/hoststat"
	"github.com/ocsemu/ocsemu/workers/job"
	"github.com/ocsemu/ocsemu/workers/record"
)

// Status of one verdict line.
type Status string

const (
	Pass Status = "pass"
	Warn Status = "warn"
	Fail Status = "fail"
	NA   Status = "n/a" // cannot be measured (yet); the figure says why
)

func (s Status) rank() int {
	switch s {
	case Warn:
		return 1
	case Fail:
		return 2
	}
	return 0
}

// Line is one check: a figure and what it means.
type Line struct {
	Check  string  `json:"check"`
	Status Status  `json:"status"`
	Figure string  `json:"figure"` // the measured figure, in words
	Value  float64 `json:"value"`  // the figure the status is decided on
	Why    string  `json:"why,omitempty"`
}

// Verdict is every line and the worst status.
type Verdict struct {
	Status Status `json:"status"`
	Lines  []Line `json:"lines"`
}

// Thresholds (docs/fidelity.md explains each).
const (
	// CPU headroom: 1 - the 95th percentile of busy CPU share.
	HeadroomPass, HeadroomWarn = 0.20, 0.05
	// Foreign load: the mean share of all CPUs other processes took.
	ForeignPass, ForeignWarn = 0.05, 0.15
	// Link efficiency: achieved over configured rate, median over the
	// sample intervals in which a shaped link had a queue throughout.
	EfficiencyPass, EfficiencyWarn = 0.97, 0.90
	// Loss: retransmitted bytes over bytes sent.
	LossPass, LossWarn = 0.001, 0.01
	// Paths: the share of the uplinks' bytes that the kernel's paths and
	// the model's put on different uplinks (pathBytes).
	PathMismatchPass, PathMismatchWarn = 0.10, 0.25
	// Lateness: the largest time a rank started a phase after it could.
	LatenessPassNs, LatenessWarnNs = 1e6, 5e6
	// Model accuracy against the TCP-aware model (the calibrated one when
	// there is none): median and max |error| of communication phases.
	AccuracyMedianPass, AccuracyMaxPass = 0.05, 0.10
	AccuracyMedianWarn, AccuracyMaxWarn = 0.10, 0.20
)

// LinkSample is one reading of a shaped link's egress queue.
type LinkSample struct {
	TNs          int64
	Bytes        uint64
	BacklogBytes uint32
}

// Link is a shaped link's readings over the run.
type Link struct {
	Name    string // node:iface
	RateBps uint64 // bytes/s the shaper allows
	Samples []LinkSample
}

// OCS is what the OCS process counted during the run (nil: no OCS).
type OCS struct {
	DarkBytes, UnpatchedBytes     uint64
	DarkPackets, UnpatchedPackets uint64
	// UplinkBytes is, per ToR uplink ("tor0:1"), the frame bytes the OCS
	// forwarded from it during the run: where the kernel sent the traffic.
	UplinkBytes map[string]uint64
	// RouteLagNs is, per reconfiguration, how long after the circuits
	// changed the servers' paths matched them (0: the same instant): the
	// ToRs' BPF paths when they run, else the netlink routes.
	RouteLagNs []int64
}

// TCPSample is what the verdict and the attribution read of one TCP_INFO
// sample (workers.TCPSample; this package stays free of the workers'
// kernel code).
type TCPSample struct {
	Job          string
	Rank, Peer   int
	TNs          int64
	Retrans      uint32 // segments retransmitted so far
	BytesRetrans uint64
	TotalRTO     uint16
	RTOTimeMs    uint32
	// Ssthresh is the slow-start threshold in segments (0: not recorded;
	// 2^31-1: never set).
	Ssthresh uint32
	// RTTUs is the smoothed RTT (µs; 0: not recorded).
	RTTUs uint32
	// BytesAcked is the connection's payload acknowledged so far.
	BytesAcked uint64
}

// Flow is one flow of a phase that its ranks time per peer (all-to-all:
// one connection per pair of ranks): from when both of its ranks had
// started the phase to its last byte in, ns on the clock of Attribute's t0
// (CLOCK_MONOTONIC in a live run; the data file's axis, t0 = 0, when a
// recorded run is attributed again).
type Flow struct {
	Job            string
	Iteration      int
	Phase          string
	Src, Dst       int
	StartNs, EndNs int64
}

// Inputs is what a run recorded.
type Inputs struct {
	Host []hoststat.Sample
	// HostErr is why host sampling failed, if it did.
	HostErr string
	// OtherLabs are the other emu labs up during the run (on a shared
	// machine: a classmate's run is foreign load here).
	OtherLabs   []string
	Links       []Link
	ShaperDrops uint64
	TCP         []TCPSample
	// Flows are the per-flow marks of the phases that have them.
	Flows []Flow
	// BytesSent is every byte the ranks sent (phase records).
	BytesSent   int64
	OCS         *OCS
	Measurement *record.Run
	// Ideal, Calibrated and TCPAware are the measurement against the
	// three models; the accuracy line and the attribution judge the
	// TCP-aware one when there is one.
	Ideal, Calibrated, TCPAware []record.Comparison
	// Replay is the measurement against the TCP-aware model replayed with
	// every phase started when it really did (flowmodel.Replay); the
	// attribution's drift is its time minus the TCP-aware model's.
	Replay []record.Comparison
	// CalibratedLockstep is the measurement against the calibrated model
	// with all-to-all and ring ranks in lockstep: framing is it minus the ideal,
	// the ranks part the calibrated model minus it.
	CalibratedLockstep []record.Comparison
	// ModelPhases are the TCP-aware model's phase records, for the spread
	// of the ranks' starts it predicts itself (its ranks run on their own
	// in all-to-all jobs): the attribution's skew is what was measured
	// beyond it.
	ModelPhases map[job.Key]record.Phase
	// ModelUplinkBytes is, per ToR uplink, the payload the TCP-aware
	// model's paths put on it (the ideal model's without one).
	ModelUplinkBytes map[string]float64
	// LinkPayloadBps is the server links' payload rate in bytes/s (the
	// calibrated model's), to turn retransmitted bytes into time.
	LinkPayloadBps float64
	// MSS is a full segment's payload (bytes), to turn a window in
	// segments into bytes.
	MSS int
	// Goodput is the payload's share of a link's wire bytes (the
	// calibrated model's framing), to turn shaper bytes into payload.
	Goodput float64
	// ModelLinks is, per phase and link, what the replayed TCP-aware
	// model put on the link while the phase ran (record.Run.PhaseLinks):
	// the busiest link's diagnosis compares the shapers' counts with it.
	ModelLinks []record.PhaseLink
	// Aggs are the ToR aggregators' hold counters over the run, INCTrees
	// the INC jobs' trees, ModelINCHopsNs the hops the replay put in each
	// INC push's round trip and INCWindowBytes an INC worker's window: the
	// INC round trip's split (incround.go).
	Aggs           []Agg
	INCTrees       map[string]INCTree
	ModelINCHopsNs map[job.Key]int64
	INCWindowBytes float64
}

// Judge makes the verdict.
func Judge(in *Inputs) Verdict {
	lines := []Line{
		headroom(in), foreign(in), efficiency(in), loss(in), ocsDrops(in), routeAgreement(in), pathBytes(in), lateness(in), accuracy(in),
	}
	v := Verdict{Status: Pass, Lines: lines}
	for _, l := range lines {
		if l.Status.rank() > v.Status.rank() {
			v.Status = l.Status
		}
	}
	return v
}

// AccuracyStatus grades a model's median and largest |error| over
// communication phases (the accuracy line's thresholds).
func AccuracyStatus(median, max float64) Status {
	s := grade(median, AccuracyMedianPass, AccuracyMedianWarn, false)
	if m := grade(max, AccuracyMaxPass, AccuracyMaxWarn, false); m.rank() > s.rank() {
		s = m
	}
	return s
}

func grade(v, pass, warn float64, higherBetter bool) Status {
	if higherBetter {
		switch {
		case v >= pass:
			return Pass
		case v >= warn:
			return Warn
		}
		return Fail
	}
	switch {
	case v <= pass:
		return Pass
	case v <= warn:
		return Warn
	}
	return Fail
}

func pct(x float64) string { return fmt.Sprintf("%.1f%%", 100*x) }

// quantile is the nearest-rank quantile of xs (sorted copy).
func quantile(xs []float64, p float64) float64 {
	if len(xs) == 0 {
		return math.NaN()
	}
	v := slices.Clone(xs)
	slices.Sort(v)
	r := int(math.Ceil(p*float64(len(v)) - 1e-9))
	return v[max(1, min(len(v), r))-1]
}

func headroom(in *Inputs) Line {
	l := Line{Check: "host CPU headroom"}
	if len(in.Host) == 0 {
		l.Status, l.Figure = Fail, "not measured"
		l.Why = "no host CPU samples: " + orNone(in.HostErr)
		return l
	}
	var busy []float64
	for _, s := range in.Host {
		busy = append(busy, s.Busy)
	}
	p95 := quantile(busy, 0.95)
	l.Value = 1 - p95
	l.Status = grade(l.Value, HeadroomPass, HeadroomWarn, true)
	l.Figure = fmt.Sprintf("%s idle at the 95th percentile of busy (busy p95 %s, %d samples of 100 ms)", pct(l.Value), pct(p95), len(busy))
	if l.Status != Pass {
		l.Why = fmt.Sprintf("the CPUs were nearly saturated: packets, timers and ranks wait for a CPU (want >= %s idle)", pct(HeadroomPass))
	}
	return l
}

func orNone(s string) string {
	if s == "" {
		return "none recorded"
	}
	return s
}

func foreign(in *Inputs) Line {
	l := Line{Check: "foreign load"}
	if len(in.Host) == 0 {
		l.Status, l.Figure, l.Why = Fail, "not measured", "no host CPU samples: "+orNone(in.HostErr)
		return l
	}
	var sum, peak, ours, soft float64
	for _, s := range in.Host {
		sum += s.Foreign
		peak = max(peak, s.Foreign)
		ours += s.Ours
		soft += s.SoftIRQ
	}
	n := float64(len(in.Host))
	l.Value = sum / n
	l.Status = grade(l.Value, ForeignPass, ForeignWarn, false)
	l.Figure = fmt.Sprintf("other processes took %s of all CPUs on average (peak %s); emu %s, softirq %s", pct(l.Value), pct(peak), pct(ours/n), pct(soft/n))
	if l.Status != Pass {
		l.Why = fmt.Sprintf("processes that are not part of this run competed for the CPUs (want < %s): stop them or expect slower phases", pct(ForeignPass))
		if len(in.OtherLabs) > 0 {
			l.Why += fmt.Sprintf("; other emu labs were up meanwhile (%s), and their processes count here", strings.Join(in.OtherLabs, ", "))
		}
	}
	return l
}

// efficiency is achieved/configured rate over intervals in which a
// shaped link had a queue at both ends: there the shaper should send at
// its rate, unless the machine cannot keep up.
func efficiency(in *Inputs) Line {
	l := Line{Check: "link efficiency on busy links"}
	var eff []float64
	for _, lk := range in.Links {
		if lk.RateBps == 0 {
			continue
		}
		for i := 1; i < len(lk.Samples); i++ {
			a, b := lk.Samples[i-1], lk.Samples[i]
			dt := float64(b.TNs-a.TNs) / 1e9
			if a.BacklogBytes == 0 || b.BacklogBytes == 0 || dt <= 0 || b.Bytes < a.Bytes {
				continue
			}
			eff = append(eff, float64(b.Bytes-a.Bytes)/dt/float64(lk.RateBps))
		}
	}
	if len(eff) == 0 {
		l.Status, l.Figure = NA, "no shaped link had a queue through a whole sample interval"
		return l
	}
	l.Value = quantile(eff, 0.5)
	l.Status = grade(l.Value, EfficiencyPass, EfficiencyWarn, true)
	l.Figure = fmt.Sprintf("median %s of the configured rate (p10 %s) over %d busy link intervals", pct(l.Value), pct(quantile(eff, 0.1)), len(eff))
	if l.Status != Pass {
		l.Why = "shapers with a queue sent below their rate: the machine did not keep the links busy"
	}
	return l
}

// lastPerConn is each connection's last TCP sample.
func lastPerConn(tcp []TCPSample) map[[3]any]TCPSample {
	out := map[[3]any]TCPSample{}
	for _, s := range tcp {
		k := [3]any{s.Job, s.Rank, s.Peer}
		if o, ok := out[k]; !ok || s.TNs >= o.TNs {
			out[k] = s
		}
	}
	return out
}

func loss(in *Inputs) Line {
	l := Line{Check: "loss and RTOs"}
	var retrans uint64
	var segs, rtos, rtoMs uint64
	for _, s := range lastPerConn(in.TCP) {
		retrans += s.BytesRetrans
		segs += uint64(s.Retrans)
		rtos += uint64(s.TotalRTO)
		rtoMs += uint64(s.RTOTimeMs)
	}
	if in.BytesSent <= 0 {
		l.Status, l.Figure = NA, "no bytes sent"
		return l
	}
	l.Value = float64(retrans) / float64(in.BytesSent)
	l.Status = grade(l.Value, LossPass, LossWarn, false)
	l.Figure = fmt.Sprintf("%.3f%% of bytes retransmitted (%d segments, %d B of %d B), %d RTOs (%d ms in RTO recovery), %d shaper drops",
		100*l.Value, segs, retrans, in.BytesSent, rtos, rtoMs, in.ShaperDrops)
	if rtos > 0 && l.Status == Pass {
		l.Status = Warn
	}
	if l.Status != Pass {
		l.Why = "TCP lost data and recovered; the fluid models have no loss, so affected phases run longer"
	}
	return l
}

func ocsDrops(in *Inputs) Line {
	l := Line{Check: "OCS drops of plan traffic"}
	if in.OCS == nil {
		l.Status, l.Figure = NA, "no OCS in this fabric"
		return l
	}
	o := in.OCS
	l.Value = float64(o.UnpatchedBytes + o.DarkBytes)
	l.Figure = fmt.Sprintf("%d B (%d packets) into unpatched ports, %d B (%d packets) into dark ports", o.UnpatchedBytes, o.UnpatchedPackets, o.DarkBytes, o.DarkPackets)
	together := len(o.RouteLagNs) > 0 && slices.Max(o.RouteLagNs) == 0
	switch {
	case o.UnpatchedBytes > 0 && together:
		l.Status, l.Why = Fail, "routes followed every circuit change at once, so these frames were already queued at a ToR uplink, or still being sent, when the plan took its circuit away: transfers outlasted their circuits (phases whose measured end is past their predicted end)"
	case o.UnpatchedBytes > 0:
		l.Status, l.Why = Fail, "traffic was routed onto ports with no circuit: routes and circuits disagreed"
	case o.DarkBytes > 0:
		l.Status, l.Why = Warn, "traffic hit ports during their dark period (flows moved onto a circuit before its light came on); the TCP-aware model charges their loss and recovery"
	default:
		l.Status = Pass
	}
	return l
}

func routeAgreement(in *Inputs) Line {
	l := Line{Check: "route/circuit agreement"}
	if in.OCS == nil {
		l.Status, l.Figure = NA, "no OCS in this fabric"
		return l
	}
	if len(in.OCS.RouteLagNs) == 0 {
		l.Status, l.Figure = NA, "no reconfiguration during the run"
		return l
	}
	lag := make([]float64, len(in.OCS.RouteLagNs))
	for i, v := range in.OCS.RouteLagNs {
		lag[i] = float64(v)
	}
	l.Value = quantile(lag, 1)
	l.Figure = fmt.Sprintf("paths followed the circuits %.2f ms later at most (median %.2f ms, %d OCS events)",
		l.Value/1e6, quantile(lag, 0.5)/1e6, len(lag))
	switch {
	case l.Value == 0:
		l.Status = Pass
	default:
		l.Status = Warn
		l.Why = "during the lag, flows on a removed circuit send into a dead port and flows onto an added one wait for routes"
	}
	return l
}

// pathBytes compares where the bytes went: per ToR uplink, the bytes the
// OCS forwarded from it against the payload the model's paths put on it.
// The kernel and the model choose paths with the same function, so a
// wrong path shows as bytes on the wrong uplink. The fast path sees TCP's
// GSO super-packets (one set of headers per up to 64 KB), so headers add
// little; ACKs, retransmissions and timing (a flow still running when
// its circuit changes) make up the rest of the difference.
func pathBytes(in *Inputs) Line {
	l := Line{Check: "paths against the model"}
	if in.OCS == nil || in.ModelUplinkBytes == nil {
		l.Status, l.Figure = NA, "no OCS in this fabric, or no model prediction"
		return l
	}
	ups := map[string]bool{}
	for u := range in.OCS.UplinkBytes {
		ups[u] = true
	}
	for u := range in.ModelUplinkBytes {
		ups[u] = true
	}
	var sumM, sumP, diff, worst float64
	worstUp := ""
	for u := range ups {
		m, p := float64(in.OCS.UplinkBytes[u]), in.ModelUplinkBytes[u]
		sumM, sumP = sumM+m, sumP+p
		d := math.Abs(m - p)
		diff += d
		if d > worst || (d == worst && u < worstUp) {
			worst, worstUp = d, u
		}
	}
	if sumM+sumP == 0 {
		l.Status, l.Figure = NA, "no traffic crossed a circuit"
		return l
	}
	l.Value = diff / (sumM + sumP)
	l.Status = grade(l.Value, PathMismatchPass, PathMismatchWarn, false)
	l.Figure = fmt.Sprintf("the ToR uplinks sent %.1f MB onto circuits, the model's paths %.1f MB; per uplink %s of the bytes differ (most on %s: %.1f MB sent, %.1f MB in the model)",
		sumM/1e6, sumP/1e6, pct(l.Value), worstUp, float64(in.OCS.UplinkBytes[worstUp])/1e6, in.ModelUplinkBytes[worstUp]/1e6)
	if l.Status != Pass {
		l.Why = "traffic crossed other uplinks than the model's paths, or at other times: compare uplink_bytes in the run's data with the prediction's"
	}
	return l
}

func lateness(in *Inputs) Line {
	l := Line{Check: "phase lateness"}
	if in.Measurement == nil || len(in.Measurement.Phases) == 0 {
		l.Status, l.Figure = NA, "no phases measured"
		return l
	}
	var late []float64
	worst := ""
	var worstGate int64 // when the worst phase could have started
	for _, p := range in.Measurement.Phases {
		if v := float64(p.LatenessNs); len(late) == 0 || v > l.Value {
			l.Value, worst, worstGate = v, fmt.Sprintf("%s iteration %d %s", p.Job, p.Iteration, p.Phase), p.StartNs-p.LatenessNs
		}
		late = append(late, float64(p.LatenessNs))
	}
	l.Status = grade(l.Value, LatenessPassNs, LatenessWarnNs, false)
	l.Figure = fmt.Sprintf("ranks started at most %.2f ms after they could (median %.3f ms over %d phases; worst %s)", l.Value/1e6, quantile(late, 0.5)/1e6, len(late), worst)
	if l.Status != Pass {
		l.Why = "ranks woke late for their gates: a busy CPU delays timers"
		together := 0
		for _, p := range in.Measurement.Phases {
			if d := p.StartNs - p.LatenessNs - worstGate; d >= -TogetherNs && d <= TogetherNs {
				together++
			}
		}
		if together >= TogetherPhases {
			l.Why = fmt.Sprintf("ranks woke late for their gates: %d phases could start within %.0f ms of the worst one, and ranks that start at once queue for the CPUs (the 100 ms CPU samples can pass while such bursts are not)",
				together, float64(TogetherNs)/1e6)
		}
	}
	return l
}

// TogetherNs and TogetherPhases: when at least TogetherPhases phases
// (the latest included) could start within TogetherNs of the latest one
// (their start less their lateness), the lateness line names the burst
// as the likely cause.
const (
	TogetherNs     = int64(time.Millisecond)
	TogetherPhases = 8
)

// CommErrors are the signed errors of communication phases.
func CommErrors(cs []record.Comparison) []float64 {
	var out []float64
	for _, c := range cs {
		if commPhase(c) {
			out = append(out, c.RelErr)
		}
	}
	return out
}

func accuracy(in *Inputs) Line {
	l := Line{Check: "model accuracy"}
	judged, name := in.TCPAware, "TCP-aware"
	if len(CommErrors(judged)) == 0 {
		judged, name = in.Calibrated, "calibrated"
	}
	med, mx, n := AbsStats(judged)
	if n == 0 {
		l.Status, l.Figure = NA, "no communication phase predicted"
		return l
	}
	l.Value = med
	l.Status = AccuracyStatus(med, mx)
	l.Figure = fmt.Sprintf("|error| against the %s model: median %s, max %s over %d communication phases", name, pct(med), pct(mx), n)
	worst, hasWorst := worstPhase(judged)
	if hasWorst {
		l.Figure += fmt.Sprintf("; worst %s iteration %d %s at %+.1f%%", worst.Job, worst.Iteration, worst.Phase, 100*worst.RelErr)
	}
	var others []string
	for _, o := range []struct {
		name string
		cs   []record.Comparison
	}{{"calibrated", in.Calibrated}, {"ideal", in.Ideal}, {"TCP-aware with the measured phase starts", in.Replay}} {
		if o.name == name {
			continue
		}
		if m, x, k := AbsStats(o.cs); k > 0 {
			others = append(others, fmt.Sprintf("%s: median %s, max %s", o.name, pct(m), pct(x)))
		}
	}
	if len(others) > 0 {
		l.Figure += " (" + strings.Join(others, "; ") + ")"
	}
	if l.Status != Pass {
		l.Why = "the attribution says where the difference went (attribution.csv); one run carries TCP's run-to-run spread: `emu run --repeat 5` measures it"
		if inc, ok := in.slowestINC(judged); ok && inc.RelErr > AccuracyMaxPass && len(in.Host) > 0 && headroom(in).Status != Pass {
			l.Why += fmt.Sprintf("; %s iteration %d %s (%+.1f%%) is in-network aggregation, which the emulator runs in userspace: with the CPUs this busy INC pushes lose their share of shared links to TCP, and the phases beside them gain (docs/fidelity.md, \"INC beside cubic on a busy CPU\")",
				inc.Job, inc.Iteration, inc.Phase, 100*inc.RelErr)
		}
	}
	return l
}

// worstPhase is the communication phase with the largest |error| (the
// first of equals); false when there is none.
func worstPhase(cs []record.Comparison) (record.Comparison, bool) {
	return largest(cs, commPhase, func(c record.Comparison) float64 { return math.Abs(c.RelErr) })
}

// slowestINC is the in-network aggregation push that ran slowest against
// the model (the largest signed error; one whose workers measured the
// tree's round trip); false when there is none.
func (in *Inputs) slowestINC(cs []record.Comparison) (record.Comparison, bool) {
	if in.Measurement == nil {
		return record.Comparison{}, false
	}
	inc := map[job.Key]bool{}
	for _, p := range in.Measurement.Phases {
		if p.INCRTTNs > 0 {
			inc[job.Key{Job: p.Job, Iteration: p.Iteration, Phase: p.Phase}] = true
		}
	}
	return largest(cs, func(c record.Comparison) bool {
		return commPhase(c) && inc[job.Key{Job: c.Job, Iteration: c.Iteration, Phase: c.Phase}]
	}, func(c record.Comparison) float64 { return c.RelErr })
}

// commPhase reports whether c is a communication phase the model
// predicted: the phases the accuracy line reads.
func commPhase(c record.Comparison) bool { return c.Phase != job.PhaseCompute && c.PredictedNs > 0 }

// largest is the first of the phases keep accepts with the largest score;
// false when keep accepts none.
func largest[T any](cs []T, keep func(T) bool, score func(T) float64) (T, bool) {
	var w T
	found := false
	for _, c := range cs {
		if keep(c) && (!found || score(c) > score(w)) {
			w, found = c, true
		}
	}
	return w, found
}

// AbsStats is the median (nearest rank) and largest |error| of the
// communication phases, as the accuracy line reads them; n is how many.
func AbsStats(cs []record.Comparison) (med, mx float64, n int) {
	errs := CommErrors(cs)
	if len(errs) == 0 {
		return 0, 0, 0
	}
	abs := make([]float64, len(errs))
	for i, e := range errs {
		abs[i] = math.Abs(e)
	}
	return quantile(abs, 0.5), slices.Max(abs), len(abs)
}

// Print writes the verdict, one line per check.
func (v Verdict) Print(w io.Writer) {
	fmt.Fprintf(w, "== fidelity verdict: %s\n", strings.ToUpper(string(v.Status)))
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	for _, l := range v.Lines {
		fmt.Fprintf(tw, "   %s\t%s\t%s\n", l.Status, l.Check, l.Figure)
		if l.Why != "" {
			fmt.Fprintf(tw, "   \t\t-> %s\n", l.Why)
		}
	}
	tw.Flush()
}
