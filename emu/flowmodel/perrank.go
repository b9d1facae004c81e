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

// Per-rank dependencies of all-to-all jobs (the calibrated and TCP-aware
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
// Parameter-server and ring jobs keep lockstep: the same expansion for
// them (a worker pushes once its own pull is done; ring flows start when
// every rank has computed) was tried on 27 recorded quickstart runs and
// made the prediction worse (the parameter server's second push 14.6%
// under the median measured against 3.7% in lockstep; docs/fidelity.md).
// So do jobs a plan caps or decides INC for per activity.

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
}

// perRank is the set of expanded jobs of one simulation.
type perRank struct {
	jobs    map[string]*expanded
	release map[plan.Key]int64 // when each original phase was released
}

func taskName(it int, phase string, i int) string { return fmt.Sprintf("i%d.%s.%d", it, phase, i) }

// newPerRank expands the plan's all-to-all jobs; jobs is what the
// simulation runs (expanded jobs replaced, the rest as they were).
func newPerRank(p *plan.Plan) (*perRank, []plan.Job) {
	special := map[string]bool{}
	for _, st := range p.Stages {
		for _, a := range st.Activities {
			if a.INC != nil || a.RateCapBps > 0 || len(a.Flows) > 0 || a.Step != nil {
				special[a.Job] = true
			}
		}
	}
	pr := &perRank{jobs: map[string]*expanded{}, release: map[plan.Key]int64{}}
	jobs := make([]plan.Job, len(p.Jobs))
	for i := range p.Jobs {
		j := &p.Jobs[i]
		if j.Pattern != job.PatternAllToAll || j.Steps || special[j.Name] || len(j.Workers) < 2 {
			jobs[i] = *j
			continue
		}
		dag, e := expandJob(j)
		pr.jobs[j.Name] = e
		jobs[i] = dag
	}
	return pr, jobs
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
	e := &expanded{byKey: map[plan.Key][]int{}, byName: map[string]int{}, ranks: n}
	dag := plan.Job{Name: j.Name, Pattern: plan.PatternDAG, Workers: j.Workers, Iterations: 1, ArrivalNs: j.ArrivalNs}
	add := func(k plan.Key, t plan.Task, src, dst int) string {
		t.Name = taskName(k.Iteration, k.Phase, len(e.byKey[k]))
		dag.Tasks = append(dag.Tasks, t)
		e.byName[t.Name] = len(e.tasks)
		e.byKey[k] = append(e.byKey[k], len(e.tasks))
		e.tasks = append(e.tasks, rankTask{name: t.Name, key: k, src: src, dst: dst})
		return t.Name
	}
	done := make([][]string, n) // per rank: its flows of the previous exchange
	for it := 0; it < j.Iterations; it++ {
		ck := plan.Key{Job: j.Name, Iteration: it, Phase: job.PhaseCompute}
		ak := plan.Key{Job: j.Name, Iteration: it, Phase: job.PhaseAllToAll}
		e.phases = append(e.phases, ck, ak)
		computed := make([]string, n)
		for r, w := range j.Workers {
			computed[r] = add(ck, plan.Task{Kind: plan.TaskCompute, Server: w, ComputeNs: j.ComputeNs, After: done[r]}, r, r)
		}
		next := make([][]string, n)
		for _, f := range j.FlowsINC(job.PhaseAllToAll, false) {
			src, dst := rank[f.Src], rank[f.Dst]
			name := add(ak, plan.Task{Kind: plan.TaskTransfer, Src: f.Src, Dst: f.Dst, Bytes: int64(math.Round(f.Bytes)), After: []string{computed[src]}}, src, dst)
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
	return dag, e
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
// the phase released), SkewNs the spread of the ranks' starts.
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
			kept = append(kept, ph)
			prevEnd = rankEnd
		}
	}
	run.Phases = byStart(kept)
}
