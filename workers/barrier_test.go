package workers

import (
	"testing"

	"github.com/ocsemu/ocsemu/workers/job"
)

// A stage starts only when every rank has finished every activity of the
// stage before; an empty stage ends as it starts.
func TestBarrier(t *testing.T) {
	jobs := []job.Job{{Name: "a", Workers: []string{"r0s0", "r1s0"}}, {Name: "b", Workers: []string{"r2s0"}}}
	k := func(j, ph string) job.Key { return job.Key{Job: j, Phase: ph} }
	s := &job.Schedule{Mode: job.ModeBarrier, Stages: []job.Stage{
		{StartNs: 0, Activities: []job.Activity{{Key: k("a", "compute")}, {Key: k("b", "compute")}}},
		{StartNs: 10, Activities: nil},
		{StartNs: 20, Activities: []job.Activity{{Key: k("a", "allreduce")}}},
	}}
	b := newBarrier(s, jobs)
	if b.stages() != 3 {
		t.Fatalf("stages = %d", b.stages())
	}
	if b.started(0, 100) {
		t.Fatal("stage 0 has work but reads as empty")
	}
	if _, ok := b.done(k("a", "compute"), 150); ok {
		t.Error("stage 0 finished after one of three completions")
	}
	if _, ok := b.done(k("zz", "compute"), 150); ok {
		t.Error("an unknown phase advanced the barrier")
	}
	b.done(k("b", "compute"), 170)
	next, ok := b.done(k("a", "compute"), 160)
	if !ok || next != 1 {
		t.Fatalf("after the last completion of stage 0: next %d, %v", next, ok)
	}
	if b.ends[0] != 170 {
		t.Errorf("stage 0 ended %d, want the latest completion 170", b.ends[0])
	}
	if !b.started(1, 180) || b.ends[1] != 180 {
		t.Error("an empty stage must end when it starts")
	}
	if b.started(2, 190) {
		t.Error("stage 2 has work")
	}
	b.done(k("a", "allreduce"), 200)
	if next, ok := b.done(k("a", "allreduce"), 210); !ok || next != 3 || b.ends[2] != 210 {
		t.Errorf("stage 2: next %d, %v, end %d", next, ok, b.ends[2])
	}
}
