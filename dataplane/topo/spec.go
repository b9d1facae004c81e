package topo

import "github.com/ocsemu/ocsemu/dataplane/units"

// Fabric kinds.
const (
	FabricEPS    = "eps"    // servers and ToRs on an electrical packet core
	FabricOCS    = "ocs"    // ToR uplinks on optical circuit switches only
	FabricHybrid = "hybrid" // both: circuits plus a packet core
)

// Uplink spreads over OCS switches.
const (
	SpreadRoundRobin = "round-robin" // uplink u goes to OCS u mod switches
	SpreadBlock      = "block"       // uplinks are split into contiguous blocks per OCS
)

// Spec is the fabric of one lab, resolved: what the kernel side and the
// OCS need to build and drive it, with rates in bit/s. The scenario (emu
// side) converts to it once; nothing below emu/ reads a scenario.
type Spec struct {
	Lab            string `json:"lab"`
	Kind           string `json:"kind"`
	Racks          int    `json:"racks"`
	ServersPerRack int    `json:"servers_per_rack"`
	UplinksPerToR  int    `json:"uplinks_per_tor"` // 0 on an eps fabric
	OCSSwitches    int    `json:"ocs_switches"`
	Spread         string `json:"spread"`
	// HalfDuplex: a port is in at most one circuit, in one direction (paper 002).
	HalfDuplex bool `json:"half_duplex"`
	// StrictHalfDuplex: a port is in at most one circuit per stage, in one
	// direction (paper 002's eq. (6), paper 004's eq. (8)); implies HalfDuplex.
	StrictHalfDuplex bool           `json:"strict_half_duplex,omitempty"`
	ReconfigDelay    units.Duration `json:"reconfig_delay"`
	ServerRate       units.Rate     `json:"server_rate"` // server <-> ToR; 0 unlimited
	UplinkRate       units.Rate     `json:"uplink_rate"` // ToR <-> OCS port
	CoreRate         units.Rate     `json:"core_rate"`   // ToR <-> packet core
	MTU              int            `json:"mtu"`
	// CongestionControl is the default of server namespaces.
	CongestionControl string `json:"congestion_control"`
	// ServerQueue is a shaped server port's queue: "fifo" or "" (the
	// shaper's one FIFO, the default) or "fair" (per destination,
	// round-robin, as a host's fq_codel); dataplane/fairq.
	ServerQueue string `json:"server_queue,omitempty"`
	// SwitchQueue is a shaped switch port's queue (a ToR's, the packet
	// core's): "fifo" or "" (the default) or "fair" (per pair of servers,
	// round-robin: per-flow fair queueing); dataplane/fairq.
	SwitchQueue string `json:"switch_queue,omitempty"`
}

// Server and switch queues (Spec.ServerQueue, Spec.SwitchQueue).
const (
	QueueFair = "fair"
	QueueFIFO = "fifo"
)

// HasOCS reports whether the fabric has optical circuit switches.
func (s *Spec) HasOCS() bool { return s.Kind == FabricOCS || s.Kind == FabricHybrid }

// HasEPS reports whether the fabric has an electrical packet core.
func (s *Spec) HasEPS() bool { return s.Kind == FabricEPS || s.Kind == FabricHybrid }

// UplinkSwitch says which OCS switch, and which port on it, ToR uplink u
// of rack r is cabled to. Ports are numbered per switch, rack-major.
func (s *Spec) UplinkSwitch(r, u int) (sw, port int) {
	n := s.OCSSwitches
	per := s.UplinksPerToR / n // uplinks of one ToR on a switch, rounded down
	if s.Spread == SpreadBlock {
		sw = u / per
		return sw, r*per + u%per
	}
	sw = u % n
	k := u / n // index of this uplink among the ToR's uplinks on sw
	return sw, r*s.PortsPerToROn(sw) + k
}

// PortsPerToROn is the number of uplinks of each ToR cabled to switch sw.
func (s *Spec) PortsPerToROn(sw int) int {
	n, u := s.OCSSwitches, s.UplinksPerToR
	if s.Spread == SpreadBlock {
		return u / n
	}
	c := u / n
	if sw < u%n {
		c++
	}
	return c
}
