package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/ocsemu/ocsemu/dataplane/fabric"
	"github.com/ocsemu/ocsemu/dataplane/names"
	"github.com/ocsemu/ocsemu/dataplane/netns"
	"github.com/ocsemu/ocsemu/dataplane/units"
	"github.com/ocsemu/ocsemu/emu/liveview"
	"github.com/ocsemu/ocsemu/emu/plural"
	"github.com/ocsemu/ocsemu/ocsfabric/circuit"
	"github.com/ocsemu/ocsemu/ocsfabric/ocs"
)

// ocsCLI holds what the `emu ocs` subcommands share: the --lab flag.
type ocsCLI struct {
	*app
	labName string
}

func (a *app) ocsCmd() *cobra.Command {
	o := &ocsCLI{app: a}
	root := &cobra.Command{
		Use:   "ocs",
		Short: "Drive the optical circuit switches of a lab: show, connect, disconnect, apply, schedule",
		Long: `The OCS process of a lab (started by deploy for ocs and hybrid fabrics) owns the
circuit map. These commands talk to it over its unix socket. Ports are ToR
uplinks written tor<rack>:<uplink>. Each change darkens the ports whose
circuit changes for the reconfiguration delay, enforced in the kernel.`,
		Example: `  sudo emu ocs connect tor0:0 tor1:0
  sudo emu ocs show
  sudo emu ocs connect tor0:0 tor2:0 --delay 50ms
  sudo emu ocs apply circuits.yaml
  sudo emu ocs events -f`,
	}
	root.PersistentFlags().StringVarP(&o.labName, "lab", "l", "", "lab (needed only when several are deployed)")
	root.AddCommand(o.serveCmd(), o.showCmd(), o.connectCmd(), o.disconnectCmd(), o.applyCmd(), o.scheduleCmd(), o.countersCmd(), o.eventsCmd())
	return root
}

// client talks to the OCS process of the chosen (or only) lab.
func (o *ocsCLI) client() (*ocs.Client, string, error) {
	lab, err := resolveLab(o.labName)
	if err != nil {
		return nil, "", err
	}
	return ocsClient(lab), lab, nil
}

// changer is client for the commands that change the circuits: refused
// while a run or a collective works on the lab.
func (o *ocsCLI) changer(what string) (*ocs.Client, string, error) {
	cl, lab, err := o.client()
	if err != nil {
		return nil, "", err
	}
	if err := refuseWhileInUse(lab, what); err != nil {
		return nil, "", err
	}
	return cl, lab, nil
}

// refuseWhileInUse refuses a change to a lab that an emu run or emu
// collective of another process is measuring (it holds the use lock):
// the change would land in its results unannounced.
func refuseWhileInUse(lab, what string) error {
	if pid, held := fabric.UsedElsewhere(lab); held {
		return fmt.Errorf("lab %s is in use by pid %d (emu run or emu collective): %s now would change a measurement under way; wait for it to end", lab, pid, what)
	}
	return nil
}

// delayOf returns the --delay flag's value if the user gave one.
func delayOf(cmd *cobra.Command, delay time.Duration) *units.Duration {
	if !cmd.Flags().Changed("delay") {
		return nil
	}
	d := units.Duration(delay)
	return &d
}

// serveCmd runs the OCS process of a lab.
func (o *ocsCLI) serveCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Run the OCS process of a lab in its ocs0 namespace (deploy starts it; this restarts a dead one)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if o.labName == "" {
				return errors.New("serve needs --lab")
			}
			// The lab must exist before its lock file is made (a lock for
			// a lab that does not exist would stay behind).
			st, err := fabric.ReadState(o.labName)
			if err != nil {
				return err
			}
			if st.Status == fabric.StatusInterrupted {
				return fmt.Errorf("lab %q was never fully deployed (its deploy was interrupted): `emu destroy %s`, then deploy it again", o.labName, o.labName)
			}
			// One OCS process per lab: two would share the fast-path maps,
			// and the first to exit would remove the other's socket.
			lock, err := fabric.Lock(o.labName, "ocs")
			if errors.Is(err, fabric.ErrLocked) {
				return fmt.Errorf("lab %q already has an OCS process (%w); stop it first, or use `emu ocs show` to talk to it", o.labName, err)
			}
			if err != nil {
				return err
			}
			defer lock.Release()
			lab, err := fabric.Open(o.labName, o.log)
			if err != nil {
				return err
			}
			defer lab.Close()
			if started, err := o.serveInOCSNamespace(cmd.Context(), lab, lock); started {
				return err
			}
			ctl, err := ocs.New(cmd.Context(), lab, ocs.Options{Log: o.log, EventPath: fabric.LabFile(o.labName, "ocs-events.jsonl")})
			if err != nil {
				return err
			}
			defer ctl.Close()
			sock := fabric.LabFile(o.labName, "ocs.sock")
			o.log.Info("OCS serving", "lab", o.labName, "socket", sock, "switches", lab.Topo.Spec.OCSSwitches)
			err = ocs.Serve(cmd.Context(), ctl, sock)
			return errors.Join(err, ctl.EventLogErr())
		},
	}
	return cmd
}

// showCmd prints the circuits and unreachable rack pairs.
func (o *ocsCLI) showCmd() *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "show",
		Short: "Print the circuits of every OCS and the racks that cannot reach each other",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cl, lab, err := o.client()
			if err != nil {
				return err
			}
			v, err := cl.Config(cmd.Context())
			if err != nil {
				return err
			}
			if asJSON {
				return writeJSON(v)
			}
			st, err := fabric.ReadState(lab)
			if err != nil {
				return err
			}
			layout := circuit.LayoutOf(st.Spec)
			fmt.Printf("lab %s: %s, default reconfiguration delay %v", lab, plural.Of(len(v.Circuits), "circuit"), time.Duration(v.DelayNs))
			if v.Schedule {
				fmt.Print(", schedule running")
			}
			fmt.Println()
			w := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', 0)
			fmt.Fprintln(w, "OCS\tCIRCUIT\tPORTS")
			for _, c := range v.Circuits {
				sw, pa := layout.Switch(c.A)
				_, pb := layout.Switch(c.B)
				fmt.Fprintf(w, "ocs%d\t%s\t%s <-> %s\n", sw, c, names.OCSPortIface(c.A.Rack, c.A.Port)+fmt.Sprintf("(%d)", pa), names.OCSPortIface(c.B.Rack, c.B.Port)+fmt.Sprintf("(%d)", pb))
			}
			w.Flush()
			if n := len(v.Unreachable); n > 0 {
				var ex []string
				for i, p := range v.Unreachable {
					if i == 4 {
						ex = append(ex, "...")
						break
					}
					ex = append(ex, p.String())
				}
				fmt.Printf("unreachable: %s (%s)\n", plural.Of(n, "rack pair"), strings.Join(ex, ", "))
			} else {
				fmt.Println("every rack reaches every other rack")
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}

// connectCmd patches one circuit.
func (o *ocsCLI) connectCmd() *cobra.Command {
	var delay time.Duration
	var simplex bool
	cmd := &cobra.Command{
		Use:   "connect <tor:uplink> <tor:uplink>",
		Short: "Patch a circuit between two uplinks, moving whatever used them",
		Args:  cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			cl, _, err := o.changer("a circuit change")
			if err != nil {
				return err
			}
			ua, err := circuit.ParseUplink(args[0])
			if err != nil {
				return err
			}
			ub, err := circuit.ParseUplink(args[1])
			if err != nil {
				return err
			}
			ev, err := cl.Connect(cmd.Context(), ocs.ConnectRequest{A: ua, B: ub, Simplex: simplex, Delay: delayOf(cmd, delay)})
			if err != nil {
				return err
			}
			printEvent(ev)
			return nil
		},
	}
	cmd.Flags().Var(delayFlag(&delay), "delay", "reconfiguration delay (default: the scenario's)")
	cmd.Flags().BoolVar(&simplex, "simplex", false, "one direction only, a->b (half-duplex fabrics)")
	return cmd
}

// disconnectCmd removes the circuit on an uplink.
func (o *ocsCLI) disconnectCmd() *cobra.Command {
	var delay time.Duration
	cmd := &cobra.Command{
		Use:   "disconnect <tor:uplink>",
		Short: "Remove the circuit on an uplink",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			cl, _, err := o.changer("a circuit change")
			if err != nil {
				return err
			}
			u, err := circuit.ParseUplink(args[0])
			if err != nil {
				return err
			}
			ev, err := cl.Disconnect(cmd.Context(), ocs.DisconnectRequest{Port: u, Delay: delayOf(cmd, delay)})
			if err != nil {
				return err
			}
			printEvent(ev)
			return nil
		},
	}
	cmd.Flags().Var(delayFlag(&delay), "delay", "reconfiguration delay (default: the scenario's)")
	return cmd
}

// applyCmd replaces the whole circuit map from a file.
func (o *ocsCLI) applyCmd() *cobra.Command {
	var delay time.Duration
	cmd := &cobra.Command{
		Use:   "apply <circuits.yaml>",
		Short: "Replace the whole circuit map from a file (YAML or JSON: circuits, optional delay)",
		Example: `  # circuits.yaml
  circuits:
    - {a: tor0:0, b: tor1:0}
    - {a: tor2:0, b: tor3:0}
  delay: 10ms`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			cl, _, err := o.changer("a circuit change")
			if err != nil {
				return err
			}
			var req ocs.ConfigRequest
			if err := readStrict(args[0], &req); err != nil {
				return err
			}
			if d := delayOf(cmd, delay); d != nil {
				req.Delay = d
			}
			ev, err := cl.Apply(cmd.Context(), req)
			if err != nil {
				return err
			}
			printEvent(ev)
			return nil
		},
	}
	cmd.Flags().Var(delayFlag(&delay), "delay", "reconfiguration delay (default: the file's, else the scenario's)")
	return cmd
}

// scheduleCmd starts or stops a time-slotted schedule.
func (o *ocsCLI) scheduleCmd() *cobra.Command {
	var stop bool
	cmd := &cobra.Command{
		Use:   "schedule <schedule.yaml> | --stop",
		Short: "Run a time-slotted schedule of configurations, once or cycled (rotor style)",
		Example: `  # rotor.yaml: two 1 ms slots, cycled 500 times, 20 us dark between slots
  slots:
    - {duration: 1ms, circuits: [{a: tor0:0, b: tor1:0}, {a: tor2:0, b: tor3:0}]}
    - {duration: 1ms, circuits: [{a: tor0:0, b: tor2:0}, {a: tor1:0, b: tor3:0}]}
  cycles: 500
  delay: 20us`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			cl, _, err := o.changer("a schedule change")
			if err != nil {
				return err
			}
			if stop {
				was, err := cl.StopScheduleStatus(cmd.Context())
				switch {
				case err != nil:
					return err
				case was:
					fmt.Println("schedule stopped; the current slot's circuits stay")
				default:
					fmt.Println("no schedule was running")
				}
				return nil
			}
			if len(args) != 1 {
				return errors.New("name a schedule file, or pass --stop")
			}
			var s ocs.Schedule
			if err := readStrict(args[0], &s); err != nil {
				return err
			}
			if err := cl.Schedule(cmd.Context(), s); err != nil {
				return err
			}
			fmt.Printf("schedule started: %d slots, cycles %d (0 = until stopped); follow it with `emu ocs events -f`\n", len(s.Slots), s.Cycles)
			return nil
		},
	}
	cmd.Flags().BoolVar(&stop, "stop", false, "stop the running schedule")
	return cmd
}

// countersCmd prints the fast path's per-port counters.
func (o *ocsCLI) countersCmd() *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "counters",
		Short: "Per-port counters of the kernel fast path (forwarded, dropped dark, dropped unpatched), and per-ToR path counters",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cl, _, err := o.client()
			if err != nil {
				return err
			}
			cs, err := cl.Counters(cmd.Context())
			if err != nil {
				return err
			}
			if asJSON {
				return writeJSON(cs)
			}
			w := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
			fmt.Fprintln(w, "PORT\tOCS\tFWD PKTS\tFWD BYTES\tDARK PKTS\tDARK BYTES\tUNPATCHED PKTS\tUNPATCHED BYTES\t")
			for _, c := range cs {
				fmt.Fprintf(w, "%s\tocs%d\t%d\t%d\t%d\t%d\t%d\t%d\t\n", c.Uplink, c.OCS, c.FwdPackets, c.FwdBytes, c.DarkPackets, c.DarkBytes, c.UnpatchedPackets, c.UnpatchedBytes)
			}
			if err := w.Flush(); err != nil {
				return err
			}
			ps, err := cl.PathCounters(cmd.Context())
			if err != nil {
				return err
			}
			fmt.Println()
			w = tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
			fmt.Fprintln(w, "TOR\tTO UPLINKS PKTS\tTO UPLINKS BYTES\tNO PATH PKTS\tNO PATH BYTES\t")
			for _, p := range ps {
				fmt.Fprintf(w, "%s\t%d\t%d\t%d\t%d\t\n", p.ToR, p.RedirectedPackets, p.RedirectedBytes, p.UnreachablePackets, p.UnreachableBytes)
			}
			return w.Flush()
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}

// eventsCmd prints (and follows) the OCS event log.
func (o *ocsCLI) eventsCmd() *cobra.Command {
	var follow, onlyNew bool
	cmd := &cobra.Command{
		Use:   "events",
		Short: "Print the OCS event log (JSONL: scheduled and effective times), -f to follow",
		Long: `Print the OCS event log of a lab, one JSON object per reconfiguration
(scheduled and effective times, circuits, dark ports, route skew).
With -f it then keeps printing new events until interrupted; add --new
to skip the log and print only events from now on.`,
		Example: `  emu ocs events --lab ocs-lab
  emu ocs events -f --new --lab ocs-lab`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if onlyNew && !follow {
				return errors.New("--new prints only events from now on: use it with -f")
			}
			cl, lab, err := o.client()
			if err != nil {
				return err
			}
			if !onlyNew {
				data, err := os.ReadFile(fabric.LabFile(lab, "ocs-events.jsonl"))
				if err != nil && !errors.Is(err, os.ErrNotExist) {
					return fmt.Errorf("read the event log: %w", err)
				}
				os.Stdout.Write(data)
			}
			if !follow {
				return nil
			}
			var werr error
			err = cl.Events(cmd.Context(), func(ev ocs.Event) bool {
				werr = writeJSONLine(ev) // a closed pipe (`| head`) ends the follow
				return werr == nil
			})
			if werr != nil {
				return werr // a closed stdout: main exits 141 quietly
			}
			if err == nil && cmd.Context().Err() == nil {
				return fmt.Errorf("the OCS process of lab %s stopped (the lab was destroyed, or its OCS ended): no more events", lab)
			}
			return err
		},
	}
	cmd.Flags().BoolVarP(&follow, "follow", "f", false, "keep printing new events")
	cmd.Flags().BoolVar(&onlyNew, "new", false, "with -f: skip the log, print only events from now on")
	return cmd
}

func printEvent(ev ocs.Event) {
	fmt.Printf("event %d: %s\n", ev.Seq, liveview.Describe(ev))
}

func writeJSONLine(v any) error {
	return json.NewEncoder(os.Stdout).Encode(v)
}

// resolveLab returns the named lab, or the only deployed one.
func resolveLab(name string) (string, error) {
	if name != "" {
		return name, names.ValidLab(name)
	}
	labs, err := fabric.Labs()
	if err != nil {
		return "", err
	}
	if len(labs) == 0 {
		return "", errors.New("no lab is deployed: start one with `emu deploy <scenario>`")
	}
	if len(labs) != 1 {
		return "", fmt.Errorf("%d labs are deployed (%s): pick one with --lab", len(labs), strings.Join(labs, ", "))
	}
	// Said, since on a shared machine the only lab may be someone else's.
	fmt.Fprintf(os.Stderr, "emu: lab %s (the only one deployed)\n", labs[0])
	return labs[0], nil
}

// startOCSProcess starts `emu ocs serve` inside the lab's first OCS
// namespace, so that destroy ends it with the lab, and waits until its
// API answers.
func (a *app) startOCSProcess(ctx context.Context, lab *fabric.Lab) error {
	exe, err := os.Executable()
	if err != nil {
		return err
	}
	name := lab.Topo.Lab
	logf, err := os.OpenFile(fabric.LabFile(name, "ocs.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("OCS log: %w", err)
	}
	defer logf.Close()
	cmd := exec.Command(exe, "ocs", "serve", "--lab", name)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := netns.Do(names.NSName(name, names.OCSName(0)), cmd.Start); err != nil {
		return fmt.Errorf("start OCS process: %w", err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }() // reap it if it ends while we run
	cl := ocs.NewClient(fabric.LabFile(name, "ocs.sock"))
	logTail := func() string {
		tail, _ := os.ReadFile(fabric.LabFile(name, "ocs.log"))
		return strings.TrimSpace(string(tail))
	}
	deadline := time.Now().Add(10 * time.Second)
	for cl.Ping(ctx) != nil {
		select {
		case err := <-exited:
			return fmt.Errorf("OCS process exited before it answered (%v); its log:\n%s", err, logTail())
		case <-ctx.Done():
			return fmt.Errorf("start OCS process: %w", ctx.Err())
		case <-time.After(10 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("OCS process did not answer within 10s; its log:\n%s", logTail())
		}
	}
	a.progress("OCS process %d serving on %s", cmd.Process.Pid, fabric.LabFile(name, "ocs.sock"))
	return nil
}
