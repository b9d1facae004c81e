// Package flowmodel predicts what a plan does, as a fluid: every
// communication phase becomes its flows (plan.Job.Flows), flows are routed
// over the circuit graph of the current stage (multi-hop through ToRs, or
// over the packet core on eps and hybrid fabrics), and rates are max-min
// fair across server links, ToR uplinks and circuits. Ports whose circuit
// changes carry nothing for the reconfiguration delay. Rates are
// recomputed only for the connected component of flows an event touches,
// which keeps the papers' full-scale setups (64 racks x 64 servers,
// 1,400 jobs) within a second or two.
package flowmodel

import (
	"container/heap"
	"fmt"
	"math"
	"net/netip"

	"github.com/ocsemu/ocsemu/dataplane/names"
	"github.com/ocsemu/ocsemu/dataplane/topo"
	"github.com/ocsemu/ocsemu/emu/plan"
	"github.com/ocsemu/ocsemu/emu/scenario"
	"github.com/ocsemu/ocsemu/ocsfabric/circuit"
	"github.com/ocsemu/ocsemu/ocsfabric/routing"
)

const inf = math.MaxInt64

// Options tune a simulation.
type Options struct {
	// ASAP releases every phase as soon as its job has arrived and its
	// predecessor is done, ignoring stages (schedulers use it to predict).
	ASAP bool
	// DelayNs is the reconfiguration delay (dark period) of changed ports.
	DelayNs int64
	// Goodput, when in (0, 1), is the fraction of every link's rate that
	// carries payload: the calibrated model's TCP framing (calibrate.go).
	// 0 is the ideal fluid model: flows get the raw line rate.
	Goodput float64
	// SlowStart, when set, ramps every flow on a new or long-idle
	// connection up from TCP's initial window (the TCP-aware model,
	// tcpaware.go).
	SlowStart *SlowStart
	// TCP, when set, adds the TCP-aware model's RTT-biased sharing and
	// the cost of a reconfiguration to the flows it hits (tcpshare.go,
	// tcpreconfig.go).
	TCP *TCPModel
	// OnDisrupt, if set, sees every flow in progress whose path crosses
	// an uplink whose circuit a reconfiguration changes (tcpreconfig.go).
	OnDisrupt func(Disruption)
	// CoalesceNs, if positive, rounds flow completions up to a multiple of
	// it, so that flows finishing within it of each other are handled at
	// one instant, with one rate computation: a big all-to-all over a
	// multi-hop topology (16,000 flows in one component) then costs
	// seconds instead of minutes, each completion late by under CoalesceNs.
	CoalesceNs int64
	// PerRank lets the ranks of all-to-all and ring jobs run on their own instead
	// of in lockstep (perrank.go; clock plans).
	PerRank bool
	// Unchained phases start when released, without waiting for their
	// predecessors (Replay: a phase the emulation started while the
	// model's predecessor still ran, as a parameter server's next push
	// does once one worker has its pull).
	Unchained map[plan.Key]bool
	// LinkShares records what every physical link carried, per phase, to
	// report per phase what shared its links (record.Run.PhaseLinks).
	LinkShares bool
}

// Sim is one fluid simulation in progress.
type Sim struct {
	f        scenario.Fabric
	opt      Options
	now      int64
	res      []resource
	flows    []*flow
	live     []*flow // flows not known to be done (compacted at stage changes)
	jobs     []*jobState
	byName   map[string]int
	events   eventHeap
	dirty    []int32 // resources whose flows need new rates
	dirtyF   []*flow
	circuits circuit.Config
	// paths gives next hops, searched per destination on demand, and
	// darkEnds the ports dark until each dark-period end: the cost of
	// routing and of a reconfiguration follows the flows and ports
	// involved, not the fabric's size.
	paths    *routing.Paths
	switchAt int64   // when the current circuits were switched in
	litFlows []*flow // flows on hops lit at the switch (make-before-break)
	darkEnds map[int64][]int32
	shaken   []bool // per rack, at a switch (markShaken)
	unmoved  int    // flows switches did not look at (mayMove), for tests
	// peers is the installed circuit map per uplink (dark.go); peersOff
	// while a map off the fabric is installed.
	peers    *portPeers
	peersOff bool
	mark     int32 // component generation
	// incWindowBytes is what an INC worker keeps in flight (INCWindow).
	incWindowBytes float64
	fairPorts      bool // fabric.switch_queue: fair: TCP shares by flow, not by RTT (weighAndFill)

	// conns is each connection's (job, src, dst) state when it last
	// finished a flow: the TCP-aware model restarts a long-idle one from
	// its initial window, and continues the slow start of one whose last
	// flow ended in it.
	conns map[connKey]connState

	// linkTrace is, per physical link, what the flows carried over it
	// (Options.LinkShares; linkshare.go).
	linkTrace  [][]linkSeg
	queueTrace [][]step
	incHops    map[[2]int32][]step // per INC push (job, phase): the hops in its tree's round trip

	// keyName, if set, names a phase in messages (a per-rank task by the
	// phase it belongs to).
	keyName func(plan.Key) plan.Key

	// OnPhaseStart, if set, is called when a phase starts.
	OnPhaseStart func(job, phaseIdx int, t int64)
	// OnPhaseEnd, if set, is called when a phase ends.
	OnPhaseEnd func(job, phaseIdx int, t int64)

	Stats Stats
}

// Stats are whole-run counters.
type Stats struct {
	Events            int
	Reconfigurations  int     // circuit-map changes between stages
	PortsReconfigured int     // ports that went dark, summed
	OCSBytes          float64 // bytes that crossed at least one circuit
	CircuitHopBytes   float64 // bytes x circuits crossed
	RateComputations  int
	// UplinkBytes is the payload each ToR uplink sent onto its circuit,
	// indexed rack*UplinksPerToR + port (OCS fabrics only).
	UplinkBytes []float64
}

type resource struct {
	capBps    float64 // bytes/s; +Inf when unlimited
	darkUntil int64
	flows     []*flow
	// water-filling scratch
	mark   int32
	remCap float64
	open   int
	openW  float64 // the open flows' weights (fill)
}

type flow struct {
	id         int
	job, phase int
	src, dst   string
	srcRack    int
	dstRack    int
	hash       uint32
	remaining  float64
	rate       float64 // bytes/s
	last       int64
	res        []int32
	pos        []int // index in each resource's flow list
	upRes      int32 // the source server's uplink; -1: a ToR
	downRes    int32 // the destination server's downlink; -1: a ToR
	capRes     int32 // -1: none
	grpRes     int32 // TCP-aware: joins an INC tree's segments into one share computation (tcpshare.go); -1: none
	ssRes      int32 // slow start's growing cap (tcpaware.go); -1: none
	rttNs      int64 // the RTT slow start ramps at
	rampAt     int64 // when slow start next doubles the window
	hops       int   // circuits crossed on the current path
	pathAt     int   // index in res of the path's first circuit
	lit        bool  // on hops lit at the switch until a dark period ends
	noPath     bool
	inc        bool // a segment of an in-network aggregation tree (not TCP)
	done       bool
	version    int32
	mark       int32
	frozen     bool
	bneck      int32 // the resource whose level fixed its rate in the last fill that shared it (a rate fixed beforehand keeps the one before); -1: none

	// The TCP-aware model's state (tcpaware.go, tcpshare.go).
	ssGen  int32   // slow start's generation: a restart after an RTO drops older ramps
	weight float64 // share weight (fill): 1, or under RTT-biased sharing its RTT's
}

// jobState is one job's progress. Its phases form a graph (plan.Job.Preds):
// a chain for the collective patterns, a task graph for dag jobs, where
// several phases run at once.
type jobState struct {
	j         *plan.Job
	keys      []plan.Key
	keyIdx    map[plan.Key]int
	succs     [][]int
	waiting   []int   // per phase: predecessors not yet done
	ready     []int   // phases whose predecessors are done, not started
	next      int     // lowest phase not done
	running   int     // phases in progress
	notBefore []int64 // per phase; -1 = not released
	caps      []phaseCaps
	flowsLeft []int
	bytes     []float64 // per started phase: the bytes its flows carry
	timerAt   []int64   // per phase: pending release timer, -1 none
	held      bool      // Hold: waits for Admit
	Start     []int64
	End       []int64
}

type phaseCaps struct {
	all   float64 // bits/s, 0 = none
	flows map[[2]string]float64
	inc   *bool // the activity's INC decision (plan v2)
}

// Event kinds.
const (
	evFlowDone = iota
	evComputeDone
	evRelease
	evDarkEnd
	evRamp // a flow in slow start doubles its window (tcpaware.go)
)

type event struct {
	t       int64
	kind    int
	id      int
	q       int // phase (compute done, release)
	version int32
}

type eventHeap []event

func (h eventHeap) Len() int           { return len(h) }
func (h eventHeap) Less(i, j int) bool { return h[i].t < h[j].t }
func (h eventHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *eventHeap) Push(x any)        { *h = append(*h, x.(event)) }
func (h *eventHeap) Pop() any {
	old := *h
	e := old[len(old)-1]
	*h = old[:len(old)-1]
	return e
}

// resource layout
func (s *Sim) serverUp(r, i int) int32 { return int32(r*s.f.ServersPerRack + i) }
func (s *Sim) serverDown(r, i int) int32 {
	return int32(s.f.Racks*s.f.ServersPerRack + r*s.f.ServersPerRack + i)
}
func (s *Sim) upTx(r, u int) int32 {
	return int32(2*s.f.Racks*s.f.ServersPerRack + r*s.f.UplinksPerToR + u)
}
func (s *Sim) coreUp(r int) int32 {
	return int32(2*s.f.Racks*s.f.ServersPerRack + s.f.Racks*s.f.UplinksPerToR + r)
}
func (s *Sim) coreDown(r int) int32 { return s.coreUp(r) + int32(s.f.Racks) }

func bytesPerSec(r scenario.Rate) float64 {
	if r == scenario.Unlimited {
		return math.Inf(1)
	}
	return float64(r) / 8
}

// payload is the share of a link's rate flows get (Options.Goodput).
func (o Options) payload() float64 {
	if o.Goodput > 0 && o.Goodput < 1 {
		return o.Goodput
	}
	return 1
}

// New prepares a simulation of jobs on a fabric.
func New(f scenario.Fabric, jobs []plan.Job, opt Options) *Sim {
	s := &Sim{f: f, opt: opt, byName: map[string]int{}, darkEnds: map[int64][]int32{}, incWindowBytes: float64(INCWindow(f) * INCSlotBytes)}
	n := 2*f.Racks*f.ServersPerRack + f.Racks*f.UplinksPerToR + 2*f.Racks
	s.res = make([]resource, n)
	if opt.LinkShares {
		s.linkTrace = make([][]linkSeg, n)
		s.queueTrace = make([][]step, n)
		s.incHops = map[[2]int32][]step{}
	}
	if f.HasOCS() {
		s.Stats.UplinkBytes = make([]float64, f.Racks*f.UplinksPerToR)
	}
	g := opt.payload()
	for i := 0; i < 2*f.Racks*f.ServersPerRack; i++ {
		s.res[i].capBps = g * bytesPerSec(f.Rates.Server)
	}
	for r := 0; r < f.Racks; r++ {
		for u := 0; u < f.UplinksPerToR; u++ {
			s.res[s.upTx(r, u)].capBps = g * bytesPerSec(f.Rates.Uplink)
		}
		core := math.Inf(1)
		if f.HasEPS() {
			core = g * bytesPerSec(f.CoreRate())
		}
		s.res[s.coreUp(r)].capBps = core
		s.res[s.coreDown(r)].capBps = core
	}
	s.fairPorts = f.SwitchQueue == topo.QueueFair
	for i := range jobs {
		j := &jobs[i]
		keys := j.Phases()
		np := len(keys)
		js := &jobState{j: j, keys: keys, keyIdx: make(map[plan.Key]int, np), succs: make([][]int, np),
			waiting: make([]int, np), notBefore: make([]int64, np), caps: make([]phaseCaps, np),
			flowsLeft: make([]int, np), bytes: make([]float64, np), timerAt: make([]int64, np), Start: make([]int64, np), End: make([]int64, np)}
		for q, k := range keys {
			js.keyIdx[k] = q
		}
		preds := j.Preds()
		for q, ps := range preds {
			if opt.Unchained[keys[q]] {
				ps = nil // its predecessors' ends take it below 0: never ready twice
			}
			js.waiting[q] = len(ps)
			for _, pq := range preds[q] {
				js.succs[pq] = append(js.succs[pq], q)
			}
			if len(ps) == 0 {
				js.ready = append(js.ready, q)
			}
		}
		for q := range js.notBefore {
			js.notBefore[q], js.timerAt[q] = -1, -1
			js.Start[q], js.End[q] = -1, -1
			if opt.ASAP {
				js.notBefore[q] = j.ArrivalNs
			}
		}
		s.byName[j.Name] = len(s.jobs)
		s.jobs = append(s.jobs, js)
	}
	s.paths = routing.NewPaths(f.Racks, circuit.Config{})
	if opt.ASAP {
		// Arrivals go through the event queue, so that OnPhaseStart,
		// set after New, sees every start.
		for ji, js := range s.jobs {
			heap.Push(&s.events, event{t: js.j.ArrivalNs, kind: evRelease, id: ji, q: -1})
		}
	}
	return s
}

// Now is the simulated time in ns.
func (s *Sim) Now() int64 { return s.now }

// SetCircuits installs a new circuit map now: ports whose circuit changes
// go dark for the reconfiguration delay, and every cross-rack flow whose
// path changes is rerouted over the new graph. The initial map is in place at time zero,
// set up before the run as the emulator does, so it causes no dark period.
func (s *Sim) SetCircuits(cfg circuit.Config, initial bool) {
	if !initial && s.paths != nil && sameConfig(s.circuits, cfg) {
		return // the same map: no port goes dark and every route stays
	}
	dark := s.darkPorts(cfg)
	if initial {
		dark = nil
	}
	if len(dark) > 0 {
		s.Stats.Reconfigurations++
		s.Stats.PortsReconfigured += len(dark)
	}
	if s.opt.DelayNs > 0 {
		until := s.now + s.opt.DelayNs
		for _, u := range dark {
			id := s.upTx(u.Rack, u.Port)
			s.res[id].darkUntil = until
			s.dirty = append(s.dirty, id)
			s.darkEnds[until] = append(s.darkEnds[until], id)
		}
		if len(dark) > 0 {
			heap.Push(&s.events, event{t: until, kind: evDarkEnd})
		}
	}
	hit := s.beforeSwitch(dark)
	s.circuits = cfg
	s.switchAt = s.now
	s.paths = s.paths.Switch(cfg)
	s.markShaken()
	live := s.live[:0]
	for _, fl := range s.live {
		if fl.done {
			continue
		}
		live = append(live, fl)
		if fl.srcRack == fl.dstRack {
			continue
		}
		if !scanAll && !s.mayMove(fl) {
			s.unmoved++
			continue
		}
		if !s.keepsPath(fl) {
			s.advance(fl)
			s.route(fl)
			s.dirtyF = append(s.dirtyF, fl)
		}
	}
	clear(s.live[len(live):])
	s.live = live
	s.afterSwitch(hit)
	s.recompute()
}

// Hold keeps a job of an ASAP simulation from starting until Admit: a
// scheduler that queues jobs for free servers, or delays a cohort, holds
// them at arrival. A held job is neither active nor in the demand. Only a
// job that has not started can be held.
func (s *Sim) Hold(ji int) {
	js := s.jobs[ji]
	if js.next > 0 || js.running > 0 {
		return
	}
	js.held = true
	for q := range js.notBefore {
		js.notBefore[q] = -1
	}
}

// Admit releases a held job's phases from time t (t >= Now).
func (s *Sim) Admit(ji int, t int64) {
	js := s.jobs[ji]
	if !js.held {
		return
	}
	js.held = false
	for q := range js.notBefore {
		js.notBefore[q] = t
	}
	s.tryStart(ji)
	s.recompute()
}

// Current returns the index of a job's current (or next) phase and
// whether it is running now.
func (s *Sim) Current(ji int) (q int, running bool) {
	return s.jobs[ji].next, s.jobs[ji].running > 0
}

// Held reports whether a job waits for Admit.
func (s *Sim) Held(ji int) bool { return s.jobs[ji].held }

func sameConfig(a, b circuit.Config) bool {
	if len(a.Circuits) != len(b.Circuits) {
		return false
	}
	for i := range a.Circuits {
		if a.Circuits[i] != b.Circuits[i] {
			return false
		}
	}
	return true
}

// Release makes phase q of a job eligible from time notBefore, with
// optional rate caps, as a plan's activity does.
func (s *Sim) Release(job string, key plan.Key, notBefore int64, a *plan.Activity) error {
	return s.ReleaseAll(job, []plan.Key{key}, notBefore, a)
}

// ReleaseAll is Release for several phases of one job at once: the phases
// that can start start together, with one rate computation (a per-rank
// expansion releases a phase's tasks so).
func (s *Sim) ReleaseAll(job string, keys []plan.Key, notBefore int64, a *plan.Activity) error {
	ji, ok := s.byName[job]
	if !ok {
		return fmt.Errorf("no job %q", job)
	}
	js := s.jobs[ji]
	for _, key := range keys {
		q, ok := js.keyIdx[key]
		if !ok {
			return fmt.Errorf("job %s has no %s", job, key)
		}
		js.notBefore[q] = notBefore
		if a != nil {
			js.caps[q].all = a.RateCapBps
			js.caps[q].inc = a.INC
			for _, fc := range a.Flows {
				if js.caps[q].flows == nil {
					js.caps[q].flows = map[[2]string]float64{}
				}
				js.caps[q].flows[[2]string{fc.Src, fc.Dst}] = fc.RateCapBps
			}
		}
	}
	s.tryStart(ji)
	s.recompute()
	return nil
}

// tryStart starts every phase of a job whose predecessors are done and
// that is released and due; a phase due later gets a release timer.
func (s *Sim) tryStart(ji int) {
	js := s.jobs[ji]
	if len(js.ready) == 0 {
		return
	}
	keep := js.ready[:0]
	var start []int
	for _, q := range js.ready {
		nb := js.notBefore[q]
		if nb < 0 {
			keep = append(keep, q)
			continue
		}
		t := max(nb, js.j.ArrivalNs)
		if t > s.now {
			if js.timerAt[q] != t {
				js.timerAt[q] = t
				heap.Push(&s.events, event{t: t, kind: evRelease, id: ji, q: q})
			}
			keep = append(keep, q)
			continue
		}
		start = append(start, q)
	}
	js.ready = keep
	for _, q := range start {
		s.startPhase(ji, q)
	}
}

func (s *Sim) startPhase(ji, q int) {
	js := s.jobs[ji]
	js.running++
	js.Start[q] = s.now
	if s.OnPhaseStart != nil {
		s.OnPhaseStart(ji, q, s.now)
	}
	k := js.keys[q]
	if d, ok := js.j.ComputeNsOf(k.Phase); ok {
		heap.Push(&s.events, event{t: s.now + d, kind: evComputeDone, id: ji, q: q})
		return
	}
	fls := s.phaseFlows(js, q)
	js.flowsLeft[q] = len(fls)
	if len(fls) == 0 {
		s.endPhase(ji, q)
		return
	}
	grp := int32(-1)
	for _, pf := range fls {
		js.bytes[q] += pf.Bytes
		fl := &flow{job: ji, phase: q, src: pf.Src, dst: pf.Dst, remaining: pf.Bytes, last: s.now, weight: 1,
			srcRack: plan.Rack(pf.Src), dstRack: plan.Rack(pf.Dst), upRes: -1, downRes: -1, capRes: -1, ssRes: -1, grpRes: -1}
		_, srcToR := names.ParseToR(pf.Src)
		_, dstToR := names.ParseToR(pf.Dst)
		fl.inc = srcToR || dstToR
		if fl.inc && s.opt.TCP != nil {
			if grp < 0 {
				s.res = append(s.res, resource{capBps: math.Inf(1)})
				grp = int32(len(s.res) - 1)
			}
			fl.grpRes = grp
		}
		if r, i, ok := names.ParseServer(pf.Src); ok {
			fl.upRes = s.serverUp(r, i)
		}
		if r, i, ok := names.ParseServer(pf.Dst); ok {
			fl.downRes = s.serverDown(r, i)
		}
		fl.hash = routing.AddrHash(endpointAddr(pf.Src), endpointAddr(pf.Dst))
		capBits := js.caps[q].all
		if c, ok := js.caps[q].flows[[2]string{pf.Src, pf.Dst}]; ok && (capBits == 0 || c < capBits) {
			capBits = c
		}
		if capBits > 0 {
			s.res = append(s.res, resource{capBps: capBits / 8})
			fl.capRes = int32(len(s.res) - 1)
		}
		s.route(fl)
		fl.id = len(s.flows)
		s.flows = append(s.flows, fl)
		s.live = append(s.live, fl)
		s.dirtyF = append(s.dirtyF, fl)
		if s.opt.SlowStart != nil && !fl.inc {
			s.startSlowStart(fl)
		}
	}
}

// phaseFlows returns the flows of phase q, with the activity's INC
// decision if it made one.
func (s *Sim) phaseFlows(js *jobState, q int) []plan.Flow {
	return js.j.FlowsINC(js.keys[q].Phase, js.j.EffectiveINC(js.caps[q].inc))
}

// endPhase marks phase q done and starts what waited for it.
func (s *Sim) endPhase(ji, q int) {
	js := s.jobs[ji]
	js.End[q] = s.now
	js.running--
	if s.OnPhaseEnd != nil {
		s.OnPhaseEnd(ji, q, s.now)
	}
	for js.next < len(js.keys) && js.End[js.next] >= 0 {
		js.next++
	}
	for _, sq := range js.succs[q] {
		if js.waiting[sq]--; js.waiting[sq] == 0 {
			js.ready = append(js.ready, sq)
		}
	}
	s.tryStart(ji)
}

// route (re)computes a flow's resources from the current circuits.
func (s *Sim) route(fl *flow) {
	for i, r := range fl.res {
		s.detach(fl, r, fl.pos[i])
	}
	fl.res, fl.pos = fl.res[:0], fl.pos[:0]
	fl.noPath, fl.hops = false, 0
	rs := fl.res // reused: its resources were detached above
	if fl.upRes >= 0 {
		rs = append(rs, fl.upRes)
	}
	if fl.srcRack != fl.dstRack {
		path, ok := s.path(fl)
		switch {
		case ok:
			fl.pathAt = len(rs)
			rs = append(rs, path...)
			fl.hops = len(path)
		case s.f.HasEPS():
			rs = append(rs, s.coreUp(fl.srcRack), s.coreDown(fl.dstRack))
		default:
			fl.noPath = true
		}
	}
	if fl.downRes >= 0 {
		rs = append(rs, fl.downRes)
	}
	if fl.capRes >= 0 {
		rs = append(rs, fl.capRes)
	}
	if fl.grpRes >= 0 {
		rs = append(rs, fl.grpRes)
	}
	if fl.ssRes >= 0 {
		rs = append(rs, fl.ssRes)
	}
	fl.res = rs
	for _, r := range rs {
		fl.pos = append(fl.pos, len(s.res[r].flows))
		s.res[r].flows = append(s.res[r].flows, fl)
	}
}

// path follows the routing table hop by hop, choosing among equal next
// hops with routing.Pick and the flow's routing.AddrHash, which the ToR's
// kernel path program computes too: the emulation sends the flow the same
// way.
func (s *Sim) path(fl *flow) ([]int32, bool) {
	ups, lit, ok := s.pathOf(fl)
	if fl.lit = lit; lit {
		s.litFlows = append(s.litFlows, fl)
	}
	if !ok {
		return nil, false
	}
	out := make([]int32, len(ups))
	for i, u := range ups {
		out[i] = s.upTx(u.Rack, u.Port)
	}
	return out, true
}

// pathOf is path without its effects on the flow: the uplinks it would
// leave on now.
func (s *Sim) pathOf(fl *flow) (ups []circuit.Uplink, lit, ok bool) {
	if !s.f.HasOCS() {
		return nil, false, false
	}
	choose := func(cur int, hops []routing.Hop) routing.Choice {
		return routing.Choose(hops, s.switchAt, func(u int) int64 { return s.res[s.upTx(cur, u)].darkUntil })
	}
	return hopPath(s.paths, s.f.Racks, fl.srcRack, fl.dstRack, fl.hash, choose, s.now)
}

// scanAll makes every switch look at every cross-rack flow's path, as
// before mayMove: tests compare the two.
var scanAll bool

// markShaken marks, after a switch, the racks where a flow may now leave
// on another uplink towards a destination whose search the switch kept
// (routing.Paths.Switch): those whose ways out changed, and those with an
// uplink dark now, around which make-before-break chooses.
func (s *Sim) markShaken() {
	if s.shaken == nil {
		s.shaken = make([]bool, s.f.Racks)
	}
	for r := range s.shaken {
		s.shaken[r] = s.paths.Moved(r)
	}
	for until, ids := range s.darkEnds {
		if until <= s.now {
			continue
		}
		for _, id := range ids {
			// Uplinks only: the TCP-aware model stalls flows with
			// dark periods of their own (tcpreconfig.go).
			if id >= s.upTx(0, 0) && id < s.coreUp(0) && s.res[id].darkUntil > s.now {
				s.shaken[s.uplinkRack(id)] = true
			}
		}
	}
}

// uplinkRack is the rack of an uplink's resource (upTx).
func (s *Sim) uplinkRack(id int32) int { return int(id-s.upTx(0, 0)) / s.f.UplinksPerToR }

// mayMove reports whether a switch may have changed a cross-rack flow's
// path: it is on make-before-break's hops, or the switch dropped the
// search towards its destination rack (its hop counts changed), or it
// leaves a rack that markShaken marked. Any other flow is on the path
// keepsPath would find, and the switch need not look at it further.
func (s *Sim) mayMove(fl *flow) bool {
	if fl.lit || !s.paths.Kept(fl.dstRack) {
		return true
	}
	if fl.hops == 0 {
		return s.shaken[fl.srcRack]
	}
	for _, id := range fl.res[fl.pathAt : fl.pathAt+fl.hops] {
		if s.shaken[s.uplinkRack(id)] {
			return true
		}
	}
	return false
}

// keepsPath reports whether a cross-rack flow's path over newly switched
// circuits is the one it is on (and neither is make-before-break's), so
// a switch need not reroute it, nor recompute its rate unless a resource
// it shares changes: the cost of a switch follows the flows it moves.
func (s *Sim) keepsPath(fl *flow) bool {
	if fl.lit {
		return false
	}
	ups, lit, ok := s.pathOf(fl)
	switch {
	case lit:
		return false
	case !ok:
		return fl.hops == 0 // still over the packet core, or still no path
	case fl.hops != len(ups):
		return false
	}
	for i, u := range ups {
		if fl.res[fl.pathAt+i] != s.upTx(u.Rack, u.Port) {
			return false
		}
	}
	return true
}

// hopPath follows the next hops from rack src to rack dst, choosing at
// every ToR with its routing.Choice (choose) at time now and the flow's
// hash, and returns the uplinks the flow leaves on; lit says whether a
// ToR chose among the hops lit at the switch (make-before-break), so the
// path changes when that ends.
func hopPath(p *routing.Paths, racks, src, dst int, hash uint32, choose func(cur int, hops []routing.Hop) routing.Choice, now int64) (ups []circuit.Uplink, lit, ok bool) {
	var out []circuit.Uplink
	for cur := src; cur != dst; {
		ch := choose(cur, p.Next(cur, dst))
		h, ok := ch.Pick(hash, now)
		if !ok || len(out) > racks {
			return nil, lit, false
		}
		lit = lit || ch.Lit != nil && now < ch.LitUntil
		out = append(out, circuit.Uplink{Rack: cur, Port: h.Uplink})
		cur = h.Via
	}
	return out, lit, true
}

// FlowPath returns the circuit path the model gives a flow between two
// endpoints (servers "r0s1" or ToRs "tor2") at time now, over a circuit
// configuration that switched at instant at with the uplinks dark until
// darkUntil (nil: none dark): the uplink it leaves each ToR on. ok is
// false when there is no circuit path. The ToRs' kernel path program
// (ocsfabric/torpath) chooses the same uplinks; a kernel test
// (emu/paths_linux_test.go) compares them on real frames.
func FlowPath(racks int, cfg circuit.Config, at, now int64, darkUntil func(circuit.Uplink) int64, src, dst string) (uplinks []circuit.Uplink, ok bool) {
	sr, dr := plan.Rack(src), plan.Rack(dst)
	if sr < 0 || dr < 0 || sr >= racks || dr >= racks {
		return nil, false
	}
	choose := func(cur int, hops []routing.Hop) routing.Choice {
		if darkUntil == nil {
			return routing.Choice{All: hops}
		}
		return routing.Choose(hops, at, func(u int) int64 { return darkUntil(circuit.Uplink{Rack: cur, Port: u}) })
	}
	ups, _, ok := hopPath(routing.NewPaths(racks, cfg), racks, sr, dr, routing.AddrHash(endpointAddr(src), endpointAddr(dst)), choose, now)
	return ups, ok
}

// detach removes a flow from a resource's list (swap-remove).
func (s *Sim) detach(fl *flow, r int32, pos int) {
	lst := s.res[r].flows
	last := lst[len(lst)-1]
	lst[pos] = last
	for i, rr := range last.res {
		if rr == r {
			last.pos[i] = pos
			break
		}
	}
	s.res[r].flows = lst[:len(lst)-1]
	s.dirty = append(s.dirty, r)
}

// advance brings a flow's remaining bytes up to now.
func (s *Sim) advance(fl *flow) {
	if dt := s.now - fl.last; dt > 0 && fl.rate > 0 {
		sent := math.Min(fl.remaining, fl.rate*float64(dt)/1e9)
		fl.remaining -= sent
		if s.linkTrace != nil && sent > 0 {
			s.traceLinks(fl, sent)
		}
		if fl.hops > 0 {
			s.Stats.OCSBytes += sent
			s.Stats.CircuitHopBytes += sent * float64(fl.hops)
			base := s.upTx(0, 0)
			for _, r := range fl.res[fl.pathAt : fl.pathAt+fl.hops] {
				s.Stats.UplinkBytes[r-base] += sent
			}
		}
	}
	fl.last = s.now
}

// RunUntil processes events up to and including time t (inf: all).
func (s *Sim) RunUntil(t int64) {
	for len(s.events) > 0 && s.events[0].t <= t {
		now := s.events[0].t
		s.now = now
		for len(s.events) > 0 && s.events[0].t == now {
			e := heap.Pop(&s.events).(event)
			s.Stats.Events++
			s.handle(e)
		}
		s.recompute()
	}
	if t != inf && t > s.now {
		s.now = t
	}
}

// Idle reports whether nothing is left to happen.
func (s *Sim) Idle() bool { return len(s.events) == 0 }

func (s *Sim) handle(e event) {
	switch e.kind {
	case evComputeDone:
		s.endPhase(e.id, e.q)
	case evRelease:
		js := s.jobs[e.id]
		if e.q >= 0 && js.timerAt[e.q] == e.t {
			js.timerAt[e.q] = -1
		}
		s.tryStart(e.id)
	case evDarkEnd:
		// The affected resources were marked dirty when they went dark;
		// mark the ones whose dark period ends now.
		for _, i := range s.darkEnds[e.t] {
			if s.res[i].darkUntil == e.t && len(s.res[i].flows) > 0 {
				s.dirty = append(s.dirty, i)
			}
		}
		delete(s.darkEnds, e.t)
		// Flows kept off dark hops (make-before-break) take their hashed
		// hop again once a dark period ends, as the ToRs' kernel paths do.
		lit := s.litFlows
		s.litFlows = nil
		for _, fl := range lit {
			if fl.lit && !fl.done {
				s.advance(fl)
				s.route(fl)
				s.dirtyF = append(s.dirtyF, fl)
			}
		}
	case evRamp:
		s.ramp(e)
	case evFlowDone:
		fl := s.flows[e.id]
		if fl.done || fl.version != e.version {
			return
		}
		s.advance(fl)
		if fl.remaining > 1e-6*math.Max(1, fl.remaining+fl.rate) && fl.remaining > 0.5 {
			s.dirtyF = append(s.dirtyF, fl) // rounding: not quite done
			return
		}
		fl.done = true
		fl.remaining = 0
		if s.opt.SlowStart != nil {
			s.connIdleFrom(fl)
		}
		for i, r := range fl.res {
			s.detach(fl, r, fl.pos[i])
		}
		fl.res, fl.pos = nil, nil
		js := s.jobs[fl.job]
		js.flowsLeft[fl.phase]--
		if js.flowsLeft[fl.phase] == 0 {
			s.endPhase(fl.job, fl.phase)
		}
	}
}

// endpointAddr is the address a flow endpoint sends from and to, which
// the path hash reads: a server's address, or for a ToR (in-network
// aggregation) its gateway address 10.(r>>8).(r&255).254, the one its
// servers reach it at. An aggregator must send from and to these
// addresses for the kernel to route its flows as the model does.
func endpointAddr(endpoint string) netip.Addr {
	if r, i, ok := names.ParseServer(endpoint); ok {
		return topo.ServerAddr(r, i)
	}
	if r, ok := names.ParseToR(endpoint); ok {
		return topo.GatewayAddr(r)
	}
	return netip.Addr{}
}
