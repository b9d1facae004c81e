package scheduler

import (
	"math"
	"sort"

	"github.com/ocsemu/ocsemu/dataplane/names"
	"github.com/ocsemu/ocsemu/emu/plan"
	"github.com/ocsemu/ocsemu/emu/scenario"
	"github.com/ocsemu/ocsemu/ocsfabric/circuit"
)

// interleave is paper 000's grouping-based interleaved scheduling
// (§III(b)):
//
//  1. jobs are sorted by their compute/communication ratio and dealt
//     alternately into two cohorts, so both have comparable ratios;
//  2. cohort B is admitted later than it arrives, by the median
//     communication time of one iteration of cohort A, so that B computes
//     while A communicates and the two cohorts' communication alternates;
//  3. the circuits are refitted (fcfs-style, to the current demand) only
//     when the set of cohorts that communicate changes, i.e. at each
//     rotation, or when a demanded rack pair has no circuit at all.
//
// Choices where the paper is silent: a job's communication time is
// estimated alone on an idle fabric (its busiest server link); the delay
// is per cohort, not per job; INC and admission are as in fcfs.
func interleave(s *scenario.Scenario) (*plan.Plan, error) {
	var cohortB []bool
	var delay int64
	var jobs []plan.Job
	lastSet := -1
	pol := policy{name: "interleave"}
	pol.setup = func(l *loop) {
		jobs = l.jobs
		cohortB, delay = cohorts(l.s.Fabric, l.jobs)
	}
	pol.notBefore = func(ji int) int64 {
		if cohortB[ji] {
			return jobs[ji].ArrivalNs + delay
		}
		return 0
	}
	pol.circuits = func(l *loop) circuit.Config {
		set := 0 // bit 0: cohort A communicates, bit 1: cohort B
		for _, ji := range l.sim.JobsActive() {
			q, running := l.sim.Current(ji)
			if running && l.jobs[ji].Phases()[q].Phase != scenario.PhaseCompute {
				set |= 1 << btoi(cohortB[ji])
			}
		}
		missing := false
		if len(l.prev.Circuits) > 0 {
			have := map[[2]int]bool{}
			for _, c := range l.prev.Circuits {
				have[pair(c.A.Rack, c.B.Rack)] = true
			}
			for pr, b := range l.sim.ActiveRackDemand() {
				if b > 0 && !have[pair(pr[0], pr[1])] {
					missing = true
					break
				}
			}
		}
		if set == lastSet && !missing && len(l.prev.Circuits) > 0 {
			return l.prev
		}
		lastSet = set
		return fcfsCircuits(l)
	}
	return slotted(s, pol)
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// cohorts deals jobs, sorted by compute/communication ratio, alternately
// into cohorts A and B, and returns B's delay: the median one-iteration
// communication time of cohort A.
func cohorts(f scenario.Fabric, jobs []plan.Job) ([]bool, int64) {
	idx := make([]int, len(jobs))
	comm := make([]float64, len(jobs))
	for i := range jobs {
		idx[i] = i
		comm[i] = commAlone(f, &jobs[i])
	}
	ratio := func(i int) float64 {
		if comm[i] == 0 {
			return math.Inf(1)
		}
		return float64(jobs[i].ComputeNs) / comm[i]
	}
	sort.SliceStable(idx, func(a, b int) bool { return ratio(idx[a]) < ratio(idx[b]) })
	inB := make([]bool, len(jobs))
	var aComm []float64
	for k, i := range idx {
		inB[i] = k%2 == 1
		if !inB[i] {
			aComm = append(aComm, comm[i])
		}
	}
	sort.Float64s(aComm)
	var delay int64
	if len(aComm) > 0 {
		delay = int64(aComm[len(aComm)/2])
	}
	return inB, delay
}

// commAlone estimates one iteration's communication time (ns) of a job
// alone on the fabric: each phase takes the longer of its busiest server
// link's bytes at the server rate and, on a fabric with uplinks, its
// busiest rack's cross-rack bytes (out or in) over all of that rack's
// uplinks (the INC choice is not made yet: the PS is assumed).
func commAlone(f scenario.Fabric, j *plan.Job) float64 {
	if f.Rates.Server == scenario.Unlimited {
		return 0
	}
	bps := float64(f.Rates.Server) / 8
	rackBps := 0.0 // all of a rack's uplinks; 0: no uplink bound
	if f.UplinksPerToR > 0 && f.Rates.Uplink != scenario.Unlimited {
		rackBps = float64(f.UplinksPerToR) * float64(f.Rates.Uplink) / 8
	}
	jj := *j
	jj.INC = false
	if jj.Pattern == scenario.PatternPS && jj.PS == "" {
		jj.PS = jj.Workers[0]
	}
	var total float64
	for _, ph := range scenario.Phases(jj.Pattern) {
		if ph == scenario.PhaseCompute {
			continue
		}
		tx, rx := map[string]float64{}, map[string]float64{}
		rackOut, rackIn := map[int]float64{}, map[int]float64{}
		var most, mostRack float64
		for _, fl := range jj.Flows(ph) {
			sr, _, sok := names.ParseServer(fl.Src)
			dr, _, dok := names.ParseServer(fl.Dst)
			if sok {
				tx[fl.Src] += fl.Bytes
				most = max(most, tx[fl.Src])
			}
			if dok {
				rx[fl.Dst] += fl.Bytes
				most = max(most, rx[fl.Dst])
			}
			if sok && dok && sr != dr {
				rackOut[sr] += fl.Bytes
				rackIn[dr] += fl.Bytes
				mostRack = max(mostRack, rackOut[sr], rackIn[dr])
			}
		}
		t := most / bps
		if rackBps > 0 {
			t = max(t, mostRack/rackBps)
		}
		total += t * 1e9
	}
	return total
}
