package fidelity

import (
	"testing"

	"github.com/ocsemu/ocsemu/workers/record"
)

func TestBesideByHand(t *testing.T) {
	const ms = int64(1e6)
	link := &LinkUse{Link: "tor1:up1", OthersNs: 100 * ms, ModelOthersNs: 130 * ms} // the others took 30 ms less
	phase := func(residual int64, l *LinkUse) Attribution {
		return Attribution{Job: "gpt", Iteration: 0, Phase: "allreduce", Link: l, Parts: map[string]int64{PartResidual: residual}}
	}
	beside := func(parts map[string]int64) Attribution {
		return Attribution{Job: "moe", Iteration: 0, Phase: "alltoall", Parts: parts}
	}
	crossing := []record.PhaseLink{{Job: "moe", Iteration: 0, Phase: "alltoall", Link: "tor1:up1", OwnBytes: 1e6}}
	elsewhere := []record.PhaseLink{{Job: "moe", Iteration: 0, Phase: "alltoall", Link: "tor2:up0", OwnBytes: 1e6}}
	full, half, apart := window{0, 200 * ms}, window{100 * ms, 300 * ms}, window{300 * ms, 400 * ms}
	tests := []struct {
		name         string
		p            Attribution
		q            Attribution
		qWindow      window
		links        []record.PhaseLink
		wantBeside   int64
		wantResidual int64
	}{
		{"a cut flow beside explains it all", phase(-20*ms, link), beside(map[string]int64{PartEarlyExit: 25 * ms}), full, crossing, -20 * ms, 0},
		{"held back less than the phase gained", phase(-20*ms, link), beside(map[string]int64{PartEarlyExit: 10 * ms}), full, crossing, -10 * ms, -10 * ms},
		{"the parts add up", phase(-20*ms, link), beside(map[string]int64{PartEarlyExit: 5 * ms, PartSkew: 4 * ms, PartINCRound: 3 * ms}), full, crossing, -12 * ms, -8 * ms},
		{"the others' deficit bounds it", phase(-40*ms, link), beside(map[string]int64{PartEarlyExit: 50 * ms}), full, crossing, -30 * ms, -10 * ms},
		{"half the held phase's window overlaps", phase(-20*ms, link), beside(map[string]int64{PartEarlyExit: 30 * ms}), half, crossing, -15 * ms, -5 * ms},
		{"a shorter INC round trip holds nothing back", phase(-20*ms, link), beside(map[string]int64{PartINCRound: -30 * ms}), full, crossing, 0, -20 * ms},
		{"cpu slows every phase alike", phase(-20*ms, link), beside(map[string]int64{PartCPU: 30 * ms}), full, crossing, 0, -20 * ms},
		{"the held phase crossed another link", phase(-20*ms, link), beside(map[string]int64{PartEarlyExit: 30 * ms}), full, elsewhere, 0, -20 * ms},
		{"the held phase ran at another time", phase(-20*ms, link), beside(map[string]int64{PartEarlyExit: 30 * ms}), apart, crossing, 0, -20 * ms},
		{"a slower phase gets nothing", phase(20*ms, link), beside(map[string]int64{PartEarlyExit: 30 * ms}), full, crossing, 0, 20 * ms},
		{"the others took more of the link", phase(-20*ms, &LinkUse{Link: "tor1:up1", OthersNs: 140 * ms, ModelOthersNs: 130 * ms}), beside(map[string]int64{PartEarlyExit: 30 * ms}), full, crossing, 0, -20 * ms},
		{"no busiest link", phase(-20*ms, nil), beside(map[string]int64{PartEarlyExit: 30 * ms}), full, crossing, 0, -20 * ms},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := &Inputs{ModelLinks: tt.links}
			as := []Attribution{tt.p, tt.q}
			in.beside(as, []window{full, tt.qWindow})
			if got := as[0].Parts[PartBeside]; got != tt.wantBeside {
				t.Errorf("beside = %.1f ms, want %.1f", float64(got)/1e6, float64(tt.wantBeside)/1e6)
			}
			if got := as[0].Parts[PartResidual]; got != tt.wantResidual {
				t.Errorf("residual = %.1f ms, want %.1f", float64(got)/1e6, float64(tt.wantResidual)/1e6)
			}
			if got := as[1].Parts[PartBeside]; got != 0 {
				t.Errorf("the held phase's own beside = %d, want 0", got)
			}
		})
	}
}
