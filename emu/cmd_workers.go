package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/ocsemu/ocsemu/dataplane/fabric"
	"github.com/ocsemu/ocsemu/dataplane/names"
	"github.com/ocsemu/ocsemu/emu/orchestrate"
	"github.com/ocsemu/ocsemu/emu/plan"
	"github.com/ocsemu/ocsemu/emu/plural"
	"github.com/ocsemu/ocsemu/emu/scenario"
	"github.com/ocsemu/ocsemu/ocsfabric/circuit"
	"github.com/ocsemu/ocsemu/workers"
)

func (a *app) workerCmd() *cobra.Command {
	var specPath string
	cmd := &cobra.Command{
		Use:   "worker --spec <rank.spec.json>",
		Short: "Run one rank of a job (emu run and emu collective start these)",
		Long: `worker plays one rank of a training job inside its server's namespace: it
connects to its peers, waits for time zero from the coordinator, then runs
every (iteration, phase) when the plan allows, and writes JSONL records.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if specPath == "" {
				return errors.New("--spec is required")
			}
			s, err := workers.ReadSpec(specPath)
			if err != nil {
				return fmt.Errorf("--spec %w", err)
			}
			return workers.Run(cmd.Context(), s, a.log)
		},
	}
	cmd.Flags().StringVar(&specPath, "spec", "", "rank spec written by emu run / emu collective")
	return cmd
}

func (a *app) collectiveCmd() *cobra.Command {
	var labName, ranks, bytes, ps, resultsRoot string
	var iters int
	var compute time.Duration
	var verify, asJSON, realtime bool
	cmd := &cobra.Command{
		Use:   "collective <ring|hd|alltoall|ps> --ranks r0s0,r1s0,... --bytes 64MiB",
		Short: "Run one collective between chosen servers of a deployed lab, nccl-tests style",
		Long: `collective runs a single job, one rank per listed server, on a deployed lab and
prints nccl-tests-like figures per iteration: time, algbw (size / time) and
busbw (algbw x 2(n-1)/n for all-reduce, (n-1)/n for all-to-all). With
--verify every reduction and every byte is checked. Every phase starts at
one instant on every rank (a barrier, as nccl-tests has before it times),
so a phase's time is its own transfer. --json prints the same figures as
JSON, for scripts.`,
		Example: `  sudo emu collective ring --ranks r0s0,r1s0,r2s0,r3s0 --bytes 64MiB --iterations 5
  sudo emu collective ps --ranks r0s0,r1s0,r2s0 --ps r3s0 --bytes 16MiB --verify`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			// Every flag is checked before anything is allocated or opened.
			j, err := collectiveJob(args[0], ranks, bytes, ps, iters, compute)
			if err != nil {
				return err
			}
			if resultsRoot == "" {
				return errors.New("--results: want a directory")
			}
			lab, err := resolveLab(labName)
			if err != nil && labName != "" {
				return fmt.Errorf("--lab %q: %w", labName, err)
			} else if err != nil {
				return err
			}
			useLock, err := fabric.LockUse(lab)
			if err != nil {
				return err
			}
			defer useLock.Release()
			l, err := fabric.Open(lab, a.log)
			if err != nil {
				return err
			}
			defer l.Close()
			s, err := labScenario(lab)
			if err != nil {
				return err
			}
			// On a circuit fabric the job runs over the circuits patched now
			// (by hand or by a plan): every stage carries them, so the check
			// below asks whether they give the job's flows a path.
			var circuits []circuit.Circuit
			if s.Fabric.HasOCS() {
				v, err := ocsClient(lab).Config(cmd.Context())
				if err != nil {
					return fmt.Errorf("current circuits of lab %s: %w", lab, err)
				}
				circuits = v.Circuits
			}
			// Check the job against the lab as a plan that runs its phases in order.
			p := &plan.Plan{Version: 1, Mode: plan.ModeBarrier, Jobs: []plan.Job{j}, Stages: oneStagePerPhase(j, circuits)}
			if err := plan.Check(p, s); err != nil {
				if s.Fabric.Kind == scenario.KindOCS && errors.Is(err, plan.ErrNoPath) {
					return fmt.Errorf("%w\nthe lab's current circuits (%d, see `emu ocs show`) must give every rack pair of the job a path: patch them with `emu ocs connect` or `emu ocs apply`", err, len(circuits))
				}
				return err
			}
			jobs, err := orchestrate.WorkerJobs(p)
			if err != nil {
				return err
			}
			exe, _ := os.Executable()
			dir, _ := filepath.Abs(filepath.Join(resultsRoot, lab, "collective-"+time.Now().Format("150405.000")))
			// The plan's barrier stages gate the phases, as nccl-tests' barrier
			// does: every stage is set collectiveStageLead ahead, so that every
			// rank has heard of it and all start each phase at one instant, and
			// a phase's time is its transfer, not the ranks' skew from the one
			// before (docs/benchmarks.md).
			out, err := workers.Launch(cmd.Context(), &workers.Options{Lab: l, Jobs: jobs, Schedule: orchestrate.Schedule(p), Dir: dir, Exe: exe, Verify: verify, Realtime: realtime,
				StageLead: collectiveStageLead, Log: a.log, Progress: a.progress})
			if err != nil {
				return err
			}
			stats, jstats, _ := workers.Summarize(jobs, out)
			if asJSON {
				enc := json.NewEncoder(os.Stdout)
				enc.SetIndent("", " ")
				return enc.Encode(collectiveResult{Phases: stats, Jobs: jstats, Records: dir})
			}
			workers.PrintStats(os.Stdout, stats, jstats)
			a.progress("records in %s", dir)
			return nil
		},
	}
	cmd.Flags().StringVarP(&labName, "lab", "l", "", "lab (needed only when several are deployed)")
	cmd.Flags().StringVar(&resultsRoot, "results", "results", "directory the ranks' records go under (<results>/<lab>/collective-<time>/)")
	cmd.Flags().StringVar(&ranks, "ranks", "", "servers, one rank each, comma-separated (required)")
	cmd.Flags().StringVar(&bytes, "bytes", "16MiB", "bytes per rank per iteration")
	cmd.Flags().StringVar(&ps, "ps", "", "server of the parameter server (ps pattern)")
	cmd.Flags().IntVar(&iters, "iterations", 3, "iterations")
	cmd.Flags().DurationVar(&compute, "compute", 0, "compute time before each collective")
	cmd.Flags().BoolVar(&verify, "verify", true, "check every reduction and every byte")
	cmd.Flags().BoolVar(&realtime, "realtime", false, "run the ranks under SCHED_RR, so that other work on a loaded machine does not delay them (default: nice -10)")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the phases as JSON (nccl-tests' figures: duration_ns, algbw_bps, busbw_bps)")
	_ = cmd.MarkFlagRequired("ranks")
	return cmd
}

// collectiveResult is what `emu collective --json` prints.
type collectiveResult struct {
	Phases  []workers.PhaseStat `json:"phases"`
	Jobs    []workers.JobStat   `json:"jobs"`
	Records string              `json:"records"` // the rank records' directory
}

// collectiveJob checks the flags of `emu collective` with the bounds the
// scenario and plan checks use, and the workers' own limits, and builds
// the job. Each message names the flag, the value and what is allowed.
func collectiveJob(pattern, ranks, bytes, ps string, iters int, compute time.Duration) (plan.Job, error) {
	var errs []error
	bad := func(flag, value, format string, a ...any) {
		errs = append(errs, fmt.Errorf("%s %s: "+format, append([]any{flag, value}, a...)...))
	}
	if scenario.Phases(pattern) == nil {
		bad("pattern", fmt.Sprintf("%q", pattern), "unknown (want ring, hd, alltoall or ps)")
	}
	var servers []string
	seen := map[string]bool{}
	for _, w := range strings.Split(ranks, ",") {
		w = strings.TrimSpace(w)
		switch _, _, ok := names.ParseServer(w); {
		case w == "":
			bad("--ranks", fmt.Sprintf("%q", ranks), "empty server name (want e.g. r0s0,r1s0)")
		case !ok:
			bad("--ranks", fmt.Sprintf("%q", ranks), "%q is not a server name (want r<rack>s<index>, e.g. r0s1)", w)
		case seen[w]:
			bad("--ranks", fmt.Sprintf("%q", ranks), "server %s is listed twice (one rank per server)", w)
		}
		seen[w] = true
		servers = append(servers, w)
	}
	n := len(servers)
	if n < 2 || n > workers.MaxRanks {
		bad("--ranks", "("+plural.Of(n, "server")+")", "a job needs between 2 and %d ranks", workers.MaxRanks)
	}
	if pattern == scenario.PatternHD && n&(n-1) != 0 {
		bad("--ranks", "("+plural.Of(n, "server")+")", "halving-doubling needs a power-of-two number of ranks (2, 4, 8, ...)")
	}
	if iters < 1 || iters > plan.MaxIterations {
		bad("--iterations", fmt.Sprint(iters), "must be between 1 and %d", plan.MaxIterations)
	}
	if compute < 0 {
		bad("--compute", compute.String(), "must not be negative")
	}
	size, err := scenario.ParseByteSize(bytes)
	if err != nil {
		bad("--bytes", fmt.Sprintf("%q", bytes), "%v", err)
	} else if err := workers.CheckBytes(int64(size), n); err != nil {
		bad("--bytes", bytes, "%v", err)
	} else if err := workers.CheckMemory(workers.BufferBytes(pattern, n, int64(size))); err != nil {
		bad("--bytes", bytes, "%d ranks of %s: %v", n, bytes, err)
	}
	switch {
	case pattern == scenario.PatternPS && ps == "":
		bad("--ps", `""`, "the ps pattern needs --ps <server> for the parameter server")
	case pattern != scenario.PatternPS && ps != "":
		bad("--ps", ps, "a parameter server is only for the ps pattern")
	case ps != "":
		if _, _, ok := names.ParseServer(ps); !ok {
			bad("--ps", ps, "not a server name (want r<rack>s<index>, e.g. r3s0)")
		}
	}
	if len(errs) > 0 {
		return plan.Job{}, errors.Join(errs...)
	}
	return plan.Job{Name: "collective", Pattern: pattern, Workers: servers, Bytes: int64(size),
		ComputeNs: int64(compute), Iterations: iters, PS: ps}, nil
}

// oneStagePerPhase is a barrier plan that runs a job's phases in order.
// Every stage keeps circuits, the lab's current ones.
func oneStagePerPhase(j plan.Job, circuits []circuit.Circuit) []plan.Stage {
	var st []plan.Stage
	for _, k := range j.Phases() {
		st = append(st, plan.Stage{Circuits: circuits, Activities: []plan.Activity{{Job: j.Name, Iteration: k.Iteration, Phase: k.Phase}}})
	}
	return st
}

// collectiveStageLead is how far ahead `emu collective` sets each phase's
// barrier stage: time for every rank to hear of it on a busy machine
// (broadcasts reach the ranks up to about 2 ms apart here).
const collectiveStageLead = 10 * time.Millisecond
