package main

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/ocsemu/ocsemu/emu/fidelity"
	"github.com/ocsemu/ocsemu/emu/orchestrate"
	"github.com/ocsemu/ocsemu/emu/plan"
	"github.com/ocsemu/ocsemu/workers"
	"github.com/ocsemu/ocsemu/workers/job"
	"github.com/ocsemu/ocsemu/workers/record"
)

// The terminal shows a task-graph job (hundreds of tasks per iteration,
// paper 004's DLRM has 608) one row per iteration: its span from the
// first task's start to the last one's end, predicted beside measured.
// Every task's own row is in comparison.csv and phases.csv.

// iterPhase is the phase name of an iteration's row.
const iterPhase = "iteration"

func dagJobs(p *plan.Plan) map[string]bool {
	m := map[string]bool{}
	for _, j := range p.Jobs {
		if j.Pattern == plan.PatternDAG {
			m[j.Name] = true
		}
	}
	return m
}

// iterSpans returns each (job, iteration)'s first start and last end in
// a run, for the dag jobs.
func iterSpans(r *record.Run, dag map[string]bool) map[job.Key][2]int64 {
	out := map[job.Key][2]int64{}
	if r == nil {
		return out
	}
	for _, ph := range r.Phases {
		if !dag[ph.Job] {
			continue
		}
		k := job.Key{Job: ph.Job, Iteration: ph.Iteration, Phase: iterPhase}
		sp, ok := out[k]
		if !ok {
			sp = [2]int64{math.MaxInt64, math.MinInt64}
		}
		out[k] = [2]int64{min(sp[0], ph.StartNs), max(sp[1], ph.EndNs)}
	}
	return out
}

// collapseDAG replaces the rows of dag jobs' tasks by one per iteration.
func collapseDAG(cs []orchestrate.Comparison, pred, meas *record.Run, dag map[string]bool) []orchestrate.Comparison {
	if len(dag) == 0 {
		return cs
	}
	ps, ms := iterSpans(pred, dag), iterSpans(meas, dag)
	var out []orchestrate.Comparison
	for _, c := range cs {
		if !dag[c.Job] {
			out = append(out, c)
		}
	}
	for k, m := range ms {
		p, ok := ps[k]
		if !ok {
			continue
		}
		c := orchestrate.Comparison{Job: k.Job, Iteration: k.Iteration, Phase: iterPhase,
			PredictedNs: p[1] - p[0], MeasuredNs: m[1] - m[0], PredEndNs: p[1], MeasEndNs: m[1]}
		if c.PredictedNs > 0 {
			c.RelErr = float64(c.MeasuredNs-c.PredictedNs) / float64(c.PredictedNs)
		}
		out = append(out, c)
	}
	slices.SortFunc(out, func(a, b orchestrate.Comparison) int {
		return cmp.Or(strings.Compare(a.Job, b.Job), cmp.Compare(a.Iteration, b.Iteration), cmp.Compare(a.PredEndNs, b.PredEndNs))
	})
	return out
}

// collapseStats replaces dag jobs' task rows by one per iteration (no
// bandwidth: an iteration is no single transfer).
func collapseStats(stats []workers.PhaseStat, dag map[string]bool, p *plan.Plan) []workers.PhaseStat {
	ranks := map[string]int{}
	for _, j := range p.Jobs {
		ranks[j.Name] = len(j.Workers)
	}
	if len(dag) == 0 {
		return stats
	}
	var out []workers.PhaseStat
	it := map[job.Key]*workers.PhaseStat{}
	for _, s := range stats {
		if !dag[s.Job] {
			out = append(out, s)
			continue
		}
		k := job.Key{Job: s.Job, Iteration: s.Iteration}
		a := it[k]
		if a == nil {
			a = &workers.PhaseStat{Job: s.Job, Iteration: s.Iteration, Phase: iterPhase, StartNs: s.StartNs, EndNs: s.EndNs, Verified: true}
			it[k] = a
		}
		a.Ranks = ranks[s.Job]
		a.StartNs, a.EndNs = min(a.StartNs, s.StartNs), max(a.EndNs, s.EndNs)
		a.DurationNs = a.EndNs - a.StartNs
		a.Verified = a.Verified && (s.Verified || s.Bytes == 0)
	}
	for _, a := range it {
		out = append(out, *a)
	}
	slices.SortFunc(out, func(a, b workers.PhaseStat) int {
		return cmp.Or(strings.Compare(a.Job, b.Job), cmp.Compare(a.Iteration, b.Iteration), cmp.Compare(a.StartNs, b.StartNs))
	})
	return out
}

// maxAttributionRows is how many attribution rows the terminal shows; the
// rest are in attribution.csv.
const maxAttributionRows = 20

// worstAttributions keeps the rows with the largest errors, and says how
// many it left out.
func worstAttributions(as []fidelity.Attribution) ([]fidelity.Attribution, string) {
	if len(as) <= maxAttributionRows {
		return as, ""
	}
	out := slices.Clone(as)
	slices.SortFunc(out, func(a, b fidelity.Attribution) int {
		return cmp.Compare(math.Abs(b.JudgedErr()), math.Abs(a.JudgedErr()))
	})
	return out[:maxAttributionRows], fmt.Sprintf("   (the %d largest errors of %d phases; all of them in attribution.csv)", maxAttributionRows, len(as))
}
