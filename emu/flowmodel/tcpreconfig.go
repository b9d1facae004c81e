package flowmodel

import (
	"container/heap"
	"math"

	"github.com/ocsemu/ocsemu/emu/plan"
	"github.com/ocsemu/ocsemu/emu/scenario"
	"github.com/ocsemu/ocsemu/ocsfabric/circuit"
)

// Disruption is a flow in progress whose path crossed an uplink whose
// circuit a reconfiguration changed: the frames it had queued there are
// lost, and TCP must recover them.
type Disruption struct {
	AtNs   int64          `json:"at_ns"`
	Key    plan.Key       `json:"key"`
	Src    string         `json:"src"`
	Dst    string         `json:"dst"`
	Uplink circuit.Uplink `json:"uplink"`
	// RateBps is the flow's payload rate at the switch (bytes/s), and
	// LostBytes what the TCP-aware model says it lost there (0 in the
	// other models).
	RateBps   float64 `json:"rate_bytes_per_s"`
	LostBytes float64 `json:"lost_bytes,omitempty"`
}

// Disruptions runs a checked plan through the ideal model and returns
// every flow in progress whose circuit one of the plan's reconfigurations
// changed under it. A scheduler that keeps the circuits of active flows
// until they end has none.
func Disruptions(p *plan.Plan, s *scenario.Scenario) ([]Disruption, error) {
	var out []Disruption
	_, err := simulate(p, s, Options{OnDisrupt: func(d Disruption) { out = append(out, d) }}, Ideal)
	return out, err
}

// switchState is what SetCircuits knows before it reroutes: the flows a
// changed circuit hits, with the bytes they lose, and every flow's RTT.
type switchState struct {
	hit  map[*flow]float64 // lost bytes
	srtt map[*flow]int64
}

// inProgress reports whether a flow's phase started before now: a phase
// released at the switch instant has sent nothing yet.
func (s *Sim) inProgress(fl *flow) bool {
	return !fl.done && s.jobs[fl.job].Start[fl.phase] < s.now
}

// beforeSwitch notes, before a reconfiguration reroutes anything, the
// flows in progress on uplinks whose circuit changes (dark) and, in the
// TCP-aware model, what each loses: the frames in flight up to and in
// that uplink's queue, rate x (base RTT + the queue's delay if the link
// is saturated).
func (s *Sim) beforeSwitch(dark []circuit.Uplink) *switchState {
	tm := s.opt.TCP
	if len(dark) == 0 || (s.opt.OnDisrupt == nil && tm == nil) {
		return nil
	}
	st := &switchState{hit: map[*flow]float64{}, srtt: map[*flow]int64{}}
	if tm != nil {
		for _, fl := range s.live {
			if fl.srcRack != fl.dstRack && s.inProgress(fl) {
				st.srtt[fl] = s.flowRTT(fl)
			}
		}
	}
	var hits []Disruption
	for _, u := range dark {
		r := s.upTx(u.Rack, u.Port)
		sat := tm != nil && s.saturatedNow(r)
		for _, fl := range s.res[r].flows {
			if _, seen := st.hit[fl]; seen || !s.inProgress(fl) {
				continue
			}
			lost := 0.0
			if tm != nil {
				lost = fl.rate * float64(tm.BaseRTTNs+s.queueNs(r, sat)) / 1e9
			}
			st.hit[fl] = lost
			hits = append(hits, Disruption{AtNs: s.now, Key: s.jobs[fl.job].keys[fl.phase], Src: fl.src, Dst: fl.dst, Uplink: u, RateBps: fl.rate, LostBytes: lost})
		}
	}
	if s.opt.OnDisrupt != nil {
		for _, d := range hits {
			s.opt.OnDisrupt(d)
		}
	}
	return st
}

// afterSwitch charges TCP's recovery to the flows a reconfiguration hit
// and to the flows whose new path crosses a dark port (no lit
// alternative). Whether the flow's ACK clock survives decides it:
//
//   - hit, new path lit: the frames queued on the changed uplink are
//     lost; what the flow sends next on the new path is SACKed and RACK
//     repairs the loss without a stall, unless nothing is left to send (a
//     tail loss: the loss probe finds it after PTO = 2 SRTT + 2 ms);
//   - not hit, new path dark for D: the data in flight on the old path is
//     still acknowledged for one SRTT and clocks new data into the dark.
//     If D < SRTT it loses rate x D and resumes when the light comes back
//     (the fluid pause); otherwise its whole window (rate x SRTT) is lost
//     and it waits for a probe;
//   - hit and new path dark: no ACK clock; it waits for a probe.
//
// Waiting for a probe: the loss probe if the dark period ends before PTO,
// else the RTO (SRTT + tcp_rto_min, doubling while retransmissions still
// go into the dark), after which the window restarts from one segment in
// slow start. Lost bytes are sent again.
func (s *Sim) afterSwitch(st *switchState) {
	tm := s.opt.TCP
	if st == nil || tm == nil {
		return
	}
	for _, fl := range s.live {
		rtt, ok := st.srtt[fl]
		if !ok || fl.done {
			continue
		}
		lost, wasHit := st.hit[fl]
		dark := int64(0)
		if end := s.pathDarkUntil(fl); end > s.now {
			dark = end - s.now
		}
		if !wasHit && dark == 0 {
			continue
		}
		if !wasHit {
			lost = fl.rate * float64(min(dark, rtt)) / 1e9
		}
		stall, rto := recoveryStall(tm, rtt, dark, wasHit, fl.remaining)
		fl.remaining += lost
		if stall > 0 {
			s.stallFlow(fl, stall, rto, rtt)
		}
		s.dirtyF = append(s.dirtyF, fl)
	}
}

// recoveryStall is how long a flow with RTT srtt sends nothing after a
// reconfiguration (afterSwitch): dark is how long its new path stays dark
// (0: lit), hit whether it lost what it had queued on a changed uplink,
// left the bytes it still has to send. rto says whether the
// retransmission timer fired. A dark period the flow merely waits out is
// not a stall: the fluid model pauses it there anyway.
func recoveryStall(tm *TCPModel, srtt, dark int64, hit bool, left float64) (stall int64, rto bool) {
	pto := 2*srtt + tm.PTOMinNs
	switch {
	case dark == 0 && (!hit || left >= tm.MSS):
		return 0, false // RACK repairs it from the SACKs of new data
	case dark == 0:
		return pto, false // a tail loss
	case !hit && dark < srtt:
		return 0, false // the ACK clock outlives the dark period
	case dark < pto:
		return pto, false
	}
	wait := srtt + tm.RTOMinNs
	t := wait
	for t < dark {
		wait *= 2
		t += wait
	}
	return t, true
}

// pathDarkUntil is the latest dark-period end among the physical links
// of a flow's path, or 0 if none is dark now.
func (s *Sim) pathDarkUntil(fl *flow) int64 {
	var until int64
	for _, r := range fl.res {
		if _, ok := s.linkRate(r); ok && s.res[r].darkUntil > s.now {
			until = max(until, s.res[r].darkUntil)
		}
	}
	return until
}

// stallFlow keeps a flow from sending for d; after an RTO its window
// restarts from one segment and doubles every RTT.
func (s *Sim) stallFlow(fl *flow, d int64, rto bool, rtt int64) {
	r := s.tcpRes(fl)
	until := s.now + d
	s.res[r].darkUntil = until
	s.darkEnds[until] = append(s.darkEnds[until], r)
	heap.Push(&s.events, event{t: until, kind: evDarkEnd})
	s.dirty = append(s.dirty, r)
	if rto {
		fl.rttNs = max(1, rtt)
		fl.ssGen++
		s.res[r].capBps = s.opt.TCP.MSS / (float64(fl.rttNs) / 1e9)
		s.scheduleRamp(fl, until+fl.rttNs)
	}
}

// tcpRes is the flow's own TCP resource (slow start's window cap, and a
// recovery's stall as its dark period), made unlimited if it has none.
func (s *Sim) tcpRes(fl *flow) int32 {
	if fl.ssRes >= 0 {
		return fl.ssRes
	}
	s.res = append(s.res, resource{capBps: math.Inf(1), flows: []*flow{fl}})
	fl.ssRes = int32(len(s.res) - 1)
	fl.res = append(fl.res, fl.ssRes)
	fl.pos = append(fl.pos, 0)
	return fl.ssRes
}
