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
	"github.com/ocsemu/ocsemu/emu/orchestrate"
	"github.com/ocsemu/ocsemu/emu/plan"
	"github.com/ocsemu/ocsemu/emu/scenario"
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
			data, err := os.ReadFile(specPath)
			if err != nil {
				return err
			}
			var s workers.Spec
			if err := json.Unmarshal(data, &s); err != nil {
				return fmt.Errorf("%s: %w", specPath, err)
			}
			return workers.Run(cmd.Context(), &s, a.log)
		},
	}
	cmd.Flags().StringVar(&specPath, "spec", "", "rank spec written by emu run / emu collective")
	return cmd
}

func (a *app) collectiveCmd() *cobra.Command {
	var labName, ranks, bytes, ps string
	var iters int
	var compute time.Duration
	var verify bool
	cmd := &cobra.Command{
		Use:   "collective <ring|hd|alltoall|ps> --ranks r0s0,r1s0,... --bytes 64MiB",
		Short: "Run one collective between chosen servers of a deployed lab, nccl-tests style",
		Long: `collective runs a single job, one rank per listed server, on a deployed lab and
prints nccl-tests-like figures per iteration: time, algbw (size / time) and
busbw (algbw x 2(n-1)/n for all-reduce, (n-1)/n for all-to-all). With
--verify every reduction and every byte is checked.`,
		Example: `  sudo emu collective ring --ranks r0s0,r1s0,r2s0,r3s0 --bytes 64MiB --iterations 5
  sudo emu collective ps --ranks r0s0,r1s0,r2s0 --ps r3s0 --bytes 16MiB --verify`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			pattern := args[0]
			if scenario.Phases(pattern) == nil {
				return fmt.Errorf("unknown pattern %q (ring, hd, alltoall, ps)", pattern)
			}
			lab, err := resolveLab(labName)
			if err != nil {
				return err
			}
			l, err := fabric.Open(lab, a.log)
			if err != nil {
				return err
			}
			defer l.Close()
			size, err := scenario.ParseByteSize(bytes)
			if err != nil {
				return err
			}
			j := plan.Job{Name: "collective", Pattern: pattern, Workers: strings.Split(ranks, ","), Bytes: int64(size),
				ComputeNs: int64(compute), Iterations: iters}
			if pattern == scenario.PatternPS {
				j.PS = ps
				if j.PS == "" {
					return errors.New("ps needs --ps <server> for the parameter server")
				}
			}
			s, err := labScenario(lab)
			if err != nil {
				return err
			}
			// Check the job against the lab as a plan that runs its phases in order.
			p := &plan.Plan{Version: 1, Mode: plan.ModeBarrier, Jobs: []plan.Job{j}, Stages: oneStagePerPhase(j)}
			if err := plan.Check(p, s); err != nil {
				return err
			}
			jobs, err := orchestrate.WorkerJobs(p)
			if err != nil {
				return err
			}
			exe, _ := os.Executable()
			dir, _ := filepath.Abs(filepath.Join("results", lab, "collective-"+time.Now().Format("150405.000")))
			out, err := workers.Launch(cmd.Context(), &workers.Options{Lab: l, Jobs: jobs, Dir: dir, Exe: exe, Verify: verify, Log: a.log, Progress: a.progress})
			if err != nil {
				return err
			}
			stats, jstats, _ := workers.Summarize(jobs, out)
			workers.PrintStats(os.Stdout, stats, jstats)
			a.progress("records in %s", dir)
			return nil
		},
	}
	cmd.Flags().StringVarP(&labName, "lab", "l", "", "lab (needed only when several are deployed)")
	cmd.Flags().StringVar(&ranks, "ranks", "", "servers, one rank each, comma-separated (required)")
	cmd.Flags().StringVar(&bytes, "bytes", "16MiB", "bytes per rank per iteration")
	cmd.Flags().StringVar(&ps, "ps", "", "server of the parameter server (ps pattern)")
	cmd.Flags().IntVar(&iters, "iterations", 3, "iterations")
	cmd.Flags().DurationVar(&compute, "compute", 0, "compute time before each collective")
	cmd.Flags().BoolVar(&verify, "verify", true, "check every reduction and every byte")
	_ = cmd.MarkFlagRequired("ranks")
	return cmd
}

// oneStagePerPhase is a barrier plan that runs a job's phases in order.
func oneStagePerPhase(j plan.Job) []plan.Stage {
	var st []plan.Stage
	for _, k := range j.Phases() {
		st = append(st, plan.Stage{Activities: []plan.Activity{{Job: j.Name, Iteration: k.Iteration, Phase: k.Phase}}})
	}
	return st
}
