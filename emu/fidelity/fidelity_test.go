package fidelity

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/ocsemu/ocsemu/emu/hoststat"
	"github.com/ocsemu/ocsemu/workers/job"
	"github.com/ocsemu/ocsemu/workers/record"
)

func line(v Verdict, check string) Line {
	for _, l := range v.Lines {
		if l.Check == check {
			return l
		}
	}
	return Line{}
}

func hostAt(busy, foreign float64, n int) []hoststat.Sample {
	var out []hoststat.Sample
	for i := 0; i < n; i++ {
		out = append(out, hoststat.Sample{TNs: int64(i+1) * 100e6, Busy: busy, Foreign: foreign, Ours: busy - foreign})
	}
	return out
}

func TestJudgeHost(t *testing.T) {
	tests := []struct {
		name               string
		host               []hoststat.Sample
		headroom, foreignS Status
	}{
		{"quiet", hostAt(0.5, 0.01, 10), Pass, Pass},
		{"busy but ours", hostAt(0.9, 0.02, 10), Warn, Pass},
		{"a hog on one of two CPUs", hostAt(1, 0.5, 10), Fail, Fail},
		{"some foreign load", hostAt(0.6, 0.1, 10), Pass, Warn},
		{"not sampled", nil, Fail, Fail},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v := Judge(&Inputs{Host: tt.host, HostErr: "no /proc"})
			if h := line(v, "host CPU headroom"); h.Status != tt.headroom {
				t.Errorf("headroom %s (%s), want %s", h.Status, h.Figure, tt.headroom)
			}
			f := line(v, "foreign load")
			if f.Status != tt.foreignS {
				t.Errorf("foreign %s (%s), want %s", f.Status, f.Figure, tt.foreignS)
			}
			if f.Status == Fail && f.Why == "" {
				t.Error("a failing line must say why")
			}
			want := tt.headroom
			if tt.foreignS.rank() > want.rank() {
				want = tt.foreignS
			}
			if v.Status != want {
				t.Errorf("verdict %s, want %s: the other lines are n/a here, so the host lines decide", v.Status, want)
			}
		})
	}
}

// A failing foreign-load line names the other emu labs that were up (a
// classmate's run on a shared machine); with none, it names none.
func TestForeignLoadNamesOtherLabs(t *testing.T) {
	for _, tc := range []struct {
		others []string
		want   string
	}{
		{[]string{"in-b-ocs", "in-c-03"}, "other emu labs were up meanwhile (in-b-ocs, in-c-03)"},
		{nil, ""},
	} {
		f := line(Judge(&Inputs{Host: hostAt(1, 0.5, 10), OtherLabs: tc.others}), "foreign load")
		if got := strings.Contains(f.Why, "other emu labs"); got != (tc.want != "") || !strings.Contains(f.Why, tc.want) {
			t.Errorf("others %v: why %q, want %q", tc.others, f.Why, tc.want)
		}
	}
}

func TestJudgeEfficiency(t *testing.T) {
	// 1 Gbit/s = 125e6 B/s; 100 ms intervals.
	mk := func(perInterval uint64, backlog uint32) Link {
		l := Link{Name: "r0s0:eth0", RateBps: 125e6}
		for i := 0; i < 5; i++ {
			l.Samples = append(l.Samples, LinkSample{TNs: int64(i) * 100e6, Bytes: uint64(i) * perInterval, BacklogBytes: backlog})
		}
		return l
	}
	tests := []struct {
		name string
		link Link
		want Status
		val  float64
	}{
		{"full rate with a queue", mk(12.5e6, 1000), Pass, 1},
		{"95% with a queue", mk(11.875e6, 1000), Warn, 0.95},
		{"half rate with a queue", mk(6.25e6, 1000), Fail, 0.5},
		{"no queue: not a busy link", mk(1e6, 0), NA, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := line(Judge(&Inputs{Links: []Link{tt.link}}), "link efficiency on busy links")
			if l.Status != tt.want || (tt.want != NA && (l.Value < tt.val-1e-9 || l.Value > tt.val+1e-9)) {
				t.Errorf("got %s %.4f (%s), want %s %.4f", l.Status, l.Value, l.Figure, tt.want, tt.val)
			}
		})
	}
}

func TestJudgeLossOCSLatenessAccuracy(t *testing.T) {
	tcp := func(retrans uint64, rtos uint16) []TCPSample {
		return []TCPSample{{Job: "j", Rank: 0, Peer: 1, TNs: 1, BytesRetrans: 0}, {Job: "j", Rank: 0, Peer: 1, TNs: 2, BytesRetrans: retrans, TotalRTO: rtos}}
	}
	comm := func(errs ...float64) []record.Comparison {
		var out []record.Comparison
		for _, e := range errs {
			out = append(out, record.Comparison{Job: "j", Phase: "allreduce", PredictedNs: 100, RelErr: e})
		}
		return append(out, record.Comparison{Job: "j", Phase: "compute", PredictedNs: 100, RelErr: 5}) // compute never counts
	}
	tests := []struct {
		name  string
		in    Inputs
		check string
		want  Status
	}{
		{"no loss", Inputs{TCP: tcp(0, 0), BytesSent: 1e6}, "loss and RTOs", Pass},
		{"0.5% retransmitted", Inputs{TCP: tcp(5000, 0), BytesSent: 1e6}, "loss and RTOs", Warn},
		{"2% retransmitted", Inputs{TCP: tcp(20000, 0), BytesSent: 1e6}, "loss and RTOs", Fail},
		{"an RTO is never a pass", Inputs{TCP: tcp(10, 1), BytesSent: 1e6}, "loss and RTOs", Warn},
		{"eps fabric", Inputs{}, "OCS drops of plan traffic", NA},
		{"clean OCS", Inputs{OCS: &OCS{}}, "OCS drops of plan traffic", Pass},
		{"dark drops", Inputs{OCS: &OCS{DarkBytes: 1500, DarkPackets: 1}}, "OCS drops of plan traffic", Warn},
		{"unpatched drops", Inputs{OCS: &OCS{UnpatchedBytes: 68968, UnpatchedPackets: 47}}, "OCS drops of plan traffic", Fail},
		{"unpatched drops with routes in the same instant", Inputs{OCS: &OCS{UnpatchedBytes: 68968, UnpatchedPackets: 47, RouteLagNs: []int64{0, 0}}}, "OCS drops of plan traffic", Fail},
		{"routes in the same instant", Inputs{OCS: &OCS{RouteLagNs: []int64{0, 0}}}, "route/circuit agreement", Pass},
		{"routes lag", Inputs{OCS: &OCS{RouteLagNs: []int64{400e3, 2.5e6}}}, "route/circuit agreement", Warn},
		{"no reconfiguration", Inputs{OCS: &OCS{}}, "route/circuit agreement", NA},
		// 100 MB on tor0:0 and tor0:1 each in the model; 5 MB of ACKs and
		// timing differ: (3 + 2) / 400 = 1.25%. The ECMP of the issue's
		// diagnosis: 200 MB on tor0:0, 0 on its sibling: 200 / 400 = 50%.
		{"paths agree", Inputs{OCS: &OCS{UplinkBytes: map[string]uint64{"tor0:0": 103e6, "tor0:1": 98e6}},
			ModelUplinkBytes: map[string]float64{"tor0:0": 100e6, "tor0:1": 100e6}}, "paths against the model", Pass},
		{"a sibling uplink took the flows", Inputs{OCS: &OCS{UplinkBytes: map[string]uint64{"tor0:0": 200e6}},
			ModelUplinkBytes: map[string]float64{"tor0:0": 100e6, "tor0:1": 100e6}}, "paths against the model", Fail},
		{"15% of the bytes on the other uplink", Inputs{OCS: &OCS{UplinkBytes: map[string]uint64{"tor0:0": 130e6, "tor0:1": 70e6}},
			ModelUplinkBytes: map[string]float64{"tor0:0": 100e6, "tor0:1": 100e6}}, "paths against the model", Warn},
		{"no model", Inputs{OCS: &OCS{}}, "paths against the model", NA},
		{"the model put nothing on circuits, the kernel did", Inputs{OCS: &OCS{UplinkBytes: map[string]uint64{"tor0:0": 100e6}},
			ModelUplinkBytes: map[string]float64{}}, "paths against the model", Fail},
		{"on time", Inputs{Measurement: &record.Run{Phases: []record.Phase{{Measured: record.Measured{LatenessNs: 200e3}}}}}, "phase lateness", Pass},
		{"3 ms late", Inputs{Measurement: &record.Run{Phases: []record.Phase{{Measured: record.Measured{LatenessNs: 200e3}}, {Measured: record.Measured{LatenessNs: 3e6}}}}}, "phase lateness", Warn},
		{"8 ms late", Inputs{Measurement: &record.Run{Phases: []record.Phase{{Measured: record.Measured{LatenessNs: 8e6}}}}}, "phase lateness", Fail},
		{"accurate", Inputs{Calibrated: comm(0.01, -0.04, 0.09)}, "model accuracy", Pass},
		{"median fine, one outlier", Inputs{Calibrated: comm(0.01, 0.02, 0.15)}, "model accuracy", Warn},
		{"far off", Inputs{Calibrated: comm(0.2, 0.3, -0.25)}, "model accuracy", Fail},
		{"nothing predicted", Inputs{}, "model accuracy", NA},
		{"judged against the TCP-aware model", Inputs{Calibrated: comm(0.2, 0.3, -0.25), TCPAware: comm(0.01, -0.04, 0.09)}, "model accuracy", Pass},
		{"the TCP-aware model far off", Inputs{Calibrated: comm(0.01, -0.04, 0.09), TCPAware: comm(0.2, 0.3, -0.25)}, "model accuracy", Fail},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := line(Judge(&tt.in), tt.check)
			if l.Status != tt.want {
				t.Errorf("%s: %s (%s), want %s", tt.check, l.Status, l.Figure, tt.want)
			}
			if l.Figure == "" {
				t.Error("every line carries a figure")
			}
			// An inaccurate run points at the attribution and at sets of runs.
			if tt.check == "model accuracy" && (l.Status == Warn || l.Status == Fail) && !strings.Contains(l.Why, "emu run --repeat") {
				t.Errorf("accuracy %s without the hint: %q", l.Status, l.Why)
			}
		})
	}
}

// The accuracy line names its worst phase, and where an INC push is more
// than 10% slower than the model on a machine without CPU headroom it
// says what that does to INC.
func TestAccuracyNamesWorstPhase(t *testing.T) {
	cmp := func(incErr float64) []record.Comparison {
		return []record.Comparison{
			{Job: "moe", Iteration: 1, Phase: "alltoall", PredictedNs: 100, RelErr: 0.4},
			{Job: "vgg", Iteration: 0, Phase: "push", PredictedNs: 100, RelErr: incErr},
			{Job: "vgg", Iteration: 0, Phase: "compute", PredictedNs: 100, RelErr: 0.9}, // compute never counts
		}
	}
	meas := func(incRTT int64) *record.Run {
		return &record.Run{Phases: []record.Phase{{Job: "moe", Iteration: 1, Phase: "alltoall"}, {Job: "vgg", Phase: "push", Measured: record.Measured{INCRTTNs: incRTT}}}}
	}
	for _, tt := range []struct {
		name   string
		in     Inputs
		hinted bool
	}{
		{"INC push 16% off, CPUs saturated", Inputs{TCPAware: cmp(0.16), Measurement: meas(7e6), Host: hostAt(0.97, 0.01, 10)}, true},
		{"INC push 16% off, CPUs with headroom", Inputs{TCPAware: cmp(0.16), Measurement: meas(7e6), Host: hostAt(0.5, 0.01, 10)}, false},
		{"INC push 4% off, CPUs saturated", Inputs{TCPAware: cmp(0.04), Measurement: meas(7e6), Host: hostAt(0.97, 0.01, 10)}, false},
		{"INC push 16% faster, CPUs saturated", Inputs{TCPAware: cmp(-0.16), Measurement: meas(7e6), Host: hostAt(0.97, 0.01, 10)}, false},
		{"a TCP push 16% off, CPUs saturated", Inputs{TCPAware: cmp(0.16), Measurement: meas(0), Host: hostAt(0.97, 0.01, 10)}, false},
		{"INC push 16% off, CPU not measured", Inputs{TCPAware: cmp(0.16), Measurement: meas(7e6)}, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			l := line(Judge(&tt.in), "model accuracy")
			if !strings.Contains(l.Figure, "; worst moe iteration 1 alltoall at +40.0%") {
				t.Errorf("figure does not name the worst phase: %q", l.Figure)
			}
			if got := strings.Contains(l.Why, "vgg iteration 0 push (+16.0%) is in-network aggregation"); got != tt.hinted {
				t.Errorf("INC hint %v, want %v: %q", got, tt.hinted, l.Why)
			}
		})
	}
	// A faster INC push does not hide a slower one.
	two := append(cmp(0.16), record.Comparison{Job: "vgg", Iteration: 1, Phase: "push", PredictedNs: 100, RelErr: -0.3})
	m := meas(7e6)
	m.Phases = append(m.Phases, record.Phase{Job: "vgg", Iteration: 1, Phase: "push", Measured: record.Measured{INCRTTNs: 7e6}})
	if l := line(Judge(&Inputs{TCPAware: two, Measurement: m, Host: hostAt(0.97, 0.01, 10)}), "model accuracy"); !strings.Contains(l.Why, "vgg iteration 0 push (+16.0%) is in-network aggregation") {
		t.Errorf("a faster INC push hid the slow one: %q", l.Why)
	}
	// Nothing to name without a communication phase.
	if l := line(Judge(&Inputs{TCPAware: cmp(0)[2:]}), "model accuracy"); strings.Contains(l.Figure, "worst") {
		t.Errorf("a worst phase without communication phases: %q", l.Figure)
	}
}

func TestVerdictIsWorstLineAndPrints(t *testing.T) {
	v := Judge(&Inputs{Host: hostAt(1, 0.5, 5)})
	if v.Status != Fail {
		t.Fatalf("verdict %s with a hog", v.Status)
	}
	var b bytes.Buffer
	v.Print(&b)
	out := b.String()
	for _, want := range []string{"fidelity verdict: FAIL", "fail  foreign load", "other processes took 50.0% of all CPUs", "->"} {
		if !strings.Contains(out, want) {
			t.Errorf("printed verdict lacks %q:\n%s", want, out)
		}
	}
}

// A hand-computed decomposition: ideal 200 ms, calibrated 209 ms,
// measured 240 ms. The ranks started 4 ms apart, one of them 1 ms late
// (after the phase's first rank had started: inside the timed phase);
// a connection spent 10 ms in RTO recovery and 125 kB were retransmitted
// (1 ms at 125 MB/s); other processes held 20% of the CPUs for the whole
// 240 ms (48 ms, capped at what is left: 15 ms). Residual 0.
func TestAttributeByHand(t *testing.T) {
	const ms = int64(1e6)
	t0 := int64(1000 * ms)
	meas := &record.Run{Phases: []record.Phase{{Job: "j", Iteration: 0, Phase: "alltoall", StartNs: 0, EndNs: 240 * ms,
		Measured: record.Measured{LatenessNs: 1 * ms, LateInNs: 1 * ms, SkewNs: 4 * ms, VerifyNs: 6 * ms}}}}
	in := &Inputs{
		Measurement:    meas,
		Ideal:          []record.Comparison{{Job: "j", Phase: "alltoall", PredictedNs: 200 * ms, MeasuredNs: 240 * ms, RelErr: 0.2}},
		Calibrated:     []record.Comparison{{Job: "j", Phase: "alltoall", PredictedNs: 209 * ms, MeasuredNs: 240 * ms, RelErr: 31.0 / 209}},
		LinkPayloadBps: 125e6,
		TCP: []TCPSample{
			{Job: "j", Rank: 0, Peer: 1, TNs: t0 - 10*ms},
			{Job: "j", Rank: 0, Peer: 1, TNs: t0 + 240*ms, RTOTimeMs: 10, BytesRetrans: 125000},
			{Job: "other", Rank: 0, Peer: 1, TNs: t0 + 240*ms, RTOTimeMs: 99, BytesRetrans: 9e6},
		},
		Host: []hoststat.Sample{{TNs: t0 + 100*ms, Foreign: 0.2}, {TNs: t0 + 200*ms, Foreign: 0.2}, {TNs: t0 + 300*ms, Foreign: 0.2}},
	}
	as := Attribute(in, t0)
	if len(as) != 1 {
		t.Fatalf("%d attributions, want 1", len(as))
	}
	a := as[0]
	want := map[string]int64{PartFraming: 9 * ms, PartLateness: 1 * ms, PartSkew: 3 * ms, PartRTO: 10 * ms, PartLoss: 1 * ms, PartCPU: 16 * ms, PartResidual: 0}
	var sum int64
	for _, p := range Parts {
		if a.Parts[p] != want[p] {
			t.Errorf("%s = %.3f ms, want %.3f", p, float64(a.Parts[p])/1e6, float64(want[p])/1e6)
		}
		sum += a.Parts[p]
	}
	if sum != a.MeasuredNs-a.IdealNs {
		t.Errorf("parts sum to %d, want measured - ideal = %d", sum, a.MeasuredNs-a.IdealNs)
	}
	if a.VerifyNs != 6*ms {
		t.Errorf("verification %d, want 6 ms (outside the phase)", a.VerifyNs)
	}
	// A phase within 5% of the calibrated model is not attributed.
	in.Calibrated[0].RelErr = 0.04
	if got := Attribute(in, t0); len(got) != 0 {
		t.Errorf("a phase within 5%% was attributed: %+v", got)
	}
	// Lateness before the instant the phase is timed from (a rank that
	// was late before the data existed) is not in its time: the skew
	// takes all 4 ms.
	in.Calibrated[0].RelErr = 31.0 / 209
	meas.Phases[0].LateInNs = 0
	if a := Attribute(in, t0)[0]; a.Parts[PartLateness] != 0 || a.Parts[PartSkew] != 4*ms || a.Parts[PartCPU] != 16*ms {
		t.Errorf("lateness outside the phase: lateness %d, skew %d, cpu %d", a.Parts[PartLateness], a.Parts[PartSkew], a.Parts[PartCPU])
	}
}

// A faster-than-predicted phase: nothing positive to claim; the residual
// takes the (negative) difference beyond framing.
func TestAttributeFaster(t *testing.T) {
	const ms = int64(1e6)
	in := &Inputs{
		Measurement: &record.Run{Phases: []record.Phase{{Job: "j", Phase: "pull", EndNs: 180 * ms, Measured: record.Measured{SkewNs: 2 * ms}}}},
		Ideal:       []record.Comparison{{Job: "j", Phase: "pull", PredictedNs: 200 * ms, MeasuredNs: 180 * ms}},
		Calibrated:  []record.Comparison{{Job: "j", Phase: "pull", PredictedNs: 209 * ms, MeasuredNs: 180 * ms, RelErr: -29.0 / 209}},
	}
	a := Attribute(in, 0)[0]
	if a.Parts[PartFraming] != 9*ms || a.Parts[PartSkew] != 0 || a.Parts[PartResidual] != -29*ms {
		t.Errorf("parts %v", a.Parts)
	}
}

// With the TCP-aware model: ideal 200 ms, calibrated 209, TCP-aware 229
// (the model's own 20 ms of slow start, sharing and recovery), measured
// 240 ms: 11 ms off it (4.8%), so not attributed; measured 260 ms is 13.5%
// off and its 60 ms beyond the ideal split into framing 9, tcp 20, skew 2
// and a residual of 29.
func TestAttributeAgainstTCPAware(t *testing.T) {
	const ms = int64(1e6)
	in := func(measured int64) *Inputs {
		cmp := func(pred int64) []record.Comparison {
			return []record.Comparison{{Job: "j", Phase: "alltoall", PredictedNs: pred, MeasuredNs: measured, RelErr: float64(measured-pred) / float64(pred)}}
		}
		return &Inputs{
			Measurement: &record.Run{Phases: []record.Phase{{Job: "j", Phase: "alltoall", EndNs: measured, Measured: record.Measured{SkewNs: 2 * ms}}}},
			Ideal:       cmp(200 * ms), Calibrated: cmp(209 * ms), TCPAware: cmp(229 * ms),
		}
	}
	if got := Attribute(in(240*ms), 0); len(got) != 0 {
		t.Errorf("a phase within 5%% of the TCP-aware model was attributed: %+v", got)
	}
	as := Attribute(in(260*ms), 0)
	if len(as) != 1 {
		t.Fatalf("%d attributions, want 1", len(as))
	}
	a := as[0]
	want := map[string]int64{PartFraming: 9 * ms, PartTCP: 20 * ms, PartSkew: 2 * ms, PartResidual: 29 * ms}
	for _, p := range Parts {
		if a.Parts[p] != want[p] {
			t.Errorf("%s = %.3f ms, want %.3f", p, float64(a.Parts[p])/1e6, float64(want[p])/1e6)
		}
	}
	if a.TCPAwareNs != 229*ms || math.Abs(a.RelErrTCP-31.0/229) > 1e-12 {
		t.Errorf("TCP-aware %d ns, error %v", a.TCPAwareNs, a.RelErrTCP)
	}
	// Replayed with the phases started when they really did, the model
	// gives the phase 241 ms (another job's phase had drifted onto it):
	// drift 12 ms, a model figure, taken from the residual (17 ms left);
	// a replay 5 ms faster than planned gives drift -5, residual 34.
	for _, tc := range []struct{ replay, drift, residual int64 }{{241 * ms, 12 * ms, 17 * ms}, {224 * ms, -5 * ms, 34 * ms}} {
		withReplay := in(260 * ms)
		withReplay.Replay = []record.Comparison{{Job: "j", Phase: "alltoall", PredictedNs: tc.replay, MeasuredNs: 260 * ms}}
		a := Attribute(withReplay, 0)[0]
		if a.Parts[PartDrift] != tc.drift || a.Parts[PartResidual] != tc.residual || a.ReplayNs != tc.replay {
			t.Errorf("replay %d ms: drift %d, residual %d, want %d, %d", tc.replay/ms, a.Parts[PartDrift], a.Parts[PartResidual], tc.drift, tc.residual)
		}
	}
	// An INC push whose workers went 12 ms without a result (a window
	// waiting on its timeout): 12 ms of the residual's 29 are that.
	stalled := in(260 * ms)
	stalled.Measurement.Phases[0].INCStallNs = 12 * ms
	if a := Attribute(stalled, 0)[0]; a.Parts[PartINCStall] != 12*ms || a.Parts[PartResidual] != 17*ms {
		t.Errorf("stalled 12 ms: inc_stall %d, residual %d", a.Parts[PartINCStall], a.Parts[PartResidual])
	}
	// A rank's garbage collector took 7 ms of CPU inside the phase: 7 ms
	// of the residual's 29 are the ranks' own stall.
	collected := in(260 * ms)
	collected.Measurement.Phases[0].GCNs = 7 * ms
	if a := Attribute(collected, 0)[0]; a.Parts[PartGC] != 7*ms || a.Parts[PartResidual] != 22*ms {
		t.Errorf("a 7 ms collection: gc %d, residual %d", a.Parts[PartGC], a.Parts[PartResidual])
	}
	// With the calibrated model's ranks in lockstep at 205 ms, 4 of its
	// 209 are the ranks running on their own, 5 framing: parts still sum.
	withLock := in(260 * ms)
	withLock.CalibratedLockstep = []record.Comparison{{Job: "j", Phase: "alltoall", PredictedNs: 205 * ms, MeasuredNs: 260 * ms}}
	if a := Attribute(withLock, 0)[0]; a.Parts[PartFraming] != 5*ms || a.Parts[PartRanks] != 4*ms || a.Parts[PartResidual] != 29*ms {
		t.Errorf("lockstep 205 ms: framing %d, ranks %d, residual %d", a.Parts[PartFraming], a.Parts[PartRanks], a.Parts[PartResidual])
	}
	// The model's own ranks started 1.5 ms apart: only the 0.5 ms of skew
	// beyond that is measured skew; the residual keeps the rest.
	withSkew := in(260 * ms)
	withSkew.ModelPhases = map[job.Key]record.Phase{{Job: "j", Phase: "alltoall"}: {Measured: record.Measured{SkewNs: 1500_000}}}
	if a := Attribute(withSkew, 0)[0]; a.Parts[PartSkew] != 500_000 || a.Parts[PartResidual] != 30500_000 {
		t.Errorf("model skew 1.5 ms: skew %d, residual %d", a.Parts[PartSkew], a.Parts[PartResidual])
	}
}

// The early-exit part, by hand: an all-to-all of three ranks measured
// 160 ms against a TCP-aware 100 (ideal 80, calibrated 84: 80 ms to
// explain, 4 framing and 16 tcp). The links carry 100 MB/s of payload in
// 1000-byte segments and each rank sends two flows at once, so a flow's
// share of a path with a 2 ms RTT is 100e6 x 0.002 / 1000 / 2 = 100
// segments. 1->2 took 110 ms: HyStart ended its slow start at 27
// segments (no retransmission); 0->2 took 60 ms after a loss set its
// threshold at 20. 2->0's threshold of 53 is above its share at a 1 ms
// RTT (50). The other flows took at most 50 ms, so early_exit = 110 - 50
// = 60 ms, and nothing is left.
func TestAttributeEarlyExitByHand(t *testing.T) {
	const ms = int64(1e6)
	cmp := func(pred int64) []record.Comparison {
		return []record.Comparison{{Job: "moe", Phase: "alltoall", PredictedNs: pred, MeasuredNs: 160 * ms, RelErr: float64(160*ms-pred) / float64(pred)}}
	}
	flow := func(src, dst int, start, end int64) Flow {
		return Flow{Job: "moe", Phase: "alltoall", Src: src, Dst: dst, StartNs: start * ms, EndNs: end * ms}
	}
	sample := func(rank, peer int, at int64, ssthresh, retrans, rttUs uint32) TCPSample {
		return TCPSample{Job: "moe", Rank: rank, Peer: peer, TNs: at * ms, Ssthresh: ssthresh, Retrans: retrans, RTTUs: rttUs}
	}
	const never = 1<<31 - 1
	in := &Inputs{
		Measurement: &record.Run{Phases: []record.Phase{{Job: "moe", Phase: "alltoall", EndNs: 160 * ms}}},
		Ideal:       cmp(80 * ms), Calibrated: cmp(84 * ms), TCPAware: cmp(100 * ms),
		LinkPayloadBps: 100e6, MSS: 1000,
		Flows: []Flow{flow(0, 1, 0, 40), flow(0, 2, 0, 60), flow(1, 0, 0, 45), flow(1, 2, 0, 110), flow(2, 0, 5, 55), flow(2, 1, 5, 50)},
		TCP: []TCPSample{
			sample(0, 1, 50, never, 0, 2000), sample(0, 2, 50, never, 0, 2000), sample(0, 2, 100, 20, 3, 2000),
			sample(1, 0, 50, never, 0, 2000), sample(1, 2, 20, never, 0, 2000), sample(1, 2, 150, 27, 0, 2000),
			sample(2, 0, 100, 53, 0, 1000), sample(2, 1, 100, never, 0, 2000),
			sample(1, 2, 120, 27, 0, 2000), // the first sample after 1->2 ended decides
		},
	}
	as := Attribute(in, 0)
	if len(as) != 1 {
		t.Fatalf("%d attributions, want 1", len(as))
	}
	want := map[string]int64{PartFraming: 4 * ms, PartTCP: 16 * ms, PartEarlyExit: 60 * ms}
	for _, p := range Parts {
		if as[0].Parts[p] != want[p] {
			t.Errorf("%s = %.3f ms, want %.3f", p, float64(as[0].Parts[p])/1e6, float64(want[p])/1e6)
		}
	}
	// The diagnosis names the cut flows: 0->2 (threshold 20 after a loss,
	// 60 ms) and 1->2 (27, 110 ms); the other four took at most 50 ms.
	if ss := as[0].SlowStart; ss == nil || ss.Text() != "slow start left below its share by 2 of 6 flows: 0->2 at 20 segments took 60.0 ms, 1->2 at 27 segments took 110.0 ms; the other 4 at most 50.0 ms" {
		t.Errorf("slow start %+v", ss)
	}
	if ds := Diagnoses(as); len(ds) != 1 || !strings.HasPrefix(ds[0], "moe 0 alltoall: slow start left below its share by 2 of 6 flows") {
		t.Errorf("diagnoses %q", ds)
	}
	// Each case: early_exit, and the flows it counts as cut (the
	// diagnosis's classification), in the order of in.Flows; byHyStart
	// when every flow was below its share and HyStart's first chance
	// decided.
	tests := []struct {
		name      string
		edit      func(in *Inputs)
		want      int64
		cut       string
		byHyStart bool
	}{
		{"no flow cut", func(in *Inputs) { in.TCP = in.TCP[:2] }, 0, "", false},
		// 0->2 now ends before its loss (other); 1->2 (45 ms) is cut.
		{"no cut flow outlasted the others", func(in *Inputs) { in.Flows[3].EndNs, in.Flows[1].EndNs = 45*ms, 45*ms }, 0, "1->2", false},
		{"a threshold above the share (RTT 0.5 ms: share 25)", func(in *Inputs) { in.TCP[8].RTTUs = 500 }, 0, "0->2", false},
		// 2->0 (50 ms, threshold 53 at a 1 ms RTT) beside 0->1 (40 ms): its
		// rank sends one flow, so its share is 100 and it was cut: 50 - 40.
		{"one flow per rank: 2->0's share is 100", func(in *Inputs) { in.Flows = []Flow{in.Flows[0], in.Flows[4]} }, 10 * ms, "2->0", false},
		// With 2->1 beside it its share is 50, above 53: nothing cut.
		{"two flows per rank: 2->0's share is 50", func(in *Inputs) { in.Flows = []Flow{in.Flows[0], in.Flows[4], in.Flows[5]} }, 0, "", false},
		// 1->2's threshold of 33 is below its share of 100...
		{"a threshold of 33 below the share", func(in *Inputs) { in.TCP[5].Ssthresh, in.TCP[8].Ssthresh = 33, 33 }, 60 * ms, "0->2 1->2", false},
		// ...but not below HyStart's first chance (32), the threshold
		// without a link rate; 0->2 (20) is, but took 60 ms to 1->2's 110.
		{"no link rate: HyStart's first chance (32)", func(in *Inputs) {
			in.TCP[5].Ssthresh, in.TCP[8].Ssthresh = 33, 33
			in.LinkPayloadBps = 0
		}, 0, "0->2", false},
		{"no link rate, 1->2 at 31", func(in *Inputs) {
			in.TCP[5].Ssthresh, in.TCP[8].Ssthresh = 31, 31
			in.LinkPayloadBps = 0
		}, 60 * ms, "0->2 1->2", false},
		// 1->2 spent 20 ms in RTO recovery: rto claims it, early_exit the
		// rest of the cut flow's excess (no time counted twice).
		{"the cut flow's RTO counted once", func(in *Inputs) { in.TCP[5].RTOTimeMs = 20 }, 40 * ms, "0->2 1->2", false},
		{"every flow cut", func(in *Inputs) { in.Flows = []Flow{in.Flows[3]} }, 0, "1->2", true},
		// At a 10 ms RTT every share is 500 segments and every threshold
		// (100 where none was set) below it: the share tells the flows
		// nothing, so HyStart's first chance decides: 1->2 (27) and 0->2
		// (20) were cut, 110 - 50.
		{"every flow below its share: HyStart's first chance decides", func(in *Inputs) {
			for i := range in.TCP {
				in.TCP[i].RTTUs = 10000
				if in.TCP[i].Ssthresh == never {
					in.TCP[i].Ssthresh = 100
				}
			}
		}, 60 * ms, "0->2 1->2", true},
		// The same with no threshold below 32: nothing cut, by HyStart.
		{"every flow below its share, none below 32", func(in *Inputs) {
			for i := range in.TCP {
				in.TCP[i].RTTUs = 10000
				in.TCP[i].Ssthresh = 100
			}
		}, 0, "", true},
		{"only a sample before the end", func(in *Inputs) {
			in.TCP = append(append(in.TCP[:4:4], in.TCP[6:8]...), sample(1, 2, 100, 27, 0, 2000), sample(1, 2, 10, never, 0, 2000))
		}, 60 * ms, "0->2 1->2", false},
		{"the sample after the end decides", func(in *Inputs) { in.TCP[8].Ssthresh = never }, 0, "0->2", false}, // 1->2 (110) uncut, the slowest
		{"the cut capped at what is left", func(in *Inputs) { in.Flows[3].EndNs = 200 * ms }, 60 * ms, "0->2 1->2", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := *in
			c.Flows, c.TCP = append([]Flow(nil), in.Flows...), append([]TCPSample(nil), in.TCP...)
			tt.edit(&c)
			a := Attribute(&c, 0)[0]
			if got := a.Parts[PartEarlyExit]; got != tt.want {
				t.Errorf("early_exit = %.3f ms, want %.3f", float64(got)/1e6, float64(tt.want)/1e6)
			}
			ss := a.SlowStart
			if ss == nil {
				t.Fatal("no slow-start diagnosis")
			}
			var cut []string
			for _, f := range ss.Cut {
				cut = append(cut, fmt.Sprintf("%d->%d", f.Src, f.Dst))
			}
			if got := strings.Join(cut, " "); got != tt.cut || ss.ByHyStart != tt.byHyStart || ss.Flows != len(c.Flows) || ss.Others != len(c.Flows)-len(cut) {
				t.Errorf("cut %q by HyStart %v (%d flows, %d others), want %q %v", got, ss.ByHyStart, ss.Flows, ss.Others, tt.cut, tt.byHyStart)
			}
		})
	}
	// No per-flow marks: no part, no diagnosis.
	c := *in
	c.Flows = nil
	if a := Attribute(&c, 0)[0]; a.Parts[PartEarlyExit] != 0 || a.SlowStart != nil {
		t.Errorf("without flows: early_exit %d, slow start %+v", a.Parts[PartEarlyExit], a.SlowStart)
	}
}

// The slow-start line says what was found, each way it can come out.
func TestSlowStartsText(t *testing.T) {
	const ms = int64(1e6)
	for _, tt := range []struct {
		name string
		s    SlowStarts
		want string
	}{
		{"none cut", SlowStarts{Flows: 6, Others: 6, OthersNs: 72 * ms},
			"slow start: none of 6 flows left it below its share; the slowest took 72.0 ms"},
		{"every flow below its share, none at the first chance", SlowStarts{Flows: 6, Others: 6, OthersNs: 80 * ms, ByHyStart: true},
			"slow start: every one of 6 flows left it below its share (an upper bound), none at HyStart's first chance (below 32 segments); the slowest took 80.0 ms"},
		{"cut at the first chance where every flow was below", SlowStarts{Flows: 3, Cut: []FlowExit{{Src: 1, Dst: 2, Segs: 27, Ns: 105 * ms}}, Others: 2, OthersNs: 48 * ms, ByHyStart: true},
			"slow start left at HyStart's first chance (below 32 segments; every flow was below its share) by 1 of 3 flows: 1->2 at 27 segments took 105.0 ms; the other 2 at most 48.0 ms"},
		{"every flow cut", SlowStarts{Flows: 1, Cut: []FlowExit{{Src: 0, Dst: 1, Segs: 40, Ns: 90 * ms}}},
			"slow start left below its share by 1 of 1 flows: 0->1 at 40 segments took 90.0 ms; no other flow"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.s.Text(); got != tt.want {
				t.Errorf("got  %q\nwant %q", got, tt.want)
			}
		})
	}
	// Only cut flows below 32 segments count for the first chance.
	s := SlowStarts{Cut: []FlowExit{{Segs: 60, Ns: 90 * ms}, {Segs: 31, Ns: 70 * ms}, {Segs: 32, Ns: 95 * ms}}}
	if s.FirstChanceNs() != 70*ms || s.CutNs() != 95*ms {
		t.Errorf("first chance %d, cut %d: want 70 and 95 ms", s.FirstChanceNs(), s.CutNs())
	}
}

// A run directory from before early_exit holds the part as "hystart".
func TestAttributionReadsOldPartNames(t *testing.T) {
	var as []Attribution
	if err := json.Unmarshal([]byte(`[{"job":"moe","phase":"alltoall","parts_ns":{"hystart":5000000,"skew":1000000}}]`), &as); err != nil {
		t.Fatal(err)
	}
	RenameOldParts(as)
	if p := as[0].Parts; p[PartEarlyExit] != 5e6 || p[PartSkew] != 1e6 || len(p) != 2 {
		t.Errorf("parts %v, want early_exit 5 ms and skew 1 ms", p)
	}
}

// The tally over runs, by hand: TCP-aware predictions of 100 ms.
func TestTally(t *testing.T) {
	const ms = int64(1e6)
	at := func(rel float64, residual int64) Attribution {
		return Attribution{Job: "j", Phase: "alltoall", TCPAwareNs: 100 * ms, RelErrTCP: rel, Parts: map[string]int64{PartResidual: residual}}
	}
	// Twelve tasks left once each: the line names the first ten.
	var tasks []Attribution
	var first10 []string
	for i := range 12 {
		a := at(0.3, 30*ms)
		a.Phase = fmt.Sprintf("t%02d", i)
		tasks = append(tasks, a)
		if i < 10 {
			first10 = append(first10, fmt.Sprintf("j iteration 0 t%02d 1", i))
		}
	}
	tests := []struct {
		name                           string
		runs                           [][]Attribution
		phases, explained, under, over int
		worst                          float64
		leftBy                         string // printed for more than one run
	}{
		{"a task graph's many tasks: ten named", [][]Attribution{tasks, nil}, 12, 0, 0, 12, 0.3,
			"left by phase: " + strings.Join(first10, ", ") + ", and 2 more phases"},
		{"nothing over 10%", [][]Attribution{{at(0.09, 9*ms), at(-0.1, -10*ms)}}, 0, 0, 0, 0, 0, ""},
		{"explained within 5 points", [][]Attribution{{at(0.3, 5*ms)}, {at(-0.2, -5*ms)}}, 2, 2, 0, 0, 0, ""},
		{"faster and slower left", [][]Attribution{{at(-0.2, -15*ms), at(0.4, 6*ms)}, {at(0.15, 0)}}, 3, 1, 1, 1, -0.15, "left by phase: j iteration 0 alltoall 2"},
		{"slower with a negative residual counts as under", [][]Attribution{{at(0.12, -8*ms)}}, 1, 0, 1, 0, -0.08, ""},
		{"left by phase, most first", [][]Attribution{{at(0.2, 20*ms), {Job: "k", Iteration: 1, Phase: "push", TCPAwareNs: 100 * ms, RelErrTCP: 0.3, Parts: map[string]int64{PartResidual: 30 * ms}}}, {at(0.2, 20*ms)}}, 3, 0, 0, 3, 0.3,
			"left by phase: j iteration 0 alltoall 2, k iteration 1 push 1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var tl Tally
			for _, r := range tt.runs {
				tl.Add(r)
			}
			if tl.Runs != len(tt.runs) || tl.Phases != tt.phases || tl.Explained != tt.explained || tl.Under != tt.under || tl.Over != tt.over || math.Abs(tl.WorstShare-tt.worst) > 1e-9 {
				t.Errorf("tally %+v, want %d phases, %d explained, %d under, %d over, worst %.2f", tl, tt.phases, tt.explained, tt.under, tt.over, tt.worst)
			}
			var b bytes.Buffer
			tl.Print(&b)
			if tt.phases == 0 && !strings.Contains(b.String(), "no communication phase") || tt.under+tt.over > 0 && !strings.Contains(b.String(), "left") ||
				tt.phases == 1 && !strings.Contains(b.String(), "1 phase more than 10% off the TCP-aware model in the run;") {
				t.Errorf("printed %q", b.String())
			}
			if got := strings.Contains(b.String(), "left by phase"); got != (tt.leftBy != "") || tt.leftBy != "" && !strings.Contains(b.String(), tt.leftBy+"\n") {
				t.Errorf("printed %q, want %q", b.String(), tt.leftBy)
			}
		})
	}
}

// A ring's connections by hand: four ring links moved bytes between the
// samples around the phase (100-300 ms), a fifth connection did not;
// 0->2 and 2->1 run below HyStart's first chance, 1->3 above it, 3->0
// never left slow start, and 2->1's threshold comes from its last
// sample before the end (none after).
func TestConnStartsByHand(t *testing.T) {
	const ms = int64(1e6)
	const never = 1<<31 - 1
	s := func(rank, peer int, at int64, ssthresh uint32, acked uint64) TCPSample {
		return TCPSample{Job: "gpt", Rank: rank, Peer: peer, TNs: at * ms, Ssthresh: ssthresh, BytesAcked: acked}
	}
	in := &Inputs{TCP: []TCPSample{
		s(0, 2, 80, never, 100), s(0, 2, 320, 27, 9000), s(0, 2, 370, 27, 9500),
		s(2, 1, 80, never, 100), s(2, 1, 280, 30, 8000),
		s(1, 3, 80, 120, 5), s(1, 3, 320, 120, 9000),
		s(3, 0, 320, never, 9000),                   // no sample before: all its bytes count
		s(0, 3, 80, 20, 700), s(0, 3, 320, 20, 700), // idle in the phase
		{Job: "moe", Rank: 0, Peer: 1, TNs: 320 * ms, Ssthresh: 10, BytesAcked: 9000}, // another job
	}}
	gpt := job.Key{Job: "gpt", Phase: "allreduce"}
	cs, ok := in.connStarts(gpt, 100*ms, 300*ms)
	want := ConnStarts{Conns: 4, FirstChance: []ConnExit{{Src: 0, Dst: 2, Segs: 27}, {Src: 2, Dst: 1, Segs: 30}}}
	if !ok || cs.Conns != want.Conns || !slices.Equal(cs.FirstChance, want.FirstChance) {
		t.Fatalf("got %+v %v, want %+v", cs, ok, want)
	}
	if got := cs.Text(); got != "slow start: 2 of its 4 connections below HyStart's first chance (32 segments): 0->2 at 27, 2->1 at 30" {
		t.Errorf("text %q", got)
	}
	if got := (ConnStarts{Conns: 3}).Text(); got != "slow start: none of its 3 connections below HyStart's first chance (32 segments)" {
		t.Errorf("text %q", got)
	}
	if _, ok := in.connStarts(job.Key{Job: "vgg", Phase: "push"}, 100*ms, 300*ms); ok {
		t.Error("a job without samples has connections")
	}
	// Attribute gives a phase without per-flow marks its connections, and
	// an all-to-all its flows instead.
	cmpRow := []record.Comparison{{Job: "gpt", Phase: "allreduce", PredictedNs: 100 * ms, MeasuredNs: 200 * ms, RelErr: 1}}
	in.Measurement = &record.Run{Phases: []record.Phase{{Job: "gpt", Phase: "allreduce", StartNs: 100 * ms, EndNs: 300 * ms}}}
	in.Ideal, in.Calibrated, in.TCPAware = cmpRow, cmpRow, cmpRow
	a := Attribute(in, 0)
	if len(a) != 1 || a[0].Conns == nil || a[0].SlowStart != nil || a[0].Conns.Conns != 4 {
		t.Fatalf("attribution %+v", a)
	}
	if ds := Diagnoses(a); len(ds) != 1 || ds[0] != "gpt 0 allreduce: "+cs.Text() {
		t.Errorf("diagnoses %q", ds)
	}
	// A ring's per-connection marks name the connection that delivered
	// last (2->1, below the first chance, 40 ms after 1->3); they do not
	// make its connections flows for early_exit: they are coupled.
	in.Flows = []Flow{{Job: "gpt", Phase: "allreduce", Src: 0, Dst: 2, StartNs: 100 * ms, EndNs: 250 * ms},
		{Job: "gpt", Phase: "allreduce", Src: 2, Dst: 1, StartNs: 100 * ms, EndNs: 300 * ms},
		{Job: "gpt", Phase: "allreduce", Src: 1, Dst: 3, StartNs: 100 * ms, EndNs: 260 * ms},
		{Job: "gpt", Iteration: 1, Phase: "allreduce", Src: 1, Dst: 3, StartNs: 400 * ms, EndNs: 500 * ms}}
	a = Attribute(in, 0)
	if len(a) != 1 || a[0].SlowStart != nil || a[0].Conns == nil || a[0].Conns.Last == nil ||
		*a[0].Conns.Last != (ConnLast{Src: 2, Dst: 1, AfterNs: 40 * ms, FirstChance: true}) {
		t.Fatalf("ring with per-connection marks: %+v", a)
	}
	if got, want := a[0].Conns.Text(), cs.Text()+"; the last byte came over 2->1, 40.0 ms after the connection before it, one of those"; got != want {
		t.Errorf("text %q, want %q", got, want)
	}
	var set DiagnosisSet
	set.Add(a)
	set.Add(a)
	if ds := set.Lines(); len(ds) != 1 || !strings.HasSuffix(ds[0], "; the last byte came over one of those in 2 of 2") {
		t.Errorf("over two runs: %q", ds)
	}
	// An all-to-all's per-flow marks are its flows.
	in.Flows = []Flow{{Job: "moe", Phase: "alltoall", Src: 0, Dst: 2, StartNs: 100 * ms, EndNs: 250 * ms}}
	cmpRow = []record.Comparison{{Job: "moe", Phase: "alltoall", PredictedNs: 100 * ms, MeasuredNs: 200 * ms, RelErr: 1}}
	in.Measurement = &record.Run{Phases: []record.Phase{{Job: "moe", Phase: "alltoall", StartNs: 100 * ms, EndNs: 300 * ms}}}
	in.Ideal, in.Calibrated, in.TCPAware = cmpRow, cmpRow, cmpRow
	if a := Attribute(in, 0); len(a) != 1 || a[0].Conns != nil || a[0].SlowStart == nil {
		t.Errorf("with per-flow marks: %+v", a)
	}
}

func TestConnName(t *testing.T) {
	for _, tt := range []struct {
		src, dst int
		want     string
	}{{0, 2, "0->2"}, {-1, 1, "ps->1"}, {2, -1, "2->ps"}} {
		if got := ConnName(tt.src, tt.dst); got != tt.want {
			t.Errorf("ConnName(%d, %d) = %q, want %q", tt.src, tt.dst, got, tt.want)
		}
	}
}

// Unpatched drops name their cause: with routes moved in the same instant
// as every circuit, frames queued before the switch; otherwise the lag.
func TestOCSDropsWhy(t *testing.T) {
	for _, tc := range []struct {
		name string
		lag  []int64
		want string
	}{
		{"routes in the same instant", []int64{0, 0, 0}, "transfers outlasted their circuits"},
		{"routes lagged once", []int64{0, 1.3e6}, "routes and circuits disagreed"},
		{"no reconfiguration measured", nil, "routes and circuits disagreed"},
	} {
		l := line(Judge(&Inputs{OCS: &OCS{UnpatchedBytes: 1500, UnpatchedPackets: 1, RouteLagNs: tc.lag}}), "OCS drops of plan traffic")
		if l.Status != Fail || !strings.Contains(l.Why, tc.want) {
			t.Errorf("%s: %s, %q; want fail saying %q", tc.name, l.Status, l.Why, tc.want)
		}
	}
}

// A late phase among many that started together is named as a burst;
// a late phase alone is put down to a busy CPU.
func TestLatenessWhy(t *testing.T) {
	phases := func(n int, spacing int64) []record.Phase {
		var ps []record.Phase
		for i := range n {
			ps = append(ps, record.Phase{Job: "j", Phase: "t", StartNs: 300e6 + int64(i)*spacing, Measured: record.Measured{LatenessNs: 1e6}})
		}
		ps[n-1].LatenessNs = 4e6
		ps[n-1].StartNs += 3e6 // started late: its gate is 4 ms before its start
		return ps
	}
	for _, tc := range []struct {
		name string
		ps   []record.Phase
		want string
	}{
		{"60 phases within 1 ms", phases(60, 10e3), "60 phases could start within 1 ms"},
		{"8 phases 100 ms apart", phases(8, 100e6), "a busy CPU delays timers"},
		{"7 phases at once", phases(7, 0), "a busy CPU delays timers"},
	} {
		l := line(Judge(&Inputs{Measurement: &record.Run{Phases: tc.ps}}), "phase lateness")
		if l.Status != Warn || !strings.Contains(l.Why, tc.want) {
			t.Errorf("%s: %s, %q; want warn saying %q", tc.name, l.Status, l.Why, tc.want)
		}
	}
}
