package main

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/ocsemu/ocsemu/dataplane/capture"
	"github.com/ocsemu/ocsemu/dataplane/fabric"
	"github.com/ocsemu/ocsemu/dataplane/topo"
)

// pcapFlags are `emu run`'s --pcap and --snaplen; check validates the
// ports against the blueprint before the lab is deployed.
type pcapFlags struct {
	list    string
	snaplen int
	ports   []capture.Port
}

func (p *pcapFlags) add(cmd *cobra.Command) {
	cmd.Flags().StringVar(&p.list, "pcap", "", "capture these ports into the run's directory, <results>/<lab>/<date-time>/pcap/<node>-<iface>.pcap (node:iface, comma-separated, e.g. r0s0:eth0,tor0:up0)")
	cmd.Flags().IntVar(&p.snaplen, "snaplen", capture.DefaultSnaplen, "bytes of each packet --pcap keeps")
}

// check validates --pcap against the lab's blueprint and the results
// directory (results is where the files go). No --pcap: nothing to do.
func (p *pcapFlags) check(t *topo.Topology, results string) (err error) {
	if p.list == "" {
		return nil
	}
	if results == "" {
		return errors.New("--pcap writes into the results directory: it cannot be used with --results ''")
	}
	if p.snaplen < capture.MinSnaplen || p.snaplen > capture.MaxSnaplen {
		return fmt.Errorf("--snaplen %d: want %d to %d bytes", p.snaplen, capture.MinSnaplen, capture.MaxSnaplen)
	}
	p.ports, err = capture.ParsePorts(t, p.list)
	if err != nil {
		return fmt.Errorf("--pcap: %w", err)
	}
	return nil
}

// startPcap starts the checked captures of `emu run` on a deployed lab,
// into <results>/pcap/. The returned stop ends them, prints their files and
// returns any capture error; it is never nil.
func (a *app) startPcap(ctx context.Context, p *pcapFlags, results string) (stop func() error, err error) {
	if len(p.ports) == 0 {
		return func() error { return nil }, nil
	}
	g, err := a.startCaptures(ctx, p.ports, filepath.Join(results, "pcap"), p.snaplen)
	if err != nil {
		return func() error { return nil }, err
	}
	return func() error { return a.stopCaptures(g) }, nil
}

func (a *app) startCaptures(ctx context.Context, ports []capture.Port, dir string, snaplen int) (*capture.Group, error) {
	g, err := capture.StartAll(ctx, ports, dir, capture.Options{Snaplen: snaplen, Log: a.log})
	if err != nil {
		return nil, err
	}
	var names []string
	for _, p := range ports {
		names = append(names, p.String())
	}
	a.progress("capturing %s (snaplen %d) into %s", strings.Join(names, ", "), snaplen, dir)
	return g, nil
}

func (a *app) stopCaptures(g *capture.Group) error {
	stats, err := g.Stop()
	for _, s := range stats {
		a.progress("pcap %s: %d packets, %d dropped by the kernel, %s", s.Path, s.Packets, s.Dropped, fmtBytes(s.Bytes))
	}
	return err
}

func fmtBytes(n int64) string {
	switch {
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d B", n)
}

func (a *app) captureCmd() *cobra.Command {
	var labName, dir string
	var dur time.Duration
	var snaplen int
	cmd := &cobra.Command{
		Use:   "capture [--lab LAB] PORTS [--duration 10s] [-o dir]",
		Short: "Write pcap files of a deployed lab's ports, for Wireshark and tshark",
		Long: `capture records the packets of lab interfaces into pcap files, one per port,
named <node>-<iface>.pcap. PORTS names them as node:iface, comma-separated:
r0s0:eth0 (a server), tor0:s1 / tor0:up0 / tor0:core (a ToR's server port,
uplink, core port), ocs0:tor1u0 (an OCS port), eps:tor0 (a core port).
Every name is checked against the lab before anything is captured. Each
packet keeps its first --snaplen bytes and its original length; timestamps
are the kernel's receive time (SO_TIMESTAMPNS). capture runs for --duration,
or until Ctrl-C with --duration 0. The files go to results/<lab>/pcap/
unless -o names a directory.`,
		Example: "  sudo emu capture r0s0:eth0,tor0:up0 --duration 10s\n  sudo emu capture --lab example-eps tor1:core -o /tmp/pcaps --duration 0",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if labName == "" {
				labs, err := fabric.Labs()
				if err != nil {
					return err
				}
				if len(labs) != 1 {
					if len(labs) == 0 {
						return errors.New("no lab is deployed: start one with `emu deploy <scenario>`")
					}
					return fmt.Errorf("%d labs are deployed (%s): pick one with --lab", len(labs), strings.Join(labs, ", "))
				}
				labName = labs[0]
			}
			st, err := fabric.ReadState(labName)
			if err != nil {
				return err
			}
			if st.Status != fabric.StatusUp {
				return fmt.Errorf("lab %q is %s, not up", labName, st.Status)
			}
			if snaplen < capture.MinSnaplen || snaplen > capture.MaxSnaplen {
				return fmt.Errorf("--snaplen %d: want %d to %d bytes", snaplen, capture.MinSnaplen, capture.MaxSnaplen)
			}
			if dur < 0 {
				return fmt.Errorf("--duration %v: want 0 (until Ctrl-C) or more", dur)
			}
			ports, err := capture.ParsePorts(topo.Build(st.Spec), args[0])
			if err != nil {
				return err
			}
			if dir == "" {
				dir = filepath.Join("results", st.Lab, "pcap")
			}
			ctx := cmd.Context()
			if dur > 0 {
				var cancel context.CancelFunc
				ctx, cancel = context.WithTimeout(ctx, dur)
				defer cancel()
			}
			g, err := a.startCaptures(ctx, ports, dir, snaplen)
			if err != nil {
				return err
			}
			if dur > 0 {
				a.progress("for %v (Ctrl-C stops earlier)", dur)
			} else {
				a.progress("until Ctrl-C")
			}
			<-ctx.Done()
			// Ctrl-C is how this command is meant to end: not an error.
			return a.stopCaptures(g)
		},
	}
	cmd.Flags().StringVarP(&labName, "lab", "l", "", "lab to capture (needed when more than one is deployed)")
	cmd.Flags().DurationVar(&dur, "duration", 10*time.Second, "how long to capture; 0: until Ctrl-C")
	cmd.Flags().StringVarP(&dir, "out", "o", "", "directory for the pcap files (default results/<lab>/pcap)")
	cmd.Flags().IntVar(&snaplen, "snaplen", capture.DefaultSnaplen, "bytes kept of each packet")
	return cmd
}
