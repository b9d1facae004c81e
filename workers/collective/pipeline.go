package collective

import (
	"fmt"
	"sync"
	"time"
)

// A pipelined all-reduce is a list of steps, each sending one range of the
// data to one peer and receiving one range from another (adding it in, or
// overwriting it with a finished sum). Run step by step, every step
// boundary drains the link: the last piece of a step must arrive, be
// added, and only then does the next step's first byte leave. A pipeline
// runs the sends and the receives as two streams instead, and a piece is
// sent as soon as what it carries is final, as NCCL's ring does: the link
// never waits for a step boundary. Ring and halving-doubling are both such
// schedules (RingAllReduce, HDAllReduce).

// span is a range of elements [lo, hi) moved with one peer.
type span struct {
	peer, lo, hi int
}

func (s span) overlaps(lo, hi int) bool { return s.lo < hi && lo < s.hi && s.lo < s.hi }

// pipeStep is one step: send data[send] to send.peer, receive recv from
// recv.peer into data (added when add, else copied).
type pipeStep struct {
	send, recv span
	add        bool
}

// pipeline is one rank's progress through a schedule, shared by its two
// streams.
type pipeline struct {
	steps []pipeStep
	mu    sync.Mutex
	cond  *sync.Cond
	// recvd counts receive steps done whole; recvAt is the element offset
	// reached in step recvd (ranges are received in increasing order).
	// sent counts send steps written whole.
	recvd, recvAt, sent int
	err                 error
	// comm is the rank's: a failure aborts it, which unblocks the other
	// stream's read or write at once, not after its timeout.
	comm *Comm
}

// checkSchedule refuses a schedule whose step receives into what the same
// step sends: that step could never be pipelined safely.
func checkSchedule(steps []pipeStep) error {
	for j, st := range steps {
		if st.recv.overlaps(st.send.lo, st.send.hi) {
			return fmt.Errorf("step %d receives [%d,%d) while it sends [%d,%d)", j, st.recv.lo, st.recv.hi, st.send.lo, st.send.hi)
		}
	}
	return nil
}

// runPipeline runs a schedule on data: sends and receives as two streams,
// pieces of at most piece elements. A send piece waits until the last
// receive step before it that touches its range has reached the piece's
// end; a receive waits until every earlier send of the range it changes
// has been written (so that no old value is sent after it changed).
func (c *Comm) runPipeline(data []int32, steps []pipeStep, piece int) error {
	if err := checkSchedule(steps); err != nil {
		return err
	}
	p := &pipeline{steps: steps, comm: c}
	p.cond = sync.NewCond(&p.mu)
	errc := make(chan error, 1)
	go func() { errc <- p.sendStream(c, data, piece) }()
	rerr := p.recvStream(c, data, piece)
	if rerr != nil {
		p.fail(rerr)
	}
	serr := <-errc
	if rerr == nil && serr == nil {
		return nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.err // the first failure, not the other stream's unblocked read or write
}

func (p *pipeline) fail(err error) {
	p.mu.Lock()
	first := p.err == nil
	if first {
		p.err = err
	}
	p.cond.Broadcast()
	p.mu.Unlock()
	if first {
		p.comm.abort() // the collective failed: its connections are done
	}
}

// sendReady reports whether elements [lo, hi) may be sent in step j.
// Receives run in step order, so only the last receive step before j
// that touches the range can still be changing it.
func (p *pipeline) sendReady(j, lo, hi int) bool {
	for r := j - 1; r >= 0; r-- {
		rs := p.steps[r].recv
		if !rs.overlaps(lo, hi) {
			continue
		}
		return p.recvd > r || (p.recvd == r && p.recvAt >= min(hi, rs.hi))
	}
	return true
}

// recvReady reports whether step j may change elements [lo, hi): every
// earlier send step that reads them has been written whole.
func (p *pipeline) recvReady(j, lo, hi int) bool {
	for i := j - 1; i >= p.sent; i-- {
		if p.steps[i].send.overlaps(lo, hi) {
			return false
		}
	}
	return true
}

func (p *pipeline) wait(ready func() bool) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	for p.err == nil && !ready() {
		p.cond.Wait()
	}
	return p.err
}

func (p *pipeline) sendStream(c *Comm, data []int32, piece int) error {
	for j, st := range p.steps {
		s := st.send
		if j > 0 && p.steps[j-1].send.peer != s.peer {
			// A new peer (hd): let the last step's bytes go on the wire
			// first, down to one piece, so that the two flows do not both
			// fill the shaper's queue and lose the old flow's tail, which
			// its receiver waits for (busbw medians 0.94 against 0.91 at
			// 64 MiB, docs/benchmarks.md).
			c.waitUnsent(p.steps[j-1].send.peer, 4*piece)
		}
		for lo := s.lo; lo < s.hi; lo += piece {
			hi := min(lo+piece, s.hi)
			if err := p.wait(func() bool { return p.sendReady(j, lo, hi) }); err != nil {
				return nil // the receiving stream failed and says why
			}
			if err := c.Send(s.peer, asBytes(data[lo:hi])); err != nil {
				err = fmt.Errorf("step %d: %w", j, err)
				p.fail(err)
				return err
			}
		}
		p.mu.Lock()
		p.sent = j + 1
		p.cond.Broadcast()
		p.mu.Unlock()
	}
	return nil
}

func (p *pipeline) recvStream(c *Comm, data []int32, piece int) error {
	tmp := c.scratchFor(0, piece)
	for j, st := range p.steps {
		r := st.recv
		if r.lo < r.hi {
			if err := p.wait(func() bool { return p.recvReady(j, r.lo, r.hi) }); err != nil {
				return err
			}
		}
		for lo := r.lo; lo < r.hi; lo += piece {
			hi := min(lo+piece, r.hi)
			if st.add {
				b := tmp[:hi-lo]
				if err := c.Recv(r.peer, asBytes(b)); err != nil {
					return fmt.Errorf("step %d: %w", j, err)
				}
				add(data[lo:hi], b)
			} else if err := c.Recv(r.peer, asBytes(data[lo:hi])); err != nil {
				return fmt.Errorf("step %d: %w", j, err)
			}
			p.mu.Lock()
			p.recvAt = hi
			p.cond.Broadcast()
			p.mu.Unlock()
		}
		if r.lo < r.hi {
			c.peerDone(r.peer, clock()) // the peer's last byte in, once its last step is done
		}
		p.mu.Lock()
		p.recvd, p.recvAt = j+1, 0
		p.cond.Broadcast()
		p.mu.Unlock()
	}
	return nil
}

// waitUnsent waits until the connection to peer holds less than limit
// bytes not yet sent (SIOCOUTQNSD), for at most 50 ms (a full socket
// buffer takes about 33 ms at 1 Gbit/s). Connections that are not TCP
// (tests) do not wait.
func (c *Comm) waitUnsent(peer, limit int) {
	deadline := time.Now().Add(50 * time.Millisecond)
	for time.Now().Before(deadline) {
		n, ok := unsent(c.Conns[peer])
		if !ok || n < limit {
			return
		}
		time.Sleep(100 * time.Microsecond)
	}
}
