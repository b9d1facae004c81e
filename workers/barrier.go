package workers

import "github.com/ocsemu/ocsemu/workers/job"

// barrier keeps the books of a barrier-mode schedule: a stage may start
// once every rank has finished every activity of the stages before it.
// It is pure bookkeeping; the coordinator does the starting.
type barrier struct {
	sched   *job.Schedule
	stageOf map[job.Key]int
	pending []int // rank-activities still running, per stage
	cur     int   // the newest started stage, -1 before the first
	starts  []int64
	ends    []int64
}

// newBarrier counts, per stage, one pending completion per rank of every
// activity that starts in it (one per task of a task-graph job).
func newBarrier(s *job.Schedule, jobs []job.Job) *barrier {
	b := &barrier{sched: s, stageOf: map[job.Key]int{}, cur: -1,
		pending: make([]int, len(s.Stages)), starts: make([]int64, len(s.Stages)), ends: make([]int64, len(s.Stages))}
	nRanks := map[string]int{}
	for _, j := range jobs {
		nRanks[j.Name] = len(j.Workers)
		if j.Pattern == job.PatternDAG {
			nRanks[j.Name] = 1 // a task's computing server or receiver says it is done (dag.go)
		}
	}
	for si, st := range s.Stages {
		for _, a := range st.Activities {
			b.stageOf[a.Key] = si
			b.pending[si] += nRanks[a.Job]
		}
	}
	return b
}

// stages is the number of stages.
func (b *barrier) stages() int { return len(b.pending) }

// started records that stage k started at `at`. It reports whether the
// stage has nothing to wait for, in which case it also ended at `at` and
// the next stage may start at once.
func (b *barrier) started(k int, at int64) (empty bool) {
	b.starts[k] = at
	b.cur = k
	if b.pending[k] > 0 {
		return false
	}
	b.ends[k] = at
	return true
}

// done records one rank's completion of a phase that ended at endNs. It
// returns the next stage to start, if this completion finished the
// current stage.
func (b *barrier) done(k job.Key, endNs int64) (next int, ok bool) {
	si, known := b.stageOf[k]
	if !known {
		return 0, false
	}
	b.pending[si]--
	b.ends[si] = max(b.ends[si], endNs)
	if si == b.cur && b.pending[si] == 0 {
		return si + 1, true
	}
	return 0, false
}
