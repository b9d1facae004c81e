package flowmodel

import (
	"testing"

	"github.com/ocsemu/ocsemu/emu/plan"
	"github.com/ocsemu/ocsemu/ocsfabric/circuit"
)

// A held job does not start at its arrival, is not active and adds no
// demand; admitted at 300 ms, its compute (100 ms) and its transfer
// (12.5 MB at 1 Gbit/s, 100 ms) follow, and its JCT counts from arrival.
// Installing the same circuit map again changes nothing.
func TestHoldAdmit(t *testing.T) {
	s := scen(t, `fabric: {kind: ocs, racks: 2, servers_per_rack: 1, uplinks_per_tor: 1, rates: {server: 1Gbit, uplink: 1Gbit}}
jobs:
  - {name: a, pattern: ring, workers: [r0s0, r1s0], bytes: 12.5MB, compute: 100ms, iterations: 1, arrival: 50ms}
`)
	jobs := plan.JobsFromScenario(s)
	sim := New(s.Fabric, jobs, Options{ASAP: true})
	cfg := circuit.Config{Circuits: []circuit.Circuit{c("tor0:0", "tor1:0")}}
	sim.SetCircuits(cfg, true)
	sim.Hold(0)
	sim.RunUntil(200 * ms)
	if start, _ := sim.PhaseTimes(0, 0); start >= 0 || !sim.Held(0) || len(sim.JobsActive()) != 0 || len(sim.ActiveRackDemand()) != 0 {
		t.Fatalf("held job: start %d, held %v, active %v, demand %v", start, sim.Held(0), sim.JobsActive(), sim.ActiveRackDemand())
	}
	sim.Admit(0, 300*ms)
	sim.SetCircuits(cfg, false)
	sim.RunUntil(inf)
	run := sim.Result()
	if j := run.Jobs[0]; j.StartNs != 300*ms || !near(j.EndNs, 500*ms) || !near(j.JCTNs, 450*ms) {
		t.Errorf("job start %d end %d JCT %d, want 300 ms, 500 ms, 450 ms", j.StartNs, j.EndNs, j.JCTNs)
	}
	if run.Reconfigurations != 0 {
		t.Errorf("the same map installed again counted %d reconfigurations", run.Reconfigurations)
	}
}
