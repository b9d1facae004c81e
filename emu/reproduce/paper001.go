package reproduce

import (
	"context"
	"fmt"
	"math"
	"time"

	"github.com/ocsemu/ocsemu/emu/flowmodel"
	"github.com/ocsemu/ocsemu/emu/plan"
	"github.com/ocsemu/ocsemu/emu/scenario"
	"github.com/ocsemu/ocsemu/emu/scheduler"
	"github.com/ocsemu/ocsemu/workers/record"
)

func init() {
	Register(Study{Paper: "001/002", Name: "paper001", Run: runPaper001})
}

// runPaper001 compares tdm with notdm (papers 001/002 give no results):
// Algorithm 1's round time and the flow model's makespan over a sweep of
// the communication/computation ratio, full and half duplex, and checks
// that the flow model's stage times equal Algorithm 2's.
func runPaper001(ctx context.Context, o Options) ([]Table, error) {
	ratios := []float64{0.25, 0.5, 1, 2, 4}
	jobs, pods, seeds := 48, 4, 3
	if o.Quick {
		ratios, jobs, seeds = []float64{0.5, 2}, 24, 1
	}
	if o.Seeds > 0 {
		seeds = o.Seeds
	}
	sweep := Table{Title: fmt.Sprintf("Papers 001/002: tdm against notdm, %d jobs on %d pods (mean of %d seeds)", jobs, pods, seeds),
		Header: []string{"comm/compute", "duplex", "notdm round", "tdm round", "round gain", "notdm makespan (flow model)", "tdm makespan (flow model)", "makespan gain", "jobs in group B"}}
	var devs []float64
	stages, exact := 0, 0
	eqSingle, diffParallel, diffSingle, singleMax := 0, 0, 0, 0.0
	roundLo, roundHi := math.Inf(1), 0.0 // ms, over every row
	for _, r := range ratios {
		for _, duplex := range []string{"full", "half"} {
			var tdmR, notR, tdmM, notM, inB float64
			for seed := 1; seed <= seeds; seed++ {
				if err := ctx.Err(); err != nil {
					return nil, err
				}
				s := scheduler.TDMBench(jobs, pods, int64(seed), r, duplex)
				t, n, b, err := scheduler.TDMRound(s)
				if err != nil {
					return nil, fmt.Errorf("ratio %g, %s duplex, seed %d: %w", r, duplex, seed, err)
				}
				tdmR += float64(t) / 1e6 / float64(seeds)
				notR += float64(n) / 1e6 / float64(seeds)
				inB += float64(b) / float64(seeds)
				for _, sched := range []string{"tdm", "notdm"} {
					s.Scheduler.Name = sched
					p, run, err := planAndSimulate(s)
					if err != nil {
						return nil, fmt.Errorf("%s, ratio %g, %s duplex, seed %d: %w", sched, r, duplex, seed, err)
					}
					ms := float64(run.MakespanNs) / 1e6 / float64(seeds)
					if sched == "tdm" {
						tdmM += ms
					} else {
						notM += ms
					}
					// Stage times: Algorithm 2 against the flow model, over
					// stages where every job has an activity (prologue and
					// epilogue stages are shorter by design).
					for si, st := range run.Stages {
						if len(p.Stages[si].Activities) < len(p.Jobs) || p.Stages[si].PredictedNs == 0 {
							continue
						}
						got, want := float64(st.EndNs-st.StartNs), float64(p.Stages[si].PredictedNs)
						d := (got - want) / want
						devs = append(devs, d)
						stages++
						eq := math.Abs(d) < 1e-6
						if eq {
							exact++
						}
						links := map[[2]int]int{}
						parallel := false
						for _, c := range p.Stages[si].Circuits {
							k := [2]int{min(c.A.Rack, c.B.Rack), max(c.A.Rack, c.B.Rack)}
							if c.Simplex {
								k = [2]int{c.A.Rack, c.B.Rack}
							}
							links[k]++
							parallel = parallel || links[k] > 1
						}
						switch {
						case eq && !parallel:
							eqSingle++
						case !eq && parallel:
							diffParallel++
						case !eq:
							diffSingle++
							singleMax = math.Max(singleMax, math.Abs(d))
						}
					}
				}
			}
			roundLo, roundHi = math.Min(roundLo, math.Min(notR, tdmR)), math.Max(roundHi, math.Max(notR, tdmR))
			sweep.Rows = append(sweep.Rows, []string{fmt.Sprint(r), duplex, fmt.Sprintf("%.1f ms", notR), fmt.Sprintf("%.1f ms", tdmR),
				pct(tdmR, notR), fmt.Sprintf("%.0f ms", notM), fmt.Sprintf("%.0f ms", tdmM), pct(tdmM, notM), fmt.Sprintf("%.1f", inB)})
		}
	}
	lo, hi := 0.0, 0.0
	for _, d := range devs {
		lo, hi = math.Min(lo, d), math.Max(hi, d)
	}
	sweep.Notes = []string{
		"The papers' evaluation sections are empty: every setting is ours (scheduler.TDMBench): 4 pods of 32 servers at 100 Gbit/s, one OXC with 3 ports of 100 Gbit/s per pod (6 in half duplex, one per direction), so jobs contend for the links, 500 us reconfiguration, 50% ring / 25% all-to-all / 25% PS jobs of 2 to 8 workers (PS: 2 to 4) over 2 or 3 pods, 1 GB per worker per iteration, 4 iterations; compute = (1 GB at 100 Gbit/s) / ratio, i.e. the ratio is that of one 1 GB transfer on an idle link to compute.",
		fmt.Sprintf("Half duplex's 6 ports a pod are used strictly, one simplex circuit per port and stage (paper 002's eq. (6), checked for every stage tdm writes): as many directed links as full duplex's 3 duplex ports, which half duplex can split between the two directions as a stage's traffic needs. Every point is communication-bound: compute is %.0f to %.0f ms against rounds of %.1f to %.1f s, since %d jobs contend for 3 links a pod; the ratio sets the compute, not a round's balance.",
			80/ratios[len(ratios)-1], 80/ratios[0], roundLo/1e3, roundHi/1e3, jobs),
		"Round time is Algorithm 1's prediction (sum of the round's stage times, Algorithm 2 per stage, reconfiguration delay where the circuits change); tdm starts from notdm's grouping (all jobs in one group), so its round is never longer. Full duplex uses paper 002's four-stage round whenever there are PS jobs (a PS job pushes and pulls in two stages), as here.",
		fmt.Sprintf("Stage times: over %d stages in which every job has an activity, the flow model's stage time differs from Algorithm 2's by %+.1f%% to %+.1f%%; %d are equal to the ns (%d of them with one link per pod pair). Of the %d that differ, %d have a pod pair with parallel links and %d do not (those by at most %.1f%%: the reconfiguration delay is added to a stage whose circuits change, though the ports of its bottleneck pair may not). With parallel links, Algorithm 2 counts a pair's bytes as split evenly over its links, while the flow model (like the emulator's ECMP) puts each flow on one of them, so a pair with fewer or uneven flows finishes later than predicted.", stages, 100*lo, 100*hi, exact, eqSingle, stages-exact, diffParallel, diffSingle, 100*singleMax),
	}
	if o.Quick {
		return []Table{sweep}, nil
	}
	// Planning cost on the 100-job, 16-pod case, every scheduler.
	cost := Table{Title: "Planning cost: every scheduler on a 100-job, 16-pod case (goal: at most 1 s each)"}
	for _, sched := range scheduler.Names {
		s := scheduler.TDMBench(100, 16, 1, 1, "full")
		s.Scheduler.Name = sched
		s.Scheduler.Slot = scenario.Duration(50 * time.Millisecond)
		t0 := time.Now()
		p, err := scheduler.Plan(s)
		if err != nil {
			cost.Notes = append(cost.Notes, fmt.Sprintf("%s: %v", sched, err))
			continue
		}
		t1 := time.Now()
		if _, err := flowmodel.Simulate(p, s); err != nil {
			return nil, fmt.Errorf("%s on the 100-job case: %w", sched, err)
		}
		cost.Timings = append(cost.Timings, Timing{Scheduler: sched, Case: "100 jobs, 16 pods (TDMBench, 50 ms slots)", Plan: t1.Sub(t0), Simulate: time.Since(t1)})
	}
	cost.Notes = append(cost.Notes, "The case is TDMBench's (ring, all-to-all and PS jobs, 4 iterations); the slotted schedulers (fcfs, static, ljf, interleave) plan it in 50 ms slots. Plan includes the scheduler's own flow-model run; simulate is a separate flow-model run of the finished plan.")
	return []Table{sweep, cost}, nil
}

func planAndSimulate(s *scenario.Scenario) (*plan.Plan, *record.Run, error) {
	p, err := scheduler.Plan(s)
	if err != nil {
		return nil, nil, err
	}
	if err := plan.Check(p, s); err != nil {
		return nil, nil, fmt.Errorf("plan does not check: %w", err)
	}
	run, err := flowmodel.Simulate(p, s)
	if err != nil {
		return nil, nil, err
	}
	return p, run, nil
}

func pct(a, b float64) string {
	if b == 0 {
		return "-"
	}
	return fmt.Sprintf("%+.1f%%", 100*(a-b)/b)
}
