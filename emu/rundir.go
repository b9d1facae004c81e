package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/ocsemu/ocsemu/dataplane/names"
	"github.com/ocsemu/ocsemu/dataplane/safefile"
	"github.com/ocsemu/ocsemu/emu/scenario"
)

// newRunDir makes a fresh directory for one run, root/<scenario>/<id>,
// where id is the start time (20261122-021530, with -2, -3, ... if that
// second is taken), so no run overwrites another; and points
// root/<scenario>/latest at it, so that `emu ui` follows the run while it
// runs. prev is what latest pointed at before ("" for nothing), for
// restoreLatest if the run does not complete. The scenario name is a
// checked lab name, so it is a single path element.
func newRunDir(root, scenario string, now time.Time) (dir, prev string, err error) {
	dir, err = newResultDir(root, scenario, "", now)
	if err != nil {
		return "", "", err
	}
	base := filepath.Dir(dir)
	prev = lastComplete(base, filepath.Base(dir))
	if err := pointLatest(base, filepath.Base(dir)); err != nil {
		return "", "", err
	}
	return dir, prev, nil
}

// restoreLatest points latest back at prev after the run in dir failed
// or was interrupted, so that `emu report` and `emu compare` on latest
// read a complete run; without one before it, latest goes. It leaves
// latest alone if another run has moved it since.
func restoreLatest(dir, prev string) error {
	base := filepath.Dir(dir)
	latest := filepath.Join(base, "latest")
	if cur, err := os.Readlink(latest); err != nil || cur != filepath.Base(dir) {
		return nil
	}
	if prev != "" && prev != filepath.Base(dir) && filepath.Base(prev) == prev {
		if fi, err := os.Stat(filepath.Join(base, prev)); err == nil && fi.IsDir() {
			return pointLatest(base, prev)
		}
	}
	if err := os.Remove(latest); err != nil {
		return fmt.Errorf("results: unlink latest: %w", err)
	}
	return nil
}

// newSetDir makes root/<scenario>/repeat-<id> for a set of repeated runs;
// latest keeps pointing at the set's last run.
func newSetDir(root, scenario string, now time.Time) (string, error) {
	return newResultDir(root, scenario, "repeat-", now)
}

// newResultDir makes root/<scenario>/<prefix><id>, id the start time
// with -2, -3, ... if taken.
func newResultDir(root, scenario, prefix string, now time.Time) (string, error) {
	if err := names.ValidLab(scenario); err != nil {
		return "", err
	}
	base := filepath.Join(root, scenario)
	if err := os.MkdirAll(base, 0o755); err != nil {
		return "", fmt.Errorf("results directory: %w", err)
	}
	latest := filepath.Join(base, "latest")
	if fi, err := os.Lstat(latest); err == nil && fi.Mode()&os.ModeSymlink == 0 {
		return "", fmt.Errorf("results: %s exists and is not a link; move it away so emu can point it at the newest run", latest)
	}
	id := prefix + now.Format("20060102-150405")
	var dir string
	for n := 1; ; n++ {
		name := id
		if n > 1 {
			name = fmt.Sprintf("%s-%d", id, n)
		}
		dir = filepath.Join(base, name)
		err := os.Mkdir(dir, 0o755)
		if err == nil {
			break
		}
		if !errors.Is(err, os.ErrExist) || n >= 1000 {
			return "", fmt.Errorf("results directory: %w", err)
		}
	}
	return dir, nil
}

// pointLatest makes base/latest a symbolic link to target (a sibling),
// replacing an older link atomically.
func pointLatest(base, target string) error {
	latest := filepath.Join(base, "latest")
	tmp := filepath.Join(base, ".latest."+target)
	_ = os.Remove(tmp)
	if err := os.Symlink(target, tmp); err != nil {
		return fmt.Errorf("results: link latest: %w", err)
	}
	if err := os.Rename(tmp, latest); err != nil {
		_ = os.Remove(tmp)
		return fmt.Errorf("results: link latest: %w", err)
	}
	return nil
}

// writeScenario records the scenario a run used, defaults applied.
func writeScenario(dir string, s *scenario.Scenario) error {
	data, err := yaml.Marshal(s)
	if err != nil {
		return fmt.Errorf("results: encode scenario: %w", err)
	}
	p := filepath.Join(dir, "scenario.yaml")
	if err := safefile.Write(p, data, 0o644); err != nil {
		return fmt.Errorf("results: write %s: %w", p, err)
	}
	return nil
}

// lastComplete names the run latest should go back to if the new run
// (skip) does not complete: latest's own target if that run completed,
// else the newest run directory that did. A run killed with SIGKILL left
// latest on itself and wrote no summary: it is passed over.
func lastComplete(base, skip string) string {
	complete := func(name string) bool {
		if name == "" || name == skip || filepath.Base(name) != name || strings.HasPrefix(name, "repeat-") {
			return false
		}
		data, err := safefile.ReadNoLink(filepath.Join(base, name, "summary.json"), 1<<20)
		if err != nil {
			return false
		}
		var s struct {
			Complete *bool `json:"complete"`
		}
		if json.Unmarshal(data, &s) != nil {
			return false
		}
		return s.Complete == nil || *s.Complete // runs before the field: as before, trusted
	}
	if cur, err := os.Readlink(filepath.Join(base, "latest")); err == nil && complete(cur) {
		return cur
	}
	entries, _ := os.ReadDir(base)
	for i := len(entries) - 1; i >= 0; i-- { // ReadDir sorts by name: newest last
		if e := entries[i]; e.IsDir() && complete(e.Name()) {
			return e.Name()
		}
	}
	return ""
}
