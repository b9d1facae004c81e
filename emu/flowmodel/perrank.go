package flowmodel

import (
	"fmt"
	"maps"
	"math"
	"slices"

	"github.com/ocsemu/ocsemu/emu/plan"
	"github.com/ocsemu/ocsemu/workers/job"
	"github.com/ocsemu/ocsemu/workers/record"
)

// Per-rank dependencies of all-to-all and ring jobs (the calibrated and TCP-aware
// models). The ideal model runs a job's phases in lockstep, as the papers
// do: a phase starts when its predecessor's last flow ends. Real all-to-all
// ranks do not wait for each other: a rank whose data arrived early
// computes and starts sending the next exchange while its peers still
// receive, and the emulation times the phase by the rank that spent
// longest in it, its wait for late peers included. So each all-to-all job
// is expanded into a task graph: rank r computes once every flow to and
// from it in the previous exchange is done, and r's flows start when r has
// computed. fold turns the tasks' times back into the job's phases the way
// the emulation's records are summarised.
//
// Ring jobs are expanded too, down to the pieces their pipeline forwards
// (expandRing): their ranks start as their own compute ends, and the
// phase is timed, as the emulation times it, from its last rank's start.
// In lockstep the model ran the quickstart ring's third all-reduce 9%
// longer than the median of 102 recorded runs, whose early ranks had
// moved bytes before the last one started (docs/fidelity.md).
//
// Parameter-server jobs keep lockstep: the same expansion for them (a
// worker pushes once its own pull is done) was tried on 27 recorded
// quickstart runs and made the prediction worse (the parameter server's
// second push 14.6% under the median measured against 3.7% in lockstep).
// So do jobs a plan caps or decides INC for per activity, or runs step by
// step.

// rankTask is one task of an expanded job: rank src's compute (dst ==
// src), or the flow from rank src to rank dst.
type rankTask struct {
	name     string
	key      plan.Key // the original phase
	src, dst int
}

// expanded is one job as a task graph.
type expanded struct {
	tasks  []rankTask
	byKey  map[plan.Key][]int // original phase -> its tasks (indexes into tasks)
	byName map[string]int     // task name -> its index
	ranks  int
	phases []plan.Key // the original phases, in order
	// ring: a ring all-reduce, timed as the emulation times it, from
	// when its last rank could start.
	ring bool
}

// perRank is the set of expanded jobs of one simulation.
type perRank struct {
	jobs    map[string]*expanded
	release map[plan.Key]int64 // when each original phase was released
}

func taskName(it int, phase string, i int) string { return fmt.Sprintf("i%d.%s.%d", it, phase, i) }

// newPerRank expands the plan's all-to-all and ring jobs (expandedJobs); jobs is what the
// simulation runs (expanded jobs replaced, the rest as they were).
func newPerRank(p *plan.Plan) (*perRank, []plan.Job) {
	pr := &perRank{jobs: map[string]*expanded{}, release: map[plan.Key]int64{}}
	jobs := slices.Clone(p.Jobs)
	exp := expandedJobs(p)
	for i := range jobs {
		j, ok := exp[jobs[i].Name]
		if !ok {
			continue
		}
		var e *expanded
		if j.Pattern == job.PatternRing {
			jobs[i], e = expandRing(j)
		} else {
			jobs[i], e = expandJob(j)
		}
		pr.jobs[j.Name] = e
	}
	return pr, jobs
}

// expandedJobs are the plan's jobs whose ranks the per-rank models run
// on their own: all-to-all and ring jobs (a ring's servers distinct) of
// at least two ranks that no activity caps, routes, decides INC for or
// runs step by step.
func expandedJobs(p *plan.Plan) map[string]*plan.Job {
	special := map[string]bool{}
	for _, st := range p.Stages {
		for _, a := range st.Activities {
			if a.INC != nil || a.RateCapBps > 0 || len(a.Flows) > 0 || a.Step != nil {
				special[a.Job] = true
			}
		}
	}
	out := map[string]*plan.Job{}
	for i := range p.Jobs {
		j := &p.Jobs[i]
		if j.Steps || special[j.Name] || len(j.Workers) < 2 {
			continue
		}
		if j.Pattern == job.PatternAllToAll || j.Pattern == job.PatternRing && distinct(ringOf(j)) {
			out[j.Name] = j
		}
	}
	return out
}

// builder grows one expanded job and its task graph.
type builder struct {
	e   *expanded
	dag plan.Job
}

func newBuilder(j *plan.Job, ranks int) *builder {
	return &builder{
		e:   &expanded{byKey: map[plan.Key][]int{}, byName: map[string]int{}, ranks: ranks},
		dag: plan.Job{Name: j.Name, Pattern: plan.PatternDAG, Workers: j.Workers, Iterations: 1, ArrivalNs: j.ArrivalNs},
	}
}

// add appends a task of original phase k, run by rank src (to rank dst
// for a transfer), and returns its name.
func (b *builder) add(k plan.Key, t plan.Task, src, dst int) string {
	e := b.e
	t.Name = taskName(k.Iteration, k.Phase, len(e.byKey[k]))
	b.dag.Tasks = append(b.dag.Tasks, t)
	e.byName[t.Name] = len(e.tasks)
	e.byKey[k] = append(e.byKey[k], len(e.tasks))
	e.tasks = append(e.tasks, rankTask{name: t.Name, key: k, src: src, dst: dst})
	return t.Name
}

// compute adds every rank's compute of iteration it, each after its own
// part of the previous exchange (done), and returns their names.
func (b *builder) compute(j *plan.Job, servers []string, it int, done [][]string) []string {
	ck := plan.Key{Job: j.Name, Iteration: it, Phase: job.PhaseCompute}
	computed := make([]string, len(servers))
	for r, w := range servers {
		computed[r] = b.add(ck, plan.Task{Kind: plan.TaskCompute, Server: w, ComputeNs: j.ComputeNs, After: done[r]}, r, r)
	}
	return computed
}

// expandJob builds the task graph of an all-to-all job (one dag iteration
// holding all of the job's iterations).
func expandJob(j *plan.Job) (plan.Job, *expanded) {
	n := len(j.Workers)
	rank := map[string]int{}
	for r, w := range j.Workers {
		if _, dup := rank[w]; !dup {
			rank[w] = r
		}
	}
	b := newBuilder(j, n)
	done := make([][]string, n) // per rank: its flows of the previous exchange
	for it := 0; it < j.Iterations; it++ {
		ck := plan.Key{Job: j.Name, Iteration: it, Phase: job.PhaseCompute}
		ak := plan.Key{Job: j.Name, Iteration: it, Phase: job.PhaseAllToAll}
		b.e.phases = append(b.e.phases, ck, ak)
		computed := b.compute(j, j.Workers, it, done)
		next := make([][]string, n)
		for _, f := range j.FlowsINC(job.PhaseAllToAll, false) {
			src, dst := rank[f.Src], rank[f.Dst]
			name := b.add(ak, plan.Task{Kind: plan.TaskTransfer, Src: f.Src, Dst: f.Dst, Bytes: int64(math.Round(f.Bytes)), After: []string{computed[src]}}, src, dst)
			next[src] = append(next[src], name)
			next[dst] = append(next[dst], name)
		}
		for r := range next {
			done[r] = next[r]
			if len(done[r]) == 0 { // every peer on the rank's own server
				done[r] = []string{computed[r]}
			}
		}
	}
	return b.dag, b.e
}

// ringOf is a ring job's ring order.
func ringOf(j *plan.Job) []string {
	if len(j.Ring) > 0 {
		return j.Ring
	}
	return j.Workers
}

// distinct reports whether no server appears twice.
func distinct(servers []string) bool {
	seen := map[string]bool{}
	for _, s := range servers {
		if seen[s] {
			return false
		}
		seen[s] = true
	}
	return true
}

// expandRing builds the task graph of a ring all-reduce job. The workers
// pipeline the ring (collective/pipeline.go): a rank sends a piece of a
// step as soon as it has received that piece of the step before, so a rank
// whose compute ended early sends its own chunk, and forwards what its
// early predecessors sent, while a late rank still computes. In the graph
// each of the 2(n-1) steps is one chunk (S/n) per ring link, in pieces
// (ringPieces); a piece leaves when the rank has sent the piece before it
// and received the same piece of the previous step, and no piece beyond
// the receiver's window (RingWindowBytes) leaves before the receiver has
// computed. At equal rates the links stay as busy as in lockstep; a late
// rank or a slow link delays only the pieces that need it.
func expandRing(j *plan.Job) (plan.Job, *expanded) {
	ring := ringOf(j)
	n := len(ring)
	b := newBuilder(j, n)
	b.e.ring = true
	pieces := ringPieces(j.Bytes, n)
	done := make([][]string, n) // per rank: its last send and last receive
	for it := 0; it < j.Iterations; it++ {
		ck := plan.Key{Job: j.Name, Iteration: it, Phase: job.PhaseCompute}
		ak := plan.Key{Job: j.Name, Iteration: it, Phase: job.PhaseAllReduce}
		b.e.phases = append(b.e.phases, ck, ak)
		computed := b.compute(j, ring, it, done)
		last := slices.Clone(computed) // per rank: its last send so far
		sent := make([]int64, n)       // per rank: bytes sent so far
		var prev [][]string            // per rank: the previous step's sends, piece by piece
		for k := 0; k < 2*(n-1); k++ {
			cur := make([][]string, n)
			for r := range ring {
				up, down := (r+n-1)%n, (r+1)%n
				for q, piece := range pieces {
					after := []string{last[r]}
					if k > 0 {
						after = append(after, prev[up][q])
					}
					if sent[r] < RingWindowBytes && sent[r]+piece > RingWindowBytes {
						after = append(after, computed[down]) // the receiver's window is full until it reads
					}
					sent[r] += piece
					last[r] = b.add(ak, plan.Task{Kind: plan.TaskTransfer, Src: ring[r], Dst: ring[down], Bytes: piece, After: after}, r, down)
					cur[r] = append(cur[r], last[r])
				}
			}
			prev = cur
		}
		for r := range ring {
			done[r] = []string{last[r], last[(r+n-1)%n]} // its last send, its predecessor's to it
		}
	}
	return b.dag, b.e
}

// tasksOf returns the keys of an original phase's tasks, if its job is
// expanded.
func (pr *perRank) tasksOf(jobName string, k plan.Key) ([]plan.Key, bool) {
	e, ok := pr.jobs[jobName]
	if !ok {
		return nil, false
	}
	ts, ok := e.byKey[k]
	if !ok {
		return nil, false
	}
	keys := make([]plan.Key, len(ts))
	for i, t := range ts {
		keys[i] = plan.Key{Job: jobName, Phase: e.tasks[t].name}
	}
	return keys, true
}

// original maps a task's key back to the phase it belongs to (the key
// itself when it is not a task), for messages.
func (pr *perRank) original(k plan.Key) plan.Key {
	if e, ok := pr.jobs[k.Job]; ok {
		if i, ok := e.byName[k.Phase]; ok {
			return e.tasks[i].key
		}
	}
	return k
}

// fold replaces the expanded jobs' task records with their original
// phases, timed as the emulation times them: from the first rank's start
// to the last rank's end, DurationNs the longest time one rank spent in
// the phase (a rank starts an exchange when it could: its compute done and
// the phase released), SkewNs the spread of the ranks' starts; a ring's
// all-reduce from its last rank's start to its last end.
func (pr *perRank) fold(run *record.Run) {
	if len(pr.jobs) == 0 {
		return
	}
	type span struct {
		start, end int64
		bytes      float64
	}
	tasks := map[string]map[string]span{} // job -> task -> its record
	var kept []record.Phase
	for _, ph := range run.Phases {
		if _, ok := pr.jobs[ph.Job]; !ok {
			kept = append(kept, ph)
			continue
		}
		if tasks[ph.Job] == nil {
			tasks[ph.Job] = map[string]span{}
		}
		tasks[ph.Job][ph.Phase] = span{ph.StartNs, ph.EndNs, ph.Bytes}
	}
	for _, name := range slices.Sorted(maps.Keys(pr.jobs)) {
		e, ts := pr.jobs[name], tasks[name]
		var prevEnd []int64 // per rank: when its part of the previous phase ended
		for _, k := range e.phases {
			first, last := int64(math.MaxInt64), int64(-1)
			var bytes float64
			rankStart, rankEnd := make([]int64, e.ranks), make([]int64, e.ranks)
			for r := range rankEnd {
				rankStart[r], rankEnd[r] = -1, -1
			}
			for _, i := range e.byKey[k] {
				t := e.tasks[i]
				sp, ok := ts[t.name]
				if !ok {
					continue
				}
				first, last = min(first, sp.start), max(last, sp.end)
				bytes += sp.bytes
				rankEnd[t.src] = max(rankEnd[t.src], sp.end)
				rankEnd[t.dst] = max(rankEnd[t.dst], sp.end)
				if k.Phase == job.PhaseCompute {
					rankStart[t.src] = sp.start
				}
			}
			if last < 0 {
				prevEnd = nil
				continue // never ran
			}
			ph := record.Phase{Job: name, Iteration: k.Iteration, Phase: k.Phase, Rank: -1, StartNs: first, EndNs: last, Bytes: bytes}
			rel, released := pr.release[k]
			lastStart := int64(-1)
			for r, end := range rankEnd {
				st := rankStart[r]
				if k.Phase != job.PhaseCompute {
					st = first
					if prevEnd != nil && prevEnd[r] >= 0 {
						st = prevEnd[r]
					}
					if released {
						st = max(st, rel)
					}
				}
				if end < 0 || st < 0 {
					continue
				}
				ph.StartNs = min(ph.StartNs, st)
				ph.DurationNs = max(ph.DurationNs, end-st)
				lastStart = max(lastStart, st)
			}
			ph.SkewNs = lastStart - ph.StartNs
			if e.ring && k.Phase != job.PhaseCompute {
				// Timed from when its last rank could start, as the
				// emulation times a ring (workers.Summarize).
				ph.StartNs, ph.SkewNs = lastStart, 0
				ph.DurationNs = last - lastStart
			}
			kept = append(kept, ph)
			prevEnd = rankEnd
		}
	}
	run.Phases = byStart(kept)
}

// maxRingPieces bounds the pieces of one ring step in the model, whose
// events grow with them: the quickstart's ring (16 pieces of 256 KiB a
// step) predicts the same with 4, 8 or 16 (docs/fidelity.md).
const maxRingPieces = 16

// ringPieces splits one ring step's chunk (a rank's S/n) into the
// pipeline's pieces (job.PipePieceBytes, at most maxRingPieces of them),
// their bytes summing to the chunk's.
func ringPieces(bytes int64, ranks int) []int64 {
	chunk := int64(math.Round(float64(bytes) / float64(ranks)))
	m := int64(min(maxRingPieces, max(1, (chunk+job.PipePieceBytes-1)/job.PipePieceBytes)))
	pieces := make([]int64, m)
	for q := range pieces {
		pieces[q] = chunk / m
		if int64(q) < chunk%m {
			pieces[q]++
		}
	}
	return pieces
}

// RingWindowBytes is how much a ring rank's predecessor can send it before
// it has started its all-reduce and reads: the connection's receive
// window. Taken as 1 MiB: Linux autotunes a receive buffer to about twice
// what the application read per round trip (0.6 MB at 1 Gbit/s and a
// 2.5 ms queue). The quickstart's measured head start needs at least
// 512 KiB (at 64 KiB the model loses it: docs/fidelity.md).
const RingWindowBytes = 1 << 20
