package inc

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"sort"
	"sync"
	"sync/atomic"
)

// ErrNoRoom is returned by Admit when the ToR already aggregates as many
// jobs as its capacity allows; the job falls back to a CPU parameter server.
var ErrNoRoom = errors.New("no aggregation capacity left on this ToR")

// Config sizes an aggregator's switch memory.
type Config struct {
	// Slots is the pool of slots (each with two sets of MaxElems
	// elements), partitioned equally among at most Capacity jobs.
	Slots int
	// Capacity is how many jobs aggregate at once (fabric.inc.capacity).
	Capacity int
}

// DefaultSlots is the slot pool of an aggregator unless told otherwise.
const DefaultSlots = 1024

// Validate checks the sizes.
func (c Config) Validate() error {
	if c.Capacity < 1 || c.Capacity > 1<<10 {
		return fmt.Errorf("inc: capacity %d, want 1..1024 jobs", c.Capacity)
	}
	if c.Slots < c.Capacity || c.Slots > 1<<20 {
		return fmt.Errorf("inc: %d slots for %d jobs: want at least one slot per job and at most %d", c.Slots, c.Capacity, 1<<20)
	}
	return nil
}

// Partition is the number of slots each admitted job gets.
func (c Config) Partition() int { return min(c.Slots/c.Capacity, MaxSlots) }

// JobConfig is what the orchestrator tells a ToR's aggregator about one
// job it admits.
type JobConfig struct {
	ID uint16 `json:"id"`
	// ToRs is the number of ToRs the job's workers sit under (its racks);
	// with more than one, aggregation is hierarchical.
	ToRs int `json:"tors"`
	// Index is this ToR's contributor index among the job's ToRs (the
	// Worker field of its partial sums).
	Index int `json:"index"`
	// Parent is the root ToR's aggregator, where this ToR sends partial
	// sums; unset on the root ToR and for single-rack jobs.
	Parent netip.AddrPort `json:"parent,omitzero"`
	// Roots, when set, spreads the root over the job's ToRs by slot:
	// slot s is rooted at the ToR of index s mod ToRs, whose aggregator is
	// Roots[s mod ToRs] (this ToR's own entry is not used). No one ToR
	// then takes every partial sum in: each ToR's uplink carries
	// (ToRs-1)/ToRs of the tensor each way, as a ring's reduce-scatter
	// and all-gather would, instead of the root's (ToRs-1) tensors in and
	// out (docs/inc.md, "Spread roots"). Parent must be unset.
	Roots []netip.AddrPort `json:"roots,omitempty"`
	// FirstStage and LastStage bound the plan stages the job is active
	// in. Capacity counts the jobs active in one stage, as the plan check
	// and the scheduler do; jobs admitted without stages all share stage 0.
	FirstStage int `json:"first_stage,omitempty"`
	LastStage  int `json:"last_stage,omitempty"`
}

func (j JobConfig) validate() error {
	if j.ToRs < 1 || j.ToRs > MaxContributors || j.Index < 0 || j.Index >= j.ToRs {
		return fmt.Errorf("inc: job %d: ToR %d of %d, want 0 <= index < tors <= %d", j.ID, j.Index, j.ToRs, MaxContributors)
	}
	if j.FirstStage < 0 || j.LastStage < j.FirstStage {
		return fmt.Errorf("inc: job %d: stages %d..%d", j.ID, j.FirstStage, j.LastStage)
	}
	if j.ToRs == 1 && (j.Parent.IsValid() || len(j.Roots) > 0) {
		return fmt.Errorf("inc: job %d: a single-rack job has no parent aggregator", j.ID)
	}
	if len(j.Roots) > 0 {
		if j.Parent.IsValid() {
			return fmt.Errorf("inc: job %d: a parent and spread roots at once", j.ID)
		}
		if len(j.Roots) != j.ToRs {
			return fmt.Errorf("inc: job %d: %d spread roots for %d ToRs", j.ID, len(j.Roots), j.ToRs)
		}
		for i, r := range j.Roots {
			if i != j.Index && !r.IsValid() {
				return fmt.Errorf("inc: job %d: root %d has no address", j.ID, i)
			}
		}
	}
	return nil
}

func (j JobConfig) equal(o JobConfig) bool {
	return j.ID == o.ID && j.ToRs == o.ToRs && j.Index == o.Index && j.Parent == o.Parent &&
		j.FirstStage == o.FirstStage && j.LastStage == o.LastStage && slices.Equal(j.Roots, o.Roots)
}

// Stats are an aggregator's counters.
type Stats struct {
	Packets     uint64 `json:"packets"`     // INC packets handled
	Elements    uint64 `json:"elements"`    // elements added into slots
	Completions uint64 `json:"completions"` // slots whose sum completed here (root or flat) or arrived from the root
	Duplicates  uint64 `json:"duplicates"`  // retransmissions of blocks already counted
	Unicasts    uint64 `json:"unicasts"`    // results resent to one sender after a retransmission
	Results     uint64 `json:"results"`     // result packets sent
	Partials    uint64 `json:"partials"`    // partial sums sent up to a root ToR (resends included)
	Stale       uint64 `json:"stale"`       // packets of an earlier round or not matching their slot, dropped
	Refusals    uint64 `json:"refusals"`    // jobs refused for want of capacity
	Unknown     uint64 `json:"unknown"`     // packets of jobs not admitted (answered with TypeRefused)
	Malformed   uint64 `json:"malformed"`   // packets that failed to decode or addressed no slot
	Jobs        int    `json:"jobs"`        // jobs admitted now
	// HoldNs sums, over the datagrams the server read (Holds of them), the
	// time from their arrival in the kernel to the end of the send of the
	// batch they came in: the aggregator's hop, its wake-up and work, which
	// a block's round trip pays at every aggregator it crosses.
	HoldNs uint64 `json:"hold_ns"`
	Holds  uint64 `json:"holds"`
}

type counters struct {
	packets, elements, completions, duplicates, unicasts, results, partials, stale, refusals, unknown, malformed atomic.Uint64
	holdNs, holds                                                                                                atomic.Uint64
}

// slot is one set (shadow copy) of one aggregation slot.
type slot struct {
	bitmap uint64 // contributors counted this round
	count  uint16 // contributors counted
	want   uint16 // contributors that complete it
	n      uint16 // elements
	packet uint32 // block the round aggregates
	exp    int8
	done   bool  // the final sum is in vals
	flags  Flags // of the result: every copy carries the same
	vals   []int32
	// wire is the slot's values in wire order, encoded once however many
	// copies go out (results to every worker and ToR, unicasts, partials);
	// valid when wired. A complete slot sends wire, not vals.
	wire  []byte
	wired bool
	// raw: the round's only contribution so far is in wire as it came,
	// and vals are not decoded. A slot one contributor completes (a rack
	// with one worker; a result passed on) is then never converted at
	// all, and the second contribution decodes and adds in one pass.
	raw bool
}

// bytes returns the slot's values in wire order, encoding them the first
// time.
func (s *slot) bytes() []byte {
	if !s.wired {
		s.wire = s.wire[:4*int(s.n)]
		putElems(s.wire, s.vals[:s.n])
		s.wired = true
	}
	return s.wire
}

// table is a job's slots at one level: [slot][set].
type table [][2]slot

func newTable(n int) table {
	t := make(table, n)
	mem := make([]int32, 2*n*MaxElems)
	wire := make([]byte, 2*n*4*MaxElems)
	for i := range t {
		for s := 0; s < 2; s++ {
			t[i][s].vals = mem[:MaxElems:MaxElems]
			t[i][s].wire = wire[: 4*MaxElems : 4*MaxElems]
			mem, wire = mem[MaxElems:], wire[4*MaxElems:]
		}
	}
	return t
}

type job struct {
	cfg      JobConfig
	local    table // the workers of this ToR
	upper    table // the job's ToRs (root of a multi-rack job only)
	workers  [MaxContributors]netip.AddrPort
	children [MaxContributors]netip.AddrPort
	// congested: a worker of the job timed out (a retransmission, or a
	// marked partial from a ToR below) since the last mark went out.
	congested bool
}

// mark returns the congestion flag for the next sum or partial this ToR
// sends, and clears it: ATP marks the aggregated result, so that every
// worker of the job sees the same signal.
func (j *job) mark() Flags {
	if !j.congested {
		return 0
	}
	j.congested = false
	return FlagCongestion
}

// root reports whether this ToR completes the sums of a slot: the job's
// root ToR, or with spread roots the ToR of index slot mod ToRs.
func (j *job) root(slot uint16) bool {
	if len(j.cfg.Roots) > 0 {
		return int(slot)%j.cfg.ToRs == j.cfg.Index
	}
	return j.cfg.ToRs > 1 && !j.cfg.Parent.IsValid()
}

// parent is the aggregator a slot's partial sum goes up to, or the zero
// address where this ToR completes the slot itself.
func (j *job) parent(slot uint16) netip.AddrPort {
	if len(j.cfg.Roots) > 0 && !j.root(slot) {
		return j.cfg.Roots[int(slot)%j.cfg.ToRs]
	}
	if len(j.cfg.Roots) > 0 {
		return netip.AddrPort{}
	}
	return j.cfg.Parent
}

// Emit sends one packet; payload is its elements in wire order (4·Count
// bytes). The engine reuses h and payload after Emit returns.
type Emit func(to netip.AddrPort, h *Header, payload []byte)

// Engine is one ToR's aggregator: a pure state machine that takes decoded
// packets and emits packets. Handle runs on one goroutine; Admit, Release,
// Jobs and Stats may be called from others.
type Engine struct {
	cfg  Config
	mu   sync.RWMutex // guards jobs against Admit/Release
	jobs map[uint16]*job
	c    counters
	out  Header
}

// NewEngine returns an aggregator with the given memory.
func NewEngine(cfg Config) (*Engine, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &Engine{cfg: cfg, jobs: map[uint16]*job{}}, nil
}

// Config returns the engine's memory configuration.
func (e *Engine) Config() Config { return e.cfg }

// Admit gives a job a partition of the slot pool, or ErrNoRoom when
// Capacity admitted jobs are already active in one of its stages.
// Admitting a job again with the same configuration is a no-op.
func (e *Engine) Admit(cfg JobConfig) error {
	if err := cfg.validate(); err != nil {
		return err
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if j, ok := e.jobs[cfg.ID]; ok {
		if j.cfg.equal(cfg) {
			return nil
		}
		return fmt.Errorf("inc: job %d is already admitted with another configuration", cfg.ID)
	}
	for s := cfg.FirstStage; s <= cfg.LastStage; s++ {
		n := 0
		for _, o := range e.jobs {
			if o.cfg.FirstStage <= s && s <= o.cfg.LastStage {
				n++
			}
		}
		if n >= e.cfg.Capacity {
			e.c.refusals.Add(1)
			return fmt.Errorf("job %d: %w (%d jobs in stage %d)", cfg.ID, ErrNoRoom, n, s)
		}
	}
	// Each job gets its own partition's worth of memory: jobs that are
	// never active in the same stage could reuse one partition (the first
	// writer overwrites), but a job running late would then share it.
	j := &job{cfg: cfg, local: newTable(e.cfg.Partition())}
	if cfg.ToRs > 1 && !cfg.Parent.IsValid() { // the root of some slots
		j.upper = newTable(e.cfg.Partition())
	}
	e.jobs[cfg.ID] = j
	return nil
}

// Release frees a job's partition.
func (e *Engine) Release(id uint16) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	_, ok := e.jobs[id]
	delete(e.jobs, id)
	return ok
}

// Jobs returns the admitted jobs, by ID.
func (e *Engine) Jobs() []JobConfig {
	e.mu.RLock()
	defer e.mu.RUnlock()
	out := make([]JobConfig, 0, len(e.jobs))
	for _, j := range e.jobs {
		out = append(out, j.cfg)
	}
	sort.Slice(out, func(a, b int) bool { return out[a].ID < out[b].ID })
	return out
}

// Stats returns the counters now.
func (e *Engine) Stats() Stats {
	e.mu.RLock()
	n := len(e.jobs)
	e.mu.RUnlock()
	return Stats{Packets: e.c.packets.Load(), Elements: e.c.elements.Load(), Completions: e.c.completions.Load(),
		Duplicates: e.c.duplicates.Load(), Unicasts: e.c.unicasts.Load(), Results: e.c.results.Load(),
		Partials: e.c.partials.Load(), Stale: e.c.stale.Load(), Refusals: e.c.refusals.Load(),
		Unknown: e.c.unknown.Load(), Malformed: e.c.malformed.Load(), Jobs: n, HoldNs: e.c.holdNs.Load(), Holds: e.c.holds.Load()}
}

// Held counts n datagrams' summed time from their arrival to the send
// their batch ended with (Stats.HoldNs).
func (e *Engine) Held(ns int64, n int) {
	if n > 0 && ns >= 0 {
		e.c.holdNs.Add(uint64(ns))
		e.c.holds.Add(uint64(n))
	}
}

// Malformed counts a packet that failed to decode before reaching Handle.
func (e *Engine) Malformed() { e.c.malformed.Add(1) }

// Handle processes one decoded packet from a sender; h.Payload holds its
// elements in wire order. Replies go out through emit.
func (e *Engine) Handle(from netip.AddrPort, h *Header, emit Emit) {
	e.c.packets.Add(1)
	e.mu.RLock()
	j := e.jobs[h.Job]
	e.mu.RUnlock()
	if j == nil {
		if h.Type == TypeData || h.Type == TypePartial {
			e.c.unknown.Add(1)
			e.out = Header{Type: TypeRefused, Job: h.Job, Worker: h.Worker, Workers: h.Workers, Slot: h.Slot, Set: h.Set, Packet: h.Packet}
			emit(from, &e.out, nil)
		}
		return
	}
	if int(h.Slot) >= len(j.local) || h.Workers == 0 || h.Worker >= h.Workers {
		e.c.malformed.Add(1)
		return
	}
	switch h.Type {
	case TypeData:
		j.workers[h.Worker] = from
		j.congested = j.congested || h.Flags&FlagRetransmit != 0
		e.data(j, h, emit)
	case TypePartial:
		if !j.root(h.Slot) || int(h.Workers) != j.cfg.ToRs {
			e.c.malformed.Add(1)
			return
		}
		j.children[h.Worker] = from
		j.congested = j.congested || h.Flags&FlagCongestion != 0
		e.upper(j, h, h.Payload, emit)
	case TypeResult:
		e.result(j, h, emit)
	default:
		e.c.malformed.Add(1)
	}
}

// contribute counts one contributor's block into t[h.Slot][h.Set] (SwitchML
// bitmap rules) and reports whether the slot completed with it. A
// retransmission returns dup; the slot is then left as it was.
func (e *Engine) contribute(t table, h *Header, payload []byte) (s *slot, complete, dup bool) {
	pair := &t[h.Slot]
	s = &pair[h.Set&1]
	bit := uint64(1) << h.Worker
	if s.want > 0 && older(h.Packet, s.packet) {
		// A late copy of a round this set has left (a retransmission
		// delayed in a queue): it must touch neither set, or it would
		// clear a contributor of the other set's round, or restart this
		// set's round with a block every sender has left behind.
		e.c.stale.Add(1)
		return s, false, false
	}
	if o := &pair[1-h.Set&1]; o.want == 0 || older(o.packet, h.Packet) {
		o.bitmap &^= bit // the sender has moved past the other set's round
	}
	if s.bitmap&bit != 0 || s.want > 0 && s.count >= s.want && h.Packet == s.packet {
		// Counted already (its bit may have been cleared since, when it
		// moved on to the other set): a copy of this round.
		if s.packet != h.Packet {
			e.c.stale.Add(1)
			return s, false, false
		}
		e.c.duplicates.Add(1)
		return s, false, true
	}
	if s.count >= s.want { // first writer of a new round overwrites
		*s = slot{bitmap: bit, count: 1, want: h.Workers, n: h.Count, packet: h.Packet, exp: h.Exp, vals: s.vals,
			wire: append(s.wire[:0], payload[:4*int(h.Count)]...), wired: true, raw: true}
	} else {
		if h.Packet != s.packet || h.Count != s.n || h.Workers != s.want {
			e.c.stale.Add(1)
			return s, false, false
		}
		s.bitmap |= bit
		s.count++
		add(s, h.Exp, payload)
	}
	e.c.elements.Add(uint64(h.Count))
	return s, s.count == s.want, false
}

// older reports whether block a precedes block b (serial numbers: the
// workers number blocks on from one all-reduce to the next).
func older(a, b uint32) bool { return int32(a-b) < 0 }

// add adds wire-order elements with exponent exp into s, rescaling to the
// coarser of the two exponents.
func add(s *slot, exp int8, payload []byte) {
	s.wired = false
	if s.raw {
		s.raw = false
		if exp == s.exp {
			sumElems(s.vals[:s.n], s.wire, payload)
			return
		}
		getElems(s.vals[:s.n], s.wire)
	}
	if exp < s.exp {
		d := int(s.exp) - int(exp)
		for i := range int(s.n) {
			s.vals[i] = shift(s.vals[i], d)
		}
		s.exp = exp
	}
	d := int(exp) - int(s.exp)
	v := s.vals[:s.n]
	if d == 0 {
		addElems(v, payload)
		return
	}
	for i := range v {
		v[i] += shift(int32(binary.LittleEndian.Uint32(payload[4*i:])), d)
	}
}

// data handles a worker's block.
func (e *Engine) data(j *job, h *Header, emit Emit) {
	s, complete, dup := e.contribute(j.local, h, h.Payload)
	switch {
	case dup && s.done:
		// Retransmission after the sum completed: its result was lost on
		// the way to this sender only (SwitchML unicast).
		e.c.unicasts.Add(1)
		e.send(emit, j.workers[h.Worker], TypeResult, j.cfg.ID, h.Worker, s.want, h.Slot, h.Set, s)
	case dup && s.count == s.want && j.parent(h.Slot).IsValid():
		// Locally complete but no result from the root yet: the partial
		// or the result may have been lost between the ToRs.
		e.sendPartial(j, h.Slot, h.Set, s, emit)
	case complete && j.root(h.Slot):
		e.upper(j, &Header{Type: TypePartial, Job: h.Job, Worker: uint16(j.cfg.Index), Workers: uint16(j.cfg.ToRs),
			Slot: h.Slot, Set: h.Set, Count: s.n, Packet: s.packet, Exp: s.exp}, s.bytes(), emit)
	case complete && j.parent(h.Slot).IsValid():
		e.sendPartial(j, h.Slot, h.Set, s, emit)
	case complete:
		s.done, s.flags = true, j.mark()
		e.c.completions.Add(1)
		e.multicast(j, h.Slot, h.Set, s, emit)
	}
}

// upper counts a ToR's partial sum (h, payload in wire order) at the
// job's root ToR: from a ToR below, or the root's own local sum.
func (e *Engine) upper(j *job, h *Header, payload []byte, emit Emit) {
	u, complete, dup := e.contribute(j.upper, h, payload)
	switch {
	case dup && u.done && int(h.Worker) != j.cfg.Index:
		e.c.unicasts.Add(1)
		e.send(emit, j.children[h.Worker], TypeResult, j.cfg.ID, h.Worker, u.want, h.Slot, h.Set, u)
	case complete:
		u.done, u.flags = true, j.mark()
		e.c.completions.Add(1)
		for c := 0; c < j.cfg.ToRs; c++ {
			if c != j.cfg.Index {
				e.send(emit, j.children[c], TypeResult, j.cfg.ID, uint16(c), u.want, h.Slot, h.Set, u)
			}
		}
		e.finish(j, h.Slot, h.Set, u, emit)
	}
}

// result handles the root's sum arriving at a ToR below it.
func (e *Engine) result(j *job, h *Header, emit Emit) {
	if !j.parent(h.Slot).IsValid() {
		e.c.malformed.Add(1)
		return
	}
	s := &j.local[h.Slot][h.Set&1]
	if s.count != s.want || s.packet != h.Packet || s.n != h.Count || s.done {
		e.c.stale.Add(1) // a second copy, or a round this ToR has left
		return
	}
	s.wire = append(s.wire[:0], h.Payload[:4*int(h.Count)]...) // passed on as it came
	s.wired = true
	s.exp, s.flags = h.Exp, h.Flags&FlagCongestion
	e.c.completions.Add(1)
	e.finish(j, h.Slot, h.Set, s, emit)
}

// finish puts a job's final sum into its local slot and sends it to the
// ToR's workers.
func (e *Engine) finish(j *job, slotIdx uint16, set uint8, sum *slot, emit Emit) {
	s := &j.local[slotIdx][set&1]
	if s != sum {
		s.wire = append(s.wire[:0], sum.bytes()...)
		s.wired = true
		s.exp, s.flags = sum.exp, sum.flags
	}
	s.done = true
	e.multicast(j, slotIdx, set, s, emit)
}

func (e *Engine) multicast(j *job, slotIdx uint16, set uint8, s *slot, emit Emit) {
	for w := uint16(0); w < s.want; w++ {
		e.send(emit, j.workers[w], TypeResult, j.cfg.ID, w, s.want, slotIdx, set, s)
	}
}

func (e *Engine) sendPartial(j *job, slotIdx uint16, set uint8, s *slot, emit Emit) {
	e.c.partials.Add(1)
	e.out = Header{Type: TypePartial, Job: j.cfg.ID, Worker: uint16(j.cfg.Index), Workers: uint16(j.cfg.ToRs),
		Slot: slotIdx, Set: set, Packet: s.packet, Exp: s.exp, Flags: j.mark()}
	emit(j.parent(slotIdx), &e.out, s.bytes())
}

func (e *Engine) send(emit Emit, to netip.AddrPort, t Type, jobID, w, want, slotIdx uint16, set uint8, s *slot) {
	if t == TypeResult {
		e.c.results.Add(1)
	}
	e.out = Header{Type: t, Job: jobID, Worker: w, Workers: want, Slot: slotIdx, Set: set, Packet: s.packet, Exp: s.exp, Flags: s.flags}
	emit(to, &e.out, s.bytes())
}
