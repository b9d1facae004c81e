package scheduler

import (
	"fmt"
	"runtime"
	"testing"

	"github.com/ocsemu/ocsemu/emu/flowmodel"
	"github.com/ocsemu/ocsemu/emu/plan"
	"github.com/ocsemu/ocsemu/emu/scenario"
)

// Planning, checking and simulating one 2-rank job costs what the job
// and the plan need, not every rack pair of the fabric: on 4096 racks it
// used to route all 16.8 million pairs at every slot (84 s and 2.27 GB
// for `emu plan`). What remains grows with the plan's circuits (the base
// ring lists one per rack in every stage): about 25 MB a stage here.
// Memory allocated is the measure, as it does not depend on the load.
func TestPlanCostFollowsWork(t *testing.T) {
	for _, kind := range []string{scenario.KindHybrid, scenario.KindOCS} {
		s, err := scenario.Parse([]byte(fmt.Sprintf(`name: big
fabric: {kind: %s, racks: 4096, servers_per_rack: 1, uplinks_per_tor: 2, rates: {server: 1Gbit, uplink: 1Gbit}}
jobs:
  - {name: a, pattern: ring, workers: [r0s0, r4095s0], bytes: 1MiB, compute: 1ms, iterations: 2}
scheduler: {name: fcfs, slot: 5ms}
`, kind)), "big")
		if err != nil {
			t.Fatal(err)
		}
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		p, err := Plan(s)
		if err != nil {
			t.Fatal(err)
		}
		if err := plan.Check(p, s); err != nil {
			t.Fatal(err)
		}
		if _, err := flowmodel.Simulate(p, s); err != nil {
			t.Fatal(err)
		}
		runtime.ReadMemStats(&after)
		mb := float64(after.TotalAlloc-before.TotalAlloc) / 1e6
		t.Logf("%s: %d stages, %.1f MB allocated", kind, len(p.Stages), mb)
		if mb > 300 {
			t.Errorf("%s fabric of 4096 racks, one 2-rank job: %.0f MB allocated, want under 300 MB", kind, mb)
		}
	}
}
