package flowmodel

import "github.com/ocsemu/ocsemu/ocsfabric/circuit"

// BusyUplinks returns the uplinks whose circuits carry a flow in progress
// now. A scheduler that keeps these circuits until the flows end spares
// them a reconfiguration (Disruptions lists the ones a plan does not).
func (s *Sim) BusyUplinks() map[circuit.Uplink]bool {
	out := map[circuit.Uplink]bool{}
	base := int32(2 * s.f.Racks * s.f.ServersPerRack)
	n := int32(s.f.Racks * s.f.UplinksPerToR)
	for _, fl := range s.live {
		if fl.done {
			continue
		}
		for _, r := range fl.res {
			if r >= base && r < base+n {
				i := int(r - base)
				out[circuit.Uplink{Rack: i / s.f.UplinksPerToR, Port: i % s.f.UplinksPerToR}] = true
			}
		}
	}
	return out
}
