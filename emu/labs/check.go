package labs

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/ocsemu/ocsemu/dataplane/fabric"
	"github.com/ocsemu/ocsemu/dataplane/names"
	"github.com/ocsemu/ocsemu/dataplane/safefile"
	"github.com/ocsemu/ocsemu/emu/scenario"
)

// Check is one automatic check of a lab.
type Check struct {
	Name string
	// Run returns what it saw when the check passes, or the reason it
	// fails (what was found, what was expected, and a hint).
	Run func(ctx context.Context, e *Env) (string, error)
	// FailsOnStart marks the checks the untouched starting point fails:
	// `emu lab selftest` asserts exactly these fail on start/ and none on
	// solution/.
	FailsOnStart bool
	// Root marks the checks that build namespaces or deploy a copy of the
	// lab (they need root); the others read files only.
	Root bool
}

// Env is what checks get: the student's folder, the lab, and a way to run
// emu and to deploy a private copy of the lab.
type Env struct {
	Lab      *Lab
	Work     string // the student's folder
	Scenario *scenario.Scenario
	// LabName names the private copy checks deploy (and, for lab 01, the
	// prefix of the namespaces the student's script makes).
	LabName string
	// Emu runs the emu binary with args in dir ("": the current one) and
	// returns its combined output.
	Emu func(ctx context.Context, dir string, args ...string) (string, error)
	Log *slog.Logger
	// Refusal is why Run ran no check: another check holds LabName.
	Refusal error

	mu        sync.Mutex
	held      *fabric.LabLock // CheckLock on LabName, from hold to Close
	deployed  bool
	deployErr error
	cleanups  []func()
	memo      map[string]memoEntry
}

type memoEntry struct {
	v   any
	err error
}

// Result is one check's outcome.
type Result struct {
	Name   string
	Pass   bool
	Detail string // what was seen, or why it failed
	Took   time.Duration
}

// File is the path of a student's file, checked to stay inside Work.
func (e *Env) File(name string) string {
	if strings.ContainsAny(name, `/\`) || name == ".." || name == "." {
		panic("labs: file names are plain names: " + name)
	}
	return filepath.Join(e.Work, name)
}

// MaxStudentFileBytes bounds a student's file.
const MaxStudentFileBytes = 1 << 20

// ReadFile reads a student's file, saying which file is missing. Root
// reads it from the student's directory: a symbolic link there is
// refused, not followed.
func (e *Env) ReadFile(name string) ([]byte, error) {
	data, err := safefile.ReadNoLink(e.File(name), MaxStudentFileBytes)
	if errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("%s is missing from %s", name, e.Work)
	}
	return data, err
}

// once computes a value once per check run (a parsed file several checks
// use); its error is the same for every check that needs it.
func once[T any](e *Env, key string, f func() (T, error)) (T, error) {
	e.mu.Lock()
	if e.memo == nil {
		e.memo = map[string]memoEntry{}
	}
	m, ok := e.memo[key]
	e.mu.Unlock()
	if !ok {
		v, err := f()
		m = memoEntry{v, err}
		e.mu.Lock()
		e.memo[key] = m
		e.mu.Unlock()
	}
	if m.err != nil {
		var zero T
		return zero, m.err
	}
	return m.v.(T), nil
}

// studentFile reads the student's file name once and parses it with
// emu's own parser for it.
func studentFile[T any](e *Env, name string, parse func(data []byte, source string) (T, error)) (T, error) {
	return once(e, "file:"+name, func() (T, error) {
		data, err := e.ReadFile(name)
		if err != nil {
			var zero T
			return zero, err
		}
		return parse(data, name)
	})
}

// Answers reads the student's answers.yaml into a map.
func (e *Env) Answers() (map[string]any, error) {
	return once(e, "answers", func() (map[string]any, error) {
		data, err := e.ReadFile("answers.yaml")
		if err != nil {
			return nil, err
		}
		var m map[string]any
		if err := yaml.Unmarshal(data, &m); err != nil {
			return nil, fmt.Errorf("answers.yaml: %w", err)
		}
		if m == nil {
			m = map[string]any{}
		}
		return m, nil
	})
}

// Number is a numeric answer.
func (e *Env) Number(key string) (float64, error) {
	m, err := e.Answers()
	if err != nil {
		return 0, err
	}
	v, ok := m[key]
	if !ok || v == nil {
		return 0, fmt.Errorf("answers.yaml: %s is not answered yet%s", key, e.misspelt(key, m))
	}
	switch n := v.(type) {
	case int:
		return float64(n), nil
	case float64:
		return n, nil
	}
	return 0, fmt.Errorf("answers.yaml: %s is %v, want a number", key, v)
}

// misspelt names the keys of answers.yaml that are not among the lab's
// answers (its start/answers.yaml) and look like a misspelling of key (a
// few edits away, or key with a part left off), for the message that says
// key is not answered.
func (e *Env) misspelt(key string, m map[string]any) string {
	known := e.answerKeys()
	var near []string
	for k := range m {
		if known == nil || known[k] {
			continue
		}
		if scenario.EditDistance(strings.ToLower(k), key) <= 3 || len(k) >= 4 && (strings.HasPrefix(key, k) || strings.HasPrefix(k, key)) {
			near = append(near, fmt.Sprintf("%q", k))
		}
	}
	if len(near) == 0 {
		return ""
	}
	slices.Sort(near)
	return fmt.Sprintf("; answers.yaml has %s, which is not one of this lab's answers: misspelt?", strings.Join(near, ", "))
}

// answerKeys is the set of keys the lab's own answers.yaml (start/) has;
// nil when it cannot be read.
func (e *Env) answerKeys() map[string]bool {
	if e.Lab == nil || e.Lab.files == nil {
		return nil
	}
	keys, err := once(e, "answer keys", func() (map[string]bool, error) {
		data, err := fs.ReadFile(e.Lab.files, "start/answers.yaml")
		if err != nil {
			return nil, err
		}
		var m map[string]any
		if err := yaml.Unmarshal(data, &m); err != nil {
			return nil, err
		}
		out := map[string]bool{}
		for k := range m {
			out[k] = true
		}
		return out, nil
	})
	if err != nil {
		return nil
	}
	return keys
}

// Choice is an answer that must be one of choices, in any case; it
// returns the choice as written in choices.
func (e *Env) Choice(key string, choices ...string) (string, error) {
	m, err := e.Answers()
	if err != nil {
		return "", err
	}
	v, ok := m[key]
	if !ok || v == nil {
		return "", fmt.Errorf("answers.yaml: %s is not answered yet (one of %s)%s", key, strings.Join(choices, ", "), e.misspelt(key, m))
	}
	s := strings.TrimSpace(fmt.Sprint(v))
	for _, c := range choices {
		if strings.EqualFold(s, c) { // "TCP-aware", as the report writes it, is tcp-aware
			return c, nil
		}
	}
	return "", fmt.Errorf("answers.yaml: %s is %q, want one of %s", key, s, strings.Join(choices, ", "))
}

// Live deploys the private copy of the lab once (the first check that
// needs it) and returns its name; Close destroys it.
func (e *Env) Live(ctx context.Context) (string, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.deployed || e.deployErr != nil {
		return e.LabName, e.deployErr
	}
	e.deployErr = e.deploy(ctx)
	e.deployed = e.deployErr == nil
	return e.LabName, e.deployErr
}

func (e *Env) deploy(ctx context.Context) error {
	if err := names.ValidLab(e.LabName); err != nil {
		return err
	}
	s := *e.Scenario
	s.Name = e.LabName
	data, err := yaml.Marshal(&s)
	if err != nil {
		return fmt.Errorf("encode the lab's scenario: %w", err)
	}
	dir, err := os.MkdirTemp("", checkDirPattern)
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	f := filepath.Join(dir, e.LabName+".yaml")
	if err := os.WriteFile(f, data, 0o644); err != nil {
		return err
	}
	if err := e.holdLocked(); err != nil {
		return err
	}
	// A copy left by an interrupted check is this checker's own: remove
	// it. A lab of that name deployed from anything else is not.
	switch st, err := fabric.ReadState(e.LabName); {
	case err == nil && !madeByCheck(st.Source, e.LabName):
		return fmt.Errorf("a lab named %s is up, deployed from %s, not by a check (perhaps someone else's): give yours another --lab-name", e.LabName, st.Source)
	case err != nil && !errors.Is(err, fabric.ErrNoLab):
		return fmt.Errorf("lab %s: %w (not destroyed: it may not be a check's)", e.LabName, err)
	}
	// Destroyed in this process, which holds the check lock (destroy
	// from any other refuses a copy a check holds).
	if err := fabric.Destroy(ctx, e.LabName, e.Log); err != nil {
		return fmt.Errorf("remove an earlier copy %s: %w", e.LabName, err)
	}
	e.cleanups = append(e.cleanups, func() {
		if err := fabric.Destroy(context.WithoutCancel(ctx), e.LabName, e.Log); err != nil {
			e.Log.Warn("destroy the lab's private copy", "lab", e.LabName, "err", err)
		}
	})
	if out, err := e.Emu(ctx, "", "deploy", f); err != nil {
		return fmt.Errorf("deploy a private copy of the lab as %s: %v\n%s", e.LabName, err, out)
	}
	return nil
}

// holdLocked takes CheckLock on LabName once (e.mu held): one check per
// name, from its first check to its last, so that another check of the
// same name (a classmate's, with the same --lab-name) neither destroys
// this one's copy nor runs lab 01's script over the same namespaces.
func (e *Env) holdLocked() error {
	if e.held != nil {
		return nil
	}
	lock, err := fabric.Lock(e.LabName, fabric.CheckLock)
	if errors.Is(err, fabric.ErrLocked) {
		return fmt.Errorf("another emu lab check uses the lab name %s (%v): give yours another --lab-name", e.LabName, err)
	}
	if err != nil {
		return err
	}
	e.held = lock
	e.cleanups = append(e.cleanups, lock.Release) // registered first: runs last, after the copy's destroy
	return nil
}

// madeByCheck says whether a lab was deployed from a check's private
// scenario file (deploy below: <temp>/emu-lab-*/<lab>.yaml).
func madeByCheck(source, lab string) bool {
	dir, file := filepath.Split(source)
	ok, _ := filepath.Match(checkDirPattern, filepath.Base(dir))
	return ok && file == lab+".yaml" && filepath.IsAbs(dir)
}

// checkDirPattern names the temporary directory deploy writes the
// private scenario into.
const checkDirPattern = "emu-lab-*"

// Cleanup registers f to run when the checks end.
func (e *Env) Cleanup(f func()) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.cleanups = append(e.cleanups, f)
}

// Close undoes what the checks built, newest first.
func (e *Env) Close() {
	e.mu.Lock()
	cs := e.cleanups
	e.cleanups = nil
	e.mu.Unlock()
	for i := len(cs) - 1; i >= 0; i-- {
		cs[i]()
	}
}

// Run runs every check of the lab against e.Work, printing one line per
// check to w as it finishes, and the tally; it returns the results.
func Run(ctx context.Context, e *Env, w io.Writer) []Result {
	defer e.Close()
	if os.Geteuid() == 0 && e.needsRoot() {
		e.mu.Lock()
		err := e.holdLocked()
		e.mu.Unlock()
		if err != nil {
			e.Refusal = err // the caller says it
			return nil
		}
	}
	var out []Result
	width := 0
	for _, c := range e.Lab.checks {
		width = max(width, len(c.Name))
	}
	for _, c := range e.Lab.checks {
		start := time.Now()
		var detail string
		var err error
		if c.Root && os.Geteuid() != 0 {
			err = errors.New("this check builds namespaces or deploys a copy of the lab: run it as root (sudo emu lab check ...)")
		} else {
			detail, err = runOne(ctx, e, c)
		}
		if err != nil && ctx.Err() != nil {
			// Stopped, not failed: the check did not get to judge.
			fmt.Fprintf(w, "stopped at %s: interrupted\n", c.Name)
			return out
		}
		r := Result{Name: c.Name, Pass: err == nil, Detail: detail, Took: time.Since(start)}
		word := "PASS"
		if err != nil {
			word, r.Detail = "FAIL", err.Error()
		}
		out = append(out, r)
		fmt.Fprintf(w, "%s  %-*s  %s\n", word, width, c.Name, indent(r.Detail, width+8))
		if ctx.Err() != nil {
			fmt.Fprintln(w, "interrupted")
			return out
		}
	}
	passed := 0
	for _, r := range out {
		if r.Pass {
			passed++
		}
	}
	fmt.Fprintf(w, "%d of %d checks passed\n", passed, len(e.Lab.checks))
	return out
}

// runOne runs a check, turning a panic into a failure of that check.
func runOne(ctx context.Context, e *Env, c Check) (detail string, err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("the check itself failed: %v", p)
		}
	}()
	return c.Run(ctx, e)
}

func indent(s string, n int) string {
	return strings.ReplaceAll(strings.TrimRight(s, "\n"), "\n", "\n"+strings.Repeat(" ", n))
}

// needsRoot says whether any of the lab's checks builds namespaces.
func (e *Env) needsRoot() bool {
	for _, c := range e.Lab.checks {
		if c.Root {
			return true
		}
	}
	return false
}
