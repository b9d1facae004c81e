package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ocsemu/ocsemu/emu/scenario"
)

func TestNewRunDir(t *testing.T) {
	root := t.TempDir()
	now := time.Date(2026, 11, 22, 2, 15, 30, 0, time.UTC)
	var dirs []string
	for range 3 {
		d, _, err := newRunDir(root, "quickstart", now)
		if err != nil {
			t.Fatal(err)
		}
		dirs = append(dirs, d)
	}
	want := []string{"20261122-021530", "20261122-021530-2", "20261122-021530-3"}
	for i, d := range dirs {
		if filepath.Base(d) != want[i] || filepath.Dir(d) != filepath.Join(root, "quickstart") {
			t.Errorf("run %d in %s, want %s", i, d, want[i])
		}
	}
	if got, err := os.Readlink(filepath.Join(root, "quickstart", "latest")); err != nil || got != want[2] {
		t.Errorf("latest -> %q, %v; want %q", got, err, want[2])
	}
	// A later run moves latest; nothing else is touched.
	os.WriteFile(filepath.Join(dirs[0], "summary.json"), []byte("{}"), 0o644)
	os.WriteFile(filepath.Join(dirs[2], "summary.json"), []byte(`{"complete": true}`), 0o644) // latest's run completed
	d, prev, err := newRunDir(root, "quickstart", now.Add(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if prev != want[2] {
		t.Errorf("latest pointed at %q before, want %q", prev, want[2])
	}
	if got, _ := os.Readlink(filepath.Join(root, "quickstart", "latest")); got != filepath.Base(d) {
		t.Errorf("latest -> %q after a later run", got)
	}
	if _, err := os.Stat(filepath.Join(dirs[0], "summary.json")); err != nil {
		t.Errorf("an earlier run lost its files: %v", err)
	}
	// Names that are not lab names never become paths.
	for _, bad := range []string{"../x", "a/b", "", "*"} {
		if _, _, err := newRunDir(root, bad, now); err == nil {
			t.Errorf("newRunDir(%q) accepted", bad)
		}
	}
	// A real directory named latest is not replaced.
	os.MkdirAll(filepath.Join(root, "other", "latest"), 0o755)
	if _, _, err := newRunDir(root, "other", now); err == nil || !strings.Contains(err.Error(), "not a link") {
		t.Errorf("latest as a directory: %v", err)
	}
}

// A run that does not complete gives latest back to the run before it,
// or removes it when there was none; a run that moved latest since is
// left alone.
func TestRestoreLatest(t *testing.T) {
	root := t.TempDir()
	now := time.Date(2026, 11, 27, 21, 40, 0, 0, time.UTC)
	latest := filepath.Join(root, "lab", "latest")
	first, prev, err := newRunDir(root, "lab", now)
	if err != nil || prev != "" {
		t.Fatalf("first run: prev %q, %v", prev, err)
	}
	if err := restoreLatest(first, prev); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(latest); !os.IsNotExist(err) {
		t.Errorf("latest after the only run failed: %v, want it gone", err)
	}
	good, _, _ := newRunDir(root, "lab", now.Add(time.Second))
	done := true
	if err := writeSummary(good, &runSummary{Complete: &done}); err != nil {
		t.Fatal(err)
	}
	bad, prev, _ := newRunDir(root, "lab", now.Add(2*time.Second))
	if err := restoreLatest(bad, prev); err != nil {
		t.Fatal(err)
	}
	if got, _ := os.Readlink(latest); got != filepath.Base(good) {
		t.Errorf("latest -> %q after a failed run, want the complete one %q", got, filepath.Base(good))
	}
	// A run killed with SIGKILL leaves latest on itself and no summary;
	// the next run that fails goes back past it to the complete one.
	killed, _, _ := newRunDir(root, "lab", now.Add(2500*time.Millisecond))
	if got, _ := os.Readlink(latest); got != filepath.Base(killed) {
		t.Fatalf("latest -> %q during the killed run, want %q", got, filepath.Base(killed))
	}
	after, prev, _ := newRunDir(root, "lab", now.Add(2700*time.Millisecond))
	if err := restoreLatest(after, prev); err != nil {
		t.Fatal(err)
	}
	if got, _ := os.Readlink(latest); got != filepath.Base(good) {
		t.Errorf("latest -> %q after a killed and a failed run, want the complete one %q", got, filepath.Base(good))
	}
	// A failed run whose latest another run took over leaves it.
	failed, prev, _ := newRunDir(root, "lab", now.Add(3*time.Second))
	other, _, _ := newRunDir(root, "lab", now.Add(4*time.Second))
	if err := restoreLatest(failed, prev); err != nil {
		t.Fatal(err)
	}
	if got, _ := os.Readlink(latest); got != filepath.Base(other) {
		t.Errorf("latest -> %q, want the newer run %q", got, filepath.Base(other))
	}
}

// The scenario a run records reads back as the same scenario.
func TestWriteScenarioReadsBack(t *testing.T) {
	for _, name := range []string{"quickstart", "plan-demo", "ocs-lab"} {
		s, _, err := loadScenario(name)
		if err != nil {
			t.Fatal(err)
		}
		dir := t.TempDir()
		if err := writeScenario(dir, s); err != nil {
			t.Fatal(err)
		}
		back, err := scenario.Load(filepath.Join(dir, "scenario.yaml"))
		if err != nil {
			t.Fatalf("%s: the recorded scenario does not read back: %v", name, err)
		}
		a, _ := json.Marshal(s)
		b, _ := json.Marshal(back)
		if string(a) != string(b) {
			t.Errorf("%s: recorded scenario differs:\n%s\n%s", name, a, b)
		}
	}
}
