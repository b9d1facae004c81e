package scheduler

import (
	"fmt"
	"sort"
	"testing"
	"time"

	"github.com/ocsemu/ocsemu/emu/flowmodel"
	"github.com/ocsemu/ocsemu/emu/plan"
	"github.com/ocsemu/ocsemu/emu/scenario"
	"github.com/ocsemu/ocsemu/scenarios"
)

// TestPlansCheckAndPredictThemselves plans every shipped scenario that has
// jobs with both schedulers; the plan must check, and simulating it must
// give exactly the prediction the scheduler wrote into it.
func TestPlansCheckAndPredictThemselves(t *testing.T) {
	for _, name := range []string{"plan-demo.yaml"} {
		data, err := scenarios.Files.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		for _, sched := range Names {
			t.Run(name+"/"+sched, func(t *testing.T) {
				s, err := scenario.Parse(data, name)
				if err != nil {
					t.Fatal(err)
				}
				s.Scheduler.Name = sched
				p, run := planAndSimulate(t, s)
				// Equal up to float rounding: rates are recomputed at
				// slightly different points, and each completion is
				// rounded up to the nanosecond.
				const tol = 1000
				if d := run.MakespanNs - p.Predicted.MakespanNs; d > tol || d < -tol {
					t.Errorf("simulated makespan %d != scheduler's prediction %d", run.MakespanNs, p.Predicted.MakespanNs)
				}
				for _, j := range run.Jobs {
					if d := j.JCTNs - p.Predicted.JobsNs[j.Job]; d > tol || d < -tol {
						t.Errorf("job %s: simulated JCT %d != predicted %d", j.Job, j.JCTNs, p.Predicted.JobsNs[j.Job])
					}
				}
			})
		}
	}
}

func TestFCFSAdaptsCircuitsStaticDoesNot(t *testing.T) {
	s := Paper000(Paper000Options{Jobs: 100, Seed: 1, Scheduler: "fcfs", INC: true})
	pf, err := Plan(s)
	if err != nil {
		t.Fatal(err)
	}
	s.Scheduler.Name = "static"
	ps, err := Plan(s)
	if err != nil {
		t.Fatal(err)
	}
	rf, _ := flowmodel.Simulate(pf, s)
	rs, _ := flowmodel.Simulate(ps, s)
	if rf.Reconfigurations == 0 {
		t.Error("fcfs never reconfigured on paper 000's setup")
	}
	if rs.Reconfigurations != 0 {
		t.Errorf("static reconfigured %d times", rs.Reconfigurations)
	}
	for _, p := range []*plan.Plan{pf, ps} {
		if err := plan.Check(p, s); err != nil {
			t.Errorf("%s: %v", p.Scheduler, err)
		}
	}
}

// BenchmarkPaper000 plans and simulates paper 000's full setup (64 racks x
// 64 servers, 24 x 40 Gbit/s OCS ports per ToR, 50 ms reconfiguration)
// with 800 and 1,400 Poisson jobs for each of the paper's four designs,
// and prints how long each step takes. Goal: <= 2 s for 1,400 jobs.
func BenchmarkPaper000(b *testing.B) {
	for _, n := range []int{800, 1400} {
		for _, d := range Paper000Designs {
			sched := d.Name
			b.Run(fmt.Sprintf("%d-jobs/%s", n, sched), func(b *testing.B) {
				s := Paper000(Paper000Options{Jobs: n, Seed: 1, Scheduler: d.Scheduler, INC: d.INC})
				var planT, simT []time.Duration
				var run *recordRun
				for i := 0; i < b.N; i++ {
					t0 := time.Now()
					p, err := Plan(s)
					if err != nil {
						b.Fatal(err)
					}
					t1 := time.Now()
					r, err := flowmodel.Simulate(p, s)
					if err != nil {
						b.Fatal(err)
					}
					planT = append(planT, t1.Sub(t0))
					simT = append(simT, time.Since(t1))
					run = &recordRun{stages: len(p.Stages), makespan: r.MakespanNs, reconf: r.Reconfigurations, ocsGB: r.OCSBytes / 1e9}
				}
				b.ReportMetric(med(planT).Seconds(), "plan-s")
				b.ReportMetric(med(simT).Seconds(), "simulate-s")
				fmt.Printf("  %4d jobs, %-6s: plan (scheduler + model) %6.3fs, simulate the plan %6.3fs; %d slots, makespan %.1fs, %d reconfigurations, %.0f GB over the OCS\n",
					n, sched, med(planT).Seconds(), med(simT).Seconds(), run.stages, float64(run.makespan)/1e9, run.reconf, run.ocsGB)
			})
		}
	}
}

type recordRun struct {
	stages   int
	makespan int64
	reconf   int
	ocsGB    float64
}

func med(d []time.Duration) time.Duration {
	s := append([]time.Duration(nil), d...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return s[len(s)/2]
}
