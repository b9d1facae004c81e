package main

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/ocsemu/ocsemu/dataplane/fabric"
	"github.com/ocsemu/ocsemu/dataplane/loss"
	"github.com/ocsemu/ocsemu/dataplane/loss/inject"
	"github.com/ocsemu/ocsemu/dataplane/names"
	"github.com/ocsemu/ocsemu/emu/plural"
)

func (a *app) lossCmd() *cobra.Command {
	var clear, asJSON bool
	var labFlag string
	cmd := &cobra.Command{
		Use:   "loss LAB [PORT DIRECTION PERCENT] | LAB --clear [PORT]",
		Short: "Drop a random fraction of the frames on a lab port, show or clear loss",
		Long: `loss drops a random fraction of the frames that cross one port of a deployed
lab, in one direction or both, with a tc BPF program in the port's
namespace (this needs no netem). PORT is node:iface as the lab names it:
r0s0:eth0 (a server), tor0:s1 / tor0:up0 / tor0:core (a ToR's server port,
uplink, core port), ocs0:tor1u0 (an OCS port), eps:tor0 (a core port).
DIRECTION is ingress (frames the node receives), egress (frames it sends)
or both; PERCENT is 0 to 100, in steps of 0.0001. Setting a port again
changes its fraction and keeps its counters. Loss runs before the OCS and
ToR fast paths on the same port.

With only LAB, loss shows every rule with the frames it dropped and passed.
--clear removes the rules of one port, or of the whole lab. Scenarios set
loss at deploy with fabric.loss (docs/scenario.md).`,
		Example: "  sudo emu loss ocs-lab tor0:up0 both 1\n  sudo emu loss ocs-lab\n  sudo emu loss ocs-lab --clear tor0:up0\n  sudo emu loss ocs-lab --clear",
		Args:    cobra.RangeArgs(0, 4),
		RunE: func(cmd *cobra.Command, args []string) error {
			// --lab, as the other lab commands take it, or LAB first.
			if labFlag != "" {
				args = append([]string{labFlag}, args...)
			}
			if len(args) == 0 {
				return errors.New("name the lab: emu loss LAB ... (or --lab LAB)")
			}
			if len(args) > 4 {
				return fmt.Errorf("too many arguments: emu loss LAB [PORT DIRECTION PERCENT]")
			}
			if strings.Contains(args[0], ":") {
				hint := "emu loss LAB " + strings.Join(args, " ")
				if labs, err := fabric.Labs(); err == nil && len(labs) == 1 {
					hint = "emu loss " + labs[0] + " " + strings.Join(args, " ")
				}
				return fmt.Errorf("%q is a port, not a lab: loss takes the lab first (%s)", args[0], hint)
			}
			if err := names.ValidLab(args[0]); err != nil {
				return err
			}
			st, err := fabric.ReadState(args[0])
			if err != nil {
				return err
			}
			if st.Status != fabric.StatusUp {
				return fmt.Errorf("lab %q is %s, not up", st.Lab, st.Status)
			}
			if clear || len(args) > 1 {
				if err := refuseWhileInUse(st.Lab, "a loss rule"); err != nil {
					return err
				}
			}
			lab, err := fabric.Open(st.Lab, a.log)
			if err != nil {
				return err
			}
			defer lab.Close()
			switch {
			case clear && len(args) == 1:
				n, err := inject.ClearAll(lab)
				if err != nil {
					return err
				}
				fmt.Printf("lab %s: removed %s\n", st.Lab, plural.Of(n, "loss rule"))
				return nil
			case clear && len(args) == 2:
				p, err := loss.ParsePort(lab.Topo, args[1])
				if err != nil {
					return err
				}
				h, err := lab.Handle(p.Node)
				if err != nil {
					return err
				}
				n, err := inject.Clear(h, p, loss.Both)
				if err != nil {
					return err
				}
				if n == 0 {
					fmt.Printf("lab %s: %s had no loss rule\n", st.Lab, p)
				} else {
					fmt.Printf("lab %s: removed %s from %s\n", st.Lab, plural.Of(n, "loss rule"), p)
				}
				return nil
			case clear:
				return errors.New("--clear takes the lab and at most one port: emu loss LAB --clear [PORT]")
			case len(args) == 1:
				return showLoss(lab, asJSON)
			case len(args) != 4:
				return fmt.Errorf("want LAB PORT DIRECTION PERCENT (e.g. emu loss %s tor0:up0 both 1), or LAB alone to show", st.Lab)
			}
			pct, err := strconv.ParseFloat(strings.TrimSuffix(args[3], "%"), 64)
			if err != nil {
				return fmt.Errorf("percent %q: want a number from 0 to 100", args[3])
			}
			rules, err := loss.Rules(lab.Topo, args[1], args[2], pct)
			if err != nil {
				return err
			}
			if err := inject.Apply(lab, rules); err != nil {
				return err
			}
			for _, r := range rules {
				fmt.Printf("lab %s: %s\n", st.Lab, r)
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&clear, "clear", false, "remove the loss rules of PORT, or of the whole lab")
	cmd.Flags().StringVarP(&labFlag, "lab", "l", "", "the lab, as the other lab commands name it (or give it as the first argument)")
	cmd.Flags().BoolVar(&asJSON, "json", false, "show the rules as JSON")
	return cmd
}

func showLoss(lab *fabric.Lab, asJSON bool) error {
	st, err := inject.List(lab)
	if err != nil {
		return err
	}
	if asJSON {
		if st == nil {
			st = []inject.Status{}
		}
		return writeJSONLine(st)
	}
	if len(st) == 0 {
		fmt.Printf("lab %s: no loss rules\n", lab.Topo.Lab)
		return nil
	}
	w := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(w, "PORT\tDIRECTION\tLOSS\tDROPPED PKTS\tDROPPED BYTES\tPASSED PKTS\tPASSED BYTES\tMEASURED\t")
	for _, s := range st {
		measured := "-"
		if n := s.DroppedPackets + s.PassedPackets; n > 0 {
			measured = fmt.Sprintf("%.4g%%", 100*float64(s.DroppedPackets)/float64(n))
		}
		fmt.Fprintf(w, "%s\t%s\t%g%%\t%d\t%d\t%d\t%d\t%s\t\n", s.Port, s.Direction, loss.PPMToPercent(s.PPM),
			s.DroppedPackets, s.DroppedBytes, s.PassedPackets, s.PassedBytes, measured)
	}
	return w.Flush()
}
