package main

import (
	"context"
	"fmt"
	"hash/fnv"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/ocsemu/ocsemu/dataplane/names"
	"github.com/ocsemu/ocsemu/emu/labs"
)

func (a *app) labCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "lab",
		Short: "Teaching labs: list them, start one, check your work",
		Long: `lab serves the teaching labs embedded in emu (scenarios/labs). Each has a
README (goal, background, steps, questions), a scenario, a starting point
you edit and automatic checks:

  emu lab list                      the labs
  emu lab start 02-circuits         copy its README, scenario and starting files to ./02-circuits
  emu lab check 02-circuits         check your work in ./02-circuits (PASS/FAIL per check)
  emu lab check 02 --against solution

Checks that need a live fabric deploy a private copy of the lab's scenario
(named <lab>-check-<4 hex digits of your folder> unless --lab-name, so
that classmates on one machine get copies of their own) and destroy it
afterwards.`,
	}
	cmd.AddCommand(a.labListCmd(), a.labStartCmd(), a.labCheckCmd(), a.labSelftestCmd())
	return cmd
}

func (a *app) labListCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "list",
		Short: "List the embedded labs",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ls, err := labs.List()
			if err != nil {
				return err
			}
			for _, l := range ls {
				fmt.Printf("%-26s %s (%d checks)\n", l.Name, l.Title, len(l.Checks()))
			}
			return nil
		},
	}
}

func (a *app) labStartCmd() *cobra.Command {
	return &cobra.Command{
		Use:     "start <lab> [dir]",
		Short:   "Copy a lab's README, scenario and starting files into dir (default ./<lab>)",
		Example: "  emu lab start 02-circuits\n  emu lab start 04 ~/labs/plan",
		Args:    cobra.RangeArgs(1, 2),
		RunE: func(cmd *cobra.Command, args []string) error {
			l, err := labs.Get(args[0])
			if err != nil {
				return err
			}
			dir := l.Name
			if len(args) == 2 {
				dir = args[1]
			}
			written, err := l.Start(dir)
			for _, w := range written {
				fmt.Println("wrote", w)
			}
			if err != nil {
				return err
			}
			fmt.Printf("lab %s: read %s, edit the files there, then `emu lab check %s`\n", l.Name, filepath.Join(dir, "README.md"), dir)
			return nil
		},
	}
}

// labEnv prepares the checks of a lab against a folder of work.
// which is start or solution when work is a temporary copy of one.
func (a *app) labEnv(l *labs.Lab, work, which, labName string) (*labs.Env, error) {
	s, err := l.Scenario()
	if err != nil {
		return nil, err
	}
	if labName == "" {
		// One name per working folder: two students checking the same
		// lab at once get two copies. A temporary copy of start/ or
		// solution/ is named by the lab, the choice and the user instead,
		// so that a check killed half-way finds its copy the next time.
		key, _ := filepath.Abs(work)
		if which == "start" || which == "solution" {
			key = l.Name + "/" + which + "/" + deployOwner()
		}
		h := fnv.New32a()
		h.Write([]byte(key))
		labName = fmt.Sprintf("%s-check-%04x", s.Name, h.Sum32()&0xffff)
	}
	if err := names.ValidLab(labName); err != nil {
		return nil, fmt.Errorf("--lab-name: %w", err)
	}
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	return &labs.Env{Lab: l, Work: work, Scenario: s, LabName: labName, Log: a.log,
		Emu: func(ctx context.Context, dir string, args ...string) (string, error) {
			cmd := exec.CommandContext(ctx, exe, args...)
			cmd.Dir = dir
			out, err := cmd.CombinedOutput()
			return string(out), err
		}}, nil
}

// against resolves --against: start or solution (extracted to a
// temporary folder), or a folder of the student's.
func against(l *labs.Lab, which string) (string, func(), error) {
	if which != "start" && which != "solution" {
		fi, err := os.Stat(which)
		if err != nil || !fi.IsDir() {
			return "", nil, fmt.Errorf("--against %q: want start, solution or a folder", which)
		}
		return which, func() {}, nil
	}
	dir, err := os.MkdirTemp("", "emu-lab-"+which+"-")
	if err != nil {
		return "", nil, err
	}
	if err := l.Extract(which, dir); err != nil {
		os.RemoveAll(dir)
		return "", nil, err
	}
	return dir, func() { os.RemoveAll(dir) }, nil
}

func (a *app) labCheckCmd() *cobra.Command {
	var which, labName string
	cmd := &cobra.Command{
		Use:   "check <lab-dir | lab> [--against start|solution|DIR]",
		Short: "Check your work on a lab: PASS or FAIL per check, with the reason",
		Example: "  sudo emu lab check 02-circuits\n  sudo emu lab check ./my-copy\n" +
			"  sudo emu lab check 03 --against solution",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			l, work, err := labs.Resolve(args[0])
			if err != nil {
				return err
			}
			if which != "" {
				var done func()
				if work, done, err = against(l, which); err != nil {
					return err
				}
				defer done()
			}
			if work == "" {
				return fmt.Errorf("no working copy of lab %s here (./%s): make one with `emu lab start %s`, or check --against start|solution|DIR", l.Name, l.Name, l.Name)
			}
			e, err := a.labEnv(l, work, which, labName)
			if err != nil {
				return err
			}
			shown := work
			if which == "start" || which == "solution" {
				shown = "its " + which + "/"
			}
			fmt.Printf("lab %s: checking %s\n", l.Name, shown)
			res := labs.Run(cmd.Context(), e, os.Stdout)
			if err := cmd.Context().Err(); err != nil {
				return err
			}
			if e.Refusal != nil {
				return e.Refusal
			}
			failed := 0
			for _, r := range res {
				if !r.Pass {
					failed++
				}
			}
			if failed > 0 {
				return fmt.Errorf("%d of %d checks failed", failed, len(res))
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&which, "against", "", "check start/, solution/ or this folder instead of your copy")
	cmd.Flags().StringVar(&labName, "lab-name", "", "name of the private copy checks deploy, destroyed before and after them; a lab of that name a check did not deploy, or one another check is using, is refused (default <lab scenario>-check-<4 hex digits of this folder>, so that classmates on one machine get copies of their own)")
	return cmd
}

func (a *app) labSelftestCmd() *cobra.Command {
	var prefix string
	cmd := &cobra.Command{
		Use:   "selftest [lab...]",
		Short: "Check every lab's solution (all must pass) and its starting point (exactly the expected checks fail)",
		Long: `selftest is what CI runs: for each lab (all by default) it runs the checks
against solution/, which must all pass, and against the untouched start/, where
exactly the checks the lab marks as failing on the starting point must fail.`,
		RunE: func(cmd *cobra.Command, args []string) error {
			var ls []*labs.Lab
			if len(args) == 0 {
				all, err := labs.List()
				if err != nil {
					return err
				}
				ls = all
			}
			for _, n := range args {
				l, err := labs.Get(n)
				if err != nil {
					return err
				}
				ls = append(ls, l)
			}
			var bad []string
			for _, l := range ls {
				for _, which := range []string{"solution", "start"} {
					problems, err := a.selftestOne(cmd.Context(), l, which, prefix+"-"+l.Name[:2])
					if err != nil {
						return err
					}
					bad = append(bad, problems...)
				}
			}
			if len(bad) > 0 {
				return fmt.Errorf("selftest: %d unexpected results:\n%s", len(bad), strings.Join(bad, "\n"))
			}
			fmt.Printf("selftest: %d labs: every solution passes, every starting point fails exactly its expected checks\n", len(ls))
			return nil
		},
	}
	cmd.Flags().StringVar(&prefix, "lab-prefix", "selftest", "private copies are named <prefix>-<lab number>")
	return cmd
}

// selftestOne checks one folder of one lab and returns the unexpected results.
func (a *app) selftestOne(ctx context.Context, l *labs.Lab, which, labName string) ([]string, error) {
	work, done, err := against(l, which)
	if err != nil {
		return nil, err
	}
	defer done()
	e, err := a.labEnv(l, work, which, labName)
	if err != nil {
		return nil, err
	}
	fmt.Printf("== lab %s against %s/\n", l.Name, which)
	res := labs.Run(ctx, e, os.Stdout)
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if e.Refusal != nil {
		return nil, e.Refusal
	}
	var bad []string
	for i, r := range res {
		want := which == "solution" || !l.Checks()[i].FailsOnStart
		if r.Pass != want {
			verb := map[bool]string{true: "passes", false: "fails"}
			bad = append(bad, fmt.Sprintf("lab %s, %s/: %q %s, expected it %s: %s", l.Name, which, r.Name, verb[r.Pass], verb[want], firstLine(r.Detail)))
		}
	}
	return bad, nil
}

func firstLine(s string) string {
	l, _, _ := strings.Cut(s, "\n")
	return l
}
