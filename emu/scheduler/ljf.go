package scheduler

import (
	"sort"

	"github.com/ocsemu/ocsemu/emu/scenario"
	"github.com/ocsemu/ocsemu/ocsfabric/circuit"
)

// ljfCircuits is paper 000's "re-optimise the AOI only where a bottleneck
// needs it". Starting from the base ring it
//
//  1. keeps every circuit of the previous slot whose rack pair still has
//     demand, on the same ports;
//  2. gives each demanded rack pair without a circuit one, in large-job-
//     first order (more workers, then more bytes), preferring ports that
//     are free or whose circuit has no demand left;
//  3. adds circuits at the bottleneck pair (the most bytes per circuit in
//     either direction) while that pair cannot clear its demand within
//     the slot and both racks have a port;
//  4. keeps idle circuits of the previous slot whose ports nobody took.
//
// A circuit that is not needed elsewhere is never torn down, so the
// circuit map changes only when new demand needs a port: far fewer
// reconfigurations than fcfs, which refits every slot.
func ljfCircuits(l *loop) circuit.Config {
	f := l.s.Fabric
	p := newPorts(f)
	p.baseRing(f.Racks)
	ring := map[circuit.Circuit]bool{}
	for _, c := range p.cfg.Circuits {
		ring[c] = true
	}
	dem := l.sim.ActiveRackDemand()
	load := func(pr [2]int) float64 {
		return max(dem[[2]int{pr[0], pr[1]}], dem[[2]int{pr[1], pr[0]}])
	}
	var idle []circuit.Circuit
	for _, c := range l.prev.Circuits {
		if ring[c] {
			continue
		}
		if load(pair(c.A.Rack, c.B.Rack)) > 0 {
			p.claim(c)
		} else {
			idle = append(idle, c)
		}
	}
	for _, c := range idle {
		p.toBack(c.A)
		p.toBack(c.B)
	}
	// Demanded pairs, large jobs first.
	act := l.sim.JobsActive()
	sort.SliceStable(act, func(a, b int) bool { return larger(&l.jobs[act[a]], &l.jobs[act[b]]) })
	var order [][2]int
	seen := map[[2]int]bool{}
	for _, ji := range act {
		j := &l.jobs[ji]
		for _, ph := range []string{scenario.PhasePush, scenario.PhasePull, scenario.PhaseAllReduce, scenario.PhaseAllToAll} {
			for _, rp := range j.RackPairs(ph) {
				pr := pair(rp[0], rp[1])
				if !seen[pr] && load(pr) > 0 {
					seen[pr] = true
					order = append(order, pr)
				}
			}
		}
	}
	for _, pr := range order {
		if p.count[pr] == 0 {
			p.connect(pr[0], pr[1])
		}
	}
	// Bottlenecks: bytes per circuit over what one circuit carries in a slot.
	perSlot := bytesPerSlot(f, l.slot)
	full := map[[2]int]bool{}
	for {
		best, bestT := [2]int{}, 1.0
		for _, pr := range order {
			if full[pr] {
				continue
			}
			if t := load(pr) / (float64(max(p.count[pr], 1)) * perSlot); t > bestT {
				best, bestT = pr, t
			}
		}
		if bestT <= 1 {
			break
		}
		if !p.connect(best[0], best[1]) {
			full[best] = true
		}
	}
	for _, c := range idle {
		p.claim(c)
	}
	return p.cfg
}

// bytesPerSlot is what one circuit carries in one slot, in one direction.
func bytesPerSlot(f scenario.Fabric, slot int64) float64 {
	if f.Rates.Uplink == scenario.Unlimited {
		return 1e300
	}
	return float64(f.Rates.Uplink) / 8 * float64(slot) / 1e9
}

// claim adds circuit c on exactly its ports, if both are free.
func (p *ports) claim(c circuit.Circuit) bool {
	sa, _ := p.layout.Switch(c.A)
	sb, _ := p.layout.Switch(c.B)
	if sa < 0 || sa != sb || c.A.Rack == c.B.Rack {
		return false
	}
	ka, kb := [2]int{c.A.Rack, sa}, [2]int{c.B.Rack, sb}
	ia, ib := indexOf(p.free[ka], c.A.Port), indexOf(p.free[kb], c.B.Port)
	if ia < 0 || ib < 0 {
		return false
	}
	p.free[ka] = append(p.free[ka][:ia:ia], p.free[ka][ia+1:]...)
	p.free[kb] = append(p.free[kb][:ib:ib], p.free[kb][ib+1:]...)
	p.cfg.Circuits = append(p.cfg.Circuits, c)
	p.count[pair(c.A.Rack, c.B.Rack)]++
	return true
}

// toBack makes a free uplink the last choice of connect.
func (p *ports) toBack(u circuit.Uplink) {
	sw, _ := p.layout.Switch(u)
	k := [2]int{u.Rack, sw}
	if i := indexOf(p.free[k], u.Port); i >= 0 {
		fr := append(p.free[k][:i:i], p.free[k][i+1:]...)
		p.free[k] = append(fr, u.Port)
	}
}

func indexOf(xs []int, x int) int {
	for i, v := range xs {
		if v == x {
			return i
		}
	}
	return -1
}
