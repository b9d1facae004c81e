package scenario

import (
	"fmt"
	"math"
	"math/bits"
	"regexp"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/ocsemu/ocsemu/dataplane/limits"
	"github.com/ocsemu/ocsemu/dataplane/names"
)

// Collective patterns of a job.
const (
	PatternPS       = "ps"       // push to a parameter server (or INC aggregator), pull back
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

// Phases returns the phases of one iteration of a pattern, in order.
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

// Job is one training job of a scenario.
type Job struct {
	Name    string   `yaml:"name" json:"name"`
	Pattern string   `yaml:"pattern" json:"pattern"`
	Workers []string `yaml:"workers" json:"workers"` // servers, e.g. r0s1, one rank each
	// Bytes is the gradient (PS, all-reduce) or token (all-to-all) volume
	// of one worker in one iteration.
	Bytes ByteSize `yaml:"bytes" json:"bytes"`
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
	Name string `yaml:"name" json:"name"` // fcfs | static
	// Slot is the time slot of time-slotted schedulers (fcfs); default 1s.
	Slot Duration `yaml:"slot,omitempty" json:"slot,omitempty"`
}

// INC configures in-network aggregation on the ToRs.
type INC struct {
	// Capacity is how many jobs one ToR can aggregate at once (paper 000: 4).
	Capacity int `yaml:"capacity" json:"capacity"`
}

// ByteSize is a byte count written with a unit: "552MB", "64MiB", "4GB".
type ByteSize int64

var byteRE = regexp.MustCompile(`^([0-9]*\.?[0-9]+(?:[eE][+-]?[0-9]+)?)\s*([KMGT]i?B|B)$`)

// ParseByteSize reads "552MB" (decimal), "64MiB" (binary) or "1000B".
func ParseByteSize(s string) (ByteSize, error) {
	m := byteRE.FindStringSubmatch(strings.TrimSpace(s))
	if m == nil {
		if _, err := strconv.ParseFloat(strings.TrimSpace(s), 64); err == nil {
			return 0, fmt.Errorf("size %q has no unit: write e.g. %q or %q", s, s+"MB", s+"MiB")
		}
		return 0, fmt.Errorf("size %q: want a number and a unit (B, KB, MB, GB, TB, KiB, MiB, GiB, TiB)", s)
	}
	v, _ := strconv.ParseFloat(m[1], 64)
	mult := map[string]float64{"B": 1, "KB": 1e3, "MB": 1e6, "GB": 1e9, "TB": 1e12,
		"KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30, "TiB": 1 << 40}[m[2]]
	b := v * mult
	if b < 1 || b > float64(limits.MaxBytes) || math.IsNaN(b) {
		return 0, fmt.Errorf("size %q out of range (1B to %dTiB)", s, limits.MaxBytes>>40)
	}
	return ByteSize(math.Round(b)), nil
}

func (b ByteSize) String() string {
	switch {
	case b%(1<<20) == 0 && b >= 1<<20:
		return fmt.Sprintf("%dMiB", b>>20)
	case b%1e9 == 0:
		return fmt.Sprintf("%dGB", b/1e9)
	case b%1e6 == 0:
		return fmt.Sprintf("%dMB", b/1e6)
	}
	return fmt.Sprintf("%dB", int64(b))
}

// UnmarshalYAML implements yaml.Unmarshaler.
func (b *ByteSize) UnmarshalYAML(n *yaml.Node) (err error) {
	*b, err = scalar(n, "size", "64MiB", ParseByteSize)
	return err
}

var serverRE = regexp.MustCompile(`^r(\d+)s(\d+)$`)

// ParseServer reads a server name "r<rack>s<index>".
func ParseServer(name string) (rack, idx int, ok bool) {
	m := serverRE.FindStringSubmatch(name)
	if m == nil {
		return 0, 0, false
	}
	rack, _ = strconv.Atoi(m[1])
	idx, _ = strconv.Atoi(m[2])
	return rack, idx, true
}

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
		if Phases(j.Pattern) == nil {
			bad(p+".pattern", "unknown pattern %q (want ps, ring, alltoall or hd)", j.Pattern)
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
		if j.Bytes <= 0 {
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
		if j.Pattern == PatternHD && bits.OnesCount(uint(len(j.Workers))) != 1 {
			bad(p+".workers", "halving-doubling needs a power-of-two number of workers, got %d", len(j.Workers))
		}
	}
	switch s.Scheduler.Name {
	case "", "fcfs", "static":
	default:
		bad("scheduler.name", "unknown scheduler %q (built in: fcfs, static)", s.Scheduler.Name)
	}
	if s.Fabric.INC.Capacity < 0 {
		bad("fabric.inc.capacity", "must not be negative")
	}
}

// checkServer checks a server name against the fabric; while the fabric's
// size is itself wrong (already reported), only the name's form.
func (s *Scenario) checkServer(name string) error {
	f := &s.Fabric
	if f.Racks < 1 || f.Racks > MaxRacks || f.ServersPerRack < 1 || f.ServersPerRack > MaxServersPerRack {
		if _, _, ok := ParseServer(name); !ok {
			return fmt.Errorf("%q is not a server name (want r<rack>s<index>, e.g. r0s1)", name)
		}
		return nil
	}
	return f.CheckServer(name)
}

// CheckServer says whether a server name exists in the fabric.
func (f *Fabric) CheckServer(name string) error {
	r, i, ok := ParseServer(name)
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
