package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/ocsemu/ocsemu/dataplane/fabric"
	"github.com/ocsemu/ocsemu/dataplane/inc"
	"github.com/ocsemu/ocsemu/dataplane/names"
	"github.com/ocsemu/ocsemu/dataplane/netns"
	"github.com/ocsemu/ocsemu/dataplane/topo"
	"github.com/ocsemu/ocsemu/emu/plural"
)

// aggCmd groups the commands of the per-ToR INC aggregators.
func (a *app) aggCmd() *cobra.Command {
	root := &cobra.Command{
		Use:   "agg",
		Short: "The in-network aggregators of a lab's ToRs: serve one, read its counters",
		Long: `Each ToR of a lab whose plan uses in-network aggregation runs one aggregator
(emu run starts them): a UDP server on port 48864 in the ToR's namespace that
sums the workers' blocks packet by packet (docs/inc.md). Its control API is a
unix socket in the lab's run state.`,
		Example: "  sudo emu agg stats inc-demo tor0\n  sudo emu agg stats inc-demo tor1 --json",
	}
	root.AddCommand(a.aggServeCmd(), a.aggStatsCmd())
	return root
}

// aggSocket is the control socket of a ToR's aggregator.
func aggSocket(lab, tor string) string { return fabric.LabFile(lab, "agg-"+tor+".sock") }

// checkToR validates a lab and ToR name before they become a path.
func checkToR(lab, tor string) error {
	if err := names.ValidLab(lab); err != nil {
		return err
	}
	if _, ok := names.ParseToR(tor); !ok {
		return fmt.Errorf("%q is not a ToR name (want tor<rack>)", tor)
	}
	return nil
}

func (a *app) aggServeCmd() *cobra.Command {
	var lab, tor string
	cfg := inc.Config{Slots: inc.DefaultSlots}
	var batch int
	var gso bool
	cmd := &cobra.Command{
		Use:   "serve --lab <lab> --tor <tor>",
		Short: "Run one ToR's aggregator inside that ToR's namespace (emu run starts them; by hand: emu exec --lab L torN -- emu agg serve ...)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkToR(lab, tor); err != nil {
				return err
			}
			// The lab and its ToR must exist, the aggregator must run in
			// the ToR's namespace (its UDP port is the ToR's), and one per
			// ToR: a second one replaced the first's control socket.
			st, err := fabric.ReadState(lab)
			if err != nil {
				return err
			}
			if r, _ := names.ParseToR(tor); r >= st.Spec.Racks {
				return fmt.Errorf("lab %s has no %s: its ToRs are tor0 to tor%d", lab, tor, st.Spec.Racks-1)
			}
			if in, err := netns.InNamespace(names.NSName(lab, tor)); err != nil {
				return err
			} else if !in {
				return fmt.Errorf("an aggregator runs in its ToR's namespace: `emu exec --lab %s %s -- emu agg serve --lab %s --tor %s` (emu run starts them itself)", lab, tor, lab, tor)
			}
			lock, err := fabric.Lock(lab, "agg-"+tor)
			if errors.Is(err, fabric.ErrLocked) {
				return fmt.Errorf("%s of lab %s already has an aggregator (%w)", tor, lab, err)
			}
			if err != nil {
				return err
			}
			defer lock.Release()
			e, err := inc.NewEngine(cfg)
			if err != nil {
				return err
			}
			rack, _ := names.ParseToR(tor)
			return serveAgg(cmd.Context(), e, aggSocket(lab, tor), inc.ServeOptions{Batch: batch, GSO: gso && batch > 1, Src: topo.GatewayAddr(rack)}, a)
		},
	}
	cmd.Flags().StringVar(&lab, "lab", "", "lab")
	cmd.Flags().StringVar(&tor, "tor", "", "ToR (tor<rack>)")
	cmd.Flags().IntVar(&cfg.Capacity, "capacity", 4, "jobs aggregated at once (fabric.inc.capacity)")
	cmd.Flags().IntVar(&cfg.Slots, "slots", inc.DefaultSlots, "slot pool, partitioned among the jobs")
	cmd.Flags().IntVar(&batch, "batch", inc.DefaultBatch, "datagrams per system call (1: one at a time)")
	cmd.Flags().BoolVar(&gso, "gso", true, "coalesce datagrams per destination in kernel buffers (UDP GSO/GRO)")
	return cmd
}

// serveAgg serves the engine's UDP port and its control socket until ctx
// ends.
func serveAgg(ctx context.Context, e *inc.Engine, sock string, opt inc.ServeOptions, a *app) error {
	conn, err := inc.Listen()
	if err != nil {
		return err
	}
	_ = os.Remove(sock) // a dead aggregator's; the lab's state directory is ours
	ln, err := net.Listen("unix", sock)
	if err != nil {
		conn.Close()
		return fmt.Errorf("aggregator control socket: %w", err)
	}
	defer os.Remove(sock)
	srv := &http.Server{Handler: inc.Handler(e), ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	defer srv.Close()
	a.log.Info("aggregator serving", "udp", conn.LocalAddr(), "socket", sock, "capacity", e.Config().Capacity, "slots", e.Config().Slots)
	return inc.Serve(ctx, conn, e, opt)
}

func (a *app) aggStatsCmd() *cobra.Command {
	var asJSON bool
	var labFlag string
	cmd := &cobra.Command{
		Use:   "stats <lab> <tor> | --lab <lab> <tor>",
		Short: "Print a running aggregator's counters and admitted jobs",
		Args:  cobra.RangeArgs(1, 2),
		RunE: func(cmd *cobra.Command, args []string) error {
			if labFlag != "" && len(args) == 1 {
				args = []string{labFlag, args[0]}
			} else if labFlag != "" && args[0] != labFlag {
				return fmt.Errorf("--lab %s and the lab %s given first: name it once", labFlag, args[0])
			}
			if len(args) != 2 {
				return errors.New("name the lab and the ToR: emu agg stats <lab> <tor> (or --lab <lab> <tor>)")
			}
			if err := checkToR(args[0], args[1]); err != nil {
				return err
			}
			state, err := fabric.ReadState(args[0])
			if err != nil {
				return err
			}
			if r, _ := names.ParseToR(args[1]); r >= state.Spec.Racks {
				return fmt.Errorf("lab %s has no %s: its ToRs are tor0 to tor%d", args[0], args[1], state.Spec.Racks-1)
			}
			cl := inc.NewClient(aggSocket(args[0], args[1]))
			st, err := cl.Stats(cmd.Context())
			if err != nil {
				return fmt.Errorf("%w (is a plan with INC running on lab %s?)", err, args[0])
			}
			jobs, err := cl.Jobs(cmd.Context())
			if err != nil {
				return err
			}
			if asJSON {
				return writeJSON(struct {
					Stats inc.Stats       `json:"stats"`
					Jobs  []inc.JobConfig `json:"jobs"`
				}{st, jobs})
			}
			w := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', 0)
			fmt.Fprintf(w, "packets\t%d\nelements\t%d\ncompletions\t%d\nduplicates\t%d\nunicasts\t%d\nresults sent\t%d\npartials sent\t%d\nstale\t%d\nrefusals\t%d\nunknown job\t%d\nmalformed\t%d\n",
				st.Packets, st.Elements, st.Completions, st.Duplicates, st.Unicasts, st.Results, st.Partials, st.Stale, st.Refusals, st.Unknown, st.Malformed)
			if st.Holds > 0 {
				fmt.Fprintf(w, "mean hold\t%.3f ms (arrival in the kernel to its batch's send, over %d datagrams)\n", float64(st.HoldNs)/float64(st.Holds)/1e6, st.Holds)
			}
			for _, j := range jobs {
				role := "root"
				if j.Parent.IsValid() {
					role = "below " + j.Parent.String()
				}
				if len(j.Roots) > 0 {
					role = fmt.Sprintf("roots spread by slot (this ToR roots slots = %d mod %d)", j.Index, j.ToRs)
				}
				if j.ToRs == 1 {
					role = "single rack"
				}
				fmt.Fprintf(w, "job %d\tToR %d of %d, %s\n", j.ID, j.Index, j.ToRs, role)
			}
			return w.Flush()
		},
	}
	cmd.Flags().StringVarP(&labFlag, "lab", "l", "", "the lab (or give it first)")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}

// startAggregators starts `emu agg serve` in every ToR namespace of a lab
// and waits until each answers. stop ends them and waits for them.
func (a *app) startAggregators(ctx context.Context, lab *fabric.Lab, capacity int) (stop func(), err error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	name := lab.Topo.Lab
	var cmds []*exec.Cmd
	var waits []chan struct{}
	stop = func() {
		for i, c := range cmds {
			_ = c.Process.Signal(syscall.SIGTERM)
			select {
			case <-waits[i]:
			case <-time.After(3 * time.Second):
				_ = c.Process.Kill()
				<-waits[i]
			}
		}
	}
	for r := 0; r < lab.Topo.Spec.Racks; r++ {
		tor := names.ToRName(r)
		logf, err := os.OpenFile(fabric.LabFile(name, "agg-"+tor+".log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		if err != nil {
			stop()
			return nil, fmt.Errorf("aggregator log: %w", err)
		}
		cmd := exec.Command(exe, "agg", "serve", "--lab", name, "--tor", tor, "--capacity", fmt.Sprint(capacity))
		cmd.Stdout, cmd.Stderr = logf, logf
		// Like the OCS process: its own session, ended by stop, and by
		// destroy with the lab's namespaces if this process dies first
		// (Pdeathsig would fire when netns.Do's locked thread exits).
		cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
		err = netns.Do(names.NSName(name, tor), cmd.Start)
		logf.Close()
		if err != nil {
			stop()
			return nil, fmt.Errorf("start the aggregator of %s: %w", tor, err)
		}
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		cmds, waits = append(cmds, cmd), append(waits, done)
	}
	deadline := time.Now().Add(10 * time.Second)
	for r := 0; r < lab.Topo.Spec.Racks; r++ {
		tor := names.ToRName(r)
		cl := inc.NewClient(aggSocket(name, tor))
		for {
			_, err := cl.Stats(ctx)
			if err == nil {
				break
			}
			if time.Now().After(deadline) || ctx.Err() != nil {
				stop()
				tail, _ := os.ReadFile(fabric.LabFile(name, "agg-"+tor+".log"))
				return nil, errors.Join(fmt.Errorf("the aggregator of %s did not answer within 10s; its log:\n%s", tor, tail), err)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	a.progress("%s serving (UDP port %d, capacity %s per ToR)", plural.Of(len(cmds), "aggregator"), inc.Port, plural.Of(capacity, "job"))
	if a.incBand {
		ports := 0
		for _, n := range lab.Topo.Nodes {
			h, err := lab.Handle(n.Name)
			if err == nil {
				var k int
				k, err = inc.Band(h)
				ports += k
			}
			if err != nil {
				stop()
				return nil, fmt.Errorf("INC band at %s: %w", n.Name, err)
			}
		}
		a.progress("INC band: %d shaped ports serve INC packets first (htb)", ports)
	}
	return stop, nil
}

// labAggregators reaches a lab's aggregators through their sockets.
type labAggregators string

func (l labAggregators) Admit(ctx context.Context, tor string, cfg inc.JobConfig) error {
	if err := checkToR(string(l), tor); err != nil {
		return err
	}
	return inc.NewClient(aggSocket(string(l), tor)).Admit(ctx, cfg)
}

func (l labAggregators) Release(ctx context.Context, tor string, id uint16) error {
	if err := checkToR(string(l), tor); err != nil {
		return err
	}
	return inc.NewClient(aggSocket(string(l), tor)).Release(ctx, id)
}
