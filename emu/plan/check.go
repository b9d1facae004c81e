package plan

import (
	"errors"
	"fmt"
	"time"

	"github.com/ocsemu/ocsemu/dataplane/limits"
	"github.com/ocsemu/ocsemu/dataplane/names"
	"github.com/ocsemu/ocsemu/emu/scenario"
	"github.com/ocsemu/ocsemu/ocsfabric/circuit"
	"github.com/ocsemu/ocsemu/ocsfabric/routing"
	"github.com/ocsemu/ocsemu/workers/job"
)

// MaxErrors bounds how many problems Check reports.
const MaxErrors = 20

// Bounds that keep a hostile plan from exhausting memory.
const (
	MaxIterations = limits.MaxIterations
	MaxWorkers    = limits.MaxWorkers
)

// Check validates a plan against the scenario it will run on: jobs and
// their servers exist, every stage's circuits are a valid configuration
// (ports exist, each port used once per OCS), the circuits an activity
// needs exist or a multi-hop path does, INC capacity per ToR is respected,
// and every phase of every iteration is scheduled exactly once, in
// dependency order. Errors name the stage, job and field.
func Check(p *Plan, s *scenario.Scenario) error {
	var errs []error
	bad := func(format string, a ...any) bool {
		if len(errs) < MaxErrors {
			errs = append(errs, fmt.Errorf(format, a...))
		}
		return len(errs) < MaxErrors
	}
	f := s.Fabric
	if p.Scenario != "" && p.Scenario != s.Name {
		bad("plan is for scenario %q, not %q", p.Scenario, s.Name)
	}
	switch p.Mode {
	case ModeBarrier, ModeClock:
	default:
		bad("mode: %q is not a mode (want %q or %q)", p.Mode, ModeBarrier, ModeClock)
	}
	if d := p.ReconfigDelayNs; d != nil && (*d < limits.MinReconfigDelayNs || *d > limits.MaxReconfigDelayNs) {
		bad("reconfig_delay_ns: must be between %d and %d (%v), got %d", limits.MinReconfigDelayNs, limits.MaxReconfigDelayNs, time.Duration(limits.MaxReconfigDelayNs), *d)
	}
	jobs := map[string]*Job{}
	for i := range p.Jobs {
		j := &p.Jobs[i]
		where := fmt.Sprintf("jobs[%d] (%s)", i, j.Name)
		if j.Name == "" {
			bad("jobs[%d]: name is empty", i)
			continue
		}
		if err := names.ValidJob(j.Name); err != nil {
			bad("%s: name: %v", where, err)
		}
		if _, dup := jobs[j.Name]; dup {
			bad("%s: duplicate job name", where)
		}
		jobs[j.Name] = j
		checkJob(j, s, where, bad)
	}
	if len(p.Stages) == 0 && len(p.Jobs) > 0 {
		bad("stages: the plan has jobs but no stages")
	}

	layout := circuit.LayoutOf(s.Spec())
	firstStage := map[string]int{} // INC job -> first and last stage it is active
	lastStage := map[string]int{}
	scheduled := map[Key]int{} // -> stage
	for si, st := range p.Stages {
		where := fmt.Sprintf("stage %d", si)
		if st.StartNs < 0 {
			bad("%s: start_ns must not be negative", where)
		}
		if si > 0 {
			prev := p.Stages[si-1]
			switch {
			case p.Mode == ModeClock && st.StartNs < prev.StartNs+prev.DurationNs:
				bad("%s: start_ns %d overlaps stage %d, which runs until %d", where, st.StartNs, si-1, prev.StartNs+prev.DurationNs)
			case st.StartNs < prev.StartNs:
				bad("%s: start_ns %d is before stage %d's %d", where, st.StartNs, si-1, prev.StartNs)
			}
		}
		if p.Mode == ModeClock && st.DurationNs <= 0 {
			bad("%s: duration_ns is required and positive in clock mode", where)
		}
		if len(st.Circuits) > 0 && !f.HasOCS() {
			bad("%s: circuits given, but the scenario's %s fabric has no OCS", where, f.Kind)
		} else if err := layout.Validate(circuit.Config{Circuits: st.Circuits}); err != nil && f.HasOCS() {
			bad("%s: circuits: %v", where, err)
		}
		var paths *routing.Paths
		if f.Kind == scenario.KindOCS {
			paths = routing.NewPaths(f.Racks, circuit.Config{Circuits: st.Circuits})
		}
		for ai, a := range st.Activities {
			aw := fmt.Sprintf("%s, activities[%d] (job %s)", where, ai, a.Job)
			j, ok := jobs[a.Job]
			if !ok {
				bad("%s: job: no job %q in the plan", aw, a.Job)
				continue
			}
			if a.Iteration < 0 || a.Iteration >= j.Iterations {
				bad("%s: iteration: %d is out of range (the job has %d)", aw, a.Iteration, j.Iterations)
				continue
			}
			if !validPhase(j.Pattern, a.Phase) {
				bad("%s: phase: %q is not a phase of a %s job (want %v)", aw, a.Phase, j.Pattern, scenario.Phases(j.Pattern))
				continue
			}
			k := Key{Job: a.Job, Iteration: a.Iteration, Phase: a.Phase}
			if prev, dup := scheduled[k]; dup {
				bad("%s: %s is scheduled twice (also in stage %d)", aw, k, prev)
				continue
			}
			scheduled[k] = si
			if a.StartNs != nil && *a.StartNs < st.StartNs {
				bad("%s: start_ns %d is before its stage starts (%d)", aw, *a.StartNs, st.StartNs)
			}
			if a.RateCapBps < 0 {
				bad("%s: rate_cap_bps must not be negative", aw)
			}
			checkFlowCaps(j, a, aw, bad)
			if paths != nil {
				for _, pr := range j.RackPairs(a.Phase) {
					if paths.Hops(pr[0], pr[1]) < 0 {
						bad("%s: %s needs rack %d -> rack %d, but the stage's circuits give no path", aw, a.Phase, pr[0], pr[1])
						break
					}
				}
			}
			if j.INC {
				if _, ok := firstStage[j.Name]; !ok {
					firstStage[j.Name] = si
				}
				lastStage[j.Name] = si
			}
		}
	}
	// Every phase exactly once, in dependency order.
	for _, j := range p.Jobs {
		if j.Iterations > MaxIterations {
			continue
		}
		prevStage, prev := -1, Key{}
		for _, k := range j.Phases() {
			si, ok := scheduled[k]
			if !ok {
				if !bad("job %s: %s is never scheduled", j.Name, k) {
					break
				}
				continue
			}
			if prevStage >= 0 && (si < prevStage || si == prevStage && p.Mode == ModeBarrier) {
				bad("job %s: %s is in stage %d but must come after %s (stage %d)", j.Name, k, si, prev, prevStage)
			}
			prevStage, prev = si, k
		}
	}
	checkINC(p, f, firstStage, lastStage, bad)
	return errors.Join(errs...)
}

func validPhase(pattern, phase string) bool {
	for _, p := range scenario.Phases(pattern) {
		if p == phase {
			return true
		}
	}
	return false
}

func checkJob(j *Job, s *scenario.Scenario, where string, bad func(string, ...any) bool) {
	if scenario.Phases(j.Pattern) == nil {
		bad("%s: pattern: %q is not a pattern (ps, ring, alltoall, hd)", where, j.Pattern)
	}
	if len(j.Workers) < 2 || len(j.Workers) > MaxWorkers {
		bad("%s: workers: a job needs between 2 and %d", where, MaxWorkers)
	}
	seen := map[string]bool{}
	for i, w := range j.Workers {
		if err := serverOK(s, w); err != nil {
			bad("%s: workers[%d]: %v", where, i, err)
		}
		if seen[w] {
			bad("%s: workers[%d]: %s is listed twice", where, i, w)
		}
		seen[w] = true
	}
	if j.Bytes <= 0 || j.Bytes > limits.MaxBytes {
		bad("%s: bytes: must be between 1 and %d (1 TiB, the most per worker per iteration the flow model's arithmetic allows), got %d", where, limits.MaxBytes, j.Bytes)
	}
	if j.ComputeNs < 0 {
		bad("%s: compute_ns: must not be negative", where)
	}
	if j.ArrivalNs < 0 {
		bad("%s: arrival_ns: must not be negative", where)
	}
	if j.Iterations < 1 || j.Iterations > MaxIterations {
		bad("%s: iterations: must be between 1 and %d", where, MaxIterations)
	}
	if j.Pattern == scenario.PatternPS {
		switch {
		case j.INC:
			if r := Rack(j.Aggregator); !IsToR(j.Aggregator) || r < 0 || r >= s.Fabric.Racks {
				bad("%s: aggregator: %q is not a ToR of the fabric (want tor<rack>)", where, j.Aggregator)
			}
		case j.PS == "":
			bad("%s: ps: a ps job without INC needs a parameter server", where)
		default:
			if err := serverOK(s, j.PS); err != nil {
				bad("%s: ps: %v", where, err)
			}
		}
	}
	if j.Pattern == scenario.PatternRing && len(j.Ring) > 0 && !scenario.SameMembers(j.Ring, j.Workers) {
		bad("%s: ring: must list every worker exactly once", where)
	}
	if err := job.CheckWorkers(j.Pattern, len(j.Workers)); err != nil {
		bad("%s: workers: %v", where, err)
	}
}

func serverOK(s *scenario.Scenario, name string) error { return s.Fabric.CheckServer(name) }

func checkFlowCaps(j *Job, a Activity, where string, bad func(string, ...any) bool) {
	if len(a.Flows) == 0 {
		return
	}
	real := map[[2]string]bool{}
	for _, fl := range j.Flows(a.Phase) {
		real[[2]string{fl.Src, fl.Dst}] = true
	}
	for i, fc := range a.Flows {
		if !real[[2]string{fc.Src, fc.Dst}] {
			bad("%s: flows[%d]: %s -> %s is not a flow of %s", where, i, fc.Src, fc.Dst, a.Phase)
		}
		if fc.RateCapBps <= 0 {
			bad("%s: flows[%d]: rate_cap_bps must be positive", where, i)
		}
	}
}

// checkINC counts, per stage, the INC jobs active on each ToR (from the
// stage of their first activity to that of their last) against capacity.
func checkINC(p *Plan, f scenario.Fabric, first, last map[string]int, bad func(string, ...any) bool) {
	if len(first) == 0 {
		return
	}
	capacity := f.INC.Capacity
	for si := range p.Stages {
		use := map[string][]string{}
		for _, j := range p.Jobs {
			f0, ok := first[j.Name]
			if !j.INC || !ok || f0 > si || last[j.Name] < si {
				continue
			}
			for _, t := range j.ToRs() {
				use[t] = append(use[t], j.Name)
			}
		}
		for t, js := range use {
			if len(js) > capacity {
				if !bad("stage %d: %s aggregates %d INC jobs %v, over its capacity of %d", si, t, len(js), js, capacity) {
					return
				}
			}
		}
	}
}
