package fidelity

import (
	"math"
	"strings"
	"testing"

	"github.com/ocsemu/ocsemu/workers/job"
	"github.com/ocsemu/ocsemu/workers/record"
)

// An INC push's round trip by hand, between 100 and 900 ms. The tree is
// rooted at tor0, with workers under tor0, tor1 and tor2. Each
// aggregator's counters were read at 0, 500 and 1000 ms and at 1200 ms;
// the push's hold is the mean between the readings around it (0 and
// 1000 ms): 0.3, 0.2 and 0.25 ms per datagram, though the halves differ
// and the reading after 1000 ms would give another mean. The costliest
// branch goes up through tor2 and back: 0.3 + 2 x 0.25 = 0.8 ms, and the
// worst worker's results waited 0.1 ms in its socket: 0.9 ms of hops. The
// replay took 348 ms for 16 MiB per worker with a window of 256 slots of
// 1440 B: a 7.646 ms round trip by Little's law, with 0.7 ms of hops.
func TestINCRoundByHand(t *testing.T) {
	const ms = int64(1e6)
	agg := func(tor string, holdNs uint64) Agg {
		// 400 datagrams held 0.5x the mean, then 600 held 1.333x: the
		// mean over the thousand is holdNs.
		first := 400 * holdNs / 2
		return Agg{ToR: tor, Samples: []AggSample{{TNs: 0}, {TNs: 500 * ms, Holds: 400, HoldNs: first},
			{TNs: 1000 * ms, Holds: 1000, HoldNs: 1000 * holdNs}, {TNs: 1200 * ms, Holds: 1100, HoldNs: 1000*holdNs + 100*9*holdNs}}}
	}
	push := job.Key{Job: "vgg", Phase: "push"}
	base := func() *Inputs {
		return &Inputs{
			Aggs:           []Agg{agg("tor0", 300_000), agg("tor1", 200_000), agg("tor2", 250_000)},
			INCTrees:       map[string]INCTree{"vgg": {Root: "tor0", Leaves: []string{"tor0", "tor1", "tor2"}, Bytes: 16 << 20}},
			ModelINCHopsNs: map[job.Key]int64{push: 700_000},
			INCWindowBytes: 256 * 1440,
		}
	}
	m := record.Phase{Measured: record.Measured{INCRTTNs: 7 * ms, INCWaitNs: ms / 10}}
	for _, tc := range []struct {
		name   string
		in     func() *Inputs
		k      job.Key
		want   INCRound
		wantOK bool
	}{
		{name: "beside other traffic", in: base, k: push, want: INCRound{RTTNs: 7 * ms, HopsNs: 900_000, ModelRTTNs: 7_646_000, ModelHopsNs: 700_000}, wantOK: true},
		{name: "the replay put no hops in", in: func() *Inputs {
			in := base()
			in.ModelINCHopsNs = nil
			return in
		}, k: push, want: INCRound{RTTNs: 7 * ms, HopsNs: 900_000, ModelRTTNs: 7_646_000}, wantOK: true},
		{name: "an aggregator without readings", in: func() *Inputs {
			in := base()
			in.Aggs = in.Aggs[:2]
			return in
		}, k: push},
		{name: "not an INC job", in: base, k: job.Key{Job: "gpt", Phase: "push"}},
		{name: "not a push", in: base, k: job.Key{Job: "vgg", Phase: "pull"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := tc.in().incRound(tc.k, m, 100*ms, 900*ms, 348*ms)
			near := func(a, b int64) bool { return a-b < 2000 && b-a < 2000 }
			if ok != tc.wantOK || ok && (got.RTTNs != tc.want.RTTNs || !near(got.HopsNs, tc.want.HopsNs) || !near(got.ModelRTTNs, tc.want.ModelRTTNs) || got.ModelHopsNs != tc.want.ModelHopsNs) {
				t.Errorf("got %+v, %v; want %+v, %v", got, ok, tc.want, tc.wantOK)
			}
			if want := "round trip 7.00 ms = hops 0.90 + network 6.10; model 7.65"; ok && !strings.HasPrefix(got.Text(), want) {
				t.Errorf("text %q, want it to start %q", got.Text(), want)
			}
		})
	}
}

// The inc_round part by hand. A push of 16 MiB per worker with a window
// of 256 slots of 1440 B (368,640 B): ideal 300 ms, calibrated 315,
// TCP-aware and replay 348. Its workers' round trip was 6.7 ms, so at
// window/RTT it takes 16,777,216 x 6.7 / 368,640 = 304.92 ms: inc_round =
// -43.08 ms, and measured 310 ms leaves a residual of 10 - 15 - 33 +
// 43.08 = 5.08 ms (the window filling and draining). A round trip of 8 ms
// (364.09 ms: +16.09) beside a worker 10 ms late, measured 370 ms: the
// round trip takes 16.09 of the 22 left and lateness the last 5.91 (the
// late worker's wait is in the round trip too). Without a round trip
// measured, no part.
func TestAttributeINCRound(t *testing.T) {
	const ms = int64(1e6)
	in := func(measured, rtt, late int64) *Inputs {
		cmp := func(pred int64) []record.Comparison {
			return []record.Comparison{{Job: "vgg", Phase: "push", PredictedNs: pred, MeasuredNs: measured, RelErr: float64(measured-pred) / float64(pred)}}
		}
		return &Inputs{
			Measurement: &record.Run{Phases: []record.Phase{{Job: "vgg", Phase: "push", EndNs: measured, Measured: record.Measured{INCRTTNs: rtt, LateInNs: late}}}},
			Ideal:       cmp(300 * ms), Calibrated: cmp(315 * ms), TCPAware: cmp(348 * ms), Replay: cmp(348 * ms),
			INCTrees:       map[string]INCTree{"vgg": {Root: "tor0", Leaves: []string{"tor0", "tor1"}, Bytes: 16 << 20}},
			INCWindowBytes: 256 * 1440,
		}
	}
	near := func(a int64, b float64) bool { return math.Abs(float64(a)/1e6-b) < 0.005 }
	for _, tc := range []struct {
		name                      string
		measured, rtt, late       int64
		round, lateness, residual float64
	}{
		{"a shorter round trip", 310 * ms, 6700_000, 0, -43.08, 0, 5.08},
		{"a longer one beside a late worker", 370 * ms, 8 * ms, 10 * ms, 16.09, 5.91, 0},
		{"no round trip measured", 310 * ms, 0, 0, 0, 0, -38},
		// 9 ms: 409.60 ms, +61.60, more than the 22 left: capped at 22,
		// nothing for lateness.
		{"a longer round trip than is left", 370 * ms, 9 * ms, 10 * ms, 22, 0, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			as := Attribute(in(tc.measured, tc.rtt, tc.late), 0)
			if len(as) != 1 {
				t.Fatalf("%d attributions, want 1", len(as))
			}
			p := as[0].Parts
			if !near(p[PartINCRound], tc.round) || !near(p[PartLateness], tc.lateness) || !near(p[PartResidual], tc.residual) {
				t.Errorf("inc_round %.2f, lateness %.2f, residual %.2f ms; want %.2f, %.2f, %.2f",
					float64(p[PartINCRound])/1e6, float64(p[PartLateness])/1e6, float64(p[PartResidual])/1e6, tc.round, tc.lateness, tc.residual)
			}
			var sum int64
			for _, name := range Parts {
				sum += p[name]
			}
			if sum != tc.measured-300*ms {
				t.Errorf("parts sum to %d, want measured - ideal", sum)
			}
		})
	}
}

// A push of under MinWindows windows spends its time filling and
// draining the window: no part, and no round trip read from its time. A
// quarter window (92,160 B) replayed in 10 ms would give a model round
// trip of 40 ms and, at a measured 8 ms, a part of -8 ms.
func TestINCRoundShortPush(t *testing.T) {
	const ms = int64(1e6)
	k := job.Key{Job: "vgg", Phase: "push"}
	m := record.Phase{Measured: record.Measured{INCRTTNs: 8 * ms, INCWaitNs: ms / 10}}
	in := &Inputs{
		Aggs:           []Agg{{ToR: "tor0", Samples: []AggSample{{TNs: 0}, {TNs: 100 * ms, Holds: 10, HoldNs: 1e6}}}},
		INCTrees:       map[string]INCTree{"vgg": {Root: "tor0", Leaves: []string{"tor0"}, Bytes: 256 * 1440 / 4}},
		INCWindowBytes: 256 * 1440,
	}
	if got := in.incRoundCost(k, m, 10*ms); got != 0 {
		t.Errorf("a quarter window: inc_round %d, want 0", got)
	}
	if _, ok := in.incRound(k, m, 0, 10*ms, 10*ms); ok {
		t.Error("a quarter window: a round trip split, want none")
	}
	in.INCTrees["vgg"] = INCTree{Root: "tor0", Leaves: []string{"tor0"}, Bytes: 2 * 256 * 1440}
	if got := in.incRoundCost(k, m, 10*ms); got != 6*ms {
		t.Errorf("two windows: inc_round %d, want 2 x 8 - 10 = 6 ms", got)
	}
}
