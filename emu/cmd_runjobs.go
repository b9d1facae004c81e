package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"text/tabwriter"

	"github.com/ocsemu/ocsemu/dataplane/fabric"
	"github.com/ocsemu/ocsemu/dataplane/topo"
	"github.com/ocsemu/ocsemu/emu/fidelity"
	"github.com/ocsemu/ocsemu/emu/flowmodel"
	"github.com/ocsemu/ocsemu/emu/orchestrate"
	"github.com/ocsemu/ocsemu/emu/plan"
	"github.com/ocsemu/ocsemu/emu/plural"
	"github.com/ocsemu/ocsemu/emu/scenario"
	"github.com/ocsemu/ocsemu/emu/scheduler"
	"github.com/ocsemu/ocsemu/workers"
	"github.com/ocsemu/ocsemu/workers/job"
	"github.com/ocsemu/ocsemu/workers/record"
)

// preparedRun is what `emu run` will execute on the lab, made and checked
// before anything touches the kernel.
type preparedRun struct {
	plan *plan.Plan
	pred *record.Run
	dir  string
	temp bool // dir is removed after the run (no --results)
	// fidelity is the run's verdict and attribution, once it ran.
	fidelity *fidelityResult
}

// preparePlan reads the plan (or makes it with the scenario's scheduler),
// checks it against the scenario and against what the workers can run,
// predicts it with the flow model, and creates the results directory with
// the plan in it. A plan that is missing or wrong is refused here, before
// a namespace exists.
func (a *app) preparePlan(s *scenario.Scenario, planFile, dir string) (*preparedRun, error) {
	var p *plan.Plan
	var err error
	if planFile != "" {
		if p, err = plan.Load(planFile); err != nil {
			return nil, err
		}
		if s.Fits(p.Scenario) {
			p.Scenario = s.Name // a plan for the scenario, run under --lab-name
		}
	} else {
		if p, err = scheduler.Plan(s); err != nil {
			return nil, err
		}
	}
	if err := plan.Check(p, s); err != nil {
		return nil, fmt.Errorf("plan does not fit scenario %s:\n%w", s.Name, err)
	}
	if planFile != "" {
		for _, w := range plan.Warnings(p, s) {
			a.log.Warn(w)
		}
	}
	// What the workers refuse (rank counts, byte alignment, INC), they
	// refuse from the topology alone, without a deployed lab.
	jobs, err := orchestrate.WorkerJobs(p)
	if err != nil {
		return nil, fmt.Errorf("plan cannot run on the emulator: %w", err)
	}
	if _, err := workers.Specs(&workers.Options{Lab: &fabric.Lab{Topo: topo.Build(s.Spec())}, Jobs: jobs, Schedule: orchestrate.Schedule(p), Dir: filepath.Join(dir, "records")}); err != nil {
		return nil, fmt.Errorf("plan cannot run on the emulator: %w", err)
	}
	pred, err := flowmodel.Simulate(p, s)
	if err != nil {
		return nil, fmt.Errorf("predict: %w", err)
	}
	if w := flowmodel.UnlimitedLinks(s.Fabric); w != "" {
		a.log.Warn(w)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("results directory: %w", err)
	}
	if err := p.Write(filepath.Join(dir, "plan.json")); err != nil {
		return nil, fmt.Errorf("results: write %s: %w", filepath.Join(dir, "plan.json"), err)
	}
	return &preparedRun{plan: p, pred: pred, dir: dir}, nil
}

// runJobs runs a prepared plan on the lab and prints the measurement
// beside the prediction.
func (a *app) runJobs(ctx context.Context, lab *fabric.Lab, s *scenario.Scenario, r *preparedRun, verify, realtime bool) error {
	p, dir := r.plan, r.dir
	a.progress("plan by %s: %s, %s (%s mode); running it with real workers", p.Scheduler, plural.Of(len(p.Jobs), "job"), plural.Of(len(p.Stages), "stage"), p.Mode)
	exe, _ := os.Executable()
	rec := a.startRecording(ctx, lab, s)
	opts := &orchestrate.Options{Lab: lab, Scenario: s, Plan: p, Prediction: r.pred, Dir: dir, Exe: exe, Verify: verify, Realtime: realtime,
		TCPInfoEvery: a.tcpInfoEvery, Log: a.log, Progress: a.progress}
	if planUsesINC(p) {
		stop, err := a.startAggregators(ctx, lab, s.Fabric.INC.Capacity)
		if err != nil {
			rec.stop()
			return err
		}
		defer stop()
		opts.Aggregators = labAggregators(lab.Topo.Lab)
		opts.INCCongestion = a.incCC
		opts.INCWindow = flowmodel.INCWindow(s.Fabric)
		rec.watchAggregators(p, opts.INCWindow, a.incCC)
	}
	res, err := orchestrate.Run(ctx, opts)
	if err != nil {
		rec.stop()
		err = fmt.Errorf("jobs: %w", err)
		if res != nil && res.Prediction != nil {
			err = errors.Join(err, writeJSONFile(filepath.Join(dir, "prediction.json"), res.Prediction))
		}
		return err
	}
	// Results that could not be written fail the run, after it is shown.
	fr, ferr := rec.finish(ctx, res, dir)
	r.fidelity = fr
	werr := errors.Join(writeResults(dir, res), ferr)
	o := a.stdout()
	fmt.Fprintln(o)
	fmt.Fprintln(o, "== jobs, measured (nccl-tests style; time zero is the plan's)")
	dag := dagJobs(p)
	workers.PrintStats(o, collapseStats(res.Stats, dag, p), res.Jobs)
	fmt.Fprintln(o)
	fmt.Fprintln(o, "== measured against the flow model's prediction (error = (measured - predicted) / predicted)")
	fmt.Fprintln(o, "   ideal: the papers' fluid model at line rate; calibrated: with TCP framing, all-to-all ranks on their own; tcp-aware: also slow start, RTT-biased sharing (not with fair switch queues), reconfiguration recovery (docs/fidelity.md)")
	byKey := func(cs []orchestrate.Comparison) map[job.Key]orchestrate.Comparison {
		m := map[job.Key]orchestrate.Comparison{}
		for _, c := range cs {
			m[job.Key{Job: c.Job, Iteration: c.Iteration, Phase: c.Phase}] = c
		}
		return m
	}
	cal := byKey(collapseDAG(res.CompareCalibrated, res.Calibrated, res.Measurement, dag))
	tcp := byKey(collapseDAG(res.CompareTCPAware, res.TCPAware, res.Measurement, dag))
	if len(dag) > 0 {
		fmt.Fprintln(o, "   task-graph jobs: one row per iteration, first task's start to last task's end (every task in comparison.csv)")
	}
	// A phase the model gives no time (an INC pull: the sums come back
	// with the push) has no relative error.
	errCell := func(c orchestrate.Comparison) string {
		if c.PredictedNs <= 0 {
			return "-"
		}
		return fmt.Sprintf("%+.1f%%", 100*c.RelErr)
	}
	cell := func(m map[job.Key]orchestrate.Comparison, c orchestrate.Comparison) (string, string) {
		if k, ok := m[job.Key{Job: c.Job, Iteration: c.Iteration, Phase: c.Phase}]; ok {
			return fmt.Sprintf("%.2f", float64(k.PredictedNs)/1e6), errCell(k)
		}
		return "-", "-"
	}
	w := tabwriter.NewWriter(o, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(w, "job\titer\tphase\tideal ms\tcalibrated ms\ttcp-aware ms\tmeasured ms\terror ideal\tcalibrated\ttcp-aware\tmeasured end ms\t")
	for _, c := range collapseDAG(res.Compare, res.Prediction, res.Measurement, dag) {
		calMs, calErr := cell(cal, c)
		tcpMs, tcpErr := cell(tcp, c)
		fmt.Fprintf(w, "%s\t%d\t%s\t%.2f\t%s\t%s\t%.2f\t%s\t%s\t%s\t%.2f\t\n", c.Job, c.Iteration, c.Phase, float64(c.PredictedNs)/1e6,
			calMs, tcpMs, float64(c.MeasuredNs)/1e6, errCell(c), calErr, tcpErr, float64(c.MeasEndNs)/1e6)
	}
	w.Flush()
	if note := verifyNote(res.Compare, res.Measurement); note != "" {
		fmt.Fprintln(o, note)
	}
	if pm, mm := res.Prediction.MakespanNs, res.Measurement.MakespanNs; pm > 0 {
		fmt.Fprintf(o, "makespan: predicted %.3f s, measured %.3f s (%+.1f%%)\n", float64(pm)/1e9, float64(mm)/1e9, 100*float64(mm-pm)/float64(pm))
	} else {
		fmt.Fprintf(o, "makespan: measured %.3f s (the model predicts none: see the unlimited-links warning)\n", float64(mm)/1e9)
	}
	fmt.Fprintln(o)
	worst, more := worstAttributions(fr.Attribution)
	fidelity.PrintAttribution(o, worst)
	if more != "" {
		fmt.Fprintln(o, more)
	}
	if len(worst) > 0 && p.Mode == plan.ModeBarrier {
		fmt.Fprintln(o, "   a barrier plan: the model is not replayed at the measured starts, so these have no drift, busiest link, inc_round, beside or INC round trip (docs/fidelity.md, Limits)")
	}
	var tally fidelity.Tally // the bar: phases more than 10% off, explained to within 5 points
	if tally.Add(fr.Attribution); tally.Phases > 0 {
		tally.Print(o)
	}
	fmt.Fprintln(o)
	fr.Verdict.Print(o)
	for _, p := range fr.Problems {
		fmt.Fprintf(o, "   (not recorded: %s)\n", p)
	}
	if werr != nil {
		return werr
	}
	if !r.temp {
		a.progress("plan, prediction, measurement and records in %s", dir)
	}
	return nil
}

// writeResults writes the prediction, the measurement and their
// comparison (JSON; also comparison.csv and phases.csv); the error names
// every file that could not be written.
func writeResults(dir string, res *orchestrate.Result) error {
	return errors.Join(
		writeJSONFile(filepath.Join(dir, "prediction.json"), res.Prediction),
		writeJSONFile(filepath.Join(dir, "measurement.json"), res.Measurement),
		writeJSONFile(filepath.Join(dir, "comparison.json"), res),
		writeCSVs(dir, res.Compare, res.Stats),
	)
}

// planUsesINC reports whether some job aggregates in the ToRs: for its
// whole life, or in some stage (plan v2).
func planUsesINC(p *plan.Plan) bool {
	if slices.ContainsFunc(p.Jobs, func(j plan.Job) bool { return j.INC }) {
		return true
	}
	for _, st := range p.Stages {
		for _, a := range st.Activities {
			if a.INC != nil && *a.INC {
				return true
			}
		}
	}
	return false
}

// verifyNote says why compute phases ran long when the results' checks
// did it: a rank checks the phase before while the next compute waits, and
// a check longer than the compute holds it over the plan.
func verifyNote(cmp []orchestrate.Comparison, m *record.Run) string {
	if m == nil {
		return ""
	}
	// Per job: its computes' overrun, and its workers' checks (a push's
	// is the parameter server's own, which delays no compute).
	over, verify := map[string]int64{}, map[string]int64{}
	for _, c := range cmp {
		if c.Phase == job.PhaseCompute && c.PredictedNs > 0 && c.MeasuredNs-c.PredictedNs > max(c.PredictedNs/10, 1e6) {
			over[c.Job] = max(over[c.Job], c.MeasuredNs-c.PredictedNs)
		}
	}
	for _, p := range m.Phases {
		if p.Phase != job.PhasePush {
			verify[p.Job] = max(verify[p.Job], p.VerifyNs)
		}
	}
	var most, check int64
	for j, o := range over {
		if v := verify[j]; o > most && 2*v >= o {
			most, check = o, v
		}
	}
	if most == 0 {
		return ""
	}
	return fmt.Sprintf("   compute phases ran up to %.2f ms over the plan: each rank checks the results of the phase before while the next compute waits, and the checks took up to %.2f ms (`emu run --verify=false` skips them)",
		float64(most)/1e6, float64(check)/1e6)
}
