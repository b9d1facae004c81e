package flowmodel

import (
	"slices"

	"github.com/ocsemu/ocsemu/ocsfabric/circuit"
)

// portPeers is the installed circuit map as one slot per uplink (rack *
// uplinks + port): the uplink it sends to and the one it receives from,
// -1 for none. A switch compares it with the next map on the ports the
// two maps use, so it costs the circuits, not the fabric's racks or
// the maps circuit.Dark builds.
type portPeers struct {
	racks, ups int
	tx, rx     []int32
	// the next map while it is compared, then swapped in
	ntx, nrx []int32
	seen     []bool
	used     []int32 // uplinks the installed map uses, each once
	spare    []int32 // the previous used list's storage
}

func newPortPeers(racks, ups int) *portPeers {
	n := racks * ups
	p := &portPeers{racks: racks, ups: ups, tx: make([]int32, n), rx: make([]int32, n),
		ntx: make([]int32, n), nrx: make([]int32, n), seen: make([]bool, n)}
	for i := range p.tx {
		p.tx[i], p.rx[i], p.ntx[i], p.nrx[i] = -1, -1, -1, -1
	}
	return p
}

// fits reports whether every circuit of cfg is on an uplink of the fabric.
func (p *portPeers) fits(cfg circuit.Config) bool {
	ok := func(u circuit.Uplink) bool { return u.Rack >= 0 && u.Rack < p.racks && u.Port >= 0 && u.Port < p.ups }
	for _, c := range cfg.Circuits {
		if !ok(c.A) || !ok(c.B) {
			return false
		}
	}
	return true
}

func (p *portPeers) id(u circuit.Uplink) int32 { return int32(u.Rack*p.ups + u.Port) }

// install makes cfg (which fits) the installed map and returns the
// uplinks whose transmit or receive peer changed, sorted rack-major:
// circuit.Dark's answer.
func (p *portPeers) install(cfg circuit.Config) []circuit.Uplink {
	link := func(a, b int32) {
		p.ntx[a], p.nrx[b] = b, a
	}
	for _, c := range cfg.Circuits {
		a, b := p.id(c.A), p.id(c.B)
		link(a, b)
		if !c.Simplex {
			link(b, a)
		}
	}
	var changed []int32
	differs := func(u int32) bool { return p.tx[u] != p.ntx[u] || p.rx[u] != p.nrx[u] }
	// The new map's uplinks, each once; then the old map's it dropped.
	used := p.spare[:0]
	for _, c := range cfg.Circuits {
		for _, u := range [2]int32{p.id(c.A), p.id(c.B)} {
			if p.seen[u] {
				continue
			}
			p.seen[u] = true
			used = append(used, u)
			if differs(u) {
				changed = append(changed, u)
			}
		}
	}
	for _, u := range p.used {
		if !p.seen[u] && differs(u) {
			changed = append(changed, u)
		}
	}
	for _, u := range used {
		p.seen[u] = false
	}
	for _, u := range p.used {
		p.tx[u], p.rx[u] = -1, -1
	}
	p.tx, p.ntx = p.ntx, p.tx
	p.rx, p.nrx = p.nrx, p.rx
	p.used, p.spare = used, p.used
	slices.Sort(changed)
	out := make([]circuit.Uplink, len(changed))
	for i, u := range changed {
		out[i] = circuit.Uplink{Rack: int(u) / p.ups, Port: int(u) % p.ups}
	}
	return out
}

// darkPorts installs cfg in place of the current map and returns the
// ports whose circuit changed (circuit.Dark), on flat slices where the
// maps fit the fabric.
func (s *Sim) darkPorts(cfg circuit.Config) []circuit.Uplink {
	if s.peers == nil {
		s.peers = newPortPeers(s.f.Racks, s.f.UplinksPerToR)
	}
	fits := s.peers.fits(cfg)
	if !s.peersOff && fits {
		return s.peers.install(cfg)
	}
	// A map off the fabric (never from a checked plan): compare the maps
	// themselves, and start the slots again from cfg when it fits.
	dark := circuit.Dark(s.circuits, cfg)
	s.peersOff = !fits
	if fits {
		s.peers.reset()
		s.peers.install(cfg)
	}
	return dark
}

// reset forgets the installed map.
func (p *portPeers) reset() {
	for _, u := range p.used {
		p.tx[u], p.rx[u] = -1, -1
	}
	p.used = p.used[:0]
}
