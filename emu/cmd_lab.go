package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"
	"golang.org/x/sys/unix"

	"github.com/ocsemu/ocsemu/dataplane/fabric"
	"github.com/ocsemu/ocsemu/dataplane/fastport"
	"github.com/ocsemu/ocsemu/dataplane/kcheck"
	"github.com/ocsemu/ocsemu/dataplane/loss/inject"
	"github.com/ocsemu/ocsemu/dataplane/names"
	"github.com/ocsemu/ocsemu/dataplane/netns"
	"github.com/ocsemu/ocsemu/dataplane/topo"
	"github.com/ocsemu/ocsemu/emu/plural"
	"github.com/ocsemu/ocsemu/emu/scenario"
)

func (a *app) deployCmd() *cobra.Command {
	var labName string
	cmd := &cobra.Command{
		Use:   "deploy <scenario.yaml | embedded-name>",
		Short: "Bring a scenario's fabric up in network namespaces",
		Long: `deploy validates the whole scenario, then creates one network namespace per
server, ToR, OCS switch and packet core (named emu-<lab>.<node>, visible to
ip netns), joins them with shaped veth pairs, and installs addresses,
routes and permanent neighbours. OCS ports are created but left unpatched.
The lab is named after the scenario unless --lab-name gives it another name.`,
		Example: "  sudo emu deploy scenarios/example-ocs.yaml\n  sudo emu deploy quickstart\n  sudo emu deploy ocs-lab --lab-name alice-ocs",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			s, src, err := loadScenario(args[0])
			if err != nil {
				return err
			}
			if err := renameLab(s, labName); err != nil {
				return err
			}
			lab, err := a.deploy(cmd.Context(), s, src, false)
			if err != nil {
				return err
			}
			lab.Close()
			a.progress("lab %q is up: %d nodes, %d links. Try `emu inspect %s`, `emu exec --lab %s %s -- ip addr`, `emu destroy %s`.",
				s.Name, len(lab.Topo.Nodes), len(lab.Topo.Links), s.Name, s.Name, lab.Topo.Servers()[0].Name, s.Name)
			return nil
		},
	}
	addLabNameFlag(cmd, &labName)
	return cmd
}

// addLabNameFlag adds --lab-name to a command that deploys a scenario.
func addLabNameFlag(cmd *cobra.Command, labName *string) {
	cmd.Flags().StringVar(labName, "lab-name", "", "name the lab this instead of after the scenario (a-z first, then a-z, 0-9, '-'; on a shared machine, a name of your own); plans made for the scenario still fit")
}

// renameLab applies --lab-name, if given.
func renameLab(s *scenario.Scenario, labName string) error {
	if labName == "" {
		return nil
	}
	if err := s.Rename(labName); err != nil {
		return fmt.Errorf("--lab-name %q: %w", labName, err)
	}
	return nil
}

// warnCapacity compares what the scenario's servers can send at once with
// what this machine carried over veth when `emu doctor` last measured it,
// as Mininet-HiFi did: beyond that, results are CPU-limited, not faithful.
// Without a measurement it says so at Debug level only (`emu run` shows
// one hint line in its summary instead), not on every deploy.
func (a *app) warnCapacity(s *scenario.Scenario) {
	r, err := kcheck.Load()
	if err != nil || r.VethGbps <= 0 {
		a.log.Debug("no machine capacity measured yet: run `emu doctor` once so emu can warn when a scenario exceeds it")
		return
	}
	f := s.Fabric
	if f.Rates.Server == scenario.Unlimited {
		a.log.Warn("server links are unlimited: every flow runs as fast as this machine's CPUs allow", "machine_gbps", r.VethGbps)
		return
	}
	demand := float64(f.Racks*f.ServersPerRack) * f.Rates.Server.Bps() / 1e9
	if demand > r.VethGbps {
		a.log.Warn(fmt.Sprintf("if every server sends at once the scenario asks for %.1f Gbit/s, but this machine moved %.1f Gbit/s over veth (emu doctor, %s): when traffic is that dense, rates are CPU-limited and the emulation is not faithful; scale rates and bytes down together",
			demand, r.VethGbps, r.When.Format("2006-01-02 15:04")))
	}
}

// deploy brings a lab up and starts its OCS process; on failure nothing
// of the lab remains.
// With holdUse the returned lab holds its use lock (fabric.Options.HoldUse)
// until lab.ReleaseUse.
func (a *app) deploy(ctx context.Context, s *scenario.Scenario, src string, holdUse bool) (*fabric.Lab, error) {
	a.warnCapacity(s)
	raw, err := json.Marshal(s)
	if err != nil {
		return nil, fmt.Errorf("encode scenario: %w", err)
	}
	lab, err := fabric.Deploy(ctx, topo.Build(s.Spec()), fabric.Options{Log: a.log, Progress: a.progress, Source: src, Scenario: raw, QuietCC: a.ccWarned, HoldUse: holdUse, Owner: deployOwner()})
	if err != nil {
		return nil, err
	}
	a.ccWarned = true // a host setting: the next deploy of this command would say the same
	if s.Fabric.HasOCS() {
		if err := a.startOCSProcess(ctx, lab); err != nil {
			lab.Close()
			derr := fabric.Destroy(context.WithoutCancel(ctx), s.Name, a.log)
			lab.ReleaseUse()
			return nil, errors.Join(err, derr)
		}
	}
	if err := a.applyLoss(s, lab); err != nil {
		lab.Close()
		derr := fabric.Destroy(context.WithoutCancel(ctx), s.Name, a.log)
		lab.ReleaseUse()
		return nil, errors.Join(err, derr)
	}
	return lab, nil
}

// applyLoss puts the scenario's fabric.loss rules on the deployed lab.
func (a *app) applyLoss(s *scenario.Scenario, lab *fabric.Lab) error {
	if len(s.Fabric.Loss) == 0 {
		return nil
	}
	rules, err := s.LossRules(lab.Topo)
	if err != nil {
		return err
	}
	if err := inject.Apply(lab, rules); err != nil {
		return fmt.Errorf("loss: %w", err)
	}
	var rs []string
	for _, r := range rules {
		rs = append(rs, r.String())
	}
	a.progress("loss: %s (`emu loss %s` shows what it dropped)", strings.Join(rs, ", "), s.Name)
	return nil
}

func (a *app) destroyCmd() *cobra.Command {
	var all bool
	var prefix string
	cmd := &cobra.Command{
		Use:   "destroy [lab...] | --prefix P | --all",
		Short: "Remove a lab: its processes, namespaces, links and state",
		Long: `destroy ends every process inside a lab's namespaces, deletes the namespaces
(and with them every link) and the lab's state file. It needs no scenario
file and is idempotent: what is already gone counts as removed. --all also
finds the leftovers of crashed runs by their emu- prefix: every lab on the
machine, other users' too. --prefix destroys the labs whose names start with
P (one student's, on a shared machine: emu destroy --prefix alice-). A lab
an emu run, emu collective or emu lab check of another process is using is
refused, not destroyed.`,
		Example: "  sudo emu destroy quickstart\n  sudo emu destroy --prefix alice-\n  sudo emu destroy --all",
		RunE: func(cmd *cobra.Command, args []string) error {
			if all && len(args) > 0 {
				return fmt.Errorf("destroy takes lab names or --all, not both (--all would remove every lab on this machine, not just %s)", strings.Join(args, " "))
			}
			if prefix != "" {
				if all || len(args) > 0 {
					return errors.New("--prefix takes no lab names and no --all")
				}
				// A prefix is checked as a name is: a-z first, then a-z,
				// 0-9 and '-', never a glob or a path.
				if err := names.ValidLab(strings.TrimSuffix(prefix, "-")); err != nil {
					return fmt.Errorf("--prefix %q: %w", prefix, err)
				}
				labs, err := fabric.Labs()
				if err != nil {
					return err
				}
				for _, l := range labs {
					if strings.HasPrefix(l, prefix) {
						args = append(args, l)
					}
				}
				if len(args) == 0 {
					a.progress("no lab name starts with %q: nothing to destroy (see `emu inspect`)", prefix)
					return nil
				}
			}
			if all {
				labs, err := fabric.DestroyAll(cmd.Context(), a.log)
				if errors.Is(err, fabric.ErrNotRoot) {
					return err
				}
				sort.Strings(labs)
				a.progress("destroyed %s %s", plural.Of(len(labs), "lab"), strings.Join(labs, " "))
				return err
			}
			if len(args) == 0 {
				return errors.New("name a lab (see `emu inspect`) or pass --all")
			}
			// Every name is checked before anything is removed.
			for _, l := range args {
				if err := names.ValidLab(l); err != nil {
					return err
				}
			}
			var errs []error
			for _, l := range args {
				existed, err := fabric.Exists(l)
				if err != nil {
					errs = append(errs, err)
				}
				if err := fabric.Destroy(cmd.Context(), l, a.log); err != nil {
					errs = append(errs, err)
					continue
				}
				if existed {
					a.progress("lab %q destroyed", l)
				} else {
					a.progress("no lab named %q: nothing to destroy (see `emu inspect`)", l)
				}
			}
			return errors.Join(errs...)
		},
	}
	cmd.Flags().BoolVar(&all, "all", false, "destroy every lab, including leftovers of crashed runs (other users' too)")
	cmd.Flags().StringVar(&prefix, "prefix", "", "destroy the labs whose names start with this (a-z, 0-9, '-')")
	return cmd
}

// inspectNode is one row of `emu inspect <lab> --json`.
type inspectNode struct {
	topo.Node
	Ifaces []string `json:"ifaces"`
	Up     bool     `json:"up"`
}

func (a *app) inspectCmd() *cobra.Command {
	var asJSON bool
	var labFlag string
	cmd := &cobra.Command{
		Use:     "inspect [lab]",
		Short:   "List deployed labs, or the nodes and links of one lab",
		Example: "  emu inspect\n  emu inspect quickstart --json",
		Args:    cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			args, err := labArg(args, labFlag)
			if err != nil {
				return err
			}
			if len(args) == 0 {
				return a.inspectLabs(asJSON)
			}
			st, err := fabric.ReadState(args[0])
			if err != nil {
				return err
			}
			t := topo.Build(st.Spec)
			ifaces := map[string][]string{}
			for _, l := range t.Links {
				ifaces[l.A.Node] = append(ifaces[l.A.Node], l.A.Iface)
				ifaces[l.B.Node] = append(ifaces[l.B.Node], l.B.Iface)
			}
			var rows []inspectNode
			for _, n := range t.Nodes {
				rows = append(rows, inspectNode{Node: n, Ifaces: ifaces[n.Name], Up: netns.Exists(n.NS)})
			}
			procs := labProcesses(cmd.Context(), st)
			if asJSON {
				return writeJSON(map[string]any{"lab": st.Lab, "status": st.Status, "source": st.Source,
					"created": st.Created, "fabric": st.Spec, "processes": procs, "nodes": rows, "links": t.Links})
			}
			f := st.Spec
			by := ""
			if st.Owner != "" {
				by = " by " + st.Owner
			}
			fmt.Printf("lab %s (%s%s, from %s): %s fabric, %s x %s, created %s%s\n", st.Lab, st.Status, labHealth(st), st.Source,
				f.Kind, plural.Of(f.Racks, "rack"), plural.Of(f.ServersPerRack, "server"), st.Created.Format("2006-01-02 15:04:05"), by)
			if len(procs) > 0 {
				fmt.Println()
				w := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', 0)
				fmt.Fprintln(w, "PROCESS\tPID\tSTATE")
				for _, p := range procs {
					fmt.Fprintf(w, "%s\t%d\t%s\n", p.Name, p.PID, p.Status)
				}
				w.Flush()
			}
			fmt.Println()
			w := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', 0)
			fmt.Fprintln(w, "NODE\tKIND\tNETNS\tADDRESS\tUP\tINTERFACES")
			for _, r := range rows {
				addr := "-"
				if r.Addr.IsValid() {
					addr = r.Addr.String()
				}
				fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%v\t%s\n", r.Name, r.Kind, r.NS, addr, r.Up, summarize(r.Ifaces))
			}
			return w.Flush()
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	cmd.Flags().StringVarP(&labFlag, "lab", "l", "", "the lab (or give it as the argument)")
	return cmd
}

// summarize shortens long interface lists for the table.
func summarize(ifaces []string) string {
	if len(ifaces) <= 6 {
		return strings.Join(ifaces, " ")
	}
	return fmt.Sprintf("%s ... %s (%d)", strings.Join(ifaces[:4], " "), ifaces[len(ifaces)-1], len(ifaces))
}

func (a *app) inspectLabs(asJSON bool) error {
	labs, err := fabric.Labs()
	if err != nil {
		return err
	}
	var states []*fabric.State
	for _, l := range labs {
		st, err := fabric.ReadState(l)
		if errors.Is(err, os.ErrPermission) {
			return fmt.Errorf("%s deployed (%s), but their state is readable by root only: run inspect as root (or with sudo)", plural.Of(len(labs), "lab"), strings.Join(labs, ", "))
		}
		if err != nil {
			// One broken state file (another emu version, a crash while
			// writing) must not hide the other labs.
			a.log.Warn("lab state unreadable; `emu destroy "+l+"` removes the lab", "lab", l, "err", err)
			continue
		}
		states = append(states, st)
	}
	if asJSON {
		return writeJSON(states)
	}
	if len(states) == 0 && len(labs) == 0 {
		fmt.Println("no labs deployed (start one with `emu deploy <scenario>` or `emu run`)")
		return nil
	}
	w := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(w, "LAB\tSTATUS\tOWNER\tKIND\tRACKS\tSERVERS/RACK\tNAMESPACES\tCREATED\tSOURCE")
	for _, st := range states {
		f := st.Spec
		status := st.Status + labHealth(st)
		if status == fabric.StatusInterrupted {
			status += " (remove: emu destroy " + st.Lab + ")"
		}
		if pid, held := fabric.Held(st.Lab, fabric.UseLock); held {
			status += fmt.Sprintf(", busy (pid %d)", pid)
		}
		if pid, held := fabric.Held(st.Lab, fabric.CheckLock); held {
			status += fmt.Sprintf(", a check's copy (pid %d)", pid)
		}
		owner := st.Owner
		if owner == "" {
			owner = "-"
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%d\t%d\t%d\t%s\t%s\n", st.Lab, status, owner, f.Kind, f.Racks, f.ServersPerRack,
			len(st.Namespace), st.Created.Format("15:04:05"), st.Source)
	}
	return w.Flush()
}

func writeJSON(v any) error {
	enc := json.NewEncoder(os.Stdout)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

func (a *app) execCmd() *cobra.Command {
	var labName string
	cmd := &cobra.Command{
		Use:   "exec [--lab LAB] <node> -- <command> [args...]",
		Short: "Run a command inside a node's network namespace",
		Long: `exec runs a command in a node's namespace, like ip netns exec. The node is a
short name (r0s1, tor2, ocs0, eps) or lab.node; --lab is needed only when
more than one lab is deployed. A capture (tcpdump, tshark, dumpcap) first
makes the node's fast ports slow, so that it sees what they send
(docs/ocs.md, fast ports).`,
		Example: "  sudo emu exec r0s0 -- ping -c 3 10.0.1.1\n  sudo emu exec quickstart.tor0 -- ip route\n  sudo emu exec tor0 -- tcpdump -n -i up0",
		Args:    cobra.MinimumNArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			if cmd.ArgsLenAtDash() != 1 {
				return errors.New("usage: emu exec <node> -- <command> [args...]")
			}
			node := args[0]
			if l, n, ok := strings.Cut(node, "."); ok {
				labName, node = l, n
			}
			if labName == "" {
				labs, err := fabric.Labs()
				if err != nil {
					return err
				}
				if len(labs) == 0 {
					return errors.New("no lab is deployed: start one with `emu deploy <scenario>`")
				}
				if len(labs) != 1 {
					return fmt.Errorf("%d labs are deployed (%s): pick one with --lab or lab.node", len(labs), strings.Join(labs, ", "))
				}
				labName = labs[0]
			}
			st, err := fabric.ReadState(labName)
			if err != nil {
				return err
			}
			if _, ok := topo.Build(st.Spec).Node(node); !ok {
				return fmt.Errorf("lab %q has no node %q (see `emu inspect %s`)", labName, node, labName)
			}
			ns := names.NSName(labName, node)
			if isCapture(args[1:]) {
				// A packet socket sees what a port sends only if the frames
				// pass its egress: fast ports skip it (docs/ocs.md).
				n, err := fastport.OffAll(ns)
				if err != nil {
					return fmt.Errorf("turn %s's ports slow for the capture: %w", node, err)
				}
				if n > 0 {
					fmt.Fprintf(os.Stderr, "emu: %d ports of %s made slow so that the capture sees what they send; they stay slow (the same forwarding, through each port's egress) while the lab's OCS process runs. `emu capture %s:<port>` captures and makes its ports fast again when it stops\n", n, node, node)
				}
			}
			return execIn(ns, args[1:])
		},
	}
	cmd.Flags().StringVarP(&labName, "lab", "l", "", "lab the node belongs to")
	cmd.SetFlagErrorFunc(func(_ *cobra.Command, err error) error {
		// `emu exec r0s0 ip -br addr`: the command's own flags need the --.
		if strings.HasPrefix(err.Error(), "unknown ") {
			return fmt.Errorf("%w: put -- before the command, so that its flags are its own: emu exec <node> -- <command> [args...]", err)
		}
		return err
	})
	return cmd
}

// isCapture reports whether a command line runs a tool that opens packet
// sockets to capture traffic (tcpdump, Wireshark's tools), also behind a
// wrapper (timeout 5 tcpdump ..., sh -c "tcpdump ...").
func isCapture(argv []string) bool {
	for _, a := range argv {
		for _, w := range strings.Fields(a) {
			switch filepath.Base(w) {
			case "tcpdump", "tshark", "dumpcap", "wireshark", "termshark":
				return true
			}
		}
	}
	return false
}

// execIn replaces this process with argv inside a network namespace. The
// thread that enters the namespace is the one that calls execve, so the
// new program starts entirely inside it.
func execIn(ns string, argv []string) error {
	path, err := exec.LookPath(argv[0])
	if err != nil {
		return fmt.Errorf("exec: %w", err)
	}
	fd, err := netns.Open(ns)
	if err != nil {
		return err
	}
	runtime.LockOSThread()
	if err := unix.Setns(fd, unix.CLONE_NEWNET); err != nil {
		return fmt.Errorf("enter %s: %w (are you root?)", ns, err)
	}
	env := append(os.Environ(), "EMU_NETNS="+ns)
	return fmt.Errorf("exec %s: %w", path, unix.Exec(path, argv, env))
}

// labScenario returns the scenario a deployed lab was made from, as its
// state file recorded it.
func labScenario(lab string) (*scenario.Scenario, error) {
	st, err := fabric.ReadState(lab)
	if err != nil {
		return nil, err
	}
	if len(st.Scenario) == 0 {
		return nil, fmt.Errorf("lab %q: its state holds no scenario", lab)
	}
	var s scenario.Scenario
	if err := json.Unmarshal(st.Scenario, &s); err != nil {
		return nil, fmt.Errorf("lab %q: decode its scenario: %w", lab, err)
	}
	s.ApplyDefaults()
	return &s, nil
}

// deployOwner names who deploys: the user behind sudo, or this one; only
// letters, digits, '.', '_' and '-' are kept (it is shown, never a path).
func deployOwner() string {
	name := os.Getenv("SUDO_USER")
	if name == "" {
		name = os.Getenv("USER")
	}
	if name == "" {
		name = fmt.Sprintf("uid %d", os.Getuid())
	}
	clean := strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '.', r == '_', r == '-', r == ' ':
			return r
		}
		return -1
	}, name)
	if len(clean) > 32 {
		clean = clean[:32]
	}
	return clean
}

// labArg merges a command's optional positional lab with its --lab flag
// (every lab command takes --lab; some also take the lab first): at most
// one, or both the same.
func labArg(args []string, flag string) ([]string, error) {
	if flag == "" {
		return args, nil
	}
	if len(args) == 0 {
		return []string{flag}, nil
	}
	if args[0] != flag {
		return nil, fmt.Errorf("--lab %s and the lab %s given first: name it once", flag, args[0])
	}
	return args, nil
}
