package scheduler

import (
	"fmt"
	"testing"

	"github.com/ocsemu/ocsemu/emu/flowmodel"
	"github.com/ocsemu/ocsemu/emu/plan"
	"github.com/ocsemu/ocsemu/emu/scenario"
	"github.com/ocsemu/ocsemu/workers/record"
)

func parse(t testing.TB, text string) *scenario.Scenario {
	t.Helper()
	s, err := scenario.Parse([]byte(text), "t")
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// ODDL on paper 003's prototype in miniature (4 racks, one uplink each):
// a stage per step with that step's matching, switching between the
// distance-1 and distance-2 matchings. 250 MB at 1 Gbit/s, 1 ms dark per
// switch: 10 ms compute, steps of 1 s, 0.5 s, 0.5 s, 1 s, two switches:
// 3.012 s. On two uplinks (the two-dimensional topology: rows on even,
// columns on odd uplinks) both matchings stay lit: no switch, 3.010 s.
func TestODDL(t *testing.T) {
	for _, tt := range []struct {
		uplinks  int
		makespan int64
		reconfig int
	}{{1, 3012e6, 2}, {2, 3010e6, 0}} {
		t.Run(fmt.Sprintf("%d uplinks", tt.uplinks), func(t *testing.T) {
			s := parse(t, fmt.Sprintf(`name: t
fabric: {kind: ocs, racks: 4, servers_per_rack: 1, uplinks_per_tor: %d, ocs: {switches: 1, reconfig_delay: 1ms}, rates: {server: 1Gbit, uplink: 1Gbit}}
jobs:
  - {name: hd, pattern: hd, workers: [r0s0, r1s0, r2s0, r3s0], bytes: 250MB, compute: 10ms, iterations: 1}
scheduler: {name: oddl}
`, tt.uplinks))
			p, err := Plan(s)
			if err != nil {
				t.Fatal(err)
			}
			if err := plan.Check(p, s); err != nil {
				t.Fatal(err)
			}
			if len(p.Stages) != 5 {
				t.Fatalf("%d stages, want 5 (compute and 4 steps)", len(p.Stages))
			}
			for k, want := range []string{"[tor0:0<->tor1:0 tor2:0<->tor3:0]", "[tor0:0<->tor2:0 tor1:0<->tor3:0]"} {
				if tt.uplinks > 1 { // both dimensions lit all along
					want = []string{"[tor0:0<->tor1:0 tor2:0<->tor3:0 tor0:1<->tor2:1 tor1:1<->tor3:1]",
						"[tor0:1<->tor2:1 tor1:1<->tor3:1 tor0:0<->tor1:0 tor2:0<->tor3:0]"}[k]
				}
				if got := fmt.Sprint(p.Stages[1+k].Circuits); got != want {
					t.Errorf("step %d circuits %s, want %s", k, got, want)
				}
			}
			if d := p.Predicted.MakespanNs - tt.makespan; d < -2 || d > 2 {
				t.Errorf("predicted makespan %d, want %d", p.Predicted.MakespanNs, tt.makespan)
			}
		})
	}
}

// Jobs whose circuits do not fit together take turns; every plan checks.
func TestODDLManyJobs(t *testing.T) {
	s := manyJobs(t, 8, 12, "oddl")
	p, err := Plan(s)
	if err != nil {
		t.Fatal(err)
	}
	if err := plan.Check(p, s); err != nil {
		t.Fatal(err)
	}
}

// manyJobs makes n hd jobs of 4 or 8 workers spread over the racks of a
// fabric with 2 uplinks per ToR (one per dimension), 8 servers per rack.
func manyJobs(t testing.TB, racks, n int, sched string) *scenario.Scenario {
	text := fmt.Sprintf(`name: t
fabric: {kind: ocs, racks: %d, servers_per_rack: 8, uplinks_per_tor: 2, ocs: {switches: 1, reconfig_delay: 1ms}, rates: {server: 1Gbit, uplink: 1Gbit}}
scheduler: {name: %s}
jobs:
`, racks, sched)
	for i := 0; i < n; i++ {
		w := 4 << (i % 2)
		text += fmt.Sprintf("  - {name: j%d, pattern: hd, bytes: 8MB, compute: %dms, iterations: 2, arrival: %dms, workers: [", i, 5+i%7, 3*i)
		for k := 0; k < w; k++ {
			if k > 0 {
				text += ", "
			}
			text += fmt.Sprintf("r%ds%d", (i+k*3)%racks, (i/racks+k)%8)
		}
		text += "]}\n"
	}
	return parse(t, text)
}

// planAndSimulate plans s with its scheduler, checks the plan against s
// and runs it through the (ideal) flow model.
func planAndSimulate(t *testing.T, s *scenario.Scenario) (*plan.Plan, *record.Run) {
	t.Helper()
	name := s.Scheduler.Name
	p, err := Plan(s)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	if err := plan.Check(p, s); err != nil {
		t.Fatalf("%s: plan does not check: %v", name, err)
	}
	run, err := flowmodel.Simulate(p, s)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return p, run
}
