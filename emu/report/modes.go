package report

import (
	"fmt"
	"slices"
)

// Two kinds of run. TCP's sharing of a contended link can fall out one
// way or the other from run to run: on the quickstart the parameter
// server's first push runs at about 210-238 ms when its flows hold their
// own beside the ring and at 260-276 ms when the ring takes the shared
// uplink (docs/fidelity.md). A median of such a set is a mix of the two,
// and the models, which predict one time, land between them; the set's
// summary says so rather than let a median stand for both.

// ModeGap is the least gap between two groups of a phase's runs, as a
// share of its median, that splits them into two kinds; the gap must
// also be wider than either group's own range, and each group must hold
// ModeMinRuns runs.
const (
	ModeGap     = 0.10
	ModeMinRuns = 2
)

// Mode is one group of a phase's runs: how many, and their range and
// median (ns).
type Mode struct {
	Runs     int   `json:"runs"`
	MinNs    int64 `json:"min_ns"`
	MaxNs    int64 `json:"max_ns"`
	MedianNs int64 `json:"median_ns"`
}

// twoModes splits a phase's measured times at their widest gap when it
// makes two kinds of run (ModeGap, ModeMinRuns): the faster group, then
// the slower. ok is false when the times form one group.
func twoModes(xs []int64) (fast, slow Mode, ok bool) {
	if len(xs) < 2*ModeMinRuns {
		return Mode{}, Mode{}, false
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	med, _, _ := medianRange(s)
	cut, gap := 0, int64(-1)
	for i := ModeMinRuns; i <= len(s)-ModeMinRuns; i++ {
		if g := s[i] - s[i-1]; g > gap {
			cut, gap = i, g
		}
	}
	lo, hi := s[:cut], s[cut:]
	if med <= 0 || float64(gap) < ModeGap*float64(med) || gap <= lo[len(lo)-1]-lo[0] || gap <= hi[len(hi)-1]-hi[0] {
		return Mode{}, Mode{}, false
	}
	mode := func(g []int64) Mode {
		m, a, b := medianRange(g)
		return Mode{Runs: len(g), MinNs: a, MaxNs: b, MedianNs: m}
	}
	return mode(lo), mode(hi), true
}

// ModesText says a row's two kinds of run and where the judged model's
// prediction lies against their medians; "" for a row of one kind.
func (r RepeatRow) ModesText() string {
	if len(r.Modes) != 2 {
		return ""
	}
	fast, slow := r.Modes[0], r.Modes[1]
	m := judgedModel(r)
	p := r.Predicted[m]
	where := ""
	if p > 0 {
		pos := "between them"
		switch {
		case p < fast.MinNs:
			pos = "below both"
		case p <= fast.MaxNs:
			pos = "within the faster group"
		case p > slow.MaxNs:
			pos = "above both"
		case p >= slow.MinNs:
			pos = "within the slower group"
		}
		where = fmt.Sprintf("; %s %s ms lies %s: the faster group's median is %s off it, the slower's %s", Models[m], fmtMsF(float64(p)), pos,
			pct(relErr(float64(p), float64(fast.MedianNs))), pct(relErr(float64(p), float64(slow.MedianNs))))
	}
	return fmt.Sprintf("%s: %d runs at %s-%s ms, %d at %s-%s ms%s", phaseName(r), fast.Runs, fmtMsF(float64(fast.MinNs)), fmtMsF(float64(fast.MaxNs)),
		slow.Runs, fmtMsF(float64(slow.MinNs)), fmtMsF(float64(slow.MaxNs)), where)
}

// ModesLines are the set's phases of two kinds of run, one line each.
func (t *RepeatTable) ModesLines() []string {
	var out []string
	for _, r := range t.Rows {
		if l := r.ModesText(); l != "" {
			out = append(out, l)
		}
	}
	return out
}
