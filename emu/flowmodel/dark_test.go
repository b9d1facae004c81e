package flowmodel

import (
	"math/rand"
	"slices"
	"testing"

	"github.com/ocsemu/ocsemu/emu/scenario"
	"github.com/ocsemu/ocsemu/ocsfabric/circuit"
)

// The flow model's switch (flat slots per uplink) darkens exactly the
// ports circuit.Dark names, over a random sequence of maps: duplex and
// simplex circuits, ports reused, maps emptied, and a map off the fabric
// (which falls back to circuit.Dark and must leave the slots right).
func TestDarkPortsMatchesCircuitDark(t *testing.T) {
	const racks, ups = 6, 3
	sim := New(scenario.Fabric{Racks: racks, ServersPerRack: 1, UplinksPerToR: ups}, nil, Options{})
	rng := rand.New(rand.NewSource(1))
	random := func() circuit.Config {
		var cfg circuit.Config
		used := map[circuit.Uplink]bool{}
		for i := rng.Intn(8); i > 0; i-- {
			a := circuit.Uplink{Rack: rng.Intn(racks), Port: rng.Intn(ups)}
			b := circuit.Uplink{Rack: rng.Intn(racks), Port: rng.Intn(ups)}
			if a.Rack == b.Rack || used[a] || used[b] {
				continue
			}
			used[a], used[b] = true, true
			cfg.Circuits = append(cfg.Circuits, circuit.Circuit{A: a, B: b, Simplex: rng.Intn(3) == 0})
		}
		if rng.Intn(10) == 0 { // off the fabric
			cfg.Circuits = append(cfg.Circuits, circuit.Circuit{A: circuit.Uplink{Rack: racks, Port: 0}, B: circuit.Uplink{Rack: 0, Port: ups}})
		}
		return cfg
	}
	prev := circuit.Config{}
	for step := 0; step < 2000; step++ {
		cfg := random()
		if step%7 == 0 {
			cfg = prev // the same map again
		}
		want := circuit.Dark(prev, cfg)
		got := sim.darkPorts(cfg)
		sim.circuits = cfg
		if !slices.Equal(got, want) && !(len(got) == 0 && len(want) == 0) {
			t.Fatalf("step %d: %v -> %v: dark %v, circuit.Dark says %v", step, prev.Circuits, cfg.Circuits, got, want)
		}
		prev = cfg
	}
}
