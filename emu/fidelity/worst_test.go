package fidelity

import "testing"

func TestExplainWorst(t *testing.T) {
	const why = "the attribution says where"
	moe := Attribution{Job: "moe", Phase: "alltoall", CalibratedNs: 46_800_000, TCPAwareNs: 62_000_000, MeasuredNs: 91_700_000,
		RelErrTCP: 29.7 / 62.0, Parts: map[string]int64{PartTCP: 15_200_000, PartDrift: 300_000, PartLateness: 600_000,
			PartSkew: 1_300_000, PartEarlyExit: 27_500_000}}
	vgg := Attribution{Job: "vgg", Phase: "push", CalibratedNs: 315_000_000, TCPAwareNs: 349_000_000, MeasuredNs: 311_000_000,
		RelErrTCP: -38.0 / 349.0, Parts: map[string]int64{PartINCRound: -31_000_000, PartResidual: -7_000_000}}
	ring := Attribution{Job: "ring", Iteration: 2, Phase: "allreduce", CalibratedNs: 270_000_000, MeasuredNs: 240_000_000,
		RelErr: -30.0 / 270.0, Parts: map[string]int64{PartResidual: -30_000_000}}
	tests := []struct {
		name   string
		status Status
		as     []Attribution
		want   string
	}{
		{"a passing line says nothing more", Pass, []Attribution{moe}, why},
		{"no attribution, nothing more", Fail, nil, why},
		{"the worst phase, its largest parts beyond the model", Fail, []Attribution{vgg, moe},
			why + "; its worst phase, moe iteration 0 alltoall, +29.7 ms off the TCP-aware model: early_exit +27.5 ms, skew +1.3 ms, lateness +0.6 ms, +0.0 ms left (+0.0 points)"},
		{"a phase faster than the model", Warn, []Attribution{vgg},
			why + "; its worst phase, vgg iteration 0 push, -38.0 ms off the TCP-aware model: inc_round -31.0 ms, -7.0 ms left (-2.0 points)"},
		{"no TCP-aware model: the calibrated one, no part", Fail, []Attribution{ring},
			why + "; its worst phase, ring iteration 2 allreduce, -30.0 ms off the calibrated model: no part, -30.0 ms left (-11.1 points)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v := Verdict{Lines: []Line{{Check: "headroom", Status: Fail, Why: "busy"}, {Check: "model accuracy", Status: tt.status, Why: why}}}
			v.ExplainWorst(tt.as)
			if got := v.Lines[1].Why; got != tt.want {
				t.Errorf("why:\n got %q\nwant %q", got, tt.want)
			}
			if v.Lines[0].Why != "busy" {
				t.Errorf("another line changed: %q", v.Lines[0].Why)
			}
		})
	}
}
