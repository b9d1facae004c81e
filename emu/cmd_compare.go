package main

import (
	"fmt"
	"io"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/ocsemu/ocsemu/dataplane/safefile"
	"github.com/ocsemu/ocsemu/emu/report"
)

func (a *app) compareCmd() *cobra.Command {
	out := report.CompareFile
	var repeat, repredictRuns bool
	cmd := &cobra.Command{
		Use:   "compare RUN RUN...",
		Short: "Compare two or more run directories: a table here and an offline HTML page",
		Long: `compare reads two or more run directories that emu run wrote (e.g. two
designs, two schedulers or two seeds; results/<lab>/latest works) and
prints, per run: lab, scheduler, mode, the makespan predicted and measured
with its signed error, the mean and largest job completion time predicted
and measured, the prediction's circuit reconfigurations and the mean signed
error of each phase kind. It also writes an HTML page (compare.html in the
current directory, or -o PATH) with the table and a bar chart of the
makespans; the page needs no network. Every argument must be a complete
run directory; what is missing is named.

With --repeat the runs must be runs of one plan (as emu run --repeat makes):
it prints each phase's measured median and range against the three models,
how far single runs scatter, how many phases more than 10% off the
TCP-aware model the runs' attributions explain, and whether the run whose
measurement is each phase's median explains a median more than 10% off,
and writes that page (repeat.html, or -o).

--repredict (with --repeat) first predicts every run again with this
emu's calibrated and TCP-aware models: the models, the TCP-aware model's
replay at the measured phase starts and the attribution, from the run's
data file; the ideal model (the plan's), the measurements and the
verdicts stay as recorded. It shows how a change of a model reads on
runs made before it, and lets runs made by different versions of the
models be summarised as one set.`,
		Example: "  emu compare results/cmpa/latest results/cmpb/latest -o /tmp/compare.html\n  emu compare --repeat results/quickstart/2026*\n  emu compare --repeat --repredict results/plan-demo/2026*",
		Args:    cobra.MinimumNArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			var (
				text func(io.Writer) error
				page []byte
				err  error
			)
			if repredictRuns && !repeat {
				return fmt.Errorf("compare: --repredict needs --repeat (it predicts the runs of one plan again)")
			}
			if repeat {
				t, terr := repeatTable(args, repredictRuns)
				if terr != nil {
					return terr
				}
				if !cmd.Flags().Changed("output") {
					out = report.RepeatPage
				}
				text = t.WriteText
				page, err = report.RenderRepeat(t, filepath.Dir(out))
			} else {
				t, terr := report.CompareRuns(args)
				if terr != nil {
					return terr
				}
				text = t.WriteText
				page, err = report.RenderCompare(t)
			}
			if err != nil {
				return err
			}
			if err := text(cmd.OutOrStdout()); err != nil {
				return err
			}
			if err := safefile.Write(out, page, 0o644); err != nil {
				return fmt.Errorf("compare: %w", err)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "\npage: %s\n", out)
			return nil
		},
	}
	cmd.Flags().StringVarP(&out, "output", "o", out, "where to write the HTML page")
	cmd.Flags().BoolVar(&repeat, "repeat", false, "the runs are repeats of one plan: summarise them phase by phase (median, range, the models' errors)")
	cmd.Flags().BoolVar(&repredictRuns, "repredict", false, "with --repeat: predict every run again with this emu's calibrated and TCP-aware models and attribution (measurements and verdicts as recorded)")
	return cmd
}

// repeatTable summarises runs of one plan, first predicted again with
// this emu's model if again.
func repeatTable(dirs []string, again bool) (*report.RepeatTable, error) {
	if !again {
		return report.RepeatRuns(dirs)
	}
	runs := make([]*report.Run, 0, len(dirs))
	for _, d := range dirs {
		r, err := report.Load(d)
		if err != nil {
			return nil, err
		}
		if err := repredict(r); err != nil {
			return nil, err
		}
		runs = append(runs, r)
	}
	t, err := report.Repeats(runs)
	if err != nil {
		return nil, err
	}
	t.Repredicted = buildVersion()
	return t, nil
}
