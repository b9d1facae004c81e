package workers

import (
	"context"
	"fmt"
	"time"

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

// ackWait bounds how long a rank waits, after its phase, for TCP to have
// every byte it sent acknowledged (the mark is 0 when that takes longer).
const ackWait = 2 * time.Millisecond

// pendingCheck is a finished phase's record, written once the phase's
// verification (check, if any) ran outside the phase's time and the
// acknowledgement of its last byte (acked, if it sent any) was seen:
// checkPending, while the next compute phase waits or before the next
// communication starts, so neither delays the rank.
type pendingCheck struct {
	rec   PhaseRecord
	check func() error
	acked <-chan int64
	where string
}

// work runs a worker rank's phases in order, each when its gate opens.
// A phase's time is its communication only: the result is verified
// afterwards (timed on its own, VerifyNs) while the next compute phase
// waits, or before the next gate opens, or after the last phase.
func (r *rank) work(ctx context.Context, t0 int64, b *buffers) error {
	j := &r.spec.Job
	if j.Pattern == job.PatternDAG {
		return r.runDAG(ctx, t0)
	}
	data, base, send, recv := b.data, b.base, b.send, b.recv
	me := r.spec.Rank
	var pending *pendingCheck
	prevEnd := t0
	// A job with steps runs its all-reduce one step per phase (plan v2).
	var hd *collective.HDSteps
	var ring *collective.RingSteps
	for q, key := range j.Phases() {
		where := fmt.Sprintf("job %s rank %d iteration %d phase %s", j.Name, me, key.Iteration, key.Phase)
		if key.Phase != job.PhaseCompute {
			// Check the last result in the idle time before this gate.
			if err := r.checkPending(&pending); err != nil {
				return err
			}
		}
		gateAt, err := r.gate(ctx, t0, q)
		if err != nil {
			r.abandonPending(&pending, err)
			return fmt.Errorf("%s: gate: %w", where, err)
		}
		it := key.Iteration
		gc := readGC()
		rec := PhaseRecord{Type: "phase", Job: j.Name, Iteration: it, Phase: key.Phase, Rank: me, StartNs: monoclock.Now(),
			GateNs: max(gateAt, prevEnd)}
		sent0 := r.comm.Sent()
		r.comm.ResetTiming()
		var check func() error
		// INC may be decided per iteration (plan v2): this one's decision.
		inc := r.inc != nil && j.INCAt(it)
		switch {
		case key.Phase == job.PhaseCompute:
			// Check the previous result, fill the gradient (the "compute"
			// output), then wait out the rest of the compute time.
			// Iteration 0's data were made before time zero.
			if err = r.checkPending(&pending); err != nil {
				return err
			}
			if it > 0 && j.Pattern == job.PatternAllToAll {
				for p := range send {
					collective.Tokens(send[p], me, p, it)
				}
			} else if it > 0 {
				copy(data, base)
				collective.Stamp(data, it)
			}
			err = monoclock.SleepUntil(ctx, rec.StartNs+j.ComputeNs)
		case key.Phase == job.PhasePush && inc:
			// The ToRs sum while the workers send: the whole all-reduce.
			s0 := r.inc.Stats()
			err = r.inc.AllReduce(ctx, data)
			s1 := r.inc.Stats()
			rec.Bytes = int64(s1.Bytes - s0.Bytes)
			if n := s1.RTTSamples - s0.RTTSamples; n > 0 {
				rec.INCRTTNs = int64(s1.RTTSum-s0.RTTSum) / int64(n)
			}
			if n := s1.Waited - s0.Waited; n > 0 {
				rec.INCWaitNs = int64(s1.Wait-s0.Wait) / int64(n)
			}
			rec.INCStallNs = int64(s1.Stall - s0.Stall)
			rtt := "-"
			if rec.INCRTTNs > 0 {
				rtt = fmt.Sprintf("%.2f ms", float64(rec.INCRTTNs)/1e6)
			}
			rec.Note = fmt.Sprintf("inc: %d blocks sent, %d resent, %d window decreases, window %d, mean round trip %s, results waited %.3f ms in the socket, stalled %.2f ms", s1.Sent-s0.Sent-(s1.Retransmits-s0.Retransmits),
				s1.Retransmits-s0.Retransmits, s1.Decreases-s0.Decreases, s1.Window, rtt, float64(rec.INCWaitNs)/1e6, float64(rec.INCStallNs)/1e6)
		case key.Phase == job.PhasePull && inc:
			// The push was the whole in-network all-reduce: pull only checks.
			check = func() error { return collective.CheckSum(data, r.n, it) }
		case key.Phase == job.PhasePush:
			err = r.comm.Push(r.ps, data)
		case key.Phase == job.PhasePull:
			err = r.comm.Pull(r.ps, data)
			check = func() error { return collective.CheckSum(data, r.n, it) }
		case key.Phase == job.PhaseAllReduce:
			if j.Pattern == job.PatternHD {
				err = r.comm.HDAllReduce(data)
			} else {
				err = r.comm.RingAllReduce(data, ringOrder(j))
			}
			check = func() error { return collective.CheckSum(data, r.n, it) }
		case isStep(key.Phase):
			step, _ := job.ParseStep(key.Phase)
			if step == 0 {
				if j.Pattern == job.PatternHD {
					hd, err = r.comm.NewHDSteps(data)
				} else {
					ring, err = r.comm.NewRingSteps(data, ringOrder(j))
				}
			}
			if err == nil && j.Pattern == job.PatternHD {
				err = hd.Step(step)
			} else if err == nil {
				err = ring.Step(step)
			}
			if step == job.AllReduceSteps(j.Pattern, r.n)-1 {
				check = func() error { return collective.CheckSum(data, r.n, it) }
			}
		case key.Phase == job.PhaseAllToAll:
			err = r.comm.AllToAll(send, recv)
			check = func() error {
				for p := range recv {
					if err := collective.CheckTokens(recv[p], p, me, it); err != nil {
						return err
					}
				}
				return nil
			}
		}
		rec.EndNs = monoclock.Now()
		gc.into(&rec)
		prevEnd = rec.EndNs
		if !inc {
			rec.Bytes = r.comm.Sent() - sent0
		}
		if err != nil {
			rec.Note = "failed: " + err.Error()
			_ = r.record(rec) // the phase's own error is the one to report
			return fmt.Errorf("%s: %w", where, err)
		}
		r.ctl.send(Msg{Type: "done", Job: j.Name, Rank: me, Iteration: it, Phase: key.Phase, EndNs: rec.EndNs})
		acked := r.markTransfer(&rec, key.Phase, inc)
		pending = &pendingCheck{rec: rec, acked: acked, where: where}
		if r.spec.Verify {
			pending.check = check // nil: nothing to check
		}
	}
	return r.checkPending(&pending)
}

// markTransfer copies the communication's byte marks into rec and, if the
// rank sent data, watches in the background for TCP to have it all
// acknowledged (at most ackWait): the returned channel gives the instant
// (0 if it took longer), for the record. The rank goes on meanwhile; the
// next communication waits for the watch to end (checkPending), so it
// never reads the next phase's bytes.
func (r *rank) markTransfer(rec *PhaseRecord, phase string, inc bool) <-chan int64 {
	if phase == job.PhaseCompute {
		return nil
	}
	tm := r.comm.Timing()
	rec.FirstRecvNs, rec.LastRecvNs, rec.LastSendNs = tm.FirstRecvNs, tm.LastRecvNs, tm.LastSendNs
	rec.PeerRecvNs = tm.PeerRecvNs
	if rec.Bytes <= 0 || inc { // an INC push's bytes went by UDP: no TCP acknowledgement to see
		return nil
	}
	acked := make(chan int64, 1)
	peers := r.peers()
	go func() { acked <- r.comm.WaitAcked(peers, ackWait) }()
	return acked
}

// checkPending runs a finished phase's verification, times it, and
// writes that phase's record.
func (r *rank) checkPending(pp **pendingCheck) error {
	p := takePending(pp)
	if p == nil {
		return nil
	}
	if p.check == nil {
		return r.record(p.rec)
	}
	t := monoclock.Now()
	err := atLowPriority(p.check)
	p.rec.VerifyNs = monoclock.Now() - t
	p.rec.Verified = err == nil
	if err != nil {
		p.rec.Note = "failed: verification: " + err.Error()
		_ = r.record(p.rec)
		return fmt.Errorf("%s: %w", p.where, err)
	}
	return r.record(p.rec)
}

// abandonPending writes a finished phase's record unchecked when the rank
// cannot go on (why), so that no record is lost with the run.
func (r *rank) abandonPending(pp **pendingCheck, why error) {
	p := takePending(pp)
	if p == nil {
		return
	}
	if p.check != nil {
		p.rec.Note = "not verified: " + why.Error()
	}
	_ = r.record(p.rec)
}

// takePending removes the pending record, if any, with the mark of its
// last byte's acknowledgement filled in.
func takePending(pp **pendingCheck) *pendingCheck {
	p := *pp
	if p == nil {
		return nil
	}
	*pp = nil
	if p.acked != nil {
		p.rec.LastAckNs = <-p.acked
	}
	return p
}

// isStep reports whether phase is one step of a per-step all-reduce.
func isStep(phase string) bool {
	_, ok := job.ParseStep(phase)
	return ok
}

// gate blocks until phase q may start: time zero in the built-in
// schedule; the planned time in clock mode; the stage's start (from the
// coordinator) and the planned time in barrier mode.
//
// It returns the instant the gate opened.
func (r *rank) gate(ctx context.Context, t0 int64, q int) (int64, error) {
	at := t0
	if r.spec.Mode != "" && q < len(r.spec.Gates) {
		g := r.spec.Gates[q]
		if g.NotBeforeNs >= 0 {
			at = max(at, t0+g.NotBeforeNs)
		}
		if r.spec.Mode == "barrier" {
			start, err := r.ctl.waitStage(ctx, g.Stage)
			if err != nil {
				return 0, err
			}
			at = max(at, start)
		}
	}
	if at > monoclock.Now() {
		return at, monoclock.SleepUntil(ctx, at)
	}
	return at, nil
}

// servePS runs a job's CPU parameter server: every iteration it receives
// all pushes and really sums them, then answers every pull. Its push
// record ends when the last push has arrived (push-complete); its pull
// record starts when it serves the sum (serve-start). The sum is checked
// after the pulls are served, timed on its own (the push record's
// VerifyNs), so the check delays no worker.
func (r *rank) servePS(ctx context.Context, t0 int64) error {
	j := &r.spec.Job
	// The server waits for its job to arrive, as its workers do (their
	// gates): its first push's read deadline counts from then.
	if j.ArrivalNs > 0 {
		if err := monoclock.SleepUntil(ctx, t0+j.ArrivalNs); err != nil {
			return err
		}
	}
	sum := make([]int32, int(j.Bytes/4))
	for it := 0; it < j.Iterations; it++ {
		if j.INCAt(it) {
			continue // the ToRs aggregate this iteration (INC decided per stage)
		}
		gc := readGC()
		push := PhaseRecord{Type: "phase", Job: j.Name, Iteration: it, Phase: job.PhasePush, Rank: PSRank, StartNs: monoclock.Now()}
		r.comm.ResetTiming()
		if err := r.comm.ServePush(sum); err != nil {
			return fmt.Errorf("job %s parameter server iteration %d phase push: %w", j.Name, it, err)
		}
		push.EndNs = monoclock.Now()
		gc.into(&push)
		tm := r.comm.Timing()
		push.FirstRecvNs, push.LastRecvNs, push.LastSendNs = tm.FirstRecvNs, tm.LastRecvNs, tm.LastSendNs
		gc = readGC()
		pull := PhaseRecord{Type: "phase", Job: j.Name, Iteration: it, Phase: job.PhasePull, Rank: PSRank, StartNs: monoclock.Now(),
			GateNs: push.EndNs}
		sent0 := r.comm.Sent()
		r.comm.ResetTiming()
		if err := r.comm.ServePull(sum); err != nil {
			return fmt.Errorf("job %s parameter server iteration %d phase pull: %w", j.Name, it, err)
		}
		pull.EndNs, pull.Bytes = monoclock.Now(), r.comm.Sent()-sent0
		gc.into(&pull)
		tm = r.comm.Timing()
		pull.FirstRecvNs, pull.LastRecvNs, pull.LastSendNs = tm.FirstRecvNs, tm.LastRecvNs, tm.LastSendNs
		pull.LastAckNs = r.comm.WaitAcked(r.peers(), ackWait)
		if r.spec.Verify {
			t := monoclock.Now()
			// At the server's own priority: its next push waits for it.
			err := collective.CheckSum(sum, r.n, it)
			push.VerifyNs = monoclock.Now() - t
			if err != nil {
				return fmt.Errorf("job %s parameter server iteration %d: sum is wrong: %w", j.Name, it, err)
			}
			push.Verified = true
		}
		if err := r.record(push); err != nil {
			return err
		}
		if err := r.record(pull); err != nil {
			return err
		}
	}
	_ = ctx
	_ = t0
	return nil
}
