// Package collective implements the communication of training jobs over
// real TCP connections with real bytes: ring all-reduce (reduce-scatter
// then all-gather), halving-doubling all-reduce, all-to-all, and
// parameter-server push/pull with a CPU server that really sums. Data are
// int32 elements, so every reduction is exact and can be verified.
package collective

import (
	"errors"
	"fmt"
	"io"
	"net"
	"slices"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"
)

// Comm connects one rank to the other ranks of a job.
type Comm struct {
	Rank, N int
	// Conns[i] is the connection to rank i (nil for Rank itself and for
	// ranks this rank never talks to).
	Conns []net.Conn
	// Timeout bounds every transfer; a lost peer fails, never hangs.
	Timeout time.Duration
	// sent counts bytes this rank has written. Collectives send to
	// several peers at once (all-to-all, the server's per-worker loops),
	// so it is atomic.
	sent atomic.Int64
	tm   timing
}

// Sent returns the bytes this rank has written so far.
func (c *Comm) Sent() int64 { return c.sent.Load() }

// PeerError says which peer a transfer failed with.
type PeerError struct {
	Peer int
	Op   string
	Err  error
}

func (e *PeerError) Error() string { return fmt.Sprintf("%s rank %d: %v", e.Op, e.Peer, e.Err) }
func (e *PeerError) Unwrap() error { return e.Err }

func asBytes(v []int32) []byte {
	if len(v) == 0 {
		return nil
	}
	return unsafe.Slice((*byte)(unsafe.Pointer(&v[0])), len(v)*4)
}

func (c *Comm) conn(peer int) (net.Conn, error) {
	if peer < 0 || peer >= len(c.Conns) || c.Conns[peer] == nil {
		return nil, fmt.Errorf("rank %d has no connection to rank %d", c.Rank, peer)
	}
	return c.Conns[peer], nil
}

func (c *Comm) deadline() time.Time {
	if c.Timeout <= 0 {
		return time.Time{}
	}
	return time.Now().Add(c.Timeout)
}

// Send writes b to a peer. Empty transfers are skipped on both sides.
func (c *Comm) Send(peer int, b []byte) error {
	if len(b) == 0 {
		return nil
	}
	cn, err := c.conn(peer)
	if err != nil {
		return err
	}
	_ = cn.SetWriteDeadline(c.deadline())
	n, err := cn.Write(b)
	c.sent.Add(int64(n))
	if err != nil {
		return &PeerError{peer, "send to", err}
	}
	maxStore(&c.tm.lastSend, clock())
	return nil
}

// Recv fills b from a peer.
func (c *Comm) Recv(peer int, b []byte) error {
	if len(b) == 0 {
		return nil
	}
	cn, err := c.conn(peer)
	if err != nil {
		return err
	}
	_ = cn.SetReadDeadline(c.deadline())
	// The first read is timed on its own: it marks the first byte in.
	n, err := cn.Read(b)
	if n > 0 {
		c.tm.firstRecv.CompareAndSwap(0, clock())
	}
	if n == len(b) {
		err = nil // io.ReadFull's rule: a full buffer is a success
	} else if err == nil {
		_, err = io.ReadFull(cn, b[n:])
	}
	if err != nil {
		return &PeerError{peer, "receive from", err}
	}
	c.tm.recv(clock())
	return nil
}

// SendRecvAdd sends sb to one peer while receiving from another and adding
// what arrives into dst, piece by piece, so that the additions overlap the
// transfer instead of following it.
func (c *Comm) SendRecvAdd(to int, sb []byte, from int, dst, scratch []int32) error {
	errc := make(chan error, 1)
	go func() { errc <- c.Send(to, sb) }()
	var rerr error
	for off := 0; off < len(dst); {
		p := scratch[:min(len(scratch), len(dst)-off)]
		if rerr = c.Recv(from, asBytes(p)); rerr != nil {
			break
		}
		add(dst[off:off+len(p)], p)
		off += len(p)
	}
	return errors.Join(<-errc, rerr)
}

// SendRecv sends to one peer while receiving from another, so that large
// transfers in a ring or pairwise exchange cannot deadlock.
func (c *Comm) SendRecv(to int, sb []byte, from int, rb []byte) error {
	errc := make(chan error, 1)
	go func() { errc <- c.Send(to, sb) }()
	rerr := c.Recv(from, rb)
	serr := <-errc
	return errors.Join(serr, rerr)
}

// chunks splits n elements into k nearly equal parts: [start, end) each.
func chunks(n, k int) [][2]int {
	out := make([][2]int, k)
	base, extra := n/k, n%k
	s := 0
	for i := 0; i < k; i++ {
		l := base
		if i < extra {
			l++
		}
		out[i] = [2]int{s, s + l}
		s += l
	}
	return out
}

func add(dst, src []int32) {
	for i := range dst {
		dst[i] += src[i]
	}
}

// RingAllReduce sums data across the ranks in place: 2(n-1) steps, each
// sending one of n chunks to the next rank of order and receiving one from
// the previous (reduce-scatter, then all-gather). order lists ranks around
// the ring.
//
// The steps are pipelined, as NCCL's ring is: the chunk a rank receives in
// step s is the one it sends in step s+1, so each piece goes on to the next
// rank as soon as it has arrived and been added, and the link never waits
// for a step boundary. A rank's sends and receives are therefore two
// streams of 2(n-1) chunks, tied by one progress record (ring).
func (c *Comm) RingAllReduce(data []int32, order []int) error {
	n := len(order)
	pos, err := c.ringPos(order)
	if err != nil || n == 1 {
		return err
	}
	next, prev := order[(pos+1)%n], order[(pos-1+n)%n]
	r := newRing(len(data), n, pos)
	errc := make(chan error, 1)
	go func() { errc <- r.send(c, next, data) }()
	rerr := r.recv(c, prev, data)
	if rerr != nil {
		r.fail(rerr)
	}
	serr := <-errc
	if rerr != nil {
		return fmt.Errorf("ring all-reduce: %w", rerr)
	}
	if serr != nil {
		return fmt.Errorf("ring all-reduce: %w", serr)
	}
	return nil
}

// RingSteps runs a ring all-reduce one step at a time, so that each step
// can wait for its own stage (plan v2 per-step activities).
type RingSteps struct {
	c          *Comm
	data       []int32
	n, pos     int
	next, prev int
	ch         [][2]int
	tmp        []int32
}

// NewRingSteps prepares a ring all-reduce of data over order.
func (c *Comm) NewRingSteps(data []int32, order []int) (*RingSteps, error) {
	n := len(order)
	pos, err := c.ringPos(order)
	if err != nil {
		return nil, err
	}
	r := &RingSteps{c: c, data: data, n: n, pos: pos}
	if n > 1 {
		r.next, r.prev = order[(pos+1)%n], order[(pos-1+n)%n]
		r.ch = chunks(len(data), n)
		r.tmp = make([]int32, pieceElems)
	}
	return r, nil
}

// Steps is 2(n-1): n-1 reduce-scatter steps, then n-1 all-gather steps.
func (r *RingSteps) Steps() int { return 2 * (r.n - 1) }

// Step runs step s (steps run in order, 0 first).
func (r *RingSteps) Step(s int) error {
	n, pos, data, ch := r.n, r.pos, r.data, r.ch
	switch {
	case s < 0 || s >= r.Steps():
		return fmt.Errorf("ring step %d: want 0 to %d", s, r.Steps()-1)
	case s < n-1: // reduce-scatter
		sc, rc := ch[(pos-s+n)%n], ch[(pos-s-1+2*n)%n]
		if err := r.c.SendRecvAdd(r.next, asBytes(data[sc[0]:sc[1]]), r.prev, data[rc[0]:rc[1]], r.tmp); err != nil {
			return fmt.Errorf("reduce-scatter step %d: %w", s, err)
		}
	default: // all-gather
		s -= n - 1
		sc, rc := ch[(pos+1-s+n)%n], ch[(pos-s+n)%n]
		if err := r.c.SendRecv(r.next, asBytes(data[sc[0]:sc[1]]), r.prev, asBytes(data[rc[0]:rc[1]])); err != nil {
			return fmt.Errorf("all-gather step %d: %w", s, err)
		}
	}
	return nil
}

// ringPos is this rank's place in a ring order.
func (c *Comm) ringPos(order []int) (int, error) {
	if i := slices.Index(order, c.Rank); i >= 0 {
		return i, nil
	}
	return -1, fmt.Errorf("rank %d is not in the ring %v", c.Rank, order)
}

// ringPiece is the ring's forwarding unit: a piece goes on to the next rank
// once it has arrived whole.
const ringPiece = 64 << 10 // elements: 256 KiB

// ring is one rank's schedule of a pipelined ring all-reduce.
type ring struct {
	n      int
	chunks [][2]int
	pos    int
	mu     sync.Mutex
	cond   *sync.Cond
	// recvd counts whole receive-stream chunks done plus, in recvAt, the
	// element offset reached in the next one; sent counts send-stream
	// chunks written whole.
	recvd, recvAt, sent int
	err                 error
}

func newRing(elems, n, pos int) *ring {
	r := &ring{n: n, chunks: chunks(elems, n), pos: pos}
	r.cond = sync.NewCond(&r.mu)
	return r
}

func (r *ring) steps() int { return 2 * (r.n - 1) }

// recvChunk is the chunk received in step j: reduce-scatter steps add into
// it, all-gather steps overwrite it with the finished sum.
func (r *ring) recvChunk(j int) [2]int {
	if j < r.n-1 {
		return r.chunks[(r.pos-j-1+2*r.n)%r.n]
	}
	return r.chunks[(r.pos-(j-(r.n-1))+r.n)%r.n]
}

// sendChunk is the chunk sent in step i: the rank's own chunk first, then
// each step the chunk received in the step before.
func (r *ring) sendChunk(i int) [2]int {
	if i == 0 {
		return r.chunks[r.pos]
	}
	return r.recvChunk(i - 1)
}

func (r *ring) fail(err error) {
	r.mu.Lock()
	if r.err == nil {
		r.err = err
	}
	r.cond.Broadcast()
	r.mu.Unlock()
}

// waitRecv blocks until receive step j has reached element end (absolute).
func (r *ring) waitRecv(j, end int) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	for r.err == nil && r.recvd <= j && !(r.recvd == j && r.recvAt >= end) {
		r.cond.Wait()
	}
	return r.err
}

// waitSent blocks until send step i has been written whole.
func (r *ring) waitSent(i int) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	for r.err == nil && r.sent <= i {
		r.cond.Wait()
	}
	return r.err
}

func (r *ring) send(c *Comm, next int, data []int32) error {
	for i := 0; i < r.steps(); i++ {
		ch := r.sendChunk(i)
		for off := ch[0]; off < ch[1]; off += ringPiece {
			end := min(off+ringPiece, ch[1])
			if i > 0 {
				if err := r.waitRecv(i-1, end); err != nil {
					return nil // the receiver failed and says why
				}
			}
			if err := c.Send(next, asBytes(data[off:end])); err != nil {
				r.fail(err)
				return fmt.Errorf("step %d: %w", i, err)
			}
		}
		r.mu.Lock()
		r.sent = i + 1
		r.cond.Broadcast()
		r.mu.Unlock()
	}
	return nil
}

func (r *ring) recv(c *Comm, prev int, data []int32) error {
	tmp := make([]int32, ringPiece)
	for j := 0; j < r.steps(); j++ {
		ch := r.recvChunk(j)
		allGather := j >= r.n-1
		if allGather {
			// The region is overwritten with the finished sum; the
			// sender must be done reading it (it sent it in step j-(n-1)).
			if err := r.waitSent(j - (r.n - 1)); err != nil {
				return err
			}
		}
		for off := ch[0]; off < ch[1]; off += ringPiece {
			end := min(off+ringPiece, ch[1])
			if allGather {
				if err := c.Recv(prev, asBytes(data[off:end])); err != nil {
					return fmt.Errorf("all-gather step %d: %w", j-(r.n-1), err)
				}
			} else {
				p := tmp[:end-off]
				if err := c.Recv(prev, asBytes(p)); err != nil {
					return fmt.Errorf("reduce-scatter step %d: %w", j, err)
				}
				add(data[off:end], p)
			}
			r.mu.Lock()
			r.recvAt = end
			if end == ch[1] {
				r.recvd, r.recvAt = j+1, 0
			}
			r.cond.Broadcast()
			r.mu.Unlock()
		}
		if ch[0] == ch[1] { // an empty chunk (fewer elements than ranks)
			r.mu.Lock()
			r.recvd, r.recvAt = j+1, 0
			r.cond.Broadcast()
			r.mu.Unlock()
		}
	}
	return nil
}

// HDAllReduce sums data in place by halving-doubling (n a power of two):
// reduce-scatter by vector halving with distance doubling (partner
// rank^1, rank^2, ...), then all-gather in reverse. Rank i exchanges
// S/2k each way with partner i^k in each half, as paper 003's prototype.
func (c *Comm) HDAllReduce(data []int32) error {
	h, err := c.NewHDSteps(data)
	if err != nil {
		return err
	}
	for k := 0; k < h.Steps(); k++ {
		if err := h.Step(k); err != nil {
			return err
		}
	}
	return nil
}

type seg struct{ lo, hi int }

// HDSteps runs halving-doubling one step at a time, so that each step can
// wait for its own stage and circuits (paper 003, plan v2 per-step
// activities): steps 0..L-1 halve at distance 1, 2, ..., 2^(L-1); steps
// L..2L-1 double back at distance 2^(L-1), ..., 1.
type HDSteps struct {
	c      *Comm
	data   []int32
	lo, hi int
	kept   []seg
	l      int
	tmp    []int32
}

// NewHDSteps prepares a halving-doubling all-reduce of data.
func (c *Comm) NewHDSteps(data []int32) (*HDSteps, error) {
	n := c.N
	if n < 1 || n&(n-1) != 0 {
		return nil, fmt.Errorf("halving-doubling needs a power-of-two number of ranks, got %d", n)
	}
	h := &HDSteps{c: c, data: data, hi: len(data), tmp: make([]int32, pieceElems)}
	for k := 1; k < n; k <<= 1 {
		h.l++
	}
	return h, nil
}

// Steps is 2 log2(n).
func (h *HDSteps) Steps() int { return 2 * h.l }

// Step runs step s (steps run in order, 0 first).
func (h *HDSteps) Step(s int) error {
	c, data := h.c, h.data
	if s < 0 || s >= h.Steps() {
		return fmt.Errorf("halving-doubling step %d: want 0 to %d", s, h.Steps()-1)
	}
	if s < h.l { // halving
		k := 1 << s
		peer := c.Rank ^ k
		mid := h.lo + (h.hi-h.lo)/2
		keep, give := seg{h.lo, mid}, seg{mid, h.hi}
		if c.Rank&k != 0 {
			keep, give = give, keep
		}
		if err := c.SendRecvAdd(peer, asBytes(data[give.lo:give.hi]), peer, data[keep.lo:keep.hi], h.tmp); err != nil {
			return fmt.Errorf("halving step %d: %w", k, err)
		}
		h.kept = append(h.kept, seg{h.lo, h.hi})
		h.lo, h.hi = keep.lo, keep.hi
		return nil
	}
	i := 2*h.l - 1 - s // doubling: give back what was reduced
	k := 1 << i
	peer := c.Rank ^ k
	whole := h.kept[i]
	mid := whole.lo + (whole.hi-whole.lo)/2
	other := seg{mid, whole.hi}
	if c.Rank&k != 0 {
		other = seg{whole.lo, mid}
	}
	if err := c.SendRecv(peer, asBytes(data[h.lo:h.hi]), peer, asBytes(data[other.lo:other.hi])); err != nil {
		return fmt.Errorf("doubling step %d: %w", k, err)
	}
	h.lo, h.hi = whole.lo, whole.hi
	return nil
}

// AllToAll sends send[p] to every other rank p and receives recv[p] from
// it, all at once.
func (c *Comm) AllToAll(send, recv [][]int32) error {
	errc := make(chan error, 2*c.N)
	pending := 0
	for p := 0; p < c.N; p++ {
		if p == c.Rank {
			copy(recv[p], send[p])
			continue
		}
		pending += 2
		go func() { errc <- c.Send(p, asBytes(send[p])) }()
		go func() { errc <- c.Recv(p, asBytes(recv[p])) }()
	}
	var errs []error
	for ; pending > 0; pending-- {
		if err := <-errc; err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
