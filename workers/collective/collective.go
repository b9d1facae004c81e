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

	"github.com/ocsemu/ocsemu/workers/job"
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
	// broken is set once a collective failed: its connections are done,
	// and a transfer that set its deadline after they were cut must not
	// block until its timeout (see abort).
	broken atomic.Bool
	// scratch holds the collectives' receive buffers, one per concurrent
	// user (scratchFor), kept for the next iteration.
	scratchMu sync.Mutex
	scratch   [][]int32
}

// scratchFor is a receive buffer of n elements for user i (a step's or a
// pipeline's addend: 0; the server's loop for worker w: w), allocated
// once and reused: steady-state iterations allocate nothing, so a rank's
// garbage collector does not run inside a measured phase. (It did: on
// paper003 every rank allocated a 1 MiB buffer per iteration, and the
// first collection, in all four ranks at once on two CPUs, stretched
// iteration 1's first step from 4-6 ms to 9-18 ms in every run.)
// ReserveAllReduce allocates the receive buffer a worker's all-reduces
// (ring or halving-doubling, pipelined or step by step) reuse, before
// time zero, so that the first iteration allocates nothing either.
func (c *Comm) ReserveAllReduce() { c.scratchFor(0, pieceElems) }

// ReserveServer allocates the per-worker pieces a parameter server of a
// buffer of elems elements reuses (ServePush), before time zero.
func (c *Comm) ReserveServer(elems int) {
	for w := 0; w < c.N; w++ {
		if w != c.Rank {
			c.scratchFor(w, min(pieceElems, elems))
		}
	}
}

func (c *Comm) scratchFor(i, n int) []int32 {
	c.scratchMu.Lock()
	defer c.scratchMu.Unlock()
	if i >= len(c.scratch) {
		c.scratch = append(c.scratch, make([][]int32, i+1-len(c.scratch))...)
	}
	if cap(c.scratch[i]) < n {
		c.scratch[i] = make([]int32, n)
	}
	return c.scratch[i][:n]
}

// errBroken fails transfers after a collective of the rank failed.
var errBroken = errors.New("the collective already failed on this rank")

// abort ends every transfer of the rank at once: blocked reads and writes
// return, and later ones fail. Transfers set their deadline and then read
// broken, abort sets broken and then cuts the deadlines: whichever comes
// first, no transfer keeps a fresh deadline past the abort.
func (c *Comm) abort() {
	c.broken.Store(true)
	for _, cn := range c.Conns {
		if cn != nil {
			_ = cn.SetDeadline(time.Now())
		}
	}
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

// failure collects the errors of a collective's concurrent transfers:
// the first aborts the rank's transfers (abort), so that none waits for
// its timeout on a peer that is gone, and it is the one reported, not
// the aborted transfers' own errors.
type failure struct {
	c    *Comm
	once sync.Once
	err  error
}

func (f *failure) add(err error) {
	if err != nil {
		f.once.Do(func() { f.err = err; f.c.abort() })
	}
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
	if c.broken.Load() {
		return &PeerError{peer, "send to", errBroken}
	}
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
	if c.broken.Load() {
		return &PeerError{peer, "receive from", errBroken}
	}
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
	f := &failure{c: c}
	done := make(chan struct{})
	go func() { f.add(c.Send(to, sb)); close(done) }()
	for off := 0; off < len(dst); {
		p := scratch[:min(len(scratch), len(dst)-off)]
		if err := c.Recv(from, asBytes(p)); err != nil {
			f.add(err)
			break
		}
		add(dst[off:off+len(p)], p)
		off += len(p)
	}
	<-done
	return f.err
}

// SendRecv sends to one peer while receiving from another, so that large
// transfers in a ring or pairwise exchange cannot deadlock.
func (c *Comm) SendRecv(to int, sb []byte, from int, rb []byte) error {
	f := &failure{c: c}
	done := make(chan struct{})
	go func() { f.add(c.Send(to, sb)); close(done) }()
	f.add(c.Recv(from, rb))
	<-done
	return f.err
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
// for a step boundary (runPipeline).
func (c *Comm) RingAllReduce(data []int32, order []int) error {
	steps, err := c.ringSchedule(len(data), order)
	if err != nil || len(steps) == 0 {
		return err
	}
	if err := c.runPipeline(data, steps, pipePiece); err != nil {
		return fmt.Errorf("ring all-reduce: %w", err)
	}
	return nil
}

// pipePiece is the pipelines' forwarding unit in elements
// (job.PipePieceBytes).
const pipePiece = job.PipePieceBytes / 4

// ringSchedule is a ring all-reduce of elems elements as steps: the rank
// sends its own chunk first, then each step the chunk it received in the
// step before; it adds what it receives in the n-1 reduce-scatter steps
// and keeps it in the n-1 all-gather steps.
func (c *Comm) ringSchedule(elems int, order []int) ([]pipeStep, error) {
	n := len(order)
	pos, err := c.ringPos(order)
	if err != nil || n == 1 {
		return nil, err
	}
	next, prev := order[(pos+1)%n], order[(pos-1+n)%n]
	ch := chunks(elems, n)
	recvChunk := func(j int) [2]int {
		if j < n-1 {
			return ch[(pos-j-1+2*n)%n]
		}
		return ch[(pos-(j-(n-1))+n)%n]
	}
	steps := make([]pipeStep, 2*(n-1))
	for j := range steps {
		sc := ch[pos]
		if j > 0 {
			sc = recvChunk(j - 1)
		}
		rc := recvChunk(j)
		steps[j] = pipeStep{send: span{next, sc[0], sc[1]}, recv: span{prev, rc[0], rc[1]}, add: j < n-1}
	}
	return steps, nil
}

// hdSchedule is a halving-doubling all-reduce of elems elements on n ranks
// (a power of two) as steps: reduce-scatter by vector halving with
// distance doubling (partner rank^1, rank^2, ...), then all-gather in
// reverse. Rank i exchanges S/2k each way with partner i^k in each half,
// as paper 003's prototype.
func (c *Comm) hdSchedule(elems int) ([]pipeStep, error) {
	n := c.N
	if n < 1 || n&(n-1) != 0 {
		return nil, fmt.Errorf("halving-doubling needs a power-of-two number of ranks, got %d", n)
	}
	var steps []pipeStep
	lo, hi := 0, elems
	var kept [][2]int
	for k := 1; k < n; k <<= 1 { // halving: keep one half, give the other
		peer := c.Rank ^ k
		mid := lo + (hi-lo)/2
		keep, give := [2]int{lo, mid}, [2]int{mid, hi}
		if c.Rank&k != 0 {
			keep, give = give, keep
		}
		steps = append(steps, pipeStep{send: span{peer, give[0], give[1]}, recv: span{peer, keep[0], keep[1]}, add: true})
		kept = append(kept, [2]int{lo, hi})
		lo, hi = keep[0], keep[1]
	}
	for i := len(kept) - 1; i >= 0; i-- { // doubling: give back what was reduced
		k := 1 << i
		peer := c.Rank ^ k
		whole := kept[i]
		mid := whole[0] + (whole[1]-whole[0])/2
		other := [2]int{mid, whole[1]}
		if c.Rank&k != 0 {
			other = [2]int{whole[0], mid}
		}
		steps = append(steps, pipeStep{send: span{peer, lo, hi}, recv: span{peer, other[0], other[1]}})
		lo, hi = whole[0], whole[1]
	}
	return steps, nil
}

// Steps runs a schedule one step at a time, so that each step can wait
// for its own stage and circuits (plan v2 per-step activities; paper 003).
type Steps struct {
	c     *Comm
	data  []int32
	steps []pipeStep
	tmp   []int32
}

// RingSteps runs a ring all-reduce one step at a time.
type RingSteps = Steps

// HDSteps runs halving-doubling one step at a time: steps 0..L-1 halve at
// distance 1, 2, ..., 2^(L-1); steps L..2L-1 double back at distance
// 2^(L-1), ..., 1.
type HDSteps = Steps

// NewRingSteps prepares a ring all-reduce of data over order.
func (c *Comm) NewRingSteps(data []int32, order []int) (*RingSteps, error) {
	steps, err := c.ringSchedule(len(data), order)
	if err != nil {
		return nil, err
	}
	return &Steps{c: c, data: data, steps: steps, tmp: c.scratchFor(0, pieceElems)}, nil
}

// NewHDSteps prepares a halving-doubling all-reduce of data.
func (c *Comm) NewHDSteps(data []int32) (*HDSteps, error) {
	steps, err := c.hdSchedule(len(data))
	if err != nil {
		return nil, err
	}
	return &Steps{c: c, data: data, steps: steps, tmp: c.scratchFor(0, pieceElems)}, nil
}

// Steps is 2(n-1) for a ring (n-1 reduce-scatter steps, then n-1
// all-gather steps), 2 log2(n) for halving-doubling.
func (r *Steps) Steps() int { return len(r.steps) }

// Step runs step s (steps run in order, 0 first).
func (r *Steps) Step(s int) error {
	if s < 0 || s >= len(r.steps) {
		return fmt.Errorf("all-reduce step %d: want 0 to %d", s, len(r.steps)-1)
	}
	st, data := r.steps[s], r.data
	sb := asBytes(data[st.send.lo:st.send.hi])
	var err error
	if st.add {
		err = r.c.SendRecvAdd(st.send.peer, sb, st.recv.peer, data[st.recv.lo:st.recv.hi], r.tmp)
	} else {
		err = r.c.SendRecv(st.send.peer, sb, st.recv.peer, asBytes(data[st.recv.lo:st.recv.hi]))
	}
	if err != nil {
		return fmt.Errorf("all-reduce step %d: %w", s, err)
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

// HDAllReduce sums data in place by halving-doubling (n a power of two),
// pipelined across its steps like the ring: a piece of the half a rank
// keeps goes on to the next step's partner as soon as it has been added,
// and the doubling steps forward the finished sum piece by piece.
func (c *Comm) HDAllReduce(data []int32) error {
	steps, err := c.hdSchedule(len(data))
	if err != nil || len(steps) == 0 {
		return err
	}
	if err := c.runPipeline(data, steps, pipePiece); err != nil {
		return fmt.Errorf("halving-doubling all-reduce: %w", err)
	}
	return nil
}

// AllToAll sends send[p] to every other rank p and receives recv[p] from
// it, all at once. Each peer's last byte in is marked (Timing.PeerRecvNs):
// one flow per peer, so the attribution can time every flow.
func (c *Comm) AllToAll(send, recv [][]int32) error {
	f := &failure{c: c}
	var wg sync.WaitGroup
	for p := 0; p < c.N; p++ {
		if p == c.Rank {
			copy(recv[p], send[p])
			continue
		}
		wg.Add(2)
		go func() { defer wg.Done(); f.add(c.Send(p, asBytes(send[p]))) }()
		go func() {
			defer wg.Done()
			err := c.Recv(p, asBytes(recv[p]))
			if err == nil {
				c.peerDone(p, clock())
			}
			f.add(err)
		}()
	}
	wg.Wait()
	return f.err
}
