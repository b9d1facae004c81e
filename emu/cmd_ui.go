package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/ocsemu/ocsemu/dataplane/fabric"
	"github.com/ocsemu/ocsemu/dataplane/names"
	"github.com/ocsemu/ocsemu/dataplane/safefile"
	"github.com/ocsemu/ocsemu/dataplane/topo"
	"github.com/ocsemu/ocsemu/emu/liveview"
	"github.com/ocsemu/ocsemu/ocsfabric/ocs"
)

func (a *app) uiCmd() *cobra.Command {
	var listen, results, labFlag string
	var port int
	var allow bool
	var interval time.Duration
	cmd := &cobra.Command{
		Use:   "ui [lab]",
		Short: "Serve a live view of a lab in the browser: circuits, port counters, job timeline",
		Long: `ui serves a page (on 127.0.0.1 only, unless --listen names another address)
that draws the lab's racks, ToRs and OCS switches with their current
circuits, charts every OCS port's throughput and its packets dropped while
dark or unpatched, and shows the phase timeline of the lab's newest run
(results/<lab>/latest) while ` + "`emu run`" + ` executes it. The page is kept current by
server push: the OCS is polled every --interval and only changes are sent.
It is read-only unless --allow-changes, which lets the page connect and
disconnect circuits, opened at the URL it prints: that URL carries a token,
so that others on a shared machine who open the port see the lab read-only.
The lab need not be deployed yet: the page says so and follows it when it
comes up. Ctrl-C stops the server.`,
		Example: "  sudo emu ui ocs-lab\n  sudo emu ui ocs-lab --allow-changes --port 9000",
		Args:    cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			args, err := labArg(args, labFlag)
			if err != nil {
				return err
			}
			lab := ""
			if len(args) == 1 {
				lab = args[0]
			} else {
				labs, err := fabric.Labs()
				if err != nil {
					return err
				}
				if len(labs) == 0 {
					return errors.New("no lab is deployed: name the lab to watch, e.g. `emu ui ocs-lab` (the page follows it once it is deployed)")
				}
				if len(labs) != 1 {
					return fmt.Errorf("%d labs are deployed (%s): name the one to show, e.g. `emu ui %s`", len(labs), strings.Join(labs, ", "), labs[0])
				}
				lab = labs[0]
			}
			if err := names.ValidLab(lab); err != nil {
				return err
			}
			if port < 1 || port > 65535 {
				return fmt.Errorf("--port %d: want 1..65535", port)
			}
			if interval < 50*time.Millisecond || interval > 10*time.Second {
				return fmt.Errorf("--interval %v: want between 50ms and 10s", interval)
			}
			ip := net.ParseIP(listen)
			if ip == nil {
				return fmt.Errorf("--listen %q: want an IP address such as 127.0.0.1", listen)
			}
			if !ip.IsLoopback() {
				if allow {
					return fmt.Errorf("--allow-changes with --listen %s would let anyone who reaches this machine rewire the lab: changes are only offered on a loopback address", listen)
				}
				a.log.Warn("the live view is reachable from other machines (read-only)", "listen", listen)
			}
			runDir := ""
			if results != "" {
				runDir = filepath.Join(results, lab, "latest")
			}
			token := ""
			if allow {
				b := make([]byte, 16)
				if _, err := rand.Read(b); err != nil {
					return fmt.Errorf("a token for --allow-changes: %w", err)
				}
				token = hex.EncodeToString(b)
			}
			srv, err := liveview.New(liveview.Options{
				Lab: lab,
				Spec: func() (topo.Spec, error) {
					st, err := fabric.ReadState(lab)
					if errors.Is(err, fabric.ErrNoLab) {
						return topo.Spec{}, errors.New("it has no state file (see `emu inspect`)")
					}
					if err != nil {
						return topo.Spec{}, err
					}
					if st.Status != fabric.StatusUp {
						return topo.Spec{}, fmt.Errorf("its status is %q", st.Status)
					}
					return st.Spec, nil
				},
				OCS:     guardedOCS{Client: ocsClient(lab), lab: lab},
				History: func() []ocs.Event { return loggedEvents(lab, liveview.MaxEventLines) },
				Explain: func(err error) error { return ocsDown(lab, err) },
				RunDir:  runDir,
				RunDirOf: func() string {
					if cmd.Flags().Changed("results") {
						return "" // the user's --results wins
					}
					return runLinkOf(lab)
				},
				AllowChanges: allow,
				Token:        token,
				Interval:     interval,
				Log:          a.log,
			})
			if err != nil {
				return err
			}
			addr := net.JoinHostPort(listen, strconv.Itoa(port))
			ln, err := net.Listen("tcp", addr)
			if err != nil {
				return fmt.Errorf("emu ui: listen on %s: %w (another emu ui? pick another --port)", addr, err)
			}
			mode := "read-only"
			if allow {
				mode = "circuits can be changed from the page"
			}
			if _, err := fabric.ReadState(lab); errors.Is(err, fabric.ErrNoLab) {
				a.progress("lab %q is not deployed yet: the page says so and follows it once it is", lab)
			}
			page := fmt.Sprintf("http://%s/", ln.Addr())
			if token != "" {
				// Only its holder may change circuits: a classmate who
				// opens the port sees the lab, read-only.
				page += "#token=" + token
				mode += ", with this URL only"
			}
			a.progress("live view of lab %s on %s (%s); Ctrl-C stops it", lab, page, mode)
			err = srv.Serve(cmd.Context(), ln)
			a.progress("live view stopped")
			return err
		},
	}
	cmd.Flags().StringVar(&listen, "listen", "127.0.0.1", "address to serve on; anything but loopback must be asked for")
	cmd.Flags().IntVar(&port, "port", 8087, "TCP port to serve on")
	cmd.Flags().BoolVar(&allow, "allow-changes", false, "let the page connect and disconnect circuits (loopback only)")
	cmd.Flags().StringVarP(&labFlag, "lab", "l", "", "the lab (or give it as the argument)")
	cmd.Flags().StringVar(&results, "results", "results", "results root of emu run: the timeline follows <root>/<lab>/latest (empty: none); left out, it follows the lab's run wherever its results go")
	cmd.Flags().DurationVar(&interval, "interval", 200*time.Millisecond, "how often the OCS is polled")
	return cmd
}

// loggedEvents returns the last n events of a lab's OCS event log, oldest
// first, reading at most its last MiB (the log may hold 256 MiB).
func loggedEvents(lab string, n int) []ocs.Event {
	f, err := safefile.Open(fabric.LabFile(lab, "ocs-events.jsonl"))
	if err != nil {
		return nil
	}
	defer f.Close()
	const tail = 1 << 20
	fi, err := f.Stat()
	if err != nil {
		return nil
	}
	off := max(0, fi.Size()-tail)
	data := make([]byte, fi.Size()-off)
	if _, err := f.ReadAt(data, off); err != nil && !errors.Is(err, io.EOF) {
		return nil
	}
	lines := strings.Split(string(data), "\n")
	if off > 0 {
		lines = lines[1:] // a partial line
	}
	var out []ocs.Event
	for _, l := range lines {
		var ev ocs.Event
		if l == "" || json.Unmarshal([]byte(l), &ev) != nil || ev.Kind == "slot" {
			continue
		}
		out = append(out, ev)
	}
	return out[max(0, len(out)-n):]
}

// guardedOCS is the page's OCS client: its circuit changes are refused, as
// the CLI's are, while a run or collective measures the lab.
type guardedOCS struct {
	*ocs.Client
	lab string
}

func (g guardedOCS) Connect(ctx context.Context, req ocs.ConnectRequest) (ocs.Event, error) {
	if err := refuseWhileInUse(g.lab, "a circuit change"); err != nil {
		return ocs.Event{}, err
	}
	return g.Client.Connect(ctx, req)
}

func (g guardedOCS) Disconnect(ctx context.Context, req ocs.DisconnectRequest) (ocs.Event, error) {
	if err := refuseWhileInUse(g.lab, "a circuit change"); err != nil {
		return ocs.Event{}, err
	}
	return g.Client.Disconnect(ctx, req)
}

// runLinkFile is the lab file in which emu run says where its results go
// (the absolute path of <results>/<lab>/latest).
const runLinkFile = "results-link"

// runLinkOf reads it: an absolute path ending in /latest, or "".
func runLinkOf(lab string) string {
	data, err := safefile.ReadNoLink(fabric.LabFile(lab, runLinkFile), 4096)
	if err != nil {
		return ""
	}
	p := strings.TrimSpace(string(data))
	if !filepath.IsAbs(p) || filepath.Base(p) != "latest" || strings.ContainsAny(p, "\x00\n") || filepath.Clean(p) != p {
		return ""
	}
	return p
}
