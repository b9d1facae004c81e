// Package taskgraph is the pure bookkeeping of a task-graph job (pattern
// dag, plan v2, paper 004) as the workers run it: which server starts,
// knows and waits for which task, and who must be told that a task has
// finished. Each server's rank runs its own compute tasks (timed waits)
// and sends its own transfers, each when the tasks it waits for are done
// and its gate has opened; receivers read whatever arrives. A rank knows
// first-hand of the tasks it takes part in (a transfer's sender hears of
// its end from the receiver's acknowledgement); the coordinator relays the
// others' ends to the ranks that wait for them (Needers).
package taskgraph

import (
	"fmt"
	"slices"

	"github.com/ocsemu/ocsemu/workers/job"
)

// Graph is one iteration's task graph with its edges resolved.
type Graph struct {
	Tasks []job.Task
	Index map[string]int
	// Preds[k] are the tasks k waits for in its iteration (After); Succs
	// the reverse.
	Preds, Succs [][]int
	// Roots wait for nothing in their iteration (from the second on they
	// wait for every sink of the previous one); Sinks nothing waits for.
	Roots, Sinks []int
}

// New resolves a task graph. It refuses what the workers cannot run: a
// duplicate or empty name, an unknown kind, a dependency that is unknown
// or not listed before its task (which rules out cycles), a transfer to
// itself, and a server outside workers.
func New(tasks []job.Task, workers []string) (*Graph, error) {
	g := &Graph{Tasks: tasks, Index: make(map[string]int, len(tasks)),
		Preds: make([][]int, len(tasks)), Succs: make([][]int, len(tasks))}
	member := map[string]bool{}
	for _, w := range workers {
		member[w] = true
	}
	for k, t := range tasks {
		if t.Name == "" {
			return nil, fmt.Errorf("tasks[%d]: no name", k)
		}
		if _, dup := g.Index[t.Name]; dup {
			return nil, fmt.Errorf("tasks[%d]: name %q given twice", k, t.Name)
		}
		switch t.Kind {
		case job.TaskCompute:
			if !member[t.Server] || t.ComputeNs < 0 {
				return nil, fmt.Errorf("task %s: compute on %q for %d ns: want one of the job's workers and a time >= 0", t.Name, t.Server, t.ComputeNs)
			}
		case job.TaskTransfer:
			if !member[t.Src] || !member[t.Dst] || t.Src == t.Dst || t.Bytes < 1 {
				return nil, fmt.Errorf("task %s: transfer %q -> %q of %d B: want two different workers of the job and at least 1 B", t.Name, t.Src, t.Dst, t.Bytes)
			}
		default:
			return nil, fmt.Errorf("task %s: kind %q is not compute or transfer", t.Name, t.Kind)
		}
		for _, a := range t.After {
			p, ok := g.Index[a]
			if !ok {
				return nil, fmt.Errorf("task %s: after %q: no such task listed before it", t.Name, a)
			}
			if !slices.Contains(g.Preds[k], p) {
				g.Preds[k] = append(g.Preds[k], p)
				g.Succs[p] = append(g.Succs[p], k)
			}
		}
		g.Index[t.Name] = k
	}
	for k := range tasks {
		if len(g.Preds[k]) == 0 {
			g.Roots = append(g.Roots, k)
		}
		if len(g.Succs[k]) == 0 {
			g.Sinks = append(g.Sinks, k)
		}
	}
	return g, nil
}

// Starter is the server that starts a task: the computing server, or a
// transfer's sender. Only the starter waits for the task's dependencies.
func Starter(t *job.Task) string {
	if t.Kind == job.TaskCompute {
		return t.Server
	}
	return t.Src
}

// Knows reports whether server learns first-hand that the task has
// finished: the computing server, a transfer's receiver (it has the last
// byte) and its sender (from the receiver's acknowledgement).
func Knows(t *job.Task, server string) bool {
	if t.Kind == job.TaskCompute {
		return t.Server == server
	}
	return t.Src == server || t.Dst == server
}

// Needers lists the servers that must be told that task k of an iteration
// has finished because they start a task that waits for it and do not
// know it first-hand: the starters of k's successors and, when k is a
// sink and another iteration follows (more), of the next iteration's
// roots. Sorted, without repeats.
func (g *Graph) Needers(k int, more bool) []string {
	var out []string
	add := func(q int) {
		s := Starter(&g.Tasks[q])
		if !Knows(&g.Tasks[k], s) && !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	for _, q := range g.Succs[k] {
		add(q)
	}
	if more && len(g.Succs[k]) == 0 {
		for _, q := range g.Roots {
			add(q)
		}
	}
	slices.Sort(out)
	return out
}

// Deps returns the phases (iteration, task) that task k of iteration it
// waits for: its After tasks, or, for a root after the first iteration,
// every sink of the previous one.
func (g *Graph) Deps(it, k int) [][2]int {
	var out [][2]int
	for _, p := range g.Preds[k] {
		out = append(out, [2]int{it, p})
	}
	if len(g.Preds[k]) == 0 && it > 0 {
		for _, s := range g.Sinks {
			out = append(out, [2]int{it - 1, s})
		}
	}
	return out
}

// Local lists the tasks server takes part in, by their index.
func (g *Graph) Local(server string) []int {
	var out []int
	for k := range g.Tasks {
		if g.Tasks[k].Involves(server) {
			out = append(out, k)
		}
	}
	return out
}

// MaxBytes is the largest transfer of the graph (0 without transfers).
func (g *Graph) MaxBytes() int64 {
	var m int64
	for _, t := range g.Tasks {
		if t.Kind == job.TaskTransfer {
			m = max(m, t.Bytes)
		}
	}
	return m
}
