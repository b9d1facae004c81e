package flowmodel

import (
	"container/heap"
	"math"

	"github.com/ocsemu/ocsemu/dataplane/shaper"
	"github.com/ocsemu/ocsemu/emu/scenario"
)

// TCPAware is the third mode of the flow model: the calibrated model plus
// TCP's slow start. A flow on a connection that is new, or that has been
// idle for longer than the retransmission timeout (Linux's
// tcp_slow_start_after_idle), starts at the initial window and doubles it
// every RTT until its window no longer limits it; one on a connection
// whose last flow ended in slow start goes on from there. Its RTT includes a
// full shaper queue when a link of its path is already saturated by
// another phase's flows (cubic keeps such a queue full), else it is the
// fabric's base RTT. Flows share links by their RTTs (tcpshare.go) and a
// reconfiguration costs the flows it hits their lost data and TCP's
// recovery (tcpreconfig.go).
const TCPAware Model = "tcp-aware"

// SlowStart is what the TCP-aware model knows of TCP's start.
type SlowStart struct {
	// InitialWindowBytes is the payload of the initial window: Linux's
	// initcwnd of 10 segments.
	InitialWindowBytes float64
	// BaseRTTNs is the RTT of an empty path.
	BaseRTTNs int64
	// QueueNs is the delay of the queue TCP keeps standing (StandingQueueNs), added to the RTT of a
	// flow that starts on a path another phase keeps busy.
	QueueNs int64
	// IdleResetNs: a connection idle longer than this starts again from
	// the initial window (the RTO, at least tcp_rto_min).
	IdleResetNs int64
}

// Kernel and emulator facts the TCP-aware model uses.
const (
	InitialWindowSegments = 10              // Linux's default initcwnd
	RTOMinNs              = 200 * 1_000_000 // Linux's tcp_rto_min
	BaseRTTNs             = 100 * 1_000     // a veth path's RTT: pingall measures 0.10-0.44 ms across a lab here
)

// ShaperQueueNs is how long the tbf queue emu puts on a link of rate bit/s
// takes to drain when full: shaper.Limit over the rate.
func ShaperQueueNs(rate scenario.Rate, mtu int) int64 {
	if rate == scenario.Unlimited || rate <= 0 {
		return 0
	}
	bps := float64(rate) / 8
	limit := float64(shaper.Limit(uint64(bps), mtu))
	return int64(math.Round(limit / bps * 1e9))
}

// SlowStartFor is the TCP-aware model's slow start on a fabric.
func SlowStartFor(f scenario.Fabric) *SlowStart {
	return &SlowStart{
		InitialWindowBytes: float64(InitialWindowSegments * Framing(f.MTU).PayloadBytes),
		BaseRTTNs:          BaseRTTNs,
		QueueNs:            StandingQueueNs(f.Rates.Server, f.MTU),
		IdleResetNs:        RTOMinNs,
	}
}

type connKey struct {
	job      int
	src, dst string
}

// connState is a connection as its last flow left it.
type connState struct {
	idleFrom int64 // when its last flow ended
	// windowBps is slow start's cap when it ended (bytes/s; +Inf: slow
	// start was over), rttNs the RTT it ramped at and rampInNs how long
	// it still had to send before the window's next doubling.
	windowBps float64
	rttNs     int64
	rampInNs  int64
}

// startSlowStart caps a new flow at its initial window per RTT, unless
// its connection is warm: then it goes on from where the connection's
// last flow left slow start (Linux keeps cwnd over an idle time shorter
// than the RTO), so that a transfer the model splits into flows, as a
// ring's pieces, ramps as one connection does.
func (s *Sim) startSlowStart(fl *flow) {
	ss := s.opt.SlowStart
	window, rampIn := 0.0, int64(0)
	if c, ok := s.conns[connKey{fl.job, fl.src, fl.dst}]; ok && s.now-c.idleFrom <= ss.IdleResetNs {
		if math.IsInf(c.windowBps, 1) {
			return
		}
		fl.rttNs, window, rampIn = c.rttNs, c.windowBps, c.rampInNs
	} else {
		fl.rttNs = max(1, ss.BaseRTTNs)
		if s.pathBusy(fl) {
			fl.rttNs += ss.QueueNs
		}
		window, rampIn = ss.InitialWindowBytes/(float64(fl.rttNs)/1e9), fl.rttNs
	}
	s.res = append(s.res, resource{capBps: window})
	fl.ssRes = int32(len(s.res) - 1)
	fl.res = append(fl.res, fl.ssRes)
	fl.pos = append(fl.pos, 0)
	s.res[fl.ssRes].flows = []*flow{fl}
	s.scheduleRamp(fl, s.now+rampIn)
}

// scheduleRamp has slow start double the flow's window at t.
func (s *Sim) scheduleRamp(fl *flow, t int64) {
	fl.rampAt = t
	heap.Push(&s.events, event{t: t, kind: evRamp, id: fl.id, version: fl.ssGen})
}

// pathBusy reports whether a link of the flow's path is already full
// with flows of other phases that started earlier: TCP keeps that link's
// shaper queue full, so the new flow sees the queue's RTT.
func (s *Sim) pathBusy(fl *flow) bool {
	for _, r := range fl.res {
		if r == fl.capRes || r == fl.ssRes || math.IsInf(s.res[r].capBps, 1) {
			continue
		}
		used := 0.0
		for _, o := range s.res[r].flows {
			if o == fl || o.done || (o.job == fl.job && o.phase == fl.phase) {
				continue
			}
			if st := s.jobs[o.job].Start[o.phase]; st >= 0 && st < s.now {
				used += o.rate
			}
		}
		if used >= saturated*s.res[r].capBps {
			return true
		}
	}
	return false
}

// saturated is the share of a link's rate at which the model takes its
// queue to be standing.
const saturated = 0.99

// ramp doubles a slow-starting flow's window; once the window exceeds
// what its links could ever give it, slow start is over.
func (s *Sim) ramp(e event) {
	fl := s.flows[e.id]
	if fl.done || fl.ssRes < 0 || e.version != fl.ssGen {
		return // done, or a ramp from before an RTO restarted slow start
	}
	r := &s.res[fl.ssRes]
	r.capBps *= 2
	s.dirty = append(s.dirty, fl.ssRes)
	linkMax := math.Inf(1)
	for _, x := range fl.res {
		if x != fl.capRes && x != fl.ssRes {
			linkMax = math.Min(linkMax, s.res[x].capBps)
		}
	}
	if r.capBps >= linkMax {
		r.capBps = math.Inf(1)
		return
	}
	s.scheduleRamp(fl, s.now+fl.rttNs)
}

// connIdleFrom notes when a flow's connection went idle, and where its
// slow start was.
func (s *Sim) connIdleFrom(fl *flow) {
	if s.conns == nil {
		s.conns = map[connKey]connState{}
	}
	c := connState{idleFrom: s.now, windowBps: math.Inf(1)}
	if fl.ssRes >= 0 {
		c.windowBps, c.rttNs, c.rampInNs = s.res[fl.ssRes].capBps, fl.rttNs, max(0, fl.rampAt-s.now)
	}
	s.conns[connKey{fl.job, fl.src, fl.dst}] = c
}
