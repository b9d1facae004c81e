package main

import (
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/ocsemu/ocsemu/emu/flowmodel"
	"github.com/ocsemu/ocsemu/emu/plan"
	"github.com/ocsemu/ocsemu/emu/plural"
	"github.com/ocsemu/ocsemu/emu/scenario"
	"github.com/ocsemu/ocsemu/emu/scheduler"
	"github.com/ocsemu/ocsemu/workers"
	"github.com/ocsemu/ocsemu/workers/record"
)

func (a *app) planCmd() *cobra.Command {
	var out, sched string
	var inc bool
	cmd := &cobra.Command{
		Use:   "plan <scenario.yaml | embedded-name>",
		Short: "Turn a scenario into a plan with a reference scheduler (" + strings.Join(scheduler.Names, ", ") + ")",
		Long: `plan runs the scenario's scheduler (scheduler.name, or --scheduler) and writes
the plan: a versioned JSON timeline of stages with circuits and activities
(docs/plan.md). The plan is checked against the scenario before it is
written. Your own scheduler, in any language, writes the same JSON.`,
		Example: "  emu plan scenarios/plan-demo.yaml -o plan.json\n  emu plan plan-demo --scheduler static -o static.json\n  emu plan plan-demo --scheduler ljf --inc=false",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			s, _, err := loadScenario(args[0])
			if err != nil {
				return err
			}
			if err := a.overrideScheduler(s, sched, cmd.Flags().Changed("inc"), inc); err != nil {
				return err
			}
			t0 := time.Now()
			p, err := scheduler.Plan(s)
			if err != nil {
				return err
			}
			if err := plan.Check(p, s); err != nil {
				return fmt.Errorf("the %s scheduler made a plan that does not check (a bug): %w", p.Scheduler, err)
			}
			if w := flowmodel.UnlimitedLinks(s.Fabric); w != "" {
				a.log.Warn(w)
			}
			if out == "" {
				out = s.Name + "." + p.Scheduler + ".plan.json"
			}
			if err := p.Write(out); err != nil {
				return err
			}
			acts := 0
			for _, st := range p.Stages {
				acts += len(st.Activities)
			}
			stages := plural.Of(len(p.Stages), "stage") + stageLengths(p)
			if p.Mode == plan.ModeBarrier {
				stages = plural.Of(len(p.Stages), "barrier stage")
			}
			a.progress("%s: %s, %s, %s; predicted makespan %.3fs; planned in %v",
				p.Scheduler, plural.Of(len(p.Jobs), "job"), stages, plural.Of(acts, "activity"), float64(p.Predicted.MakespanNs)/1e9, time.Since(t0).Round(time.Millisecond))
			fmt.Println(out)
			return nil
		},
	}
	cmd.Flags().StringVarP(&out, "output", "o", "", "plan file (default <scenario>.<scheduler>.plan.json)")
	cmd.Flags().StringVar(&sched, "scheduler", "", "override the scenario's scheduler: "+strings.Join(scheduler.Names, ", "))
	cmd.Flags().BoolVar(&inc, "inc", true, "--inc=false turns in-network aggregation off for every job (scheduler.inc: false)")
	return cmd
}

// overrideScheduler applies --scheduler and --inc to a loaded scenario.
// Settings only ljf reads (a scenario written for ljf, run against its
// baseline with --scheduler fcfs) are left out, and it says so.
func (a *app) overrideScheduler(s *scenario.Scenario, sched string, incSet, inc bool) error {
	if sched != "" {
		if !slices.Contains(scheduler.Names, sched) {
			return fmt.Errorf("--scheduler %q: unknown scheduler (built in: %s)", sched, strings.Join(scheduler.Names, ", "))
		}
		if sched != "ljf" && (s.Scheduler.BaseUplinks != 0 || s.Scheduler.Order != "") {
			a.log.Info(fmt.Sprintf("--scheduler %s: the scenario's scheduler.base_uplinks and scheduler.order are ljf's, left out", sched))
			s.Scheduler.BaseUplinks, s.Scheduler.Order = 0, ""
		}
		s.Scheduler.Name = sched
	}
	if incSet {
		s.Scheduler.INC = &inc
	}
	return nil
}

func (a *app) simulateCmd() *cobra.Command {
	var scen, out string
	var jobsTable, inc bool
	cmd := &cobra.Command{
		Use:   "simulate <plan.json> --scenario <scenario>",
		Short: "Predict a plan with the flow model (max-min fair fluid, dark periods included)",
		Long: `simulate checks a plan against its scenario, runs it through the flow model and
prints a summary: makespan, job completion times, reconfigurations and
bytes over the OCS layer. The full prediction (every phase's start and end,
stages, jobs) is written as JSON in the same shape as the emulator's
measurements.`,
		Example: "  emu simulate plan.json --scenario scenarios/plan-demo.yaml",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if scen == "" {
				return errors.New("--scenario is required: a plan is checked against its scenario's fabric")
			}
			s, _, err := loadScenario(scen)
			if err != nil {
				return err
			}
			p, err := plan.Load(args[0])
			if err != nil {
				return err
			}
			if err := plan.Check(p, s); err != nil {
				return fmt.Errorf("%s does not fit scenario %s:\n%w", args[0], s.Name, err)
			}
			if cmd.Flags().Changed("inc") && !inc || s.Scheduler.INCOff() {
				for _, j := range p.Jobs {
					if j.INC {
						return fmt.Errorf("%s grants in-network aggregation to job %s, but INC is off (--inc=false or scheduler.inc: false): plan again with `emu plan --inc=false`", args[0], j.Name)
					}
				}
			}
			if w := flowmodel.UnlimitedLinks(s.Fabric); w != "" {
				a.log.Warn(w)
			}
			for _, w := range plan.Warnings(p, s) {
				a.log.Warn(w)
			}
			// The flow model takes any byte count; the workers exchange
			// int32 elements. Say it now, not at `emu run`.
			for _, j := range p.Jobs {
				if j.Pattern != scenario.PatternDAG {
					if err := workers.CheckBytes(j.Bytes, len(j.Workers)); err != nil {
						a.log.Warn(fmt.Sprintf("job %s: `emu run` will refuse it: %v", j.Name, err))
					}
				}
			}
			t0 := time.Now()
			run, err := flowmodel.Simulate(p, s)
			if err != nil {
				return err
			}
			took := time.Since(t0)
			if out == "" {
				out = strings.TrimSuffix(args[0], filepath.Ext(args[0])) + ".prediction.json"
			}
			if err := writeJSONFile(out, run); err != nil {
				return err
			}
			printRun(run, jobsTable)
			a.progress("flow model took %v; prediction written to %s", roundTook(took), out)
			return nil
		},
	}
	cmd.Flags().StringVarP(&scen, "scenario", "s", "", "scenario the plan runs on (file or embedded name)")
	cmd.Flags().StringVarP(&out, "output", "o", "", "prediction JSON (default <plan>.prediction.json)")
	cmd.Flags().BoolVar(&jobsTable, "jobs", false, "print every job's completion time")
	cmd.Flags().BoolVar(&inc, "inc", true, "--inc=false refuses a plan that grants in-network aggregation")
	return cmd
}

// nearestRank is the p-quantile of sorted xs by nearest rank (p90 of
// three jobs is the slowest); 0 for none.
func nearestRank(xs []float64, p float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	r := int(math.Ceil(p*float64(len(xs)) - 1e-9))
	return xs[max(1, min(len(xs), r))-1]
}

func printRun(r *record.Run, jobsTable bool) {
	var jcts []float64
	for _, j := range r.Jobs {
		jcts = append(jcts, float64(j.JCTNs)/1e9)
	}
	sort.Float64s(jcts)
	pct := func(p float64) float64 { return nearestRank(jcts, p) }
	fmt.Printf("plan by %s, %s mode: %s, %s\n", r.Scheduler, r.Mode, plural.Of(len(r.Jobs), "job"), plural.Of(len(r.Stages), "stage"))
	fmt.Printf("  makespan            %.3f s\n", float64(r.MakespanNs)/1e9)
	fmt.Printf("  job completion      p50 %.3f s, p90 %.3f s, max %.3f s\n", pct(.5), pct(.9), pct(1))
	fmt.Printf("  reconfigurations    %d (%d ports went dark in all)\n", r.Reconfigurations, r.PortsReconfigured)
	fmt.Printf("  bytes over the OCS  %.3f GB (%.3f GB x circuit hops)\n", r.OCSBytes/1e9, r.CircuitHopBytes/1e9)
	if jobsTable {
		w := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', 0)
		fmt.Fprintln(w, "JOB\tARRIVAL s\tSTART s\tEND s\tJCT s")
		for _, j := range r.Jobs {
			fmt.Fprintf(w, "%s\t%.3f\t%.3f\t%.3f\t%.3f\n", j.Job, float64(j.ArrivalNs)/1e9, float64(j.StartNs)/1e9, float64(j.EndNs)/1e9, float64(j.JCTNs)/1e9)
		}
		w.Flush()
	}
}

// stageLengths says how long a clock plan's stages last, from the stages
// themselves (the scenario's slot is not always theirs: static's one
// stage lasts the whole plan): " of 100ms", or " of 10ms to 1.2s".
func stageLengths(p *plan.Plan) string {
	lo, hi := int64(-1), int64(0)
	for _, st := range p.Stages {
		if lo < 0 || st.DurationNs < lo {
			lo = st.DurationNs
		}
		hi = max(hi, st.DurationNs)
	}
	show := func(ns int64) string {
		d := time.Duration(ns)
		if d >= 10*time.Millisecond {
			return d.Round(time.Millisecond).String()
		}
		return d.Round(time.Microsecond).String()
	}
	switch {
	case hi <= 0:
		return ""
	case lo == hi:
		return " of " + show(hi)
	default:
		return " of " + show(lo) + " to " + show(hi)
	}
}

// roundTook rounds a duration for a progress line: to the millisecond,
// or the microsecond below one (a small plan's model took "0s").
func roundTook(d time.Duration) time.Duration {
	if d < time.Millisecond {
		return d.Round(time.Microsecond)
	}
	return d.Round(time.Millisecond)
}
