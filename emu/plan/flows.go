package plan

import (
	"sort"
	"strconv"
	"strings"

	"github.com/ocsemu/ocsemu/dataplane/names"
	"github.com/ocsemu/ocsemu/emu/scenario"
	"github.com/ocsemu/ocsemu/workers/job"
)

// Flow is one transfer of a communication phase. Endpoints are server
// names ("r0s1") or, for in-network aggregation, ToR names ("tor0").
type Flow struct {
	Src, Dst string
	Bytes    float64
}

// Rack returns the rack of an endpoint (server or ToR).
func Rack(endpoint string) int {
	if r, _, ok := names.ParseServer(endpoint); ok {
		return r
	}
	if n, err := strconv.Atoi(strings.TrimPrefix(endpoint, "tor")); err == nil && strings.HasPrefix(endpoint, "tor") {
		return n
	}
	return -1
}

// IsToR reports whether an endpoint is a ToR.
func IsToR(endpoint string) bool { return strings.HasPrefix(endpoint, "tor") }

// Flows returns the transfers of one phase of a job (none for compute).
// These are the flows the flow model rates and the workers send:
//
//   - ps push: every worker to the PS (S bytes each); pull: back. With
//     INC the push is the whole in-network all-reduce: workers send to
//     their ToR, each other ToR sends its partial sum (S) to the root ToR,
//     and the sums come back down the same way at the same time (SwitchML/
//     ATP hierarchy: a slot's result frees it for the next block, so up
//     and down stream together); the pull carries nothing (docs/inc.md).
//   - ring allreduce: rank i to i+1, 2(n-1)/n * S (reduce-scatter then
//     all-gather, 2(n-1) steps of S/n).
//   - hd allreduce: at step k rank i exchanges with i xor 2^k, S/2^(k+1)
//     each way in reduce-scatter and again in all-gather.
//   - alltoall: every rank to every other, S/n.
//
// Flows between ranks on the same server carry nothing and are omitted.
// A step of a per-step all-reduce ("allreduce.k") has the step's flows
// (stepFlows), and a dag job's transfer task its one flow.
func (j *Job) Flows(phase string) []Flow { return j.FlowsINC(phase, j.INC) }

// FlowsINC is Flows with in-network aggregation decided by the caller (a
// v2 activity's inc, the stage's decision) instead of the job.
func (j *Job) FlowsINC(phase string, inc bool) []Flow {
	S := float64(j.Bytes)
	n := len(j.Workers)
	var out []Flow
	add := func(src, dst string, b float64) {
		if src != dst && b > 0 {
			out = append(out, Flow{Src: src, Dst: dst, Bytes: b})
		}
	}
	if j.Pattern == PatternDAG {
		if t, ok := j.Task(phase); ok && t.Kind == TaskTransfer {
			add(t.Src, t.Dst, float64(t.Bytes))
		}
		return out
	}
	if k, ok := job.ParseStep(phase); ok && j.Steps {
		j.stepFlows(k, add)
		return out
	}
	switch {
	case phase == scenario.PhasePush && inc:
		root := j.Aggregator
		for _, w := range j.Workers {
			add(w, torOf(w), S)
		}
		for _, t := range j.ToRs() {
			add(t, root, S)
		}
		for _, t := range j.ToRs() {
			add(root, t, S)
		}
		for _, w := range j.Workers {
			add(torOf(w), w, S)
		}
	case phase == scenario.PhasePull && inc:
		// Nothing: the push returned the sums.
	case phase == scenario.PhasePush:
		for _, w := range j.Workers {
			add(w, j.PS, S)
		}
	case phase == scenario.PhasePull:
		for _, w := range j.Workers {
			add(j.PS, w, S)
		}
	case phase == scenario.PhaseAllReduce && j.Pattern == scenario.PatternRing:
		ring := j.Ring
		if len(ring) == 0 {
			ring = j.Workers
		}
		for i := range ring {
			add(ring[i], ring[(i+1)%n], 2*float64(n-1)/float64(n)*S)
		}
	case phase == scenario.PhaseAllReduce && j.Pattern == scenario.PatternHD:
		for k := 1; k < n; k <<= 1 {
			for i := range j.Workers {
				add(j.Workers[i], j.Workers[i^k], 2*S/float64(2*k))
			}
		}
	case phase == scenario.PhaseAllToAll:
		for i := range j.Workers {
			for k := range j.Workers {
				if i != k {
					add(j.Workers[i], j.Workers[k], S/float64(n))
				}
			}
		}
	}
	return out
}

func torOf(server string) string { return names.ToRName(Rack(server)) }

// ToRs returns the ToRs of the racks holding the job's workers, sorted.
func (j *Job) ToRs() []string {
	seen := map[int]bool{}
	var racks []int
	for _, w := range j.Workers {
		if r := Rack(w); !seen[r] {
			seen[r] = true
			racks = append(racks, r)
		}
	}
	sort.Ints(racks)
	var out []string
	for _, r := range racks {
		out = append(out, names.ToRName(r))
	}
	return out
}

// RackPairs returns the directed (src rack, dst rack) pairs a phase's
// flows cross, each once.
func (j *Job) RackPairs(phase string) [][2]int { return j.RackPairsINC(phase, j.INC) }

// RackPairsINC is RackPairs with in-network aggregation decided by the
// caller (FlowsINC).
func (j *Job) RackPairsINC(phase string, inc bool) [][2]int {
	seen := map[[2]int]bool{}
	var out [][2]int
	if phase == scenario.PhaseAllToAll && j.Pattern == scenario.PatternAllToAll {
		// Every rank sends to every other: all pairs of the job's racks,
		// without building n^2 flows.
		var racks []int
		for _, t := range j.ToRs() {
			racks = append(racks, Rack(t))
		}
		for _, a := range racks {
			for _, b := range racks {
				if a != b {
					out = append(out, [2]int{a, b})
				}
			}
		}
		return out
	}
	for _, f := range j.FlowsINC(phase, inc) {
		a, b := Rack(f.Src), Rack(f.Dst)
		if a != b && !seen[[2]int{a, b}] {
			seen[[2]int{a, b}] = true
			out = append(out, [2]int{a, b})
		}
	}
	return out
}
