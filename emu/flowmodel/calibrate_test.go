package flowmodel

import (
	"math"
	"testing"

	"github.com/ocsemu/ocsemu/emu/plan"
	"github.com/ocsemu/ocsemu/ocsfabric/circuit"
)

func TestFraming(t *testing.T) {
	tests := []struct {
		mtu, payload, wire int
		goodput            float64
	}{
		{1500, 1448, 1514, 1448.0 / 1514},
		{9000, 8948, 9014, 8948.0 / 9014},
		{576, 524, 590, 524.0 / 590},
		{0, 1448, 1514, 1448.0 / 1514}, // unset: the scenario default
	}
	for _, tt := range tests {
		f := Framing(tt.mtu)
		if f.PayloadBytes != tt.payload || f.WireBytes != tt.wire || math.Abs(f.Goodput()-tt.goodput) > 1e-12 {
			t.Errorf("Framing(%d) = %+v, goodput %.5f; want %d/%d = %.5f", tt.mtu, f, f.Goodput(), tt.payload, tt.wire, tt.goodput)
		}
	}
}

func TestParseModel(t *testing.T) {
	for _, ok := range []string{"ideal", "calibrated"} {
		if m, err := ParseModel(ok); err != nil || string(m) != ok {
			t.Errorf("ParseModel(%q) = %q, %v", ok, m, err)
		}
	}
	if _, err := ParseModel("tcp"); err == nil {
		t.Error("an unknown model is accepted")
	}
}

// The calibrated model is the ideal one with every link carrying
// payload at (MTU-52)/(MTU+14) of its rate, so, by hand: a transfer of S
// bytes alone on its links takes S / (rate x goodput); shared links split
// that payload rate max-min as before; compute does not change.
func TestCalibratedByHand(t *testing.T) {
	const S = 125_000_000 // 1 s at 1 Gbit/s
	ring4 := plan.Job{Name: "r", Pattern: "ring", Workers: []string{"r0s0", "r1s0", "r2s0", "r3s0"}, Bytes: S, Iterations: 1, ComputeNs: 100 * ms}
	ps2 := plan.Job{Name: "p", Pattern: "ps", Workers: []string{"r0s0", "r1s0", "r1s1"}, PS: "r0s0", Bytes: S, Iterations: 1}
	oneStage := func(j plan.Job, circuits []circuit.Circuit, phases ...string) plan.Plan {
		st := plan.Stage{DurationNs: 100000 * ms, Circuits: circuits}
		for _, ph := range phases {
			st.Activities = append(st.Activities, act(j.Name, 0, ph))
		}
		return plan.Plan{Mode: plan.ModeClock, Jobs: []plan.Job{j}, Stages: []plan.Stage{st}}
	}
	tests := []struct {
		name, fabric string
		plan         plan.Plan
		phase        string
		ideal, cal   float64 // duration of the phase, seconds
	}{
		{"ring on a packet core, MTU 1500", "fabric: {kind: eps, racks: 4, servers_per_rack: 1, rates: {server: 1Gbit}, mtu: 1500}\n",
			oneStage(ring4, nil, "compute", "allreduce"), "allreduce", 1.5, 1.5 * 1514 / 1448},
		{"ring on a packet core, MTU 9000", "fabric: {kind: eps, racks: 4, servers_per_rack: 1, rates: {server: 1Gbit}, mtu: 9000}\n",
			oneStage(ring4, nil, "compute", "allreduce"), "allreduce", 1.5, 1.5 * 9014 / 8948},
		{"compute is not framed", "fabric: {kind: eps, racks: 4, servers_per_rack: 1, rates: {server: 1Gbit}}\n",
			oneStage(ring4, nil, "compute", "allreduce"), "compute", 0.1, 0.1},
		{"two pushes share one circuit", "fabric: {kind: ocs, racks: 2, servers_per_rack: 2, rates: {server: 10Gbit, uplink: 1Gbit}, mtu: 1500}\n",
			oneStage(ps2, []circuit.Circuit{c("tor0:0", "tor1:0")}, "compute", "push", "pull"), "push", 2, 2 * 1514.0 / 1448},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := scen(t, tt.fabric)
			if err := plan.Check(&tt.plan, s); err != nil {
				t.Fatal(err)
			}
			for _, m := range []struct {
				model Model
				want  float64
			}{{Ideal, tt.ideal}, {Calibrated, tt.cal}} {
				run, err := SimulateModel(&tt.plan, s, m.model)
				if err != nil {
					t.Fatal(err)
				}
				found := false
				for _, ph := range run.Phases {
					if ph.Phase == tt.phase {
						found = true
						if got := float64(ph.EndNs-ph.StartNs) / 1e9; math.Abs(got-m.want) > 1e-6 {
							t.Errorf("%s: %s takes %.6f s, want %.6f", m.model, tt.phase, got, m.want)
						}
					}
				}
				if !found {
					t.Fatalf("%s: no %s phase", m.model, tt.phase)
				}
				if m.model == Calibrated && run.Source != "flow-model-calibrated" {
					t.Errorf("calibrated run's source %q", run.Source)
				}
			}
		})
	}
}
