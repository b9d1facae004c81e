// Command emu emulates optical-circuit-switched data-center fabrics for ML
// training on one Linux machine: network namespaces play servers, ToRs and
// optical circuit switches, and real TCP runs across them.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/ocsemu/ocsemu/dataplane/safefile"
	"github.com/ocsemu/ocsemu/emu/scenario"
	"github.com/ocsemu/ocsemu/scenarios"
)

// app holds what every subcommand shares.
type app struct {
	log     *slog.Logger
	verbose bool
	start   time.Time
	incBand bool // emu run --inc-band: INC gets its own band at every shaper
	incCC   bool // emu run --inc-cc: INC workers run congestion control
	// ccWarned: deploy has warned that the scenario's congestion control
	// cannot be the namespaces' default; later deploys of the command
	// (emu run --repeat) need not say it again.
	ccWarned bool
	// keptLab is the lab emu run --keep left up, for the interrupt message.
	keptLab string
	// tcpInfoEvery is how often each rank samples its connections'
	// TCP_INFO (emu run --tcpinfo-every, which checks and defaults it).
	tcpInfoEvery time.Duration
	// out takes what emu run prints of each run (its tables, verdict and
	// summary); nil is standard output. emu run --repeat prints a line
	// per run instead.
	out io.Writer
}

// stdout is where a run's results are printed.
func (a *app) stdout() io.Writer {
	if a.out == nil {
		return os.Stdout
	}
	return a.out
}

// stopSignals end a command, which removes what it built first. SIGHUP
// only if it is not ignored: under nohup a closed terminal must not stop
// a long run (noticing a signal undoes its being ignored).
func stopSignals() []os.Signal {
	sigs := []os.Signal{os.Interrupt, syscall.SIGTERM}
	if !signal.Ignored(syscall.SIGHUP) {
		sigs = append(sigs, syscall.SIGHUP)
	}
	return sigs
}

// offline annotates the commands that touch no kernel state (plan,
// simulate, report, compare, scenarios): an interrupt ends them at once.
const offline = "offline"

func main() {
	// A closed terminal (SIGHUP) ends a command as Ctrl-C does: what it
	// built is removed. A closed pipe on stdout or stderr (`emu run |
	// head`) must not kill it half way: with SIGPIPE noticed, such writes
	// fail instead, and the command runs on to its teardown.
	ctx, stop := signal.NotifyContext(context.Background(), stopSignals()...)
	defer stop()
	signal.Notify(make(chan os.Signal, 1), syscall.SIGPIPE)
	a := &app{start: time.Now()}
	root := &cobra.Command{
		Use:   "emu",
		Short: "Emulate an optical data-center fabric for ML training with real TCP",
		Long: `emu builds a fabric of Linux network namespaces (servers, ToRs, optical
circuit switches or a packet core) from a scenario file, runs traffic across
it and tears it down again, leaving nothing behind.

Start with:  sudo emu run            (embedded quickstart scenario)
             sudo emu doctor         (what this machine's kernel can do)`,
		SilenceUsage:  true,
		SilenceErrors: true,
		PersistentPreRun: func(cmd *cobra.Command, _ []string) {
			level := slog.LevelInfo
			if a.verbose {
				level = slog.LevelDebug
			}
			a.log = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
			if cmd.Annotations[offline] != "" {
				// Nothing to tear down, and outputs are written whole or
				// not at all: Ctrl-C stops it at once, not when its model
				// next looks at the context. A signal of its own, not the
				// context, which main also cancels when the command ends.
				sig := make(chan os.Signal, 1)
				signal.Notify(sig, stopSignals()...)
				go func() {
					<-sig
					safefile.RemovePending()
					fmt.Fprintln(os.Stderr, "emu: interrupted")
					os.Exit(130)
				}()
			}
		},
	}
	for _, c := range []*cobra.Command{a.planCmd(), a.simulateCmd(), a.reportCmd(), a.compareCmd(), a.scenariosCmd()} {
		c.Annotations = map[string]string{offline: "true"}
		root.AddCommand(c)
	}
	root.Version = buildVersion()
	root.SetVersionTemplate("{{.Version}}\n")
	root.PersistentFlags().BoolVarP(&a.verbose, "verbose", "v", false, "log debug details")
	root.AddCommand(
		a.deployCmd(), a.destroyCmd(), a.inspectCmd(), a.execCmd(), a.captureCmd(), a.lossCmd(),
		a.doctorCmd(), a.runCmd(), a.ocsCmd(), a.workerCmd(), a.collectiveCmd(), a.reproduceCmd(), a.uiCmd(), a.labCmd(), a.aggCmd(),
	)
	if err := root.ExecuteContext(ctx); err != nil {
		if ctx.Err() != nil && errors.Is(err, context.Canceled) {
			if a.keptLab != "" {
				fmt.Fprintf(os.Stderr, "emu: interrupted; lab %q stays up (--keep): `emu destroy %s` removes it\n", a.keptLab, a.keptLab)
				os.Exit(130)
			}
			fmt.Fprintln(os.Stderr, "emu: interrupted; whatever this command had built was removed")
			os.Exit(130)
		}
		if stdoutClosed(err) {
			os.Exit(141) // its reader went away (`| head`): as a shell reports SIGPIPE, quietly
		}
		fmt.Fprintln(os.Stderr, "emu:", err)
		os.Exit(1)
	}
}

// progress prints a timestamped progress line on stderr.
func (a *app) progress(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "[%6.2fs] %s\n", time.Since(a.start).Seconds(), fmt.Sprintf(format, args...))
}

// loadScenario reads a scenario file, or an embedded one by name
// ("quickstart" or "quickstart.yaml"). An empty arg is the default.
func loadScenario(arg string) (*scenario.Scenario, string, error) {
	if arg == "" {
		// The default is the embedded one, whatever file of its name is here.
		arg = scenarios.Default
	} else if _, err := os.Stat(arg); err == nil {
		s, err := scenario.Load(arg)
		return s, arg, err
	} else if !errors.Is(err, fs.ErrNotExist) {
		return nil, "", fmt.Errorf("scenario %q: %w", arg, err) // a file we may not read is not "no such file"
	}
	name := arg
	if !strings.HasSuffix(name, ".yaml") {
		name += ".yaml"
	}
	data, err := scenarios.Files.ReadFile(name)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, "", fmt.Errorf("scenario %q: no such file, and not an embedded scenario (see `emu scenarios`)", arg)
	}
	if err != nil {
		return nil, "", err
	}
	s, err := scenario.Parse(data, "embedded:"+name)
	return s, "embedded:" + name, err
}

func (a *app) scenariosCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "scenarios [name]",
		Short: "List the scenarios embedded in emu, or print one",
		Args:  cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 1 {
				name := strings.TrimSuffix(args[0], ".yaml") + ".yaml"
				data, err := scenarios.Files.ReadFile(name)
				if err != nil {
					return fmt.Errorf("no embedded scenario %q (see `emu scenarios`)", args[0])
				}
				_, err = os.Stdout.Write(data)
				return err
			}
			names, _ := fs.Glob(scenarios.Files, "*.yaml")
			for _, n := range names {
				data, _ := scenarios.Files.ReadFile(n)
				s, err := scenario.Parse(data, n)
				desc := ""
				if err == nil {
					desc = s.Description
				}
				fmt.Printf("%-22s %s\n", strings.TrimSuffix(n, ".yaml"), desc)
			}
			return nil
		},
	}
}

// stdoutClosed says whether err is a write to stdout that failed because
// its reader went away (`emu inspect | head -1`: the table's flush).
func stdoutClosed(err error) bool {
	var pe *fs.PathError
	// Only when it is the whole error: a real failure joined beside it
	// must not exit quietly.
	return errors.As(err, &pe) && err.Error() == pe.Error() && pe.Op == "write" && pe.Path == os.Stdout.Name() && errors.Is(err, syscall.EPIPE)
}
