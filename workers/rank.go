// Package workers plays the ranks of training jobs: each rank is a
// process in its server's namespace that alternates compute (a timed wait
// that burns no CPU) with real collective traffic over TCP, gated by the
// plan, and records exactly what happened. A coordinator (coordinator.go)
// hands out time zero and, in barrier mode, the stage starts.
package workers

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"runtime"
	"strconv"
	"sync"
	"syscall"
	"time"

	incwire "github.com/ocsemu/ocsemu/dataplane/inc"
	"github.com/ocsemu/ocsemu/dataplane/names"
	"github.com/ocsemu/ocsemu/dataplane/topo"
	"github.com/ocsemu/ocsemu/workers/inc"

	"golang.org/x/sys/unix"

	"github.com/ocsemu/ocsemu/dataplane/monoclock"
	"github.com/ocsemu/ocsemu/dataplane/netns"
	"github.com/ocsemu/ocsemu/dataplane/safefile"
	"github.com/ocsemu/ocsemu/workers/collective"
	"github.com/ocsemu/ocsemu/workers/job"
)

// PSRank is the rank of a job's CPU parameter server.
const PSRank = -1

// Gate says when one phase may start.
type Gate struct {
	Stage int `json:"stage"` // plan stage it starts in (barrier mode)
	// NotBeforeNs is the earliest start, from time zero (-1: none).
	NotBeforeNs int64 `json:"not_before_ns"`
}

// Spec is everything one rank process needs.
type Spec struct {
	Job  job.Job `json:"job"`
	Rank int     `json:"rank"` // 0..n-1, or PSRank
	// Addrs maps every server of the job to its address.
	Addrs map[string]string `json:"addrs"`
	// Ports[r] is the port rank r listens on, and Ports[n] the parameter
	// server's (ps pattern). Ports are unique per server namespace, not
	// per job (see BasePort).
	Ports []int  `json:"ports"`
	CC    string `json:"congestion_control"`
	// Mode is "" (built-in: start at time zero and iterate), "clock" or
	// "barrier"; Gates then has one entry per phase of the job.
	Mode  string `json:"mode"`
	Gates []Gate `json:"gates,omitempty"`
	// Verify checks every reduction and every byte received.
	Verify       bool          `json:"verify"`
	Timeout      time.Duration `json:"timeout"`
	TCPInfoEvery time.Duration `json:"tcpinfo_every"`
	Coordinator  string        `json:"coordinator"` // unix socket
	Out          string        `json:"out"`         // JSONL records
	// NS, when set, makes the rank open its sockets in that namespace
	// (ranks run as goroutines of one process, in tests).
	NS string `json:"netns,omitempty"`
}

// Name is "job/rank" for messages.
func (s *Spec) Name() string {
	if s.Rank == PSRank {
		return s.Job.Name + "/ps"
	}
	return s.Job.Name + "/" + strconv.Itoa(s.Rank)
}

// Server is the server this rank (or the job's PS) runs on.
func (s *Spec) Server() string {
	if s.Rank == PSRank {
		return s.Job.PS
	}
	return s.Job.Workers[s.Rank]
}

// PhaseRecord is one JSONL line of a rank's record file.
type PhaseRecord struct {
	Type      string `json:"type"` // "phase"
	Job       string `json:"job"`
	Iteration int    `json:"iteration"`
	Phase     string `json:"phase"`
	Rank      int    `json:"rank"`
	StartNs   int64  `json:"start_ns"` // CLOCK_MONOTONIC
	EndNs     int64  `json:"end_ns"`
	Bytes     int64  `json:"bytes"` // sent by this rank
	// RecvBytes is what this rank received of a task-graph transfer (the
	// receiver's record; its sender's has Bytes).
	RecvBytes int64  `json:"recv_bytes,omitempty"`
	Verified  bool   `json:"verified,omitempty"`
	Note      string `json:"note,omitempty"`
	// INCRTTNs is an INC push's mean round trip, a block to its sum, over
	// the results the rank timed.
	INCRTTNs int64 `json:"inc_rtt_ns,omitempty"`
	// INCWaitNs is the mean time a result waited in the rank's socket
	// until the rank read it (inc.Stats.Wait): its own hop in the round
	// trip.
	INCWaitNs int64 `json:"inc_wait_ns,omitempty"`
	// INCStallNs is how long the push went without any result while a
	// retransmission timeout was due (inc.Stats.Stall).
	INCStallNs int64 `json:"inc_stall_ns,omitempty"`
	// GCNs is how long the rank's garbage collector held it between the
	// phase's start and end (assists and stop-the-world pauses), GCCycles
	// the collections it ran (gcMark).
	GCNs     int64  `json:"gc_ns,omitempty"`
	GCCycles uint64 `json:"gc_cycles,omitempty"`
	// What the phase's time is made of (CLOCK_MONOTONIC ns, 0: does not
	// apply). GateNs is when the rank could start: its gate opened and its
	// previous phase had ended, so StartNs - GateNs is the rank's own
	// lateness. The byte marks are the rank's transfers (collective.Timing);
	// LastAckNs is when TCP had every byte the rank sent acknowledged.
	// VerifyNs is how long checking the result took: it runs outside the
	// phase, while the next compute phase waits or after the job.
	GateNs      int64 `json:"gate_ns,omitempty"`
	FirstRecvNs int64 `json:"first_recv_ns,omitempty"`
	LastRecvNs  int64 `json:"last_recv_ns,omitempty"`
	LastSendNs  int64 `json:"last_send_ns,omitempty"`
	LastAckNs   int64 `json:"last_ack_ns,omitempty"`
	// PeerRecvNs[p] is when the last byte from rank p arrived, where the
	// phase marks it (all-to-all: one flow per peer; a pipelined ring or
	// halving-doubling all-reduce: each peer it receives from); 0 for no
	// flow.
	PeerRecvNs []int64 `json:"peer_recv_ns,omitempty"`
	VerifyNs   int64   `json:"verify_ns,omitempty"`
}

// TCPSample is one TCP_INFO reading of one connection.
type TCPSample struct {
	Type        string `json:"type"` // "tcp"
	Job         string `json:"job"`
	Rank        int    `json:"rank"`
	Peer        int    `json:"peer"`
	TNs         int64  `json:"t_ns"`
	CwndSegs    uint32 `json:"cwnd"`
	RTTUs       uint32 `json:"rtt_us"`
	Retrans     uint32 `json:"retrans_total"`
	DeliveryBps uint64 `json:"delivery_rate_bps"`
	BytesAcked  uint64 `json:"bytes_acked"`
	// What loss recovery did (the attribution reads them): the congestion
	// state (0 open, 1 disorder, 2 CWR, 3 recovery, 4 loss), the
	// retransmission timeout and its backoff, segments the kernel counts
	// lost now, bytes retransmitted so far, and RTO events, recoveries
	// and time spent in RTO recovery (kernel 6.7 and later; 0 before).
	CAState       uint8  `json:"ca_state"`
	RTOUs         uint32 `json:"rto_us"`
	Backoff       uint8  `json:"backoff,omitempty"`
	Lost          uint32 `json:"lost,omitempty"`
	BytesRetrans  uint64 `json:"bytes_retrans,omitempty"`
	RTTVarUs      uint32 `json:"rtt_var_us,omitempty"`
	TotalRTO      uint16 `json:"total_rto,omitempty"`
	RTORecoveries uint16 `json:"total_rto_recoveries,omitempty"`
	RTOTimeMs     uint32 `json:"total_rto_time_ms,omitempty"`
	// SsthreshSegs is the slow-start threshold: below 2^31-1 with no
	// loss it is where cubic's HyStart ended slow start.
	SsthreshSegs uint32 `json:"ssthresh,omitempty"`
	// What limited the sender, in µs since the connection began
	// (tcp_chrono): busy is any time with data outstanding, of which
	// rwnd_limited the peer's receive window was full (the receiving
	// rank did not read) and sndbuf_limited the send buffer was. Busy
	// time the window did not limit is the network's (cwnd); a stalled
	// flow whose busy time does not grow was not written to (the sending
	// rank did not run). notsent is bytes written not yet sent.
	BusyUs          uint64 `json:"busy_us,omitempty"`
	RwndLimitedUs   uint64 `json:"rwnd_limited_us,omitempty"`
	SndbufLimitedUs uint64 `json:"sndbuf_limited_us,omitempty"`
	NotsentBytes    uint32 `json:"notsent,omitempty"`
}

// rank is one running rank.
type rank struct {
	spec  *Spec
	log   *slog.Logger
	comm  *collective.Comm
	inc   *inc.Client // the ToR aggregator's client (INC jobs)
	dag   *dagRank    // a task-graph job's state (dag.go)
	n     int
	ps    int // index of the PS in comm.Conns (== n), or -1
	ctl   *control
	out   *json.Encoder
	outMu sync.Mutex
	// outErr is the first failed record write: the rank then stops
	// recording and fails, naming the file.
	outErr error
}

// Run plays one rank until its job is done. It returns an error naming the
// job, rank, iteration and phase when something fails.
func Run(ctx context.Context, spec *Spec, log *slog.Logger) (err error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if err := spec.Validate(); err != nil {
		return fmt.Errorf("rank %d of job %q: bad spec:\n%w", spec.Rank, spec.Job.Name, err)
	}
	r := &rank{spec: spec, log: log.With("rank", spec.Name()), n: len(spec.Job.Workers), ps: -1}
	if spec.Job.UsesPS() {
		r.ps = r.n
	}
	f, err := safefile.Create(spec.Out)
	if err != nil {
		return fmt.Errorf("%s: records: %w", spec.Name(), err)
	}
	defer func() {
		// A record that never reached the disk is a lost measurement.
		if cerr := f.Close(); cerr != nil && err == nil {
			err = r.fail(fmt.Errorf("%s: records: close %s: %w", spec.Name(), spec.Out, cerr))
		}
	}()
	r.out = json.NewEncoder(f)

	// Connect while the data are prepared: the rank listens at once, so
	// peers' dials do not wait for its buffers (which take seconds on a
	// busy machine or under the race detector) and the connect deadlines
	// measure connecting only. prepare reads the spec alone.
	connected := make(chan error, 1)
	go func() { connected <- r.connect(ctx) }()
	var bufs *buffers
	if spec.Rank != PSRank && spec.Job.Pattern != job.PatternDAG {
		bufs = r.prepare()
	}
	if spec.Job.INC != nil && spec.Rank != PSRank { // the parameter server of a job with INC in some iterations has no INC client
		if err = r.inNS(func() (err error) { r.inc, err = dialINC(spec); return err }); err != nil {
			<-connected
			return r.fail(fmt.Errorf("%s: %w", spec.Name(), err))
		}
		defer r.inc.Close()
	}
	err = <-connected
	defer r.closeConns()
	if err != nil {
		return r.fail(fmt.Errorf("%s: connect: %w", spec.Name(), err))
	}
	// Allocate the buffers the collectives reuse, then collect what
	// starting up allocated, before saying hello: no phase allocates
	// them, and the first collection does not fall inside a measured
	// phase (steady iterations allocate little).
	switch p := spec.Job.Pattern; {
	case spec.Rank == PSRank:
		r.comm.ReserveServer(int(spec.Job.Bytes / 4))
	case p == job.PatternRing || p == job.PatternHD:
		r.comm.ReserveAllReduce()
	}
	runtime.GC()
	if r.ctl, err = dialControl(ctx, spec); err != nil {
		return fmt.Errorf("%s: coordinator: %w", spec.Name(), err)
	}
	defer r.ctl.close()
	t0, err := r.ctl.start()
	if err != nil {
		return fmt.Errorf("%s: waiting for time zero: %w", spec.Name(), err)
	}
	sctx, stop := context.WithCancel(ctx)
	sampled := make(chan struct{})
	if spec.TCPInfoEvery > 0 {
		go func() {
			defer close(sampled)
			r.sampleTCP(sctx)
		}()
	} else {
		close(sampled)
	}
	if spec.Rank == PSRank {
		err = r.servePS(ctx, t0)
	} else {
		err = r.work(ctx, t0, bufs)
	}
	stop()
	<-sampled // no record is written after this
	if err == nil {
		err = r.recordErr()
	}
	if err != nil {
		return r.fail(err)
	}
	return nil
}

func (r *rank) fail(err error) error {
	if r.ctl != nil {
		r.ctl.send(Msg{Type: "fail", Job: r.spec.Job.Name, Rank: r.spec.Rank, Error: err.Error()})
	}
	return err
}

// record appends one JSONL record. The first write that fails is kept
// (later records are dropped) and returned, naming the file.
func (r *rank) record(v any) error {
	r.outMu.Lock()
	defer r.outMu.Unlock()
	if r.outErr != nil {
		return r.outErr
	}
	if err := r.out.Encode(v); err != nil {
		r.outErr = fmt.Errorf("%s: records: write %s: %w", r.spec.Name(), r.spec.Out, err)
	}
	return r.outErr
}

func (r *rank) recordErr() error {
	r.outMu.Lock()
	defer r.outMu.Unlock()
	return r.outErr
}

// peers returns the ranks this rank exchanges data with.
func (r *rank) peers() []int {
	j, me, n := &r.spec.Job, r.spec.Rank, r.n
	if me == PSRank {
		all := make([]int, n)
		for i := range all {
			all[i] = i
		}
		return all
	}
	set := map[int]bool{}
	switch j.Pattern {
	case job.PatternPS:
		if r.ps >= 0 { // none with INC: the ToRs aggregate
			set[r.ps] = true
		}
	case job.PatternRing:
		order := ringOrder(j)
		for i, x := range order {
			if x == me {
				set[order[(i+1)%n]] = true
				set[order[(i-1+n)%n]] = true
			}
		}
	case job.PatternHD:
		for k := 1; k < n; k <<= 1 {
			set[me^k] = true
		}
	case job.PatternAllToAll:
		for p := 0; p < n; p++ {
			set[p] = true
		}
	}
	delete(set, me)
	var out []int
	for p := range set {
		out = append(out, p)
	}
	return out
}

// ringOrder maps the job's ring (server names) to ranks.
func ringOrder(j *job.Job) []int {
	idx := map[string]int{}
	for i, w := range j.Workers {
		idx[w] = i
	}
	var order []int
	for _, w := range j.Ring {
		order = append(order, idx[w])
	}
	if len(order) != len(j.Workers) {
		order = order[:0]
		for i := range j.Workers {
			order = append(order, i)
		}
	}
	return order
}

// server returns the server a rank (or the PS) runs on.
func (r *rank) server(rk int) string {
	if rk == r.ps || rk == PSRank {
		return r.spec.Job.PS
	}
	return r.spec.Job.Workers[rk]
}

func (r *rank) port(rk int) int {
	if rk == r.ps || rk == PSRank {
		return r.spec.Ports[r.n]
	}
	return r.spec.Ports[rk]
}

// inNS runs fn in the spec's namespace, if any.
func (r *rank) inNS(fn func() error) error {
	if r.spec.NS == "" {
		return fn()
	}
	return netns.Do(r.spec.NS, fn)
}

// connect sets up every data connection before time zero, so that no
// handshake is measured: a rank dials the peers with a higher index (and
// the PS), and accepts the others. The dialer announces its rank.
func (r *rank) connect(ctx context.Context) error {
	if r.spec.Job.Pattern == job.PatternDAG {
		return r.connectDAG(ctx)
	}
	me := r.spec.Rank
	self := me
	if me == PSRank {
		self = r.ps
		if self < 0 {
			return errors.New("a parameter server for a job that is not ps")
		}
	}
	size := r.n
	if r.ps >= 0 {
		size++
	}
	r.comm = &collective.Comm{Rank: self, N: r.n, Conns: make([]net.Conn, size), Timeout: r.spec.Timeout}
	if me == PSRank {
		r.comm.N = r.n + 1
	}
	peers := r.peers()
	var accept, dial []int
	for _, p := range peers {
		if p < self || (me == PSRank) {
			accept = append(accept, p)
		} else {
			dial = append(dial, p)
		}
	}
	myAddr := net.JoinHostPort(r.spec.Addrs[r.server(me)], strconv.Itoa(r.port(me)))
	var ln net.Listener
	if len(accept) > 0 {
		var err error
		if ln, err = r.listen(ctx, myAddr); err != nil {
			return err
		}
		defer ln.Close()
	}
	return acceptAndDial(ctx, ln, func() error { return r.acceptPeers(ln, accept) },
		func(ctx context.Context) error { return r.dialPeers(ctx, self, dial) })
}

func (r *rank) acceptPeers(ln net.Listener, want []int) error {
	id := func(h uint32) int {
		if p := int(int32(h)); p != PSRank {
			return p
		}
		return r.ps
	}
	return acceptGreeted(ln, want, id, "ranks", func(p int, c net.Conn) { r.comm.Conns[p] = c })
}

// acceptAndDial runs a connect's two sides at once and joins their
// errors. A failed side, or an ended ctx, stops the other at once: the
// dial side through its ctx, the accept side by closing ln (if any), not
// by a deadline, which the accept loop would overwrite were it to set its
// own after.
func acceptAndDial(ctx context.Context, ln net.Listener, accept func() error, dial func(context.Context) error) error {
	ctx, stop := context.WithCancel(ctx)
	defer stop()
	if ln != nil {
		go func() {
			<-ctx.Done()
			_ = ln.Close()
		}()
	}
	errc := make(chan error, 2)
	side := func(f func() error) {
		err := f()
		if err != nil {
			stop()
		}
		errc <- err
	}
	go side(accept)
	go side(func() error { return dial(ctx) })
	return errors.Join(<-errc, <-errc)
}

// acceptGreeted accepts connections on ln until one has greeted with each
// of want (a 4-byte big-endian word that id maps to it), and hands each
// to keep; a connection that greets with nothing wanted is closed. what
// names the ids in the error ("ranks", "transfers").
func acceptGreeted(ln net.Listener, want []int, id func(uint32) int, what string, keep func(int, net.Conn)) error {
	if len(want) == 0 {
		return nil
	}
	_ = ln.(*net.TCPListener).SetDeadline(time.Now().Add(30 * time.Second))
	need := map[int]bool{}
	for _, p := range want {
		need[p] = true
	}
	for len(need) > 0 {
		c, err := ln.Accept()
		if err != nil {
			return fmt.Errorf("accept (still waiting for %s %v): %w", what, keysOf(need), err)
		}
		var hdr [4]byte
		_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
		if _, err := io.ReadFull(c, hdr[:]); err != nil {
			c.Close()
			continue
		}
		_ = c.SetReadDeadline(time.Time{})
		p := id(binary.BigEndian.Uint32(hdr[:]))
		if !need[p] {
			c.Close()
			continue
		}
		delete(need, p)
		tune(c)
		keep(p, c)
	}
	return nil
}

func (r *rank) dialPeers(ctx context.Context, self int, peers []int) error {
	for _, p := range peers {
		addr := net.JoinHostPort(r.spec.Addrs[r.server(p)], strconv.Itoa(r.port(p)))
		c, err := r.dialRetry(ctx, addr)
		if err != nil {
			return fmt.Errorf("dial rank %d at %s: %w", p, addr, err)
		}
		id := self
		if r.spec.Rank == PSRank {
			id = PSRank
		}
		var hdr [4]byte
		binary.BigEndian.PutUint32(hdr[:], uint32(int32(id)))
		if _, err := c.Write(hdr[:]); err != nil {
			c.Close()
			return fmt.Errorf("greet rank %d: %w", p, err)
		}
		tune(c)
		r.comm.Conns[p] = c
	}
	return nil
}

func tune(c net.Conn) {
	if tc, ok := c.(*net.TCPConn); ok {
		_ = tc.SetNoDelay(true)
	}
}

func keysOf(m map[int]bool) []int {
	var out []int
	for k := range m {
		out = append(out, k)
	}
	return out
}

func (r *rank) closeConns() {
	r.dag.close()
	if r.comm == nil {
		return
	}
	for _, c := range r.comm.Conns {
		if c != nil {
			c.Close()
		}
	}
}

// sampleTCP records TCP_INFO of every connection periodically.
func (r *rank) sampleTCP(ctx context.Context) {
	t := time.NewTicker(r.spec.TCPInfoEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			r.sampleTCPOnce() // the totals as the rank ends
			return
		case <-t.C:
		}
		if !r.sampleTCPOnce() {
			return
		}
	}
}

// sampleTCPOnce records one TCP_INFO sample of every connection; false
// when records can no longer be written.
func (r *rank) sampleTCPOnce() bool {
	for p, c := range r.comm.Conns {
		sc, ok := c.(syscall.Conn)
		if !ok || c == nil {
			continue
		}
		raw, err := sc.SyscallConn()
		if err != nil {
			continue
		}
		var info *unix.TCPInfo
		_ = raw.Control(func(fd uintptr) { info, err = unix.GetsockoptTCPInfo(int(fd), unix.IPPROTO_TCP, unix.TCP_INFO) })
		if err != nil || info == nil {
			continue
		}
		peer := p
		if p == r.ps {
			peer = PSRank
		}
		if r.record(TCPSample{Type: "tcp", Job: r.spec.Job.Name, Rank: r.spec.Rank, Peer: peer, TNs: monoclock.Now(),
			CwndSegs: info.Snd_cwnd, RTTUs: info.Rtt, Retrans: info.Total_retrans,
			DeliveryBps: info.Delivery_rate * 8, BytesAcked: info.Bytes_acked,
			CAState: info.Ca_state, RTOUs: info.Rto, Backoff: info.Backoff, Lost: info.Lost, BytesRetrans: info.Bytes_retrans,
			RTTVarUs: info.Rttvar, TotalRTO: info.Total_rto, RTORecoveries: info.Total_rto_recoveries, RTOTimeMs: info.Total_rto_time,
			SsthreshSegs: info.Snd_ssthresh, BusyUs: info.Busy_time, RwndLimitedUs: info.Rwnd_limited,
			SndbufLimitedUs: info.Sndbuf_limited, NotsentBytes: info.Notsent_bytes}) != nil {
			return false // Run reports the error when the rank ends
		}
	}
	return true
}

// dialINC opens the client of this rank's ToR aggregator: the ToR's
// gateway address, the rank's index among the job's workers in its rack.
func dialINC(spec *Spec) (*inc.Client, error) {
	j := &spec.Job
	me := j.Workers[spec.Rank]
	rack, _, ok := names.ParseServer(me)
	if !ok {
		return nil, fmt.Errorf("INC: %q is not a server name", me)
	}
	idx, local := 0, 0
	for i, w := range j.Workers {
		if r, _, _ := names.ParseServer(w); r == rack {
			if i < spec.Rank {
				idx++
			}
			local++
		}
	}
	return inc.Dial(inc.Config{Job: j.INC.ID, Worker: idx, Workers: local, Total: len(j.Workers),
		Aggregator: netip.AddrPortFrom(topo.GatewayAddr(rack), incwire.Port), Window: j.INC.Window, Congestion: j.INC.Congestion, Stall: spec.Timeout, GSO: true})
}
