package taskgraph

import (
	"slices"
	"strings"
	"testing"

	"github.com/ocsemu/ocsemu/workers/job"
)

func comp(name, server string, after ...string) job.Task {
	return job.Task{Name: name, Kind: job.TaskCompute, Server: server, ComputeNs: 1, After: after}
}

func xfer(name, src, dst string, after ...string) job.Task {
	return job.Task{Name: name, Kind: job.TaskTransfer, Src: src, Dst: dst, Bytes: 8, After: after}
}

// The servers told of a task's end are the starters of what waits for it
// that do not see it themselves.
func TestNeeders(t *testing.T) {
	g, err := New([]job.Task{
		comp("fwd", "a"),
		comp("prep", "c"),
		xfer("ab", "a", "b", "fwd"),
		xfer("ac", "a", "c", "fwd", "prep"),
		comp("bwd", "b", "ab"),
		xfer("ba", "b", "a", "bwd"),
	}, []string{"a", "b", "c"})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		task string
		more bool
		want []string
	}{
		{"fwd", true, nil},            // ab, ac start on a, which computed fwd
		{"prep", true, []string{"a"}}, // ac starts on a, prep ran on c
		{"ab", true, nil},             // bwd runs on b, ab's receiver
		{"bwd", true, nil},            // ba starts on b
		{"ba", false, nil},            // a sink, and no next iteration
		{"ba", true, []string{"c"}},   // a sink: the next roots fwd (a knows) and prep (c)
		{"ac", true, nil},             // a sink whose next roots start on a (its sender) and c (its receiver)
	} {
		got := g.Needers(g.Index[tc.task], tc.more)
		if !slices.Equal(got, tc.want) {
			t.Errorf("Needers(%s, more %v) = %v, want %v", tc.task, tc.more, got, tc.want)
		}
	}
	if got := g.Deps(1, g.Index["prep"]); len(got) != 2 || got[0][0] != 0 {
		t.Errorf("Deps(1, prep) = %v, want the sinks of iteration 0", got)
	}
	if got := g.Local("c"); !slices.Equal(got, []int{1, 3}) {
		t.Errorf("Local(c) = %v, want [1 3]", got)
	}
}

// New refuses what the workers cannot run, naming the task.
func TestNewRefuses(t *testing.T) {
	ws := []string{"a", "b"}
	for _, tc := range []struct {
		tasks []job.Task
		want  string
	}{
		{[]job.Task{comp("x", "a"), comp("x", "b")}, "given twice"},
		{[]job.Task{comp("x", "a", "y"), comp("y", "b")}, "no such task listed before it"},
		{[]job.Task{xfer("x", "a", "a")}, "two different workers"},
		{[]job.Task{xfer("x", "a", "z")}, "two different workers"},
		{[]job.Task{comp("x", "z")}, "one of the job's workers"},
		{[]job.Task{{Name: "x", Kind: "sleep"}}, "not compute or transfer"},
		{[]job.Task{{Kind: job.TaskCompute, Server: "a"}}, "no name"},
	} {
		if _, err := New(tc.tasks, ws); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("New(%v) = %v, want %q", tc.tasks, err, tc.want)
		}
	}
}
