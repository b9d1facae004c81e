package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"text/tabwriter"

	"github.com/ocsemu/ocsemu/dataplane/fabric"
	"github.com/ocsemu/ocsemu/emu/orchestrate"
	"github.com/ocsemu/ocsemu/emu/plan"
	"github.com/ocsemu/ocsemu/emu/scenario"
	"github.com/ocsemu/ocsemu/emu/scheduler"
	"github.com/ocsemu/ocsemu/workers"
)

// runJobs plans (or loads) the scenario's plan, runs it on the lab and
// prints the measurement beside the prediction.
func (a *app) runJobs(ctx context.Context, lab *fabric.Lab, s *scenario.Scenario, planFile, dir string, verify bool) error {
	var p *plan.Plan
	var err error
	if planFile != "" {
		if p, err = plan.Load(planFile); err != nil {
			return err
		}
	} else {
		for i := range s.Jobs {
			if s.Jobs[i].INC {
				a.log.Warn("the emulator does not run in-network aggregation yet: the job uses a CPU parameter server", "job", s.Jobs[i].Name)
				s.Jobs[i].INC = false
			}
		}
		if p, err = scheduler.Plan(s); err != nil {
			return err
		}
	}
	if err := plan.Check(p, s); err != nil {
		return fmt.Errorf("plan does not fit scenario %s:\n%w", s.Name, err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("results: %w", err)
	}
	if err := p.Write(filepath.Join(dir, "plan.json")); err != nil {
		return fmt.Errorf("results: write %s: %w", filepath.Join(dir, "plan.json"), err)
	}
	a.progress("plan by %s: %d jobs, %d stages (%s mode); running it with real workers", p.Scheduler, len(p.Jobs), len(p.Stages), p.Mode)
	exe, _ := os.Executable()
	res, err := orchestrate.Run(ctx, &orchestrate.Options{Lab: lab, Scenario: s, Plan: p, Dir: dir, Exe: exe, Verify: verify,
		Log: a.log, Progress: a.progress})
	if err != nil {
		err = fmt.Errorf("jobs: %w", err)
		if res != nil && res.Prediction != nil {
			err = errors.Join(err, writeJSONFile(filepath.Join(dir, "prediction.json"), res.Prediction))
		}
		return err
	}
	// Results that could not be written fail the run, after it is shown.
	werr := writeResults(dir, res)
	fmt.Println()
	fmt.Println("== jobs, measured (nccl-tests style; time zero is the plan's)")
	workers.PrintStats(os.Stdout, res.Stats, res.Jobs)
	fmt.Println()
	fmt.Println("== measured against the flow model's prediction (error = (measured - predicted) / predicted)")
	w := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(w, "job\titer\tphase\tpredicted ms\tmeasured ms\terror\tpredicted end ms\tmeasured end ms\t")
	for _, c := range res.Compare {
		fmt.Fprintf(w, "%s\t%d\t%s\t%.2f\t%.2f\t%+.1f%%\t%.2f\t%.2f\t\n", c.Job, c.Iteration, c.Phase, float64(c.PredictedNs)/1e6,
			float64(c.MeasuredNs)/1e6, 100*c.RelErr, float64(c.PredEndNs)/1e6, float64(c.MeasEndNs)/1e6)
	}
	w.Flush()
	fmt.Fprintf(os.Stdout, "makespan: predicted %.3f s, measured %.3f s (%+.1f%%)\n", float64(res.Prediction.MakespanNs)/1e9,
		float64(res.Measurement.MakespanNs)/1e9, 100*float64(res.Measurement.MakespanNs-res.Prediction.MakespanNs)/float64(res.Prediction.MakespanNs))
	if werr != nil {
		return werr
	}
	a.progress("plan, prediction, measurement and records in %s", dir)
	return nil
}

// writeResults writes the prediction, the measurement and their
// comparison; the error names every file that could not be written.
func writeResults(dir string, res *orchestrate.Result) error {
	return errors.Join(
		writeJSONFile(filepath.Join(dir, "prediction.json"), res.Prediction),
		writeJSONFile(filepath.Join(dir, "measurement.json"), res.Measurement),
		writeJSONFile(filepath.Join(dir, "comparison.json"), res),
	)
}
