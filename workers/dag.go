package workers

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"sync"
	"time"

	"github.com/ocsemu/ocsemu/dataplane/monoclock"
	"github.com/ocsemu/ocsemu/dataplane/sockopt"
	"github.com/ocsemu/ocsemu/workers/collective"
	"github.com/ocsemu/ocsemu/workers/job"
	"github.com/ocsemu/ocsemu/workers/taskgraph"
)

// A rank of a task-graph job (pattern dag, paper 004) runs its share of
// every iteration's graph (workers/taskgraph): its compute tasks as timed
// waits, its transfers as real TCP sends of the task's bytes, each on a
// connection of its own made before time zero, so that concurrent
// transfers share the links as the flow model's flows do. A task starts
// once the tasks it waits for are done and its gate has opened (clock
// mode: its start_ns). Receivers read whatever arrives and acknowledge the
// last byte with one byte back, which tells the sender that its transfer
// is done. What a rank does not see itself, the coordinator relays.

// dagChunk is how much a transfer writes or checks at once.
const dagChunk = 64 << 10

// dagRank is a rank's task-graph state.
type dagRank struct {
	g  *taskgraph.Graph
	me string
	// out[k] is the connection to task k's receiver (this rank sends k),
	// in[k] the one from its sender.
	out, in map[int]net.Conn
	mu      sync.Mutex
	done    map[[2]int]int64 // (iteration, task) -> end, tasks known first-hand
	changed chan struct{}
}

func (d *dagRank) markDone(it, k int, end int64) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.done[[2]int{it, k}] = end
	close(d.changed)
	d.changed = make(chan struct{})
}

func (d *dagRank) waitLocal(ctx context.Context, it, k int) (int64, error) {
	for {
		d.mu.Lock()
		end, ok := d.done[[2]int{it, k}]
		ch := d.changed
		d.mu.Unlock()
		if ok {
			return end, nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return 0, ctx.Err()
		}
	}
}

// connectDAG makes one connection per transfer this rank sends or
// receives: it dials each of its transfers' receivers and names the task
// (4 bytes, its index), and accepts its senders.
func (r *rank) connectDAG(ctx context.Context) error {
	j := &r.spec.Job
	g, err := taskgraph.New(j.Tasks, j.Workers)
	if err != nil {
		return err
	}
	me := r.server(r.spec.Rank)
	r.dag = &dagRank{g: g, me: me, out: map[int]net.Conn{}, in: map[int]net.Conn{}, done: map[[2]int]int64{}, changed: make(chan struct{})}
	r.comm = &collective.Comm{Rank: r.spec.Rank, N: r.n, Timeout: r.spec.Timeout}
	rankOf := map[string]int{}
	for i, w := range j.Workers {
		rankOf[w] = i
	}
	var recv, send []int
	for k := range j.Tasks {
		t := &j.Tasks[k]
		if t.Kind != job.TaskTransfer {
			continue
		}
		if t.Dst == me {
			recv = append(recv, k)
		}
		if t.Src == me {
			send = append(send, k)
		}
	}
	var ln net.Listener
	if len(recv) > 0 {
		myAddr := net.JoinHostPort(r.spec.Addrs[me], strconv.Itoa(r.port(r.spec.Rank)))
		var err error
		if ln, err = r.listen(ctx, myAddr); err != nil {
			return err
		}
		defer ln.Close()
	}
	var inMu sync.Mutex
	accept := func() error {
		return acceptGreeted(ln, recv, func(h uint32) int { return int(h) }, "transfers", func(k int, c net.Conn) {
			inMu.Lock()
			r.dag.in[k] = c
			inMu.Unlock()
		})
	}
	dial := func(ctx context.Context) error {
		for _, k := range send {
			t := &j.Tasks[k]
			dst := rankOf[t.Dst]
			addr := net.JoinHostPort(r.spec.Addrs[t.Dst], strconv.Itoa(r.port(dst)))
			c, err := r.dialRetry(ctx, addr)
			if err != nil {
				return fmt.Errorf("task %s: dial rank %d at %s: %w", t.Name, dst, addr, err)
			}
			var hdr [4]byte
			binary.BigEndian.PutUint32(hdr[:], uint32(k))
			if _, err := c.Write(hdr[:]); err != nil {
				c.Close()
				return fmt.Errorf("task %s: greet rank %d: %w", t.Name, dst, err)
			}
			tune(c)
			r.dag.out[k] = c
		}
		return nil
	}
	return acceptAndDial(ctx, ln, accept, dial)
}

// listen listens on addr in the rank's namespace with its congestion
// control.
func (r *rank) listen(ctx context.Context, addr string) (net.Listener, error) {
	var ln net.Listener
	if err := r.inNS(func() (err error) {
		lc := net.ListenConfig{Control: sockopt.Control(r.spec.CC)}
		ln, err = lc.Listen(ctx, "tcp4", addr)
		return err
	}); err != nil {
		return nil, fmt.Errorf("listen on %s: %w", addr, err)
	}
	return ln, nil
}

// dialRetry dials addr in the rank's namespace, retrying for 30 s while
// the peer does not listen yet.
func (r *rank) dialRetry(ctx context.Context, addr string) (net.Conn, error) {
	deadline := time.Now().Add(30 * time.Second)
	for {
		var c net.Conn
		err := r.inNS(func() (err error) {
			d := net.Dialer{Control: sockopt.Control(r.spec.CC), Timeout: 2 * time.Second}
			c, err = d.DialContext(ctx, "tcp4", addr)
			return err
		})
		if err == nil {
			return c, nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return nil, err
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// closeDAG closes the task-graph connections.
func (d *dagRank) close() {
	if d == nil {
		return
	}
	for _, c := range d.out {
		c.Close()
	}
	for _, c := range d.in {
		c.Close()
	}
}

// runDAG runs the rank's tasks of every iteration, each in a goroutine of
// its own that waits for its dependencies and gate. An iteration's tasks
// all end before the next one's start (its roots wait for every sink).
func (r *rank) runDAG(ctx context.Context, t0 int64) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	// An abort, or the end of the run, unblocks every read and write.
	go func() {
		_ = r.ctl.waitFailed(ctx)
		cancel()
	}()
	stop := context.AfterFunc(ctx, r.dag.close)
	defer stop()
	j := &r.spec.Job
	local := r.dag.g.Local(r.dag.me)
	recvBuf := make(map[int][2][]byte)
	sendBuf := make(map[int][]byte)
	for _, k := range local {
		t := &j.Tasks[k]
		switch {
		case t.Kind == job.TaskTransfer && t.Dst == r.dag.me:
			n := min(t.Bytes, dagChunk)
			recvBuf[k] = [2][]byte{make([]byte, n), make([]byte, n)}
		case t.Kind == job.TaskTransfer:
			sendBuf[k] = make([]byte, min(t.Bytes, dagChunk))
		}
	}
	for it := 0; it < j.Iterations; it++ {
		var wg sync.WaitGroup
		errs := make([]error, len(local))
		for i, k := range local {
			wg.Add(1)
			go func() {
				defer wg.Done()
				t := &j.Tasks[k]
				var err error
				switch {
				case t.Kind == job.TaskCompute:
					err = r.dagCompute(ctx, t0, it, k)
				case t.Dst == r.dag.me:
					err = r.dagRecv(ctx, it, k, recvBuf[k])
				default:
					err = r.dagSend(ctx, t0, it, k, sendBuf[k])
				}
				if err != nil {
					errs[i] = fmt.Errorf("job %s rank %d iteration %d task %s: %w", j.Name, r.spec.Rank, it, t.Name, err)
					cancel()
				}
			}()
		}
		wg.Wait()
		if err := errors.Join(errs...); err != nil {
			return err
		}
	}
	return nil
}

// dagWait waits for the tasks that task k of iteration it depends on and
// for its gate; it returns when the task could start.
func (r *rank) dagWait(ctx context.Context, t0 int64, it, k int) (int64, error) {
	j := &r.spec.Job
	ready := t0
	for _, dep := range r.dag.g.Deps(it, k) {
		t := &j.Tasks[dep[1]]
		var end int64
		var err error
		if taskgraph.Knows(t, r.dag.me) {
			end, err = r.dag.waitLocal(ctx, dep[0], dep[1])
		} else {
			end, err = r.ctl.waitTask(ctx, job.Key{Job: j.Name, Iteration: dep[0], Phase: t.Name})
		}
		if err != nil {
			return 0, fmt.Errorf("waiting for %s of iteration %d: %w", t.Name, dep[0], err)
		}
		ready = max(ready, end)
	}
	gateAt, err := r.gate(ctx, t0, it*len(j.Tasks)+k)
	if err != nil {
		return 0, fmt.Errorf("gate: %w", err)
	}
	return max(ready, gateAt), nil
}

func (r *rank) dagCompute(ctx context.Context, t0 int64, it, k int) error {
	j := &r.spec.Job
	t := &j.Tasks[k]
	gate, err := r.dagWait(ctx, t0, it, k)
	if err != nil {
		return err
	}
	rec := PhaseRecord{Type: "phase", Job: j.Name, Iteration: it, Phase: t.Name, Rank: r.spec.Rank, StartNs: monoclock.Now(), GateNs: gate}
	if err := monoclock.SleepUntil(ctx, rec.StartNs+t.ComputeNs); err != nil {
		return err
	}
	rec.EndNs = monoclock.Now()
	r.dag.markDone(it, k, rec.EndNs)
	r.ctl.send(Msg{Type: "done", Job: j.Name, Rank: r.spec.Rank, Iteration: it, Phase: t.Name, EndNs: rec.EndNs})
	return r.record(rec)
}

// dagSend sends task k's bytes and waits for the receiver's
// acknowledgement of the last one.
func (r *rank) dagSend(ctx context.Context, t0 int64, it, k int, buf []byte) error {
	j := &r.spec.Job
	t := &j.Tasks[k]
	gate, err := r.dagWait(ctx, t0, it, k)
	if err != nil {
		return err
	}
	c := r.dag.out[k]
	gc := readGC()
	rec := PhaseRecord{Type: "phase", Job: j.Name, Iteration: it, Phase: t.Name, Rank: r.spec.Rank, StartNs: monoclock.Now(), GateNs: gate}
	for off := int64(0); off < t.Bytes; off += int64(len(buf)) {
		n := min(int64(len(buf)), t.Bytes-off)
		if r.spec.Verify {
			fillTask(buf[:n], k, it, off)
		}
		if err := r.deadline(c); err != nil {
			return err
		}
		w, err := c.Write(buf[:n])
		rec.Bytes += int64(w)
		if err != nil {
			return fmt.Errorf("send to %s after %d of %d B: %w", t.Dst, rec.Bytes, t.Bytes, err)
		}
	}
	rec.LastSendNs = monoclock.Now()
	var ack [1]byte
	if _, err := io.ReadFull(c, ack[:]); err != nil {
		return fmt.Errorf("acknowledgement from %s: %w", t.Dst, err)
	}
	rec.EndNs = monoclock.Now()
	gc.into(&rec)
	rec.LastAckNs = rec.EndNs
	// The receiver acknowledges only what it has checked (with Verify).
	rec.Verified = r.spec.Verify
	r.dag.markDone(it, k, rec.EndNs)
	return r.record(rec)
}

// dagRecv reads task k's bytes (checking them with Verify), acknowledges
// the last one and reports the task done: the receiver is the first to
// know.
func (r *rank) dagRecv(ctx context.Context, it, k int, bufs [2][]byte) error {
	j := &r.spec.Job
	t := &j.Tasks[k]
	c := r.dag.in[k]
	buf, want := bufs[0], bufs[1]
	rec := PhaseRecord{Type: "phase", Job: j.Name, Iteration: it, Phase: t.Name, Rank: r.spec.Rank}
	var gc gcMark // from the first byte: the receiver's phase starts then
	chunk := int64(len(buf))
	verified := r.spec.Verify
	for got := int64(0); got < t.Bytes; {
		if rec.FirstRecvNs > 0 {
			if err := r.deadline(c); err != nil {
				return err
			}
		} else {
			_ = c.SetReadDeadline(time.Time{}) // the sender may not start for a while
		}
		base := got - got%chunk
		n := min(chunk, t.Bytes-base)
		m, err := c.Read(buf[got-base : n])
		if m > 0 && rec.FirstRecvNs == 0 {
			gc = readGC()
			rec.FirstRecvNs = monoclock.Now()
		}
		got += int64(m)
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return fmt.Errorf("receive from %s after %d of %d B: %w", t.Src, got, t.Bytes, err)
		}
		if got-base == n && r.spec.Verify {
			fillTask(want[:n], k, it, base)
			if !bytes.Equal(buf[:n], want[:n]) {
				return fmt.Errorf("bytes %d to %d from %s are not what it sent", base, base+n, t.Src)
			}
		}
	}
	rec.LastRecvNs = monoclock.Now()
	if rec.FirstRecvNs > 0 {
		gc.into(&rec)
	}
	rec.StartNs, rec.EndNs, rec.RecvBytes, rec.Verified = rec.FirstRecvNs, rec.LastRecvNs, t.Bytes, verified
	if _, err := c.Write([]byte{1}); err != nil {
		return fmt.Errorf("acknowledge to %s: %w", t.Src, err)
	}
	r.dag.markDone(it, k, rec.EndNs)
	r.ctl.send(Msg{Type: "done", Job: j.Name, Rank: r.spec.Rank, Iteration: it, Phase: t.Name, EndNs: rec.EndNs})
	return r.record(rec)
}

// deadline bounds the next read or write of a transfer under way by the
// spec's per-transfer timeout.
func (r *rank) deadline(c net.Conn) error {
	if r.spec.Timeout <= 0 {
		return nil
	}
	return c.SetDeadline(time.Now().Add(r.spec.Timeout))
}

// fillTask writes the content of task k's bytes [off, off+len(b)) in
// iteration it: 8-byte words that depend on the task, the iteration and
// the word's place, so that a byte lost, repeated or delivered to the
// wrong task is caught. off is a multiple of 8.
func fillTask(b []byte, k, it int, off int64) {
	w := uint64(off / 8)
	seed := uint64(k+1)*0x9E3779B97F4A7C15 ^ uint64(it+1)*0xC2B2AE3D27D4EB4F
	var word [8]byte
	for i := 0; i < len(b); i += 8 {
		binary.LittleEndian.PutUint64(word[:], seed^w)
		copy(b[i:], word[:])
		w++
	}
}

// waitFailed blocks until the run fails (an abort, or the coordinator
// going away) or ctx ends.
func (c *control) waitFailed(ctx context.Context) error {
	for {
		c.stMu.Lock()
		err, ch := c.err, c.changed
		c.stMu.Unlock()
		if err != nil {
			return err
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}
