package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/ocsemu/ocsemu/dataplane/fabric"
	"github.com/ocsemu/ocsemu/dataplane/kcheck"
	"github.com/ocsemu/ocsemu/dataplane/names"
	"github.com/ocsemu/ocsemu/dataplane/netns"
	"github.com/ocsemu/ocsemu/dataplane/probe"
	"github.com/ocsemu/ocsemu/dataplane/safefile"
	"github.com/ocsemu/ocsemu/dataplane/topo"
	"github.com/ocsemu/ocsemu/emu/fidelity"
	"github.com/ocsemu/ocsemu/emu/report"
	"github.com/ocsemu/ocsemu/emu/scenario"
	"github.com/ocsemu/ocsemu/emu/scheduler"
	"github.com/ocsemu/ocsemu/workers"
)

// runSummary is what `emu run` prints and writes as summary.json.
type runSummary struct {
	Lab      string `json:"lab"`
	Scenario string `json:"scenario"`
	Kind     string `json:"kind"`
	// ServerQueue is fabric.server_queue: fifo or fair.
	ServerQueue string `json:"server_queue"`
	// SwitchQueue is fabric.switch_queue: fifo or fair.
	SwitchQueue string           `json:"switch_queue"`
	Nodes       int              `json:"nodes"`
	Links       int              `json:"links"`
	DeploySec   float64          `json:"deploy_s"`
	PingPairs   int              `json:"ping_pairs"`
	PingFailed  int              `json:"ping_failed"`
	PingMaxRTT  float64          `json:"ping_max_rtt_ms"`
	Transfer    *transferSummary `json:"transfer,omitempty"`
	DestroySec  float64          `json:"destroy_s"`
	Leftovers   int              `json:"leftover_namespaces"`
	// Complete says the run ended with all its records written; a run
	// killed (SIGKILL) has no summary at all. Runs before 28 Nov lack it.
	Complete *bool `json:"complete,omitempty"`
}

// transferSummary is the measured cross-rack transfer of `emu run`.
type transferSummary struct {
	From, To      string
	GoodputMbps   float64 `json:"goodput_mbps"`
	ConfiguredBps float64 `json:"configured_bps"`
	Fraction      float64 `json:"fraction_of_configured"`
	CC            string  `json:"congestion_control"`
}

func (a *app) runCmd() *cobra.Command {
	var keep, verify, realtime bool
	var planFile, sched string
	var inc bool
	var dur time.Duration
	var out, labName string
	var pcap pcapFlags
	var repeat int
	cmd := &cobra.Command{
		Use:   "run [scenario.yaml | embedded-name]",
		Short: "Deploy a scenario, check it end to end, print a summary, destroy it",
		Long: `run is the one-command tour: it deploys a scenario (the embedded quickstart
by default); on a fabric with a packet core (eps, hybrid) it checks that
every pair of servers reaches every other (pingall) and measures one
cross-rack TCP transfer (--duration) against the configured rate (an ocs
fabric has no circuits before its plan patches them, so it skips both);
and, if the scenario has jobs, it plans them with its scheduler (or runs
--plan), predicts the plan with the flow model, runs it with real workers
gated by the plan, and prints measured beside predicted. Each run's results
go to a directory of its own, results/<lab>/<date-time>/ (results/<lab>/latest
points at the run in progress, then stays on the newest complete one). The lab
is destroyed again, also on Ctrl-C or failure. While a plan runs, a line
names the stage it is in and its circuits, at most every 0.5 s (every
stage with -v); every reconfiguration is in the run's data and report.

TCP shares links differently from run to run: --repeat N runs the scenario N
times and summarises the set (each phase's median and range against the
models, and how many phases the runs' attributions explain) in
results/<lab>/repeat-<date-time>/.`,
		Example: "  sudo emu run\n  sudo emu run example-eps --duration 5s\n  sudo emu run plan-demo --repeat 5\n  sudo emu run plan-demo --lab-name alice-pd   (a lab of your own on a shared machine)",
		Args:    cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			arg := ""
			if len(args) == 1 {
				arg = args[0]
			}
			if err := checkTCPInfoEvery(a.tcpInfoEvery); err != nil {
				return err
			}
			if dur < minTransfer || dur > maxTransfer {
				return fmt.Errorf("--duration %v: want %v to %v (the cross-rack TCP transfer on a fabric with a packet core)", dur, minTransfer, maxTransfer)
			}
			s, src, err := loadScenario(arg)
			if err != nil {
				return err
			}
			if err := renameLab(s, labName); err != nil {
				return err
			}
			if err := a.overrideScheduler(s, sched, cmd.Flags().Changed("inc"), inc); err != nil {
				return err
			}
			if a.incBand && (s.Fabric.ServerQueue == topo.QueueFair || s.Fabric.SwitchQueue == topo.QueueFair) {
				// The band replaces each port's tbf, and the fair queue under it with it.
				return fmt.Errorf("--inc-band replaces every shaped port's queue, and %s asks for fair ones (fabric.server_queue %s, fabric.switch_queue %s): drop one of the two", src, s.Fabric.ServerQueue, s.Fabric.SwitchQueue)
			}
			a.progress("scenario %s (%s): %s", s.Name, src, s.Description)
			t := topo.Build(s.Spec())
			if err := pcap.check(t, out); err != nil {
				return err
			}
			o := runOpts{keep: keep, verify: verify, realtime: realtime, planFile: planFile, dur: dur, out: out, pcap: &pcap}
			// emu run's own traffic sets its congestion control per socket:
			// that the namespaces' default cannot be it matters only to
			// programs run in a lab left up (--keep).
			a.ccWarned = !keep
			if repeat < 1 || repeat > maxRepeat {
				return fmt.Errorf("--repeat %d: want 1 to %d runs", repeat, maxRepeat)
			}
			if repeat == 1 {
				_, err := a.runOnce(cmd.Context(), s, src, t, o)
				return err
			}
			switch {
			case out == "":
				return errors.New("--repeat needs --results: the set is summarised from the runs' directories")
			case keep:
				return errors.New("--repeat and --keep do not go together: each run deploys the lab afresh")
			case len(s.Jobs) == 0 && planFile == "":
				return fmt.Errorf("--repeat: scenario %s has no jobs, so there is no phase to repeat", s.Name)
			}
			return a.runRepeated(cmd.Context(), s, src, t, o, repeat)
		},
	}
	cmd.Flags().BoolVar(&keep, "keep", false, "leave the lab up afterwards")
	addLabNameFlag(cmd, &labName)
	cmd.Flags().StringVar(&planFile, "plan", "", "run this plan instead of the scenario scheduler's")
	cmd.Flags().StringVar(&sched, "scheduler", "", "plan with this scheduler instead of the scenario's: "+strings.Join(scheduler.Names, ", "))
	cmd.Flags().BoolVar(&inc, "inc", true, "--inc=false turns in-network aggregation off for every job (scheduler.inc: false)")
	cmd.Flags().BoolVar(&verify, "verify", true, "check every reduction and every byte the workers move")
	cmd.Flags().BoolVar(&realtime, "realtime", false, "run the ranks under SCHED_RR, so that other work on a loaded machine does not delay them (default: nice -10)")
	cmd.Flags().BoolVar(&a.incBand, "inc-band", false, "give INC packets a strict-priority band at every shaped port (htb; docs/inc.md)")
	cmd.Flags().BoolVar(&a.incCC, "inc-cc", false, "INC workers run congestion control (ATP-style window; docs/inc.md)")
	cmd.Flags().DurationVar(&a.tcpInfoEvery, "tcpinfo-every", workers.DefaultTCPInfoEvery, "how often each rank samples its connections' TCP_INFO (cwnd, ssthresh, RTT, retransmissions; the attribution reads them), from 1ms to 1s")
	cmd.Flags().DurationVar(&dur, "duration", 2*time.Second, "length of the measured TCP transfer")
	cmd.Flags().StringVar(&out, "results", "results", "results root: each run writes <root>/<lab>/<date-time>/ (empty: keep nothing)")
	cmd.Flags().IntVar(&repeat, "repeat", 1, "run the scenario this many times (each deployed afresh) and summarise the set: each phase's median and range against the models, and the attributions' tally (docs/fidelity.md)")
	pcap.add(cmd)
	return cmd
}

// runOpts are emu run's flags that shape one run.
type runOpts struct {
	keep, verify, realtime bool
	planFile               string
	dur                    time.Duration
	out                    string
	pcap                   *pcapFlags
}

// runOnce deploys s, checks it, runs its jobs, destroys it and writes the
// run's directory (returned; empty without --results).
func (a *app) runOnce(ctx context.Context, s *scenario.Scenario, src string, t *topo.Topology, o runOpts) (string, error) {
	keep, verify, realtime, planFile, dur, out, pcap := o.keep, o.verify, o.realtime, o.planFile, o.dur, o.out, o.pcap
	var err error
	completed := false // latest stays on the run only if it completes
	// The results directory is made, and the plan read, checked and
	// predicted, before anything touches the kernel. Each run gets
	// its own directory; without --results the records live in a
	// temporary one that is removed afterwards.
	dir := ""
	start := time.Now()
	if out != "" {
		var prev string
		if dir, prev, err = newRunDir(out, s.Name, start); err != nil {
			return dir, err
		}
		defer func() {
			if !completed {
				if err := restoreLatest(dir, prev); err != nil {
					a.log.Warn("results", "err", err)
				}
				if _, err := os.Stat(dir); errors.Is(err, os.ErrNotExist) {
					_ = os.Remove(filepath.Dir(dir)) // results/<lab>/, if the dropped run was all it held
				}
			}
		}()
		if err := writeScenario(dir, s); err != nil {
			return dir, err
		}
	} else if len(s.Jobs) > 0 || planFile != "" {
		if dir, err = os.MkdirTemp("", "emu-run-"); err != nil {
			return "", fmt.Errorf("records directory: %w", err)
		}
		defer os.RemoveAll(dir)
	}
	var prepared *preparedRun
	if len(s.Jobs) > 0 || planFile != "" {
		if prepared, err = a.preparePlan(s, planFile, dir); err != nil {
			a.dropRunDir(out, dir)
			return "", err
		}
		prepared.temp = out == ""
	}
	if out != "" {
		sched := s.Scheduler.Name
		if prepared != nil {
			sched = prepared.plan.Scheduler
		}
		if err := writeRunMeta(dir, s, planFile, sched, start); err != nil {
			return dir, err
		}
	}
	sum := &runSummary{Lab: s.Name, Scenario: src, Kind: s.Fabric.Kind, ServerQueue: s.Fabric.ServerQueue, SwitchQueue: s.Fabric.SwitchQueue, Nodes: len(t.Nodes), Links: len(t.Links)}
	t0 := time.Now()
	lab, err := a.deploy(ctx, s, src, true)
	if err != nil {
		a.dropRunDir(out, dir)
		return "", err
	}
	sum.DeploySec = time.Since(t0).Seconds()
	if out != "" {
		// Where this run's results go, for `emu ui` of the lab started
		// elsewhere (another folder, another --results).
		if abs, err := filepath.Abs(filepath.Join(out, s.Name, "latest")); err == nil {
			if err := safefile.Write(fabric.LabFile(s.Name, runLinkFile), []byte(abs+"\n"), 0o644); err != nil {
				a.log.Debug("results link for emu ui", "err", err)
			}
		}
	}
	a.progress("fabric up in %.2fs: %d namespaces, %d veth links", sum.DeploySec, len(t.Nodes), len(t.Links))
	// The run holds the lab's use lock from its deploy until its teardown:
	// destroy from another process, or a collective on it, is refused.
	defer lab.ReleaseUse()
	stopPcap, runErr := a.startPcap(ctx, pcap, dir)
	if runErr == nil {
		runErr = a.checkLab(ctx, lab, sum, dur)
	}
	if runErr == nil && prepared != nil {
		runErr = a.runJobs(ctx, lab, s, prepared, verify, realtime)
	}
	runErr = errors.Join(runErr, stopPcap())
	lab.Close()
	// Teardown problems are the command's, not the run's: a run whose
	// records are all written is complete however the lab went.
	var teardownErr error
	if keep {
		a.progress("--keep: lab %q stays up; remove it with `emu destroy %s`", s.Name, s.Name)
		a.keptLab = s.Name
		lab.ReleaseUse() // the run is over: the lab is the user's now
	} else {
		t1 := time.Now()
		if err := fabric.Destroy(context.WithoutCancel(ctx), s.Name, a.log); err != nil {
			teardownErr = err
		}
		lab.ReleaseUse() // at once: a classmate may deploy the name next
		sum.DestroySec = time.Since(t1).Seconds()
		left, _ := netns.List(names.LabPrefix(s.Name))
		sum.Leftovers = len(left)
		if len(left) > 0 {
			teardownErr = errors.Join(teardownErr, fmt.Errorf("%d namespaces left behind, e.g. %s", len(left), left[0]))
		}
		a.progress("lab destroyed in %.2fs", sum.DestroySec)
	}
	printSummary(a.stdout(), sum)
	if prepared != nil && prepared.fidelity != nil {
		fmt.Fprintln(a.stdout(), verdictLine(prepared.fidelity.Verdict))
	}
	if r, err := kcheck.Load(); err != nil || r.VethGbps <= 0 {
		fmt.Fprintln(a.stdout(), "   hint        run `emu doctor` once: it measures this machine, so emu can warn when a scenario asks for more than it can carry")
	}
	if out != "" {
		complete := runErr == nil
		sum.Complete = &complete
		if err := writeSummary(dir, sum); err != nil {
			runErr = errors.Join(runErr, err)
		}
		if runErr == nil && prepared != nil {
			if page, err := report.Write(dir); err != nil {
				a.log.Warn("no report written", "err", err)
			} else {
				a.progress("report: %s (open it in a browser; `emu report` rewrites it)", page)
			}
		}
		if runErr == nil {
			completed = true
			a.progress("results in %s (also %s)", dir, filepath.Join(out, s.Name, "latest"))
		} else {
			a.progress("what the run recorded before it stopped is in %s; %s stays on the last complete run, if any", dir, filepath.Join(out, s.Name, "latest"))
		}
	}
	return dir, errors.Join(runErr, teardownErr)
}

// dropRunDir removes the directory of a run that never ran (its plan was
// refused, or its lab could not be deployed: it holds only the scenario,
// plan and run.json); latest goes back with runOnce's deferred
// restoreLatest.
func (a *app) dropRunDir(out, dir string) {
	if out == "" {
		return
	}
	if err := os.RemoveAll(dir); err != nil {
		a.log.Warn("results: remove the directory of a run that did not start", "dir", dir, "err", err)
	}
}

// maxRepeat bounds --repeat: 20 quickstart runs take about a minute.
const maxRepeat = 50

// runRepeated runs s n times, each deployed afresh into its own run
// directory, then summarises the set into <results>/<lab>/repeat-<time>/
// (repeat.txt, repeat.json, repeat.csv and the page repeat.html). It stops at the first failed
// run; the runs before it keep their directories.
func (a *app) runRepeated(ctx context.Context, s *scenario.Scenario, src string, t *topo.Topology, o runOpts, n int) error {
	start := time.Now()
	var dirs []string
	// Each run's tables go to its directory; here a line per run.
	a.out = io.Discard
	defer func() { a.out = nil }()
	for i := 1; i <= n; i++ {
		a.progress("run %d of %d", i, n)
		dir, err := a.runOnce(ctx, s, src, t, o)
		if err != nil {
			if len(dirs) >= 2 {
				return fmt.Errorf("run %d of %d: %w (the %d runs before it are kept: emu compare --repeat %s summarises them)", i, n, err, len(dirs), strings.Join(dirs, " "))
			}
			return fmt.Errorf("run %d of %d: %w", i, n, err)
		}
		fmt.Println(runLine(i, n, dir))
		dirs = append(dirs, dir)
	}
	tab, err := report.RepeatRuns(dirs)
	if err != nil {
		return err
	}
	var txt, csvb bytes.Buffer
	if err := errors.Join(tab.WriteText(&txt), tab.WriteCSV(&csvb)); err != nil {
		return err
	}
	fmt.Printf("\n%s", txt.Bytes())
	set, err := newSetDir(o.out, s.Name, start)
	if err != nil {
		return err
	}
	page, err := report.RenderRepeat(tab, set)
	if err != nil {
		return err
	}
	if err := errors.Join(
		safefile.Write(filepath.Join(set, "repeat.txt"), txt.Bytes(), 0o644),
		safefile.Write(filepath.Join(set, report.RepeatCSV), csvb.Bytes(), 0o644),
		writeJSONFile(filepath.Join(set, report.RepeatFile), tab),
		safefile.Write(filepath.Join(set, report.RepeatPage), page, 0o644),
	); err != nil {
		return fmt.Errorf("write the set's summary: %w", err)
	}
	a.progress("%d runs summarised in %s (open %s in a browser; each run's own directory is beside it)", n, set, report.RepeatPage)
	return nil
}

// runLine sums up one run of a set: makespan, the TCP-aware model's
// |error| and the verdict (the rest is in its directory).
func runLine(i, n int, dir string) string {
	line := fmt.Sprintf("run %d of %d  %s", i, n, filepath.Base(dir))
	r, err := report.Load(dir)
	if err != nil {
		return line + "  (" + err.Error() + ")"
	}
	if pm, mm := r.Prediction.MakespanNs, r.Measurement.MakespanNs; pm > 0 {
		line += fmt.Sprintf("  makespan %.3f s (%+.1f%%)", float64(mm)/1e9, 100*float64(mm-pm)/float64(pm))
	}
	if r.Data == nil {
		return line
	}
	if med, mx, n := fidelity.AbsStats(r.Data.ComparisonTCPAware); n > 0 {
		line += fmt.Sprintf("  TCP-aware |error| median %.1f%%, max %.1f%%", 100*med, 100*mx)
	}
	return line + "  " + strings.Join(strings.Fields(verdictLine(r.Data.Verdict)), " ")
}

// checkLab runs pingall and one cross-rack transfer.
func (a *app) checkLab(ctx context.Context, lab *fabric.Lab, sum *runSummary, dur time.Duration) error {
	var hs []probe.Host
	for _, n := range lab.Topo.Servers() {
		hs = append(hs, probe.Host{Name: n.Name, NS: n.NS, Addr: n.Addr})
	}
	f := lab.Topo.Spec
	if f.Kind == topo.FabricOCS {
		a.progress("ocs fabric: circuits are unpatched until an OCS configuration is applied, so racks cannot reach each other yet; skipping pingall and transfer")
		return nil
	}
	a.progress("pingall: %d servers, %d pairs", len(hs), len(hs)*(len(hs)-1))
	pr, err := probe.PingAll(ctx, hs, 3, time.Second)
	if err != nil {
		return fmt.Errorf("pingall: %w", err)
	}
	sum.PingPairs, sum.PingFailed, sum.PingMaxRTT = pr.Pairs, len(pr.Failed), float64(pr.RTTMax.Microseconds())/1000
	a.progress("pingall: %d/%d pairs reached in %v", pr.Pairs-len(pr.Failed), pr.Pairs, pr.Took.Round(time.Millisecond))
	if len(pr.Failed) > 0 {
		return fmt.Errorf("pingall: %d pairs unreachable, e.g. %s -> %s", len(pr.Failed), pr.Failed[0].From, pr.Failed[0].To)
	}
	src, dst := hs[0], hs[len(hs)-1]
	a.progress("TCP transfer %s -> %s (cross-rack) for %v", src.Name, dst.Name, dur)
	tr, err := probe.Transfer(ctx, src, dst, probe.TransferOptions{Duration: dur, Warmup: 300 * time.Millisecond, CongestionControl: f.CongestionControl})
	if err != nil {
		return err
	}
	bottleneck := f.ServerRate
	if f.HasEPS() && f.CoreRate < bottleneck {
		bottleneck = f.CoreRate
	}
	sum.Transfer = &transferSummary{From: src.Name, To: dst.Name, GoodputMbps: tr.GoodputBps / 1e6, ConfiguredBps: bottleneck.Bps(), CC: tr.CC}
	if bottleneck > 0 {
		sum.Transfer.Fraction = tr.GoodputBps / bottleneck.Bps()
	}
	return nil
}

func printSummary(w io.Writer, s *runSummary) {
	fmt.Fprintln(w)
	fmt.Fprintf(w, "== emu run: lab %s (%s fabric, from %s)\n", s.Lab, s.Kind, s.Scenario)
	queues := ""
	if s.ServerQueue == topo.QueueFair {
		queues = "; servers' ports queue per destination (fair)"
	}
	if s.SwitchQueue == topo.QueueFair {
		queues += "; switches' ports queue per server pair (fair)"
	}
	fmt.Fprintf(w, "   fabric      %d namespaces, %d veth links, up in %.2fs%s\n", s.Nodes, s.Links, s.DeploySec, queues)
	if s.PingPairs > 0 {
		fmt.Fprintf(w, "   pingall     %d/%d pairs reachable, max RTT %.2f ms\n", s.PingPairs-s.PingFailed, s.PingPairs, s.PingMaxRTT)
	}
	if t := s.Transfer; t != nil {
		rate := "unlimited"
		if t.ConfiguredBps > 0 {
			rate = fmt.Sprintf("%.0f Mbit/s", t.ConfiguredBps/1e6)
		}
		fmt.Fprintf(w, "   TCP         %s -> %s: %.1f Mbit/s goodput (%s), configured bottleneck %s", t.From, t.To, t.GoodputMbps, t.CC, rate)
		if t.Fraction > 0 {
			fmt.Fprintf(w, " = %.1f%%", 100*t.Fraction)
		}
		fmt.Fprintln(w)
	}
	if s.DestroySec > 0 {
		fmt.Fprintf(w, "   teardown    %.2fs, %d namespaces left behind\n", s.DestroySec, s.Leftovers)
	}
}

func writeJSONFile(path string, v any) error {
	data, err := json.MarshalIndent(v, "", " ")
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := safefile.Write(path, append(data, '\n'), 0o644); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

func writeSummary(dir string, s *runSummary) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("results dir: %w", err)
	}
	data, _ := json.MarshalIndent(s, "", "  ")
	if err := safefile.Write(filepath.Join(dir, "summary.json"), append(data, '\n'), 0o644); err != nil {
		return fmt.Errorf("write summary: %w", err)
	}
	return nil
}

// minTransfer and maxTransfer bound emu run --duration: the probe
// transfer warms up for 300 ms, and a minute is plenty to read a rate.
const (
	minTransfer = 100 * time.Millisecond
	maxTransfer = time.Minute
)

// checkTCPInfoEvery refuses a TCP_INFO period outside 1 ms to 1 s: below,
// the samples cost the ranks more than they tell; above, a phase gets
// none.
func checkTCPInfoEvery(d time.Duration) error {
	if d < time.Millisecond || d > time.Second {
		return fmt.Errorf("--tcpinfo-every %v: want 1ms to 1s (default %v)", d, workers.DefaultTCPInfoEvery)
	}
	return nil
}
