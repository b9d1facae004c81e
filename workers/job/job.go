// Package job is the workers' own description of what they run: a job's
// collective pattern and its phases, its ranks and sizes, and the schedule
// that gates its phases. It is pure Go. The emu side converts a plan into
// these types once (emu/orchestrate); nothing in workers/ reads a plan or
// a scenario. The pattern and phase names defined here are the ones the
// scenario and plan formats use.
package job

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/ocsemu/ocsemu/dataplane/limits"
)

// Collective patterns of a job.
const (
	PatternPS       = "ps"       // parameter server: push gradients, pull the sum
	PatternRing     = "ring"     // ring all-reduce: reduce-scatter + all-gather
	PatternAllToAll = "alltoall" // expert-parallel token exchange
	PatternHD       = "hd"       // halving-doubling all-reduce (paper 003)
)

// Phases of one iteration, per pattern, in dependency order.
const (
	PhaseCompute   = "compute"
	PhasePush      = "push"
	PhasePull      = "pull"
	PhaseAllReduce = "allreduce"
	PhaseAllToAll  = "alltoall"
)

// PipePieceBytes is the pipelined all-reduces' forwarding unit: a rank
// sends a piece on to the next once it has arrived whole (the workers'
// pipeline; the flow model's ring follows it).
const PipePieceBytes = 256 << 10

// Phases returns the phases of one iteration of a pattern, in order, or
// nil for an unknown pattern.
func Phases(pattern string) []string {
	switch pattern {
	case PatternPS:
		return []string{PhaseCompute, PhasePush, PhasePull}
	case PatternRing, PatternHD:
		return []string{PhaseCompute, PhaseAllReduce}
	case PatternAllToAll:
		return []string{PhaseCompute, PhaseAllToAll}
	}
	return nil
}

// AllReduceSteps is how many steps the all-reduce of a pattern takes with
// n workers: halving-doubling 2 log2(n) (halving, then doubling), ring
// 2(n-1) (reduce-scatter, then all-gather); 0 for other patterns.
func AllReduceSteps(pattern string, n int) int {
	switch {
	case pattern == PatternHD && n >= 2:
		l := 0
		for k := 1; k < n; k <<= 1 {
			l++
		}
		return 2 * l
	case pattern == PatternRing && n >= 2:
		return 2 * (n - 1)
	}
	return 0
}

// StepPhase names step k of the all-reduce: "allreduce.3".
func StepPhase(k int) string { return fmt.Sprintf("%s.%d", PhaseAllReduce, k) }

// ParseStep reads a step phase name; ok is false for any other phase.
func ParseStep(phase string) (k int, ok bool) {
	rest, found := strings.CutPrefix(phase, PhaseAllReduce+".")
	if !found {
		return 0, false
	}
	k, err := strconv.Atoi(rest)
	if err != nil || k < 0 || StepPhase(k) != phase {
		return 0, false
	}
	return k, true
}

// StepPhases returns one iteration's phases when the all-reduce runs step
// by step: compute, then allreduce.0 ... allreduce.<steps-1>. Patterns
// without steps keep their phases.
func StepPhases(pattern string, n int) []string {
	steps := AllReduceSteps(pattern, n)
	if steps == 0 {
		return Phases(pattern)
	}
	out := []string{PhaseCompute}
	for k := 0; k < steps; k++ {
		out = append(out, StepPhase(k))
	}
	return out
}

// Key names one phase of one iteration of one job.
type Key struct {
	Job       string
	Iteration int
	Phase     string
}

func (k Key) String() string {
	return fmt.Sprintf("%s iteration %d phase %s", k.Job, k.Iteration, k.Phase)
}

// Job is one job as the workers run it.
type Job struct {
	Name       string   `json:"name"`
	Pattern    string   `json:"pattern"`
	Workers    []string `json:"workers"`    // servers, one rank each
	Bytes      int64    `json:"bytes"`      // per worker per iteration
	ComputeNs  int64    `json:"compute_ns"` // per iteration
	Iterations int      `json:"iterations"`
	ArrivalNs  int64    `json:"arrival_ns,omitempty"`
	// PS is the server of the CPU parameter server (ps pattern).
	PS string `json:"ps,omitempty"`
	// Ring is the ring order (ring pattern); empty: Workers order.
	Ring []string `json:"ring,omitempty"`
	// CongestionControl of the job's sockets; empty: the namespace default.
	CongestionControl string `json:"congestion_control,omitempty"`
	// Steps runs the all-reduce one algorithm step at a time, each step a
	// phase of its own (StepPhase) gated by its own stage (plan v2).
	Steps bool `json:"steps,omitempty"`
	// INC, on a ps job, aggregates in the ToRs instead of a CPU parameter
	// server: push is the whole in-network all-reduce, pull only checks it.
	INC *INC `json:"inc,omitempty"`
	// INCIterations (plan v2, INC decided per stage) says, per iteration,
	// whether the job aggregates in the ToRs (true) or at its CPU parameter
	// server PS (false); nil: every iteration as INC says.
	INCIterations []bool `json:"inc_iterations,omitempty"`
	// Tasks (pattern dag) are one iteration's task graph; Bytes and
	// ComputeNs stay 0 (dag.go).
	Tasks []Task `json:"tasks,omitempty"`
}

// INC is how a job reaches the ToR aggregators that admitted it.
type INC struct {
	// ID is the job's number at the aggregators.
	ID uint16 `json:"id"`
	// Window is the number of slots each worker keeps in flight, at most
	// the job's partition of a ToR's slot pool.
	Window int `json:"window"`
	// Congestion: the workers run INC congestion control (workers/inc).
	Congestion bool `json:"congestion,omitempty"`
}

// UsesPS reports whether the job runs a CPU parameter server.
func (j *Job) UsesPS() bool {
	if j.Pattern != PatternPS {
		return false
	}
	if j.INC == nil {
		return true
	}
	for _, inc := range j.INCIterations {
		if !inc {
			return true
		}
	}
	return false
}

// INCAt reports whether iteration it aggregates in the ToRs.
func (j *Job) INCAt(it int) bool {
	if j.INC == nil {
		return false
	}
	return j.INCIterations == nil || it >= 0 && it < len(j.INCIterations) && j.INCIterations[it]
}

// Phases returns the job's phase sequence over all iterations. With
// Steps, the all-reduce phase becomes its steps; a dag job's phases are
// its tasks, in the order given.
func (j *Job) Phases() []Key {
	ph := Phases(j.Pattern)
	if j.Pattern == PatternDAG {
		ph = make([]string, len(j.Tasks))
		for i, t := range j.Tasks {
			ph[i] = t.Name
		}
	}
	if j.Steps {
		ph = StepPhases(j.Pattern, len(j.Workers))
	}
	out := make([]Key, 0, max(j.Iterations, 0)*len(ph))
	for it := 0; it < j.Iterations; it++ {
		for _, p := range ph {
			out = append(out, Key{Job: j.Name, Iteration: it, Phase: p})
		}
	}
	return out
}

// Schedule modes.
const (
	// ModeBarrier: a stage starts when the previous one has finished, or at
	// its planned start if that is later.
	ModeBarrier = "barrier"
	// ModeClock: a stage starts exactly at its planned start.
	ModeClock = "clock"
)

// Schedule gates the phases of the jobs: each phase starts in a stage.
type Schedule struct {
	Mode   string
	Stages []Stage
}

// Stage is one step of a schedule.
type Stage struct {
	StartNs    int64 // planned start from time zero
	Activities []Activity
}

// Activity is one phase that starts in a stage; StartNs, if set, is the
// phase's own earliest start from time zero.
type Activity struct {
	Key
	StartNs *int64
}

// MaxFlows bounds the flows of a scenario's or plan's jobs together.
const MaxFlows = limits.MaxFlows

// FlowsPerIteration is how many flows one iteration of a pattern with n
// workers puts into the flow model: ps 2n (push and pull), ring n (each
// rank to the next), halving-doubling n per step, all-to-all n(n-1); 0
// for a dag, whose flows are its tasks' (bounded by their own limit).
func FlowsPerIteration(pattern string, n int) int {
	switch pattern {
	case PatternPS:
		return 2 * n
	case PatternRing:
		return n
	case PatternHD:
		return AllReduceSteps(pattern, n) * n
	case PatternAllToAll:
		return n * (n - 1)
	}
	return 0
}

// Flows sums jobs' flows over their iterations, against MaxFlows: the
// one count the scenario and plan checks share.
type Flows struct {
	total, most int
	mostJob     string
}

// Add counts a job (workers and iterations are clamped to their limits,
// which the checks report on their own).
func (f *Flows) Add(name, pattern string, workers, iterations int) {
	n := FlowsPerIteration(pattern, min(max(workers, 0), limits.MaxWorkers)) * min(max(iterations, 0), limits.MaxIterations)
	if n > f.most {
		f.most, f.mostJob = n, name
	}
	f.total += n
}

// Check refuses more than MaxFlows, naming the job that makes the most.
func (f Flows) Check() error {
	if f.total <= MaxFlows {
		return nil
	}
	return fmt.Errorf("the jobs make %d flows over their iterations (%s: %d), more than the %d the flow model holds: fewer workers or iterations", f.total, f.mostJob, f.most, MaxFlows)
}

// CheckWorkers checks a job's number of workers against its pattern: the
// one definition the scenario and plan checks share. Halving-doubling
// pairs ranks at distance 1, 2, 4, ..., so it needs a power of two.
func CheckWorkers(pattern string, n int) error {
	if pattern == PatternHD && (n < 1 || n&(n-1) != 0) {
		return fmt.Errorf("halving-doubling needs a power-of-two number of workers, got %d", n)
	}
	return nil
}

// SameMembers reports whether a and b hold the same names, each as often
// (a ring order against a job's workers).
func SameMembers(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	m := map[string]int{}
	for _, x := range a {
		m[x]++
	}
	for _, x := range b {
		if m[x]--; m[x] < 0 {
			return false
		}
	}
	return true
}
