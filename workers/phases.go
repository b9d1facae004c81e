package workers

import (
	"context"
	"fmt"

	"github.com/ocsemu/ocsemu/dataplane/monoclock"
	"github.com/ocsemu/ocsemu/workers/collective"
	"github.com/ocsemu/ocsemu/workers/job"
)

// buffers are a worker's data, made before time zero.
type buffers struct {
	data, base []int32
	send, recv [][]int32
}

// prepare allocates and fills the iteration-independent data before the
// rank says hello, so that time zero finds every rank ready.
func (r *rank) prepare() *buffers {
	j := &r.spec.Job
	elems := int(j.Bytes / 4)
	b := &buffers{data: make([]int32, elems)}
	if j.Pattern == job.PatternAllToAll {
		per := elems / r.n
		b.send, b.recv = make([][]int32, r.n), make([][]int32, r.n)
		for p := range b.send {
			b.send[p], b.recv[p] = make([]int32, per), make([]int32, per)
			collective.Tokens(b.send[p], r.spec.Rank, p, 0)
			clear(b.recv[p]) // fault the pages in now, not at time zero
		}
	} else {
		b.base = make([]int32, elems)
		collective.BaseGradient(b.base, r.spec.Rank)
		copy(b.data, b.base) // iteration 0's gradient, pages faulted in
	}
	return b
}

// work runs a worker rank's phases in order, each when its gate opens.
func (r *rank) work(ctx context.Context, t0 int64, b *buffers) error {
	j := &r.spec.Job
	data, base, send, recv := b.data, b.base, b.send, b.recv
	me := r.spec.Rank
	for q, key := range j.Phases() {
		where := fmt.Sprintf("job %s rank %d iteration %d phase %s", j.Name, me, key.Iteration, key.Phase)
		if err := r.gate(ctx, t0, q); err != nil {
			return fmt.Errorf("%s: gate: %w", where, err)
		}
		it := key.Iteration
		rec := PhaseRecord{Type: "phase", Job: j.Name, Iteration: it, Phase: key.Phase, Rank: me, StartNs: monoclock.Now()}
		sent0 := r.comm.Sent()
		var err error
		switch {
		case key.Phase == job.PhaseCompute:
			// Fill the gradient first (that is the "compute" output), then
			// wait out the rest of the compute time.
			// Iteration 0's data were made before time zero.
			if it > 0 && j.Pattern == job.PatternAllToAll {
				for p := range send {
					collective.Tokens(send[p], me, p, it)
				}
			} else if it > 0 {
				copy(data, base)
				collective.Stamp(data, it)
			}
			err = monoclock.SleepUntil(ctx, rec.StartNs+j.ComputeNs)
		case key.Phase == job.PhasePush && r.inc != nil:
			// The ToRs sum while the workers send: the whole all-reduce.
			b0 := r.inc.Stats().Bytes
			err = r.inc.AllReduce(ctx, data)
			rec.Bytes = int64(r.inc.Stats().Bytes - b0)
		case key.Phase == job.PhasePull && r.inc != nil:
			if r.spec.Verify {
				err = collective.CheckSum(data, r.n, it)
				rec.Verified = err == nil
			}
		case key.Phase == job.PhasePush:
			err = r.comm.Push(r.ps, data)
		case key.Phase == job.PhasePull:
			if err = r.comm.Pull(r.ps, data); err == nil && r.spec.Verify {
				err = collective.CheckSum(data, r.n, it)
				rec.Verified = err == nil
			}
		case key.Phase == job.PhaseAllReduce:
			if j.Pattern == job.PatternHD {
				err = r.comm.HDAllReduce(data)
			} else {
				err = r.comm.RingAllReduce(data, ringOrder(j))
			}
			if err == nil && r.spec.Verify {
				err = collective.CheckSum(data, r.n, it)
				rec.Verified = err == nil
			}
		case key.Phase == job.PhaseAllToAll:
			if err = r.comm.AllToAll(send, recv); err == nil && r.spec.Verify {
				for p := range recv {
					if err = collective.CheckTokens(recv[p], p, me, it); err != nil {
						break
					}
				}
				rec.Verified = err == nil
			}
		}
		rec.EndNs = monoclock.Now()
		if r.inc == nil {
			rec.Bytes = r.comm.Sent() - sent0
		}
		if err != nil {
			rec.Note = "failed: " + err.Error()
			_ = r.record(rec) // the phase's own error is the one to report
			return fmt.Errorf("%s: %w", where, err)
		}
		if err := r.record(rec); err != nil {
			return err
		}
		r.ctl.send(Msg{Type: "done", Job: j.Name, Rank: me, Iteration: it, Phase: key.Phase, EndNs: rec.EndNs})
	}
	return nil
}

// gate blocks until phase q may start: time zero in the built-in
// schedule; the planned time in clock mode; the stage's start (from the
// coordinator) and the planned time in barrier mode.
func (r *rank) gate(ctx context.Context, t0 int64, q int) error {
	at := t0
	if r.spec.Mode != "" && q < len(r.spec.Gates) {
		g := r.spec.Gates[q]
		if g.NotBeforeNs >= 0 {
			at = max(at, t0+g.NotBeforeNs)
		}
		if r.spec.Mode == "barrier" {
			start, err := r.ctl.waitStage(ctx, g.Stage)
			if err != nil {
				return err
			}
			at = max(at, start)
		}
	}
	if at > monoclock.Now() {
		return monoclock.SleepUntil(ctx, at)
	}
	return nil
}

// servePS runs a job's CPU parameter server: every iteration it receives
// all pushes and really sums them, then answers every pull.
func (r *rank) servePS(ctx context.Context, t0 int64) error {
	j := &r.spec.Job
	sum := make([]int32, int(j.Bytes/4))
	for it := 0; it < j.Iterations; it++ {
		rec := PhaseRecord{Type: "phase", Job: j.Name, Iteration: it, Phase: job.PhasePush, Rank: PSRank, StartNs: monoclock.Now()}
		if err := r.comm.ServePush(sum); err != nil {
			return fmt.Errorf("job %s parameter server iteration %d phase push: %w", j.Name, it, err)
		}
		rec.EndNs = monoclock.Now()
		if r.spec.Verify {
			if err := collective.CheckSum(sum, r.n, it); err != nil {
				return fmt.Errorf("job %s parameter server iteration %d: sum is wrong: %w", j.Name, it, err)
			}
			rec.Verified = true
		}
		if err := r.record(rec); err != nil {
			return err
		}
		rec = PhaseRecord{Type: "phase", Job: j.Name, Iteration: it, Phase: job.PhasePull, Rank: PSRank, StartNs: monoclock.Now()}
		sent0 := r.comm.Sent()
		if err := r.comm.ServePull(sum); err != nil {
			return fmt.Errorf("job %s parameter server iteration %d phase pull: %w", j.Name, it, err)
		}
		rec.EndNs, rec.Bytes = monoclock.Now(), r.comm.Sent()-sent0
		if err := r.record(rec); err != nil {
			return err
		}
	}
	_ = t0
	return nil
}
