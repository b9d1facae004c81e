package flowmodel

import (
	"testing"

	"github.com/ocsemu/ocsemu/emu/plan"
	"github.com/ocsemu/ocsemu/ocsfabric/circuit"
)

// A push r0s0 -> r2s0 over the chain tor0:0-tor1:0, tor1:1-tor2:0 leaves
// on tor0:0 and tor1:1: those are busy while it runs, the chain's other
// ends (which would carry the pull) are not, and nothing is once the job
// ends.
func TestBusyUplinks(t *testing.T) {
	s := scen(t, "fabric: {kind: ocs, racks: 3, servers_per_rack: 1, uplinks_per_tor: 2, rates: {server: 1Gbit, uplink: 1Gbit}}\n")
	jobs := []plan.Job{{Name: "p", Pattern: "ps", Workers: []string{"r0s0", "r2s0"}, PS: "r2s0", Bytes: 125_000_000, Iterations: 1}}
	sim := New(s.Fabric, jobs, Options{ASAP: true})
	sim.SetCircuits(circuit.Config{Circuits: []circuit.Circuit{c("tor0:0", "tor1:0"), c("tor1:1", "tor2:0")}}, true)
	sim.RunUntil(500e6)
	up := func(s string) circuit.Uplink { u, _ := circuit.ParseUplink(s); return u }
	got := sim.BusyUplinks()
	want := map[circuit.Uplink]bool{up("tor0:0"): true, up("tor1:1"): true}
	if len(got) != len(want) || !got[up("tor0:0")] || !got[up("tor1:1")] {
		t.Errorf("busy uplinks at 0.5 s: %v, want %v", got, want)
	}
	sim.RunUntil(inf)
	if got := sim.BusyUplinks(); len(got) != 0 {
		t.Errorf("busy uplinks after the push: %v, want none", got)
	}
}
