// Package labs runs the teaching labs embedded in emu (scenarios/labs):
// it lists them, copies a lab's starting point for a student, and checks
// a student's work, printing PASS or FAIL per check with the reason. Each
// lab's checks are Go code here, registered by lab name; they read the
// student's files with emu's own parsers and, when the lab needs it,
// deploy a private copy of the lab's scenario and look at it live.
package labs

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"sort"
	"strings"

	"github.com/ocsemu/ocsemu/emu/scenario"
	"github.com/ocsemu/ocsemu/scenarios"
)

// nameRE is the form of a lab name: two digits, a dash, a-z0-9 and dashes.
var nameRE = regexp.MustCompile(`^[0-9]{2}-[a-z0-9][a-z0-9-]{0,38}$`)

// Marker is the file `emu lab start` writes into a student's copy; it
// holds the lab's name, so the copy may live under any directory name.
const Marker = ".emu-lab"

// Lab is one embedded lab.
type Lab struct {
	Name   string
	Title  string // the README's first heading
	files  fs.FS  // its folder under scenarios/labs
	checks []Check
}

// registry maps a lab name to its checks; each labNN.go registers one.
var registry = map[string][]Check{}

// ValidName checks the form of a lab name.
func ValidName(name string) error {
	if !nameRE.MatchString(name) {
		return fmt.Errorf("invalid lab name %q: want two digits, a dash and a-z, 0-9 or '-' (e.g. 02-circuits; see `emu lab list`)", name)
	}
	return nil
}

// List returns every embedded lab, in order.
func List() ([]*Lab, error) {
	entries, err := fs.ReadDir(scenarios.Labs, "labs")
	if err != nil {
		return nil, fmt.Errorf("embedded labs: %w", err)
	}
	var out []*Lab
	for _, e := range entries {
		if !e.IsDir() || ValidName(e.Name()) != nil {
			continue
		}
		l, err := Get(e.Name())
		if err != nil {
			return nil, err
		}
		out = append(out, l)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// Get returns an embedded lab by its full name or its number ("02").
func Get(name string) (*Lab, error) {
	if len(name) == 2 && name[0] >= '0' && name[0] <= '9' && name[1] >= '0' && name[1] <= '9' {
		entries, _ := fs.ReadDir(scenarios.Labs, "labs")
		for _, e := range entries {
			if strings.HasPrefix(e.Name(), name+"-") {
				name = e.Name()
			}
		}
	}
	if err := ValidName(name); err != nil {
		return nil, err
	}
	sub, err := fs.Sub(scenarios.Labs, path.Join("labs", name))
	if err != nil {
		return nil, err
	}
	readme, err := fs.ReadFile(sub, "README.md")
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("no lab named %q (see `emu lab list`)", name)
	}
	if err != nil {
		return nil, err
	}
	title, _, _ := strings.Cut(string(readme), "\n")
	checks, ok := registry[name]
	if !ok {
		return nil, fmt.Errorf("lab %s has no checks registered (an emu built without them?)", name)
	}
	return &Lab{Name: name, Title: strings.TrimSpace(strings.TrimLeft(title, "# ")), files: sub, checks: checks}, nil
}

// Checks returns the lab's checks, in order.
func (l *Lab) Checks() []Check { return l.checks }

// Scenario returns the lab's scenario (scenario.yaml of its folder).
func (l *Lab) Scenario() (*scenario.Scenario, error) {
	data, err := fs.ReadFile(l.files, "scenario.yaml")
	if err != nil {
		return nil, fmt.Errorf("lab %s: %w", l.Name, err)
	}
	return scenario.Parse(data, "embedded:labs/"+l.Name+"/scenario.yaml")
}

// Extract writes the lab's folder sub ("start", "solution") into dir,
// which must not exist yet or be empty.
func (l *Lab) Extract(sub, dir string) error {
	if sub != "start" && sub != "solution" {
		return fmt.Errorf("lab %s has no %q folder: want start or solution", l.Name, sub)
	}
	return copyTree(l.files, sub, dir)
}

// Start copies what a student needs into dir: the README, the scenario
// and the starting files, plus the marker naming the lab. Nothing that
// exists is overwritten.
func (l *Lab) Start(dir string) ([]string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	var written []string
	write := func(name string, data []byte, mode fs.FileMode) error {
		p := filepath.Join(dir, name)
		if _, err := os.Lstat(p); err == nil {
			return fmt.Errorf("%s exists: emu lab start never overwrites your work (pick another directory)", p)
		}
		if err := os.WriteFile(p, data, mode); err != nil {
			return err
		}
		written = append(written, p)
		return nil
	}
	for _, f := range []string{"README.md", "scenario.yaml"} {
		data, err := fs.ReadFile(l.files, f)
		if err != nil {
			return written, err
		}
		if err := write(f, data, 0o644); err != nil {
			return written, err
		}
	}
	entries, err := fs.ReadDir(l.files, "start")
	if err != nil {
		return written, err
	}
	for _, e := range entries {
		data, err := fs.ReadFile(l.files, "start/"+e.Name())
		if err != nil {
			return written, err
		}
		if err := write(e.Name(), data, modeOf(e.Name())); err != nil {
			return written, err
		}
	}
	return written, write(Marker, []byte(l.Name+"\n"), 0o644)
}

func modeOf(name string) fs.FileMode {
	if strings.HasSuffix(name, ".sh") || strings.HasSuffix(name, ".py") {
		return 0o755
	}
	return 0o644
}

// copyTree copies the flat folder sub of fsys into dir (labs hold no
// nested folders under start/ or solution/).
func copyTree(fsys fs.FS, sub, dir string) error {
	return fs.WalkDir(fsys, sub, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(sub, p)
		if err != nil {
			return err
		}
		out := filepath.Join(dir, rel)
		if d.IsDir() { // a solution may hold recorded runs (lab 06)
			return os.MkdirAll(out, 0o755)
		}
		data, err := fs.ReadFile(fsys, p)
		if err != nil {
			return err
		}
		return os.WriteFile(out, data, modeOf(d.Name()))
	})
}

// Resolve finds the lab and the student's folder for `emu lab check ARG`:
// ARG is a lab name (its work is then ./<name>, made by `emu lab start`),
// a student's copy (holding the .emu-lab marker), or a lab's folder of a
// checkout (scenarios/labs/02-circuits: its start/ is the work).
func Resolve(arg string) (*Lab, string, error) {
	fi, err := os.Stat(arg)
	if err != nil || !fi.IsDir() {
		l, err := Get(arg)
		if err != nil {
			return nil, "", err
		}
		if fi, err := os.Stat(l.Name); err == nil && fi.IsDir() {
			return l, l.Name, nil
		}
		// Inside the copy (the READMEs say `cd` into it): its marker
		// names the lab.
		if b, err := os.ReadFile(Marker); err == nil && strings.TrimSpace(string(b)) == l.Name {
			return l, ".", nil
		}
		return l, "", nil
	}
	name := filepath.Base(filepath.Clean(arg))
	if b, err := os.ReadFile(filepath.Join(arg, Marker)); err == nil {
		name = strings.TrimSpace(string(b))
	}
	l, err := Get(name)
	if err != nil {
		return nil, "", fmt.Errorf("%s: not a lab folder (no %s marker, and its name is not a lab's): %w", arg, Marker, err)
	}
	if fi, err := os.Stat(filepath.Join(arg, "start")); err == nil && fi.IsDir() {
		return l, filepath.Join(arg, "start"), nil
	}
	return l, arg, nil
}
