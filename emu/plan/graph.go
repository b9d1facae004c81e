package plan

import (
	"fmt"
	"regexp"

	"github.com/ocsemu/ocsemu/workers/job"
)

// PatternDAG is the v2 job kind whose iteration is a task graph (Tasks).
const PatternDAG = job.PatternDAG

// Task kinds of a dag job.
const (
	TaskCompute  = job.TaskCompute
	TaskTransfer = job.TaskTransfer
)

// Bounds on task graphs, so that a hostile plan cannot exhaust memory.
const (
	MaxTasks        = job.MaxTasks // per dag job (one iteration)
	MaxTaskPhases   = 1_000_000
	maxTaskNameLen  = 64
	taskNamePattern = `^[a-z][a-z0-9._-]*$`
)

var taskName = regexp.MustCompile(taskNamePattern)

// dagIndex maps task names to their index in Tasks.
type dagIndex struct {
	n     int
	index map[string]int
	sinks []int // tasks no other task waits for
}

func (j *Job) dagIdx() *dagIndex {
	if j.dag != nil && j.dag.n == len(j.Tasks) {
		return j.dag
	}
	d := &dagIndex{n: len(j.Tasks), index: make(map[string]int, len(j.Tasks))}
	for i, t := range j.Tasks {
		if _, dup := d.index[t.Name]; !dup {
			d.index[t.Name] = i
		}
	}
	waited := make([]bool, len(j.Tasks))
	for _, t := range j.Tasks {
		for _, a := range t.After {
			if i, ok := d.index[a]; ok {
				waited[i] = true
			}
		}
	}
	for i, w := range waited {
		if !w {
			d.sinks = append(d.sinks, i)
		}
	}
	j.dag = d
	return d
}

// Task returns the dag job's task of that name.
func (j *Job) Task(name string) (*Task, bool) {
	if j.Pattern != PatternDAG {
		return nil, false
	}
	i, ok := j.dagIdx().index[name]
	if !ok {
		return nil, false
	}
	return &j.Tasks[i], true
}

// IterPhases returns the phase names of one iteration, in order: the
// pattern's phases, the all-reduce's steps (Steps), or the tasks of a dag
// job in the order given.
func (j *Job) IterPhases() []string {
	switch {
	case j.Pattern == PatternDAG:
		out := make([]string, len(j.Tasks))
		for i, t := range j.Tasks {
			out[i] = t.Name
		}
		return out
	case j.Steps:
		return job.StepPhases(j.Pattern, len(j.Workers))
	}
	return job.Phases(j.Pattern)
}

// Phases returns the job's phases over all iterations.
func (j *Job) Phases() []Key {
	ph := j.IterPhases()
	out := make([]Key, 0, max(j.Iterations, 0)*len(ph))
	for it := 0; it < j.Iterations; it++ {
		for _, p := range ph {
			out = append(out, Key{Job: j.Name, Iteration: it, Phase: p})
		}
	}
	return out
}

// Preds returns, for every phase of Phases, the indexes of the phases it
// waits for. Patterns are chains (each phase waits for the one before);
// in a dag job a task waits for its After tasks, and a task without any
// waits for every sink of the previous iteration. Unknown task names in
// After are skipped (Check reports them).
func (j *Job) Preds() [][]int {
	per := len(j.IterPhases())
	n := max(j.Iterations, 0) * per
	out := make([][]int, n)
	if j.Pattern != PatternDAG {
		for q := 1; q < n; q++ {
			out[q] = []int{q - 1}
		}
		return out
	}
	return job.DAGPreds(j.Tasks, j.Iterations)
}

// ComputeNs returns how long a phase computes, and whether it is a
// compute phase at all.
func (j *Job) ComputeNsOf(phase string) (int64, bool) {
	if j.Pattern == PatternDAG {
		if t, ok := j.Task(phase); ok && t.Kind == TaskCompute {
			return t.ComputeNs, true
		}
		return 0, false
	}
	if phase == job.PhaseCompute {
		return j.ComputeNs, true
	}
	return 0, false
}

// ActivityPhase returns the phase name an activity stands for: its Phase,
// or with Step the step's phase ("allreduce.2").
func ActivityPhase(a Activity) string {
	if a.Step != nil {
		return job.StepPhase(*a.Step)
	}
	return a.Phase
}

// stepFlows returns the transfers of all-reduce step k (Steps).
//
//   - hd, L = log2(n) steps each way: step k < L is halving step k, rank
//     i with rank i xor 2^k, S/2^(k+1) each way; step L+m is the doubling
//     step with the same partner and bytes as halving step L-1-m.
//   - ring: every step, rank i to rank i+1 (ring order), S/n.
func (j *Job) stepFlows(k int, add func(src, dst string, b float64)) {
	S, n := float64(j.Bytes), len(j.Workers)
	steps := job.AllReduceSteps(j.Pattern, n)
	if k < 0 || k >= steps {
		return
	}
	switch j.Pattern {
	case job.PatternHD:
		l := steps / 2
		e := k
		if k >= l {
			e = 2*l - 1 - k
		}
		d := 1 << e
		for i := range j.Workers {
			// A worker count that is not a power of two is refused by
			// CheckWorkers; listing flows meanwhile must not panic.
			if p := i ^ d; p < n {
				add(j.Workers[i], j.Workers[p], S/float64(2*d))
			}
		}
	case job.PatternRing:
		ring := j.Ring
		if len(ring) == 0 {
			ring = j.Workers
		}
		for i := range ring {
			add(ring[i], ring[(i+1)%n], S/float64(n))
		}
	}
}

// checkV2 refuses v2 constructs in a version 1 plan and checks a dag
// job's task graph: names, kinds, endpoints, sizes and dependencies.
func (c *checker) checkV2Job(j *Job, where string) {
	if c.p.Version < 2 {
		switch {
		case j.Steps:
			c.bad("%s: steps: per-step activities need plan_version 2", where)
		case j.Pattern == PatternDAG || len(j.Tasks) > 0:
			c.bad("%s: task graphs (pattern dag, tasks) need plan_version 2", where)
		}
	}
	if j.Steps && job.AllReduceSteps(j.Pattern, len(j.Workers)) == 0 {
		c.bad("%s: steps: only hd and ring all-reduces run step by step, not %s", where, j.Pattern)
	}
	if j.Pattern != PatternDAG {
		if len(j.Tasks) > 0 {
			c.bad("%s: tasks: only a dag job has a task graph (pattern is %s)", where, j.Pattern)
		}
		return
	}
	if len(j.Tasks) == 0 || len(j.Tasks) > MaxTasks {
		c.bad("%s: tasks: a dag job needs between 1 and %d tasks", where, MaxTasks)
		return
	}
	if j.Iterations >= 1 && j.Iterations*len(j.Tasks) > MaxTaskPhases {
		c.bad("%s: iterations x tasks is %d, more than %d", where, j.Iterations*len(j.Tasks), MaxTaskPhases)
	}
	if j.Bytes != 0 || j.ComputeNs != 0 {
		c.bad("%s: bytes and compute_ns belong to the tasks of a dag job; leave them 0", where)
	}
	workers := map[string]bool{}
	for _, w := range j.Workers {
		workers[w] = true
	}
	d := j.dagIdx()
	for i, t := range j.Tasks {
		tw := fmt.Sprintf("%s: tasks[%d] (%s)", where, i, t.Name)
		if len(t.Name) > maxTaskNameLen || !taskName.MatchString(t.Name) {
			if !c.bad("%s: name: want a-z, 0-9, '.', '_' and '-', starting with a letter, at most %d characters", tw, maxTaskNameLen) {
				return
			}
		}
		if d.index[t.Name] != i {
			c.bad("%s: name: also tasks[%d]'s", tw, d.index[t.Name])
		}
		switch t.Kind {
		case TaskCompute:
			if !workers[t.Server] {
				c.bad("%s: server: %q is not one of the job's workers", tw, t.Server)
			}
			if t.ComputeNs < 0 || t.Src != "" || t.Dst != "" || t.Bytes != 0 {
				c.bad("%s: a compute task has a server and compute_ns >= 0, and no src, dst or bytes", tw)
			}
		case TaskTransfer:
			if !workers[t.Src] || !workers[t.Dst] || t.Src == t.Dst {
				c.bad("%s: src and dst: %q -> %q must be two different workers of the job", tw, t.Src, t.Dst)
			}
			if t.Bytes <= 0 || t.Bytes > 1<<40 || t.Server != "" || t.ComputeNs != 0 {
				c.bad("%s: a transfer task has src, dst and bytes between 1 and 1 TiB, and no server or compute_ns", tw)
			}
		default:
			c.bad("%s: kind: %q is not a task kind (compute, transfer)", tw, t.Kind)
		}
		for _, a := range t.After {
			k, ok := d.index[a]
			if !ok {
				c.bad("%s: after: no task %q", tw, a)
			} else if k >= i {
				// Tasks come in a topological order: this rules out cycles
				// and keeps every dependency check one pass.
				c.bad("%s: after: %q must be listed before the task that waits for it", tw, a)
			}
		}
	}
}
