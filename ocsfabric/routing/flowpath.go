package routing

import "net/netip"

// Path choice among equal next hops. The flow model (emu/flowmodel) and
// the ToR's kernel path program (ocsfabric/torpath) choose a flow's next
// hop with these functions, so the emulation routes every flow where the
// model does, by construction. A flow is identified by its IPv4 source
// and destination addresses only, not its ports: the model knows the
// servers of a transfer, not the ephemeral ports TCP picks, so every
// connection between two hosts takes the same path. Every ToR on the way
// uses the same hash, as ECMP does.

// Hash constants, shared with the BPF program.
const (
	HashMul1 = 0x9E3779B1 // 2^32 / golden ratio
	HashMul2 = 0x85EBCA77
)

// FlowHash mixes a flow's addresses (IPv4, as big-endian uint32) into its
// path hash, with 32-bit arithmetic that BPF computes identically:
//
//	h = src*HashMul1 ^ dst; h ^= h >> 15; h *= HashMul2; h ^= h >> 13
func FlowHash(src, dst uint32) uint32 {
	h := src*HashMul1 ^ dst
	h ^= h >> 15
	h *= HashMul2
	h ^= h >> 13
	return h
}

// AddrHash is FlowHash of two IPv4 addresses (0 for any other address).
func AddrHash(src, dst netip.Addr) uint32 { return FlowHash(v4(src), v4(dst)) }

func v4(a netip.Addr) uint32 {
	if !a.Is4() {
		return 0
	}
	b := a.As4()
	return uint32(b[0])<<24 | uint32(b[1])<<16 | uint32(b[2])<<8 | uint32(b[3])
}

// Pick chooses the next hop of a flow with hash h: hops[h mod len(hops)],
// hops sorted by uplink as Compute and Paths give them. It returns false
// for no hops.
func Pick(hops []Hop, h uint32) (Hop, bool) {
	if len(hops) == 0 {
		return Hop{}, false
	}
	return hops[h%uint32(len(hops))], true
}

// Choice is how a ToR chooses among its next hops to one destination
// around a reconfiguration, make-before-break: from the switch instant
// until LitUntil, flows take only the hops that were lit at the switch
// (Lit), so no flow waits for a dark port while another circuit to the
// same place carries light; from LitUntil on, the earliest end of a dark
// period among the other hops, flows take All. Lit is nil when every hop
// or none was lit at the switch: then All is used throughout.
type Choice struct {
	All      []Hop
	Lit      []Hop
	LitUntil int64
}

// Choose makes the choice of hops (sorted by uplink) at switch instant
// at, given when each uplink of the ToR is dark until (CLOCK_MONOTONIC
// ns; 0 or past: lit).
func Choose(hops []Hop, at int64, darkUntil func(uplink int) int64) Choice {
	c := Choice{All: hops}
	dark := false
	for _, h := range hops {
		if darkUntil(h.Uplink) > at {
			dark = true
			break
		}
	}
	if !dark { // the common case: nothing to choose around, nothing to allocate
		return c
	}
	var lit []Hop
	for _, h := range hops {
		if d := darkUntil(h.Uplink); d > at {
			if c.LitUntil == 0 || d < c.LitUntil {
				c.LitUntil = d
			}
			continue
		}
		lit = append(lit, h)
	}
	if len(lit) > 0 && len(lit) < len(hops) {
		c.Lit = lit
	} else {
		c.LitUntil = 0
	}
	return c
}

// Pick chooses the next hop of a flow with hash h at time now.
func (c Choice) Pick(h uint32, now int64) (Hop, bool) {
	if c.Lit != nil && now < c.LitUntil {
		return Pick(c.Lit, h)
	}
	return Pick(c.All, h)
}
