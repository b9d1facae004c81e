package workers_test

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ocsemu/ocsemu/workers"
	"github.com/ocsemu/ocsemu/workers/job"
)

// dagJob is a small task graph over three ranks with every kind of
// dependency: a transfer after a compute on its sender, a compute after a
// transfer into its server, a transfer that waits for a compute on
// another server (relayed by the coordinator: a waits for c's "prep"),
// two transfers at once on one pair, and iterations chained through the
// sinks.
func dagJob(iterations int) job.Job {
	return job.Job{Name: "g", Pattern: job.PatternDAG, Workers: []string{"a", "b", "c"}, Iterations: iterations, Tasks: []job.Task{
		{Name: "fwd", Kind: job.TaskCompute, Server: "a", ComputeNs: 2e6},
		{Name: "prep", Kind: job.TaskCompute, Server: "c", ComputeNs: 3e6},
		{Name: "ab", Kind: job.TaskTransfer, Src: "a", Dst: "b", Bytes: 300_001, After: []string{"fwd"}},
		{Name: "ab2", Kind: job.TaskTransfer, Src: "a", Dst: "b", Bytes: 70_000, After: []string{"fwd"}},
		{Name: "ac", Kind: job.TaskTransfer, Src: "a", Dst: "c", Bytes: 123_456, After: []string{"fwd", "prep"}},
		{Name: "bwd", Kind: job.TaskCompute, Server: "b", ComputeNs: 1e6, After: []string{"ab", "ab2"}},
		{Name: "back", Kind: job.TaskTransfer, Src: "b", Dst: "a", Bytes: 5, After: []string{"bwd"}},
	}}
}

// TestDAGLoopback runs a task graph on loopback ranks: every task runs
// once per iteration on the right ranks, after every task it waits for,
// and every transfer moves exactly its bytes, checked by its receiver.
func TestDAGLoopback(t *testing.T) {
	j := dagJob(2)
	dir := ""
	errs, cerr := runLoopback(t, j, func(s *workers.Spec) { dir = filepath.Dir(s.Out) })
	if err := errors.Join(append(errs, cerr)...); err != nil {
		t.Fatal(err)
	}
	var recs []workers.PhaseRecord
	for r := range j.Workers {
		recs = append(recs, phaseRecords(t, filepath.Join(dir, fmt.Sprintf("rank%d.jsonl", r)))...)
	}
	checkDAGRecords(t, j, recs)
}

// TestDAGLoopbackBarrier runs the graph in barrier mode, one stage per
// iteration: the coordinator counts one report per task (its receiver's,
// or its computing server's) and starts iteration 1's stage once every
// task of iteration 0 has ended.
func TestDAGLoopbackBarrier(t *testing.T) {
	j := dagJob(2)
	sched := &job.Schedule{Mode: job.ModeBarrier, Stages: make([]job.Stage, 2)}
	for it := range 2 {
		for _, tk := range j.Tasks {
			sched.Stages[it].Activities = append(sched.Stages[it].Activities, job.Activity{Key: job.Key{Job: j.Name, Iteration: it, Phase: tk.Name}})
		}
	}
	dir := ""
	errs, cerr := runLoopbackSchedule(t, j, sched, func(s *workers.Spec) {
		dir = filepath.Dir(s.Out)
		s.Mode = job.ModeBarrier
		s.Gates = nil
		for _, k := range j.Phases() {
			s.Gates = append(s.Gates, workers.Gate{Stage: k.Iteration, NotBeforeNs: -1})
		}
	})
	if err := errors.Join(append(errs, cerr)...); err != nil {
		t.Fatal(err)
	}
	var recs []workers.PhaseRecord
	for r := range j.Workers {
		recs = append(recs, phaseRecords(t, filepath.Join(dir, fmt.Sprintf("rank%d.jsonl", r)))...)
	}
	checkDAGRecords(t, j, recs)
}

// checkDAGRecords checks a task graph's records: one per task and
// iteration from each rank taking part, exact bytes, dependencies kept.
func checkDAGRecords(t *testing.T, j job.Job, recs []workers.PhaseRecord) {
	t.Helper()
	type key struct {
		it   int
		task string
	}
	start, end := map[key]int64{}, map[key]int64{}
	seen := map[key]int{}
	idx := map[string]int{}
	for i, w := range j.Workers {
		idx[w] = i
	}
	byName := map[string]job.Task{}
	for _, tk := range j.Tasks {
		byName[tk.Name] = tk
	}
	for _, r := range recs {
		tk, ok := byName[r.Phase]
		if !ok {
			t.Fatalf("record of unknown task %q", r.Phase)
		}
		k := key{r.Iteration, r.Phase}
		seen[k]++
		switch {
		case tk.Kind == job.TaskCompute:
			if r.Rank != idx[tk.Server] || r.EndNs-r.StartNs < tk.ComputeNs {
				t.Errorf("%v: rank %d computed %d ns, want rank %d for %d ns", k, r.Rank, r.EndNs-r.StartNs, idx[tk.Server], tk.ComputeNs)
			}
			start[k], end[k] = r.StartNs, r.EndNs
		case r.Rank == idx[tk.Src]:
			if r.Bytes != tk.Bytes || !r.Verified {
				t.Errorf("%v: sender sent %d B (verified %v), want %d", k, r.Bytes, r.Verified, tk.Bytes)
			}
			start[k] = r.StartNs
		case r.Rank == idx[tk.Dst]:
			if r.RecvBytes != tk.Bytes || r.Bytes != 0 || !r.Verified {
				t.Errorf("%v: receiver got %d B (sent %d, verified %v), want %d", k, r.RecvBytes, r.Bytes, r.Verified, tk.Bytes)
			}
			end[k] = r.EndNs
		default:
			t.Errorf("%v: recorded by rank %d, which takes no part", k, r.Rank)
		}
	}
	for it := 0; it < j.Iterations; it++ {
		for _, tk := range j.Tasks {
			k := key{it, tk.Name}
			want := 1
			if tk.Kind == job.TaskTransfer {
				want = 2
			}
			if seen[k] != want {
				t.Errorf("%v: %d records, want %d", k, seen[k], want)
			}
			deps := tk.After
			if len(deps) == 0 && it > 0 {
				deps = []string{"back", "ac"} // the sinks
			}
			for _, d := range deps {
				dk := key{it, d}
				if len(tk.After) == 0 {
					dk.it = it - 1
				}
				if start[k] < end[dk] {
					t.Errorf("%v started at %d, before %v ended at %d", k, start[k], dk, end[dk])
				}
			}
		}
	}
}

// A task-graph rank that fails (here: its records cannot be written)
// fails the job: the coordinator aborts the others, whose waits for
// relayed tasks and whose reads end instead of hanging.
func TestDAGLoopbackFailure(t *testing.T) {
	j := dagJob(2)
	errs, cerr := runLoopback(t, j, func(s *workers.Spec) {
		if s.Rank == 2 {
			s.Out = "/dev/full" // every write fails with ENOSPC
		}
	})
	if cerr == nil {
		t.Fatal("the coordinator reports no failure")
	}
	if errs[2] == nil || !strings.Contains(errs[2].Error(), "/dev/full") {
		t.Errorf("rank 2: %v, want the records' error naming /dev/full", errs[2])
	}
	failed := 0
	for _, err := range errs {
		if err != nil {
			failed++
		}
	}
	if failed < 2 {
		t.Errorf("%d ranks failed, want the failing rank and those that wait for it: %v", failed, errs)
	}
}
