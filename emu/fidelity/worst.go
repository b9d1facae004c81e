package fidelity

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"strings"
)

// ExplainWorst adds to the verdict's accuracy line, when it did not
// pass, what the attribution found in the phase furthest off the model
// it judges: its time beyond that model, the largest parts beyond it
// (drift and the measured ones) and what none explains. A line that
// fails on a phase the run's own measurements account for (a flow's
// slow start cut early, a late rank) then says so, and one whose phase
// is left unexplained says that too.
func (v *Verdict) ExplainWorst(as []Attribution) {
	i := slices.IndexFunc(v.Lines, func(l Line) bool { return l.Check == "model accuracy" })
	if i < 0 || v.Lines[i].Status == Pass || v.Lines[i].Status == NA {
		return
	}
	a, ok := largest(as, func(a Attribution) bool { return a.TCPAwareNs > 0 || a.CalibratedNs > 0 },
		func(a Attribution) float64 { return math.Abs(a.JudgedErr()) })
	if !ok {
		return
	}
	model, name := a.TCPAwareNs, "TCP-aware"
	if model <= 0 {
		model, name = a.CalibratedNs, "calibrated"
	}
	type part struct {
		name string
		ns   int64
	}
	var parts []part
	beyond := false
	for _, p := range Parts {
		beyond = beyond || p == PartDrift
		if beyond && p != PartResidual && a.Parts[p] != 0 {
			parts = append(parts, part{p, a.Parts[p]})
		}
	}
	slices.SortStableFunc(parts, func(x, y part) int { return cmp.Compare(math.Abs(float64(y.ns)), math.Abs(float64(x.ns))) })
	var said []string
	for _, p := range parts[:min(3, len(parts))] {
		said = append(said, fmt.Sprintf("%s %+.1f ms", p.name, ms(p.ns)))
	}
	if len(said) == 0 {
		said = append(said, "no part")
	}
	share, _ := a.ResidualShare()
	v.Lines[i].Why += fmt.Sprintf("; its worst phase, %s iteration %d %s, %+.1f ms off the %s model: %s, %+.1f ms left (%+.1f points)",
		a.Job, a.Iteration, a.Phase, ms(a.MeasuredNs-model), name, strings.Join(said, ", "), ms(a.Parts[PartResidual]), 100*share)
}
