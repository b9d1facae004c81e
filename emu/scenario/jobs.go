package scenario

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/ocsemu/ocsemu/dataplane/limits"
	"github.com/ocsemu/ocsemu/dataplane/names"
	"github.com/ocsemu/ocsemu/emu/dlrm"
	"github.com/ocsemu/ocsemu/workers/job"
)

// Collective patterns and phases: the workers define them (workers/job),
// and the scenario and plan formats use the same names.
const (
	PatternPS       = job.PatternPS
	PatternRing     = job.PatternRing
	PatternAllToAll = job.PatternAllToAll
	PatternHD       = job.PatternHD
	PatternDAG      = job.PatternDAG

	PhaseCompute   = job.PhaseCompute
	PhasePush      = job.PhasePush
	PhasePull      = job.PhasePull
	PhaseAllReduce = job.PhaseAllReduce
	PhaseAllToAll  = job.PhaseAllToAll
)

// Phases returns the phases of one iteration of a pattern, in order.
func Phases(pattern string) []string { return job.Phases(pattern) }

// Job is one training job of a scenario.
type Job struct {
	Name    string   `yaml:"name" json:"name"`
	Pattern string   `yaml:"pattern" json:"pattern"`
	Workers []string `yaml:"workers" json:"workers"` // servers, e.g. r0s1, one rank each
	// Bytes is the gradient (PS, all-reduce) or token (all-to-all) volume
	// of one worker in one iteration.
	Bytes ByteSize `yaml:"bytes,omitempty" json:"bytes,omitempty"`
	// Compute is the compute time of an iteration, or derive it from Model.
	Compute    Duration `yaml:"compute,omitempty" json:"compute,omitempty"`
	Model      *Model   `yaml:"model,omitempty" json:"model,omitempty"`
	Iterations int      `yaml:"iterations" json:"iterations"`
	// INC asks for in-network aggregation (PS pattern only).
	INC bool `yaml:"inc,omitempty" json:"inc,omitempty"`
	// PS is the server of the CPU parameter server (PS pattern without
	// INC); default: the first worker's server.
	PS string `yaml:"ps,omitempty" json:"ps,omitempty"`
	// Ring is the ring order (ring pattern); default: Workers order.
	Ring []string `yaml:"ring,omitempty" json:"ring,omitempty"`
	// Arrival is when the job arrives, from the run's time zero.
	Arrival Duration `yaml:"arrival,omitempty" json:"arrival,omitempty"`
	// TCP overrides the fabric's TCP settings for this job's connections.
	TCP *TCP `yaml:"tcp,omitempty" json:"tcp,omitempty"`
	// Graph (pattern dag) synthesises the job's task graph from a model;
	// the job then has no bytes, and Compute is one server's compute per
	// iteration, split over the graph's compute tasks.
	Graph *Graph `yaml:"graph,omitempty" json:"graph,omitempty"`
}

// Graph names the model a task-graph job's iteration is synthesised from
// (emu/dlrm: paper 004's DLRM, Table II).
type Graph struct {
	Model  string `yaml:"model" json:"model"`   // dlrm
	Config int    `yaml:"config" json:"config"` // Table II's row: 1 or 2
	// Channels is how many rings the all-reduce runs over (each in both
	// directions); 0 means 1.
	Channels int `yaml:"channels,omitempty" json:"channels,omitempty"`
	// ScaleDown divides every transfer's bytes (rates and bytes scaled by
	// one factor); 0 means 1.
	ScaleDown float64 `yaml:"scale_down,omitempty" json:"scale_down,omitempty"`
}

// Tasks synthesises the graph's task graph for the job's workers and
// compute time.
func (j *Job) Tasks() ([]job.Task, error) {
	g := j.Graph
	if g == nil {
		return nil, fmt.Errorf("job %s has no graph", j.Name)
	}
	if g.Model != "dlrm" {
		return nil, fmt.Errorf("graph model %q: the one known model is dlrm", g.Model)
	}
	c, err := dlrm.ByNumber(g.Config)
	if err != nil {
		return nil, err
	}
	if g.Channels < 0 || g.Channels > 64 {
		return nil, fmt.Errorf("channels %d: want 0 (one ring) to 64", g.Channels)
	}
	return dlrm.Tasks(c, dlrm.Options{Workers: j.Workers, ComputeNs: int64(j.ComputeTime()), Channels: g.Channels, ScaleDown: g.ScaleDown})
}

// Model derives compute time as in papers 001/002:
// t = K * tokens * params / (GPU FLOP/s * efficiency), K = 6, or 8 with
// activation recomputation.
type Model struct {
	Params     float64 `yaml:"params" json:"params"`         // parameters, e.g. 7e9
	Tokens     float64 `yaml:"tokens" json:"tokens"`         // tokens per iteration per worker
	GPUTFLOPS  float64 `yaml:"gpu_tflops" json:"gpu_tflops"` // peak TFLOP/s, e.g. 312
	Efficiency float64 `yaml:"efficiency" json:"efficiency"` // model FLOPs utilisation, e.g. 0.4
	Recompute  bool    `yaml:"recompute,omitempty" json:"recompute,omitempty"`
}

// ComputeTime evaluates the model.
func (m Model) ComputeTime() time.Duration {
	k := 6.0
	if m.Recompute {
		k = 8
	}
	s := k * m.Tokens * m.Params / (m.GPUTFLOPS * 1e12 * m.Efficiency)
	return time.Duration(s * 1e9)
}

// ComputeTime is the job's compute time per iteration.
func (j *Job) ComputeTime() time.Duration {
	if j.Model != nil {
		return j.Model.ComputeTime()
	}
	return j.Compute.D()
}

// PSServer is the server that hosts the CPU parameter server.
func (j *Job) PSServer() string {
	if j.PS != "" {
		return j.PS
	}
	if len(j.Workers) > 0 {
		return j.Workers[0]
	}
	return ""
}

// RingOrder is the order of ranks around the ring.
func (j *Job) RingOrder() []string {
	if len(j.Ring) > 0 {
		return j.Ring
	}
	return j.Workers
}

// Scheduler names the planner of a scenario and its settings.
type Scheduler struct {
	Name string `yaml:"name" json:"name"` // fcfs | static | ljf | interleave | tdm | notdm
	// Slot is the time slot of time-slotted schedulers (fcfs); default 1s.
	Slot Duration `yaml:"slot,omitempty" json:"slot,omitempty"`
	// INC: false turns in-network aggregation off for every job without
	// editing them (paper 000's noINC designs); unset or true leaves each
	// job's own inc.
	INC *bool `yaml:"inc,omitempty" json:"inc,omitempty"`
	// ExclusiveServers: a job waits until none of its servers is used by
	// another active job (paper 000's server allocation).
	ExclusiveServers bool `yaml:"exclusive_servers,omitempty" json:"exclusive_servers,omitempty"`
	// Bottleneck (ljf): a circuit is a bottleneck when its load takes
	// longer than this fraction of a slot; default 0.5.
	Bottleneck float64 `yaml:"bottleneck,omitempty" json:"bottleneck,omitempty"`
	// BaseUplinks (ljf): how many uplinks of every ToR the base topology,
	// kept at every slot, uses: 2 (the default) is a ring; more add
	// circuits to racks at growing distances (a circulant graph), so paths
	// are short and fewer circuits must be added where a bottleneck is.
	BaseUplinks int `yaml:"base_uplinks,omitempty" json:"base_uplinks,omitempty"`
	// Order (ljf): which waiting jobs are admitted first when servers are
	// scarce: OrderArrival (default) or OrderLargest (more workers, then
	// more bytes, first).
	Order string `yaml:"order,omitempty" json:"order,omitempty"`
}

// Admission orders (Scheduler.Order).
const (
	OrderArrival = "arrival"
	OrderLargest = "largest"
)

// BottleneckOr is Bottleneck, or its default 0.5.
func (s Scheduler) BottleneckOr() float64 {
	if s.Bottleneck > 0 {
		return s.Bottleneck
	}
	return 0.5
}

// SchedulerNames are the built-in schedulers (emu/scheduler implements them).
var SchedulerNames = []string{"fcfs", "static", "ljf", "interleave", "tdm", "notdm", "oddl", "topox"}

// INCOff reports whether the scheduler settings turn INC off.
func (s Scheduler) INCOff() bool { return s.INC != nil && !*s.INC }

// INC configures in-network aggregation on the ToRs.
type INC struct {
	// Capacity is how many jobs one ToR can aggregate at once (paper 000: 4),
	// at most MaxINCCapacity.
	Capacity int `yaml:"capacity" json:"capacity"`
}

// MaxINCCapacity is the most jobs a ToR can aggregate at once: its
// aggregator's slot pool (inc.DefaultSlots), at least one slot each.
const MaxINCCapacity = 1024

// validateJobs checks the jobs against the fabric.
func (s *Scenario) validateJobs(bad func(field, format string, a ...any)) {
	seen := map[string]int{}
	for i, j := range s.Jobs {
		p := fmt.Sprintf("jobs[%d]", i)
		if err := names.ValidJob(j.Name); err != nil {
			bad(p+".name", "%v", err)
		} else if prev, dup := seen[j.Name]; dup {
			bad(p+".name", "duplicate job name %q (also jobs[%d])", j.Name, prev)
		}
		seen[j.Name] = i
		dag := j.Pattern == PatternDAG
		if Phases(j.Pattern) == nil && !dag {
			bad(p+".pattern", "unknown pattern %q (want ps, ring, alltoall, hd or dag)", j.Pattern)
		}
		switch {
		case dag && j.Graph == nil:
			bad(p+".graph", "a dag job's task graph is synthesised from a model: graph: {model: dlrm, config: 2}")
		case dag:
			if _, err := j.Tasks(); err != nil {
				bad(p+".graph", "%v", err)
			}
		case j.Graph != nil:
			bad(p+".graph", "a graph is for the dag pattern")
		}
		if len(j.Workers) < 2 || len(j.Workers) > limits.MaxWorkers {
			bad(p+".workers", "a job needs between 2 and %d workers, got %d", limits.MaxWorkers, len(j.Workers))
		}
		seen := map[string]bool{}
		for k, w := range j.Workers {
			if err := s.checkServer(w); err != nil {
				bad(fmt.Sprintf("%s.workers[%d]", p, k), "%v", err)
			}
			if seen[w] {
				bad(fmt.Sprintf("%s.workers[%d]", p, k), "server %s is listed twice", w)
			}
			seen[w] = true
		}
		if dag {
			if j.Bytes != 0 {
				bad(p+".bytes", "a dag job's bytes are its graph's transfers; leave bytes out")
			}
		} else if j.Bytes <= 0 {
			bad(p+".bytes", "bytes per iteration is required, e.g. \"64MiB\"")
		} else if int64(j.Bytes) > limits.MaxBytes {
			bad(p+".bytes", "%d bytes is more than the %dTiB per worker per iteration that the flow model's arithmetic allows", int64(j.Bytes), limits.MaxBytes>>40)
		}
		if j.Iterations < 1 || j.Iterations > limits.MaxIterations {
			bad(p+".iterations", "must be between 1 and %d, got %d", limits.MaxIterations, j.Iterations)
		}
		if j.Model != nil {
			m := j.Model
			if j.Compute != 0 {
				bad(p+".model", "give compute or model, not both")
			}
			if m.Params <= 0 || m.Tokens <= 0 || m.GPUTFLOPS <= 0 || m.Efficiency <= 0 || m.Efficiency > 1 {
				bad(p+".model", "params, tokens and gpu_tflops must be positive and efficiency in (0, 1]")
			}
		}
		if j.INC && j.Pattern != PatternPS {
			bad(p+".inc", "in-network aggregation is for the ps pattern")
		}
		if j.PS != "" {
			if j.Pattern != PatternPS {
				bad(p+".ps", "a parameter server is for the ps pattern")
			} else if err := s.checkServer(j.PS); err != nil {
				bad(p+".ps", "%v", err)
			}
		}
		if len(j.Ring) > 0 {
			if j.Pattern != PatternRing {
				bad(p+".ring", "a ring order is for the ring pattern")
			} else if !SameMembers(j.Ring, j.Workers) {
				bad(p+".ring", "the ring order must list every worker exactly once")
			}
		}
		if j.TCP != nil && !ccRE.MatchString(j.TCP.CongestionControl) {
			bad(p+".tcp.congestion_control", "%q is not a congestion control name (e.g. cubic, reno, bbr)", j.TCP.CongestionControl)
		}
		if err := job.CheckWorkers(j.Pattern, len(j.Workers)); err != nil {
			bad(p+".workers", "%v", err)
		}
	}
	var flows job.Flows
	for _, j := range s.Jobs {
		flows.Add(j.Name, j.Pattern, len(j.Workers), j.Iterations)
	}
	if err := flows.Check(); err != nil {
		bad("jobs", "%v", err)
	}
	if n := s.Scheduler.Name; n != "" && !slices.Contains(SchedulerNames, n) {
		bad("scheduler.name", "unknown scheduler %q (built in: %s)", n, strings.Join(SchedulerNames, ", "))
	}
	if b := s.Scheduler.Bottleneck; b < 0 || b > 100 {
		bad("scheduler.bottleneck", "must be between 0 (default 0.5) and 100 slots, got %g", b)
	}
	if b := s.Scheduler.BaseUplinks; b != 0 && (b < 2 || b > s.Fabric.UplinksPerToR) {
		bad("scheduler.base_uplinks", "must be 0 (default 2, a ring) or from 2 to the ToR's %d uplinks, got %d", s.Fabric.UplinksPerToR, b)
	}
	if o := s.Scheduler.Order; o != "" && o != OrderArrival && o != OrderLargest {
		bad("scheduler.order", "must be %s (default) or %s, got %q", OrderArrival, OrderLargest, o)
	}
	if c := s.Fabric.INC.Capacity; c < 0 || c > MaxINCCapacity {
		bad("fabric.inc.capacity", "must be from 1 to %d jobs per ToR (a ToR aggregator partitions its %d slots between them, at least one each), got %d", MaxINCCapacity, MaxINCCapacity, c)
	}
}

// checkServer checks a server name against the fabric; while the fabric's
// size is itself wrong (already reported), only the name's form.
func (s *Scenario) checkServer(name string) error {
	f := &s.Fabric
	if f.Racks < 1 || f.Racks > MaxRacks || f.ServersPerRack < 1 || f.ServersPerRack > MaxServersPerRack {
		if _, _, ok := names.ParseServer(name); !ok {
			return fmt.Errorf("%q is not a server name (want r<rack>s<index>, e.g. r0s1)", name)
		}
		return nil
	}
	return f.CheckServer(name)
}

// CheckServer says whether a server name exists in the fabric.
func (f *Fabric) CheckServer(name string) error {
	r, i, ok := names.ParseServer(name)
	if !ok {
		return fmt.Errorf("%q is not a server name (want r<rack>s<index>, e.g. r0s1)", name)
	}
	if r >= f.Racks || i >= f.ServersPerRack {
		return fmt.Errorf("no server %s in a fabric of %d racks x %d servers", name, f.Racks, f.ServersPerRack)
	}
	return nil
}

// SameMembers reports whether a and b hold the same strings, with the
// same multiplicity, in any order.
func SameMembers(a, b []string) bool { return job.SameMembers(a, b) }
