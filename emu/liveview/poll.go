package liveview

import (
	"context"
	"fmt"
	"reflect"
	"time"

	"github.com/ocsemu/ocsemu/dataplane/topo"
	"github.com/ocsemu/ocsemu/ocsfabric/circuit"
	"github.com/ocsemu/ocsemu/ocsfabric/fastpath"
	"github.com/ocsemu/ocsemu/ocsfabric/ocs"
	"github.com/ocsemu/ocsemu/ocsfabric/routing"
)

// Topology is the "topology" event: what the page draws.
type Topology struct {
	Lab            string  `json:"lab"`
	Kind           string  `json:"kind"`
	Racks          int     `json:"racks"`
	ServersPerRack int     `json:"servers_per_rack"`
	Uplinks        int     `json:"uplinks_per_tor"`
	Switches       int     `json:"ocs_switches"`
	HalfDuplex     bool    `json:"half_duplex"`
	DelayNs        int64   `json:"reconfig_delay_ns"`
	UplinkBps      float64 `json:"uplink_bps"` // 0: unlimited
	Ports          []Port  `json:"ports"`
	AllowChanges   bool    `json:"allow_changes"`
}

// Port is one OCS port: ToR uplink Uplink of rack Rack, cabled to port
// Index of switch OCS.
type Port struct {
	Name   string `json:"name"` // "tor0:1"
	Rack   int    `json:"rack"`
	Uplink int    `json:"uplink"`
	OCS    int    `json:"ocs"`
	Index  int    `json:"index"`
}

// Status is the "status" event: whether the lab and its OCS answer.
type Status struct {
	OK      bool   `json:"ok"`
	Message string `json:"message"`
}

// Circuits is the "circuits" event, sent when the circuit map changes.
type Circuits struct {
	Circuits    []circuit.Circuit `json:"circuits"`
	Unreachable []routing.Pair    `json:"unreachable"`
	Schedule    bool              `json:"schedule_running"`
}

// PortRate is one port's rates since the previous poll.
type PortRate struct {
	Port         string  `json:"port"`
	Bps          float64 `json:"bps"`           // forwarded bits per second
	DarkPps      float64 `json:"dark_pps"`      // packets dropped dark per second
	UnpatchedPps float64 `json:"unpatched_pps"` // packets dropped unpatched per second
	DarkTotal    uint64  `json:"dark_total"`
	Unpatched    uint64  `json:"unpatched_total"`
}

// Sample is the "counters" event: the ports whose counters moved since
// the previous poll (the page counts the others as idle).
type Sample struct {
	TMs   int64      `json:"t_ms"` // wall clock, Unix milliseconds
	DtMs  float64    `json:"dt_ms"`
	Ports []PortRate `json:"ports"`
}

func layoutOf(sp topo.Spec) circuit.Layout { return circuit.LayoutOf(sp) }

// topologyOf is what the page draws for a fabric.
func topologyOf(sp topo.Spec, allow bool) Topology {
	t := Topology{Lab: sp.Lab, Kind: sp.Kind, Racks: sp.Racks, ServersPerRack: sp.ServersPerRack, Uplinks: sp.UplinksPerToR,
		Switches: sp.OCSSwitches, HalfDuplex: sp.HalfDuplex, DelayNs: int64(sp.ReconfigDelay.D()), UplinkBps: sp.UplinkRate.Bps(), AllowChanges: allow}
	if !sp.HasOCS() {
		return t
	}
	for r := 0; r < sp.Racks; r++ {
		for u := 0; u < sp.UplinksPerToR; u++ {
			sw, idx := sp.UplinkSwitch(r, u)
			t.Ports = append(t.Ports, Port{Name: circuit.Uplink{Rack: r, Port: u}.String(), Rack: r, Uplink: u, OCS: sw, Index: idx})
		}
	}
	return t
}

// rates compares two counter readings dt apart and returns the ports
// whose counters moved (a port absent before counts from zero; a counter
// that went down, after an OCS restart, counts from zero too).
func rates(prev map[circuit.Uplink]fastpath.Counters, cur []ocs.PortCounters, dt time.Duration) []PortRate {
	sec := dt.Seconds()
	if sec <= 0 {
		return nil
	}
	delta := func(now, before uint64) float64 {
		if now < before {
			return float64(now)
		}
		return float64(now - before)
	}
	var out []PortRate
	for _, c := range cur {
		p := prev[c.Uplink]
		if c.Counters == p {
			continue
		}
		out = append(out, PortRate{Port: c.Uplink.String(),
			Bps:          8 * delta(c.FwdBytes, p.FwdBytes) / sec,
			DarkPps:      delta(c.DarkPackets, p.DarkPackets) / sec,
			UnpatchedPps: delta(c.UnpatchedPackets, p.UnpatchedPackets) / sec,
			DarkTotal:    c.DarkPackets, Unpatched: c.UnpatchedPackets})
	}
	return out
}

// pollState is what the poller remembers between two polls.
type pollState struct {
	status   *Status
	topology *Topology
	circuits *Circuits
	counters map[circuit.Uplink]fastpath.Counters
	at       time.Time
	n        int
	timeline *timeline
	lastTL   *Timeline
	events   *EventLog
}

func (s *Server) poll(ctx context.Context) {
	st := &pollState{timeline: newTimeline(s.o.RunDir)}
	st.timeline.resolve = s.o.RunDirOf
	t := time.NewTicker(s.o.Interval)
	defer t.Stop()
	for {
		s.tick(ctx, st)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// publishIf publishes a sticky event when it differs from the last one.
func publishIf[T any](s *Server, event string, last **T, v T) {
	if *last != nil && reflect.DeepEqual(**last, v) {
		return
	}
	*last = &v
	if err := s.hub.publish(event, v, true); err != nil {
		s.o.Log.Warn("live view", "err", err)
	}
}

// timelineEvery is how many polls pass between two reads of the run's
// records.
const timelineEvery = 5

func (s *Server) tick(ctx context.Context, st *pollState) {
	if st.n%timelineEvery == 0 {
		publishIf(s, "timeline", &st.lastTL, st.timeline.read())
	}
	st.n++
	publishIf(s, "events", &st.events, s.events.snapshot())
	sp, err := s.o.Spec()
	if err != nil {
		s.setSpec(nil)
		publishIf(s, "status", &st.status, Status{Message: fmt.Sprintf("lab %s is not deployed: %v. The page keeps watching; deploy it (`emu deploy`) or run it (`emu run --keep`).", s.o.Lab, err)})
		// No circuits of a lab that is gone stay on the page.
		publishIf(s, "circuits", &st.circuits, Circuits{Circuits: []circuit.Circuit{}, Unreachable: []routing.Pair{}})
		st.counters = nil
		return
	}
	s.setSpec(&sp)
	publishIf(s, "topology", &st.topology, topologyOf(sp, s.o.AllowChanges))
	if !sp.HasOCS() {
		publishIf(s, "status", &st.status, Status{OK: true, Message: fmt.Sprintf("lab %s is an %s fabric: it has no OCS, so no circuits or port counters to show", s.o.Lab, sp.Kind)})
		return
	}
	cctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	cfg, err := s.o.OCS.Config(cctx)
	var ctrs []ocs.PortCounters
	if err == nil {
		ctrs, err = s.o.OCS.Counters(cctx)
	}
	if err != nil {
		if ctx.Err() != nil {
			return
		}
		publishIf(s, "status", &st.status, Status{Message: s.o.Explain(err).Error()})
		st.counters = nil
		return
	}
	publishIf(s, "status", &st.status, Status{OK: true, Message: fmt.Sprintf("lab %s: %s fabric, OCS answering", s.o.Lab, sp.Kind)})
	c := Circuits{Circuits: cfg.Circuits, Unreachable: cfg.Unreachable, Schedule: cfg.Schedule}
	if c.Circuits == nil {
		c.Circuits = []circuit.Circuit{}
	}
	if c.Unreachable == nil {
		c.Unreachable = []routing.Pair{}
	}
	publishIf(s, "circuits", &st.circuits, c)
	now := time.Now()
	if st.counters != nil {
		smp := Sample{TMs: now.UnixMilli(), DtMs: float64(now.Sub(st.at).Microseconds()) / 1000, Ports: rates(st.counters, ctrs, now.Sub(st.at))}
		if smp.Ports == nil {
			smp.Ports = []PortRate{}
		}
		if err := s.hub.publish("counters", smp, false); err != nil {
			s.o.Log.Warn("live view", "err", err)
		}
	}
	st.counters = map[circuit.Uplink]fastpath.Counters{}
	for _, c := range ctrs {
		st.counters[c.Uplink] = c.Counters
	}
	st.at = now
}

func (s *Server) setSpec(sp *topo.Spec) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.spec = sp
}
