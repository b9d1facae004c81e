package plan

import (
	"strings"
	"testing"

	"github.com/ocsemu/ocsemu/emu/scenario"
	"github.com/ocsemu/ocsemu/ocsfabric/circuit"
)

func TestWarnings(t *testing.T) {
	s, err := scenario.Parse([]byte(`name: t
fabric: {kind: ocs, racks: 4, servers_per_rack: 2, uplinks_per_tor: 2, ocs: {switches: 2, reconfig_delay: 1ms}, rates: {server: 1Gbit, uplink: 1Gbit}}
jobs:
  - {name: a, pattern: ps, workers: [r0s0, r1s0], ps: r0s0, bytes: 1MB, iterations: 1}
`), "t")
	if err != nil {
		t.Fatal(err)
	}
	clock := func(p *Plan, starts, durs []int64) {
		p.Mode = ModeClock
		for i := range p.Stages {
			p.Stages[i].StartNs, p.Stages[i].DurationNs = starts[i], durs[i]
		}
	}
	other := []circuit.Circuit{cc("tor0:0", "tor2:0"), cc("tor1:0", "tor3:0")}
	for _, tt := range []struct {
		name   string
		change func(*Plan)
		want   []string
	}{
		{"as the scenario", func(*Plan) {}, nil},
		{"bytes changed", func(p *Plan) { p.Jobs[0].Bytes = 8 }, []string{"job a: bytes 8 (scenario 1000000): the plan's job is what runs"}},
		{"workers and iterations changed", func(p *Plan) { p.Jobs[0].Workers[1], p.Jobs[0].Iterations = "r2s0", 2 },
			[]string{"job a: workers [r0s0 r2s0] (scenario [r0s0 r1s0])", "job a: iterations 2 (scenario 1)"}},
		{"a job the scenario does not have", func(p *Plan) { p.Jobs[0].Name = "b" }, nil},
		{"clock stages in ms, not ns", func(p *Plan) {
			p.Stages[2].Circuits = other
			clock(p, []int64{0, 50, 100}, []int64{50, 50, 50})
		}, []string{"stage 1 lasts 50ns, shorter than the 1ms its changed circuits are dark (start_ns and duration_ns are nanoseconds)", "2 stages in all change circuits and are shorter than their dark period"}},
		{"a short stage that changes no circuit", func(p *Plan) { clock(p, []int64{0, 50e6, 100e6}, []int64{50e6, 50e6, 50}) }, nil},
		{"stages long enough", func(p *Plan) {
			p.Stages[2].Circuits = other
			clock(p, []int64{0, 50e6, 100e6}, []int64{50e6, 50e6, 50e6})
		}, nil},
	} {
		t.Run(tt.name, func(t *testing.T) {
			p := valid()
			p.Jobs[0].Bytes = 1e6
			tt.change(p)
			got := Warnings(p, s)
			if len(got) != len(tt.want) {
				t.Fatalf("warnings %q, want %q", got, tt.want)
			}
			for i := range got {
				if !strings.Contains(got[i], tt.want[i]) {
					t.Errorf("warning %q, want %q", got[i], tt.want[i])
				}
			}
		})
	}
}
