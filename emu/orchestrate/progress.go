package orchestrate

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/ocsemu/ocsemu/dataplane/monoclock"
	"github.com/ocsemu/ocsemu/emu/plan"
	"github.com/ocsemu/ocsemu/ocsfabric/circuit"
)

// stageReporter prints, while a plan runs, which stage it is in: stage k
// of n, time since time zero, and the stage's circuit map in one line. A
// time-slotted plan can switch every millisecond, so lines come at most
// every `every` (500 ms; 0 with emu -v: every stage), and always for the
// first and the last stage.
type stageReporter struct {
	p        *plan.Plan
	progress func(format string, args ...any)
	every    time.Duration
	last     time.Time
	lastK    int
	circuits bool // the fabric has circuits to show
}

func newStageReporter(p *plan.Plan, circuits bool, every time.Duration, progress func(string, ...any)) *stageReporter {
	return &stageReporter{p: p, progress: progress, every: every, lastK: -1, circuits: circuits}
}

// stage reports that stage k starts `at` (monotonic ns), t0 being time zero.
func (r *stageReporter) stage(k int, at, t0 int64, now time.Time) {
	n := len(r.p.Stages)
	if k <= r.lastK || (now.Sub(r.last) < r.every && k != n-1 && k != 0) {
		return
	}
	r.last, r.lastK = now, k
	var acts []string
	for _, a := range r.p.Stages[k].Activities {
		acts = append(acts, fmt.Sprintf("%s/%d/%s", a.Job, a.Iteration, a.Phase))
	}
	cs := ""
	if r.circuits {
		cs = "circuits " + circuitLine(r.p.Stages[k].Circuits) + "; "
	}
	r.progress("stage %d/%d at +%.1f ms: %sstarts %s", k+1, n, float64(at-t0)/1e6, cs, orNone(strings.Join(acts, " ")))
}

// circuitLine writes a circuit map in one line, shortened when long.
func circuitLine(cs []circuit.Circuit) string {
	if len(cs) == 0 {
		return "none"
	}
	var parts []string
	for i, c := range cs {
		if i == 6 {
			parts = append(parts, fmt.Sprintf("... (%d in all)", len(cs)))
			break
		}
		parts = append(parts, c.String())
	}
	return strings.Join(parts, " ")
}

func orNone(s string) string {
	if s == "" {
		return "nothing"
	}
	return s
}

// follow reports the stages of a clock-mode plan as they come (the OCS
// switches them in the kernel; this only tells the user), until the last
// stage or until ctx ends. It wakes at most every r.every, not once per
// slot, so a rotor schedule of 1 ms slots costs the workers no CPU.
func (r *stageReporter) follow(ctx context.Context, t0 int64) {
	st := r.p.Stages
	for k := -1; ; {
		now := monoclock.Now()
		for k+1 < len(st) && t0+st[k+1].StartNs <= now {
			k++
			if r.every == 0 && k < len(st)-1 && t0+st[k+1].StartNs <= now {
				r.stage(k, t0+st[k].StartNs, t0, time.Now()) // emu -v: the stages a late wake-up passed too
			}
		}
		if k >= 0 {
			r.stage(k, t0+st[k].StartNs, t0, time.Now())
		}
		if k == len(st)-1 {
			return
		}
		wait := time.Duration(t0 + st[k+1].StartNs - now)
		if k >= 0 && k+1 < len(st)-1 {
			wait = max(wait, r.every) // the first and the last stage on time
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
	}
}
