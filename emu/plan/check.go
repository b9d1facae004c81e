package plan

import (
	"errors"
	"fmt"
	"time"

	"github.com/ocsemu/ocsemu/dataplane/limits"
	"github.com/ocsemu/ocsemu/dataplane/names"
	"github.com/ocsemu/ocsemu/emu/scenario"
	"github.com/ocsemu/ocsemu/ocsfabric/circuit"
	"github.com/ocsemu/ocsemu/ocsfabric/reconfig"
	"github.com/ocsemu/ocsemu/ocsfabric/routing"
	"github.com/ocsemu/ocsemu/workers/job"
)

// ErrNoPath is wrapped when a stage's circuits connect not every rack
// pair an activity needs.
var ErrNoPath = errors.New("the stage's circuits give no path")

// MaxArrivalNs bounds a job's arrival.
const MaxArrivalNs = limits.MaxArrivalNs

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
	c := &checker{p: p, s: s, f: s.Fabric, jobs: map[string]*Job{}, scheduled: map[Key]int{},
		firstStage: map[string]int{}, lastStage: map[string]int{}, incs: iterationINC{}, broken: map[string]bool{}, layout: circuit.LayoutOf(s.Spec())}
	c.checkHeader()
	c.checkJobs()
	for si := range p.Stages {
		c.checkStage(si)
	}
	c.checkOrder()
	checkINC(p, c.f, c.firstStage, c.lastStage, c.bad)
	return errors.Join(c.errs...)
}

// checker collects the problems of one plan, at most MaxErrors.
type checker struct {
	p      *Plan
	s      *scenario.Scenario
	f      scenario.Fabric
	layout circuit.Layout
	errs   []error
	// problems counts every problem found, also past MaxErrors.
	problems int
	jobs     map[string]*Job
	// scheduled maps each phase to the stage it starts in.
	scheduled map[Key]int
	// firstStage and lastStage bound the stages an INC job is active in.
	firstStage, lastStage map[string]int
	// incs holds each ps job iteration's INC decision: push and pull
	// must agree.
	incs iterationINC
	// broken names the jobs that failed their own check: their stages
	// are not checked further (their workers or ring cannot be trusted
	// to build flows from).
	broken map[string]bool
}

// bad records a problem; it reports whether more are still wanted.
func (c *checker) bad(format string, a ...any) bool {
	c.problems++
	if len(c.errs) < MaxErrors {
		c.errs = append(c.errs, fmt.Errorf(format, a...))
	}
	return len(c.errs) < MaxErrors
}

// checkHeader checks what the plan says about itself.
func (c *checker) checkHeader() {
	p := c.p
	if p.Scenario != "" && p.Scenario != c.s.Name {
		c.bad("plan is for scenario %q, not %q", p.Scenario, c.s.Name)
	}
	switch p.Mode {
	case ModeBarrier, ModeClock:
	default:
		c.bad("mode: %q is not a mode (want %q or %q)", p.Mode, ModeBarrier, ModeClock)
	}
	if d := p.ReconfigDelayNs; d != nil && (*d < limits.MinReconfigDelayNs || *d > limits.MaxReconfigDelayNs) {
		c.bad("reconfig_delay_ns: must be between %d and %d (%v), got %d", limits.MinReconfigDelayNs, limits.MaxReconfigDelayNs, time.Duration(limits.MaxReconfigDelayNs), *d)
	}
	if len(p.Stages) == 0 && len(p.Jobs) > 0 {
		c.bad("stages: the plan has jobs but no stages")
	}
}

// checkJobs checks each job on its own and indexes them by name.
func (c *checker) checkJobs() {
	for i := range c.p.Jobs {
		j := &c.p.Jobs[i]
		where := fmt.Sprintf("jobs[%d] (%s)", i, j.Name)
		if j.Name == "" {
			c.bad("jobs[%d]: name is empty", i)
			continue
		}
		if err := names.ValidJob(j.Name); err != nil {
			c.bad("%s: name: %v", where, err)
		}
		if _, dup := c.jobs[j.Name]; dup {
			c.bad("%s: duplicate job name", where)
		}
		c.jobs[j.Name] = j
		before := c.problems
		checkJob(j, c.s, where, c.bad)
		c.checkV2Job(j, where)
		if c.problems > before {
			c.broken[j.Name] = true
		}
	}
	var flows job.Flows
	for i := range c.p.Jobs {
		j := &c.p.Jobs[i]
		flows.Add(j.Name, j.Pattern, len(j.Workers), j.Iterations)
	}
	if err := flows.Check(); err != nil {
		c.bad("jobs: %v", err)
	}
}

// checkStage checks stage si's timing and circuits, and each activity in it.
func (c *checker) checkStage(si int) {
	p, f := c.p, c.f
	st := p.Stages[si]
	where := fmt.Sprintf("stage %d", si)
	if st.StartNs < 0 {
		c.bad("%s: start_ns must not be negative", where)
	}
	if si > 0 {
		prev := p.Stages[si-1]
		switch {
		case p.Mode == ModeClock && st.StartNs < prev.StartNs+prev.DurationNs:
			c.bad("%s: start_ns %d overlaps stage %d, which runs until %d", where, st.StartNs, si-1, prev.StartNs+prev.DurationNs)
		case st.StartNs < prev.StartNs:
			c.bad("%s: start_ns %d is before stage %d's %d", where, st.StartNs, si-1, prev.StartNs)
		}
	}
	if p.Mode == ModeClock && st.DurationNs <= 0 {
		c.bad("%s: duration_ns is required and positive in clock mode", where)
	}
	if p.Mode == ModeClock && f.HasOCS() && si >= 1 && len(p.Stages) >= 2 {
		// The OCS runs stages 1.. as one schedule's slots, each until
		// the next stage starts, the schedule starting with stage 1.
		slot := st.DurationNs
		if si+1 < len(p.Stages) {
			slot = p.Stages[si+1].StartNs - st.StartNs
		}
		if time.Duration(slot) > reconfig.MaxSlot {
			c.bad("%s: its circuits hold for %v until the next stage, but the OCS holds a slot at most %v: add a stage in between", where, time.Duration(slot), reconfig.MaxSlot)
		}
		if si == 1 && time.Duration(st.StartNs) > reconfig.MaxAhead {
			c.bad("%s: start_ns %v is more than the %v ahead an OCS schedule may start", where, time.Duration(st.StartNs), reconfig.MaxAhead)
		}
	}
	if len(st.Circuits) > 0 && !f.HasOCS() {
		c.bad("%s: circuits given, but the scenario's %s fabric has no OCS", where, f.Kind)
	} else if err := c.layout.Validate(circuit.Config{Circuits: st.Circuits}); err != nil && f.HasOCS() {
		c.bad("%s: circuits: %v", where, err)
	}
	var paths *routing.Paths
	if f.Kind == scenario.KindOCS {
		paths = routing.NewPaths(f.Racks, circuit.Config{Circuits: st.Circuits})
	}
	for ai, a := range st.Activities {
		c.checkActivity(si, fmt.Sprintf("%s, activities[%d] (job %s)", where, ai, a.Job), a, paths)
	}
}

// checkActivity checks one activity of stage si: its job, iteration and
// phase exist, it is scheduled once, its caps are sane, and (on an ocs
// fabric) the stage's circuits give its flows a path.
func (c *checker) checkActivity(si int, aw string, a Activity, paths *routing.Paths) {
	st := c.p.Stages[si]
	j, ok := c.jobs[a.Job]
	if !ok {
		c.bad("%s: job: no job %q in the plan", aw, a.Job)
		return
	}
	if a.Iteration < 0 || a.Iteration >= j.Iterations {
		c.bad("%s: iteration: %d is out of range (the job has %d)", aw, a.Iteration, j.Iterations)
		return
	}
	if !c.activityPhaseOK(j, a, aw) {
		return
	}
	inc := j.EffectiveINC(a.INC)
	if err := c.incs.record(si, j, a); err != nil {
		c.bad("%v", err)
	}
	k := Key{Job: a.Job, Iteration: a.Iteration, Phase: ActivityPhase(a)}
	if prev, dup := c.scheduled[k]; dup {
		c.bad("%s: %s is scheduled twice (also in stage %d)", aw, k, prev)
		return
	}
	c.scheduled[k] = si
	if c.broken[a.Job] {
		return // the job's own problems are reported; its flows cannot be built from it
	}
	if a.StartNs != nil && *a.StartNs < st.StartNs {
		c.bad("%s: start_ns %d is before its stage starts (%d)", aw, *a.StartNs, st.StartNs)
	}
	if a.RateCapBps < 0 {
		c.bad("%s: rate_cap_bps must not be negative", aw)
	}
	checkFlowCaps(j, a, aw, c.bad)
	if paths != nil {
		for _, pr := range j.RackPairsINC(k.Phase, inc) {
			if paths.Hops(pr[0], pr[1]) < 0 {
				c.bad("%s: %s needs rack %d -> rack %d, but %w", aw, k.Phase, pr[0], pr[1], ErrNoPath)
				break
			}
		}
	}
	if inc {
		if _, ok := c.firstStage[j.Name]; !ok {
			c.firstStage[j.Name] = si
		}
		c.lastStage[j.Name] = si
	}
}

// checkOrder checks that every phase of every job is scheduled exactly
// once, in dependency order: after each phase it waits for (Job.Preds),
// in a later stage in barrier mode, the same or a later one in clock mode.
func (c *checker) checkOrder() {
	for ji := range c.p.Jobs {
		j := &c.p.Jobs[ji]
		if j.Iterations < 1 || j.Iterations > MaxIterations || len(j.Tasks) > MaxTasks || j.Iterations*len(j.Tasks) > MaxTaskPhases {
			continue // checkJob has said so
		}
		keys, preds := j.Phases(), j.Preds()
		stage := make([]int, len(keys))
		for q, k := range keys {
			si, ok := c.scheduled[k]
			stage[q] = si
			if !ok {
				stage[q] = -1
				if !c.bad("job %s: %s is never scheduled", j.Name, k) {
					return
				}
			}
		}
		for q, k := range keys {
			if stage[q] < 0 {
				continue
			}
			for _, pq := range preds[q] {
				ps := stage[pq]
				if ps >= 0 && (stage[q] < ps || stage[q] == ps && c.p.Mode == ModeBarrier) {
					if !c.bad("job %s: %s is in stage %d but must come after %s (stage %d)", j.Name, k, stage[q], keys[pq], ps) {
						return
					}
					break
				}
			}
		}
	}
}

// activityPhaseOK checks an activity's phase, step and inc against its
// job and the plan's version.
func (c *checker) activityPhaseOK(j *Job, a Activity, aw string) bool {
	if c.p.Version < 2 && (a.Step != nil || a.INC != nil) {
		c.bad("%s: step and inc need plan_version 2", aw)
		return false
	}
	if a.INC != nil {
		switch {
		case j.Pattern != scenario.PatternPS || a.Phase != scenario.PhasePush && a.Phase != scenario.PhasePull:
			c.bad("%s: inc: only the push and pull of a ps job aggregate in the network", aw)
			return false
		case *a.INC && !IsToR(j.Aggregator):
			c.bad("%s: inc: true needs the job's aggregator (root ToR)", aw)
			return false
		case !*a.INC && j.PS == "":
			c.bad("%s: inc: false needs the job's ps (a CPU parameter server)", aw)
			return false
		}
	}
	switch {
	case j.Pattern == PatternDAG:
		if _, ok := j.Task(a.Phase); !ok || a.Step != nil {
			c.bad("%s: phase: %q is not a task of dag job %s", aw, a.Phase, j.Name)
			return false
		}
		return true
	case a.Step != nil:
		steps := 0
		if j.Steps {
			steps = job.AllReduceSteps(j.Pattern, len(j.Workers))
		}
		if a.Phase != scenario.PhaseAllReduce || !j.Steps || *a.Step < 0 || *a.Step >= steps {
			c.bad("%s: step: %d is not a step of %s's all-reduce (the job has steps: %v, %d steps)", aw, *a.Step, j.Name, j.Steps, steps)
			return false
		}
		return true
	case j.Steps && a.Phase == scenario.PhaseAllReduce:
		c.bad("%s: phase: job %s runs its all-reduce step by step: give each step (0 to %d) its own activity with step", aw, j.Name, job.AllReduceSteps(j.Pattern, len(j.Workers))-1)
		return false
	}
	for _, p := range scenario.Phases(j.Pattern) {
		if p == a.Phase {
			return true
		}
	}
	c.bad("%s: phase: %q is not a phase of a %s job (want %v)", aw, a.Phase, j.Pattern, scenario.Phases(j.Pattern))
	return false
}

func checkJob(j *Job, s *scenario.Scenario, where string, bad func(string, ...any) bool) {
	if scenario.Phases(j.Pattern) == nil && j.Pattern != PatternDAG {
		bad("%s: pattern: %q is not a pattern (ps, ring, alltoall, hd, dag)", where, j.Pattern)
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
	if j.Pattern != PatternDAG && (j.Bytes <= 0 || j.Bytes > limits.MaxBytes) {
		bad("%s: bytes: must be between 1 and %d (1 TiB, the most per worker per iteration the flow model's arithmetic allows), got %d", where, limits.MaxBytes, j.Bytes)
	}
	if j.ComputeNs < 0 {
		bad("%s: compute_ns: must not be negative", where)
	}
	if j.ArrivalNs < 0 {
		bad("%s: arrival_ns: must not be negative", where)
	} else if j.ArrivalNs > MaxArrivalNs {
		bad("%s: arrival_ns: must be at most %d (%v): the ranks wait for it, and instants stay far from int64's end", where, int64(MaxArrivalNs), time.Duration(MaxArrivalNs))
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
	inc := j.EffectiveINC(a.INC)
	for _, fl := range j.FlowsINC(ActivityPhase(a), inc) {
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
			// first and last hold the stages of the activities that
			// aggregate in the ToRs: the job's own inc, or a stage's (v2).
			if !ok || f0 > si || last[j.Name] < si {
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
