package main

import (
	"errors"
	"fmt"
	"os"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/ocsemu/ocsemu/dataplane/kcheck"
)

func (a *app) doctorCmd() *cobra.Command {
	var asJSON bool
	var measure time.Duration
	cmd := &cobra.Command{
		Use:   "doctor",
		Short: "Check root, the kernel features emu uses, and this machine's veth throughput",
		Long: `doctor tries every kernel feature emu relies on for real, in throwaway
namespaces: veth, tbf/htb shaping, clsact and cls_bpf (the OCS fast path),
the bridge, congestion controls, and whether netem, fq and fq_codel exist.
It then measures TCP goodput over one unshaped veth pair: the budget all
emulated traffic on this machine shares. The result is kept in
/run/emu/doctor.json.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if !asJSON {
				a.progress("checking kernel features; measuring veth throughput for %v", measure)
			}
			r, err := kcheck.Run(cmd.Context(), kcheck.Options{Measure: measure})
			if err != nil {
				return err
			}
			if err := cmd.Context().Err(); err != nil {
				// A throughput cut short is no measurement: nothing is
				// saved or shown (the capacity warnings read the file).
				return fmt.Errorf("doctor: %w", err)
			}
			if os.Geteuid() == 0 {
				if err := kcheck.Save(r); err != nil {
					a.log.Warn("could not save doctor report", "err", err)
				}
			}
			if asJSON {
				if err := writeJSON(r); err != nil {
					return err
				}
			} else {
				w := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', 0)
				fmt.Fprintln(w, "CHECK\tRESULT\tDETAIL")
				for _, c := range r.Checks {
					res := "ok"
					switch {
					case !c.OK && c.Required:
						res = "FAIL"
					case !c.OK:
						res = "absent"
					}
					fmt.Fprintf(w, "%s\t%s\t%s\n", c.Name, res, c.Detail)
				}
				w.Flush()
			}
			if !r.OK() {
				return errors.New("this machine lacks something emu needs (FAIL above)")
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	cmd.Flags().DurationVar(&measure, "measure", 2*time.Second, "length of the veth throughput measurement (0 skips it)")
	return cmd
}
