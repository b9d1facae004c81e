package orchestrate

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/ocsemu/ocsemu/dataplane/monoclock"
	"github.com/ocsemu/ocsemu/emu/plan"
	"github.com/ocsemu/ocsemu/ocsfabric/circuit"
)

func TestStageReporter(t *testing.T) {
	c := func(a, b string) circuit.Circuit {
		ua, _ := circuit.ParseUplink(a)
		ub, _ := circuit.ParseUplink(b)
		return circuit.Circuit{A: ua, B: ub}
	}
	p := &plan.Plan{Stages: []plan.Stage{
		{StartNs: 0, Circuits: []circuit.Circuit{c("tor0:0", "tor1:0")}, Activities: []plan.Activity{{Job: "ring", Phase: "compute"}}},
		{StartNs: 1e6},
		{StartNs: 2e6},
		{StartNs: 3e6, Activities: []plan.Activity{{Job: "ring", Phase: "allreduce"}}},
	}}
	var lines []string
	r := newStageReporter(p, true, 500*time.Millisecond, func(f string, a ...any) { lines = append(lines, fmt.Sprintf(f, a...)) })
	t0 := time.Unix(100, 0)
	r.stage(0, 5e6, 5e6, t0)
	r.stage(1, 6e6, 5e6, t0.Add(time.Millisecond)) // too soon after the last line: skipped
	r.stage(2, 7e6, 5e6, t0.Add(time.Second))      // reported
	r.stage(1, 6e6, 5e6, t0.Add(2*time.Second))    // older than the last reported: skipped
	r.stage(3, 8e6, 5e6, t0.Add(time.Second+1))    // the last stage: always reported
	want := []string{
		"stage 1/4 at +0.0 ms: circuits tor0:0<->tor1:0; starts ring/0/compute",
		"stage 3/4 at +2.0 ms: circuits none; starts nothing",
		"stage 4/4 at +3.0 ms: circuits none; starts ring/0/allreduce",
	}
	if strings.Join(lines, "\n") != strings.Join(want, "\n") {
		t.Errorf("lines:\n%s\nwant:\n%s", strings.Join(lines, "\n"), strings.Join(want, "\n"))
	}
	// emu -v: every stage.
	lines = nil
	r = newStageReporter(p, true, 0, func(f string, a ...any) { lines = append(lines, fmt.Sprintf(f, a...)) })
	for k := range 4 {
		r.stage(k, int64(5e6+k*1e6), 5e6, t0.Add(time.Duration(k)*time.Microsecond))
	}
	if len(lines) != 4 {
		t.Errorf("with every stage asked for, %d lines: %q", len(lines), lines)
	}
	var many []circuit.Circuit
	for i := range 8 {
		many = append(many, c(fmt.Sprintf("tor%d:0", i), fmt.Sprintf("tor%d:1", i)))
	}
	if got := circuitLine(many); !strings.HasSuffix(got, "... (8 in all)") || strings.Count(got, "<->") != 6 {
		t.Errorf("circuitLine of 8 = %q", got)
	}
}

// In clock mode the reporter follows the plan's clock: first and last
// stage reported, the ones between at most every r.every.
func TestStageReporterFollows(t *testing.T) {
	p := &plan.Plan{}
	for k := range 40 {
		p.Stages = append(p.Stages, plan.Stage{StartNs: int64(k) * 5e6}) // 5 ms slots, 195 ms in all
	}
	var lines []string
	r := newStageReporter(p, false, 500*time.Millisecond, func(f string, a ...any) { lines = append(lines, fmt.Sprintf(f, a...)) })
	r.every = 50 * time.Millisecond
	r.follow(context.Background(), monoclock.Now()+int64(10*time.Millisecond)) // time zero ahead: stage 1 is never already past
	if len(lines) < 2 || len(lines) > 8 || !strings.HasPrefix(lines[0], "stage 1/40 ") || !strings.HasPrefix(lines[len(lines)-1], "stage 40/40 ") {
		t.Errorf("lines: %q", lines)
	}
	// emu -v: every stage, in order, also those a late wake-up passed
	// (1 ms slots, shorter than a timer's overshoot under load).
	q := &plan.Plan{}
	for k := range 40 {
		q.Stages = append(q.Stages, plan.Stage{StartNs: int64(k) * 1e6})
	}
	lines = nil
	r = newStageReporter(q, false, 0, func(f string, a ...any) { lines = append(lines, fmt.Sprintf(f, a...)) })
	r.follow(context.Background(), monoclock.Now()+int64(5*time.Millisecond))
	if len(lines) != 40 {
		t.Fatalf("%d lines with every stage asked for, want 40: %q", len(lines), lines)
	}
	for k, l := range lines {
		if !strings.HasPrefix(l, fmt.Sprintf("stage %d/40 ", k+1)) {
			t.Errorf("line %d: %q", k, l)
		}
	}
}
