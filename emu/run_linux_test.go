package main

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/ocsemu/ocsemu/dataplane/fabric"
	"github.com/ocsemu/ocsemu/dataplane/fabric/fabrictest"
	"github.com/ocsemu/ocsemu/dataplane/names"
	"github.com/ocsemu/ocsemu/dataplane/netns"
)

// `emu run --plan` reads, checks and predicts the plan, and makes the
// results directory, before it touches the kernel: a plan that is missing
// or wrong is refused and no namespace of the lab ever appears.
func TestCLIRunBadPlanTouchesNoKernel(t *testing.T) {
	fabrictest.SkipUnlessRoot(t)
	bin := buildEmu(t)
	dir := t.TempDir()
	lab := fabrictest.UniqueLab("runp")
	scen := filepath.Join(dir, "s.yaml")
	os.WriteFile(scen, []byte("name: "+lab+"\nfabric: {kind: eps, racks: 2, servers_per_rack: 1, rates: {server: 1Gbit}}\n"+
		"jobs:\n  - {name: a, pattern: ring, workers: [r0s0, r1s0], bytes: 1MiB, compute: 1ms, iterations: 1}\n"), 0o644)
	plan := func(body string) string {
		f := filepath.Join(t.TempDir(), "p.json")
		os.WriteFile(f, []byte(body), 0o644)
		return f
	}
	const stages = `"stages": [{"start_ns": 0, "circuits": [], "activities": [{"job": "a", "iteration": 0, "phase": "compute"}]},
	{"start_ns": 0, "circuits": [], "activities": [{"job": "a", "iteration": 0, "phase": "allreduce"}]}]}`
	job := func(bytes string) string {
		return `{"plan_version": 1, "mode": "barrier", "jobs": [{"name": "a", "pattern": "ring", "workers": ["r0s0", "r1s0"], "bytes": ` +
			bytes + `, "compute_ns": 0, "iterations": 1}], ` + stages
	}
	notADir := filepath.Join(dir, "file")
	os.WriteFile(notADir, nil, 0o644)
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"missing plan file", []string{"--plan", "/nonexistent.json"}, "read plan: open /nonexistent.json"},
		{"plan that does not parse", []string{"--plan", plan(`{"plan_version": 1, "modus": "clock"}`)}, `unknown key "modus", did you mean "mode"?`},
		{"plan with a key twice", []string{"--plan", plan(`{"plan_version": 1, "mode": "clock", "mode": "barrier"}`)}, `duplicate key "mode"`},
		{"plan that does not fit", []string{"--plan", plan(strings.Replace(job("1048576"), "r1s0", "r7s0", 1))}, "no server r7s0"},
		{"plan the workers cannot run", []string{"--plan", plan(job("1048575"))}, "must be a multiple of 4"},
		{"results directory that cannot be made", []string{"--results", notADir}, "results directory"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			results := filepath.Join(t.TempDir(), "results")
			args := append([]string{"run", scen, "--results", results}, tt.args...)
			// Watch for any namespace of the lab while the command runs.
			seen := map[string]bool{}
			var mu sync.Mutex
			stop := make(chan struct{})
			var wg sync.WaitGroup
			wg.Add(1)
			go func() {
				defer wg.Done()
				for {
					if left, _ := netns.List(names.LabPrefix(lab)); len(left) > 0 {
						mu.Lock()
						for _, ns := range left {
							seen[ns] = true
						}
						mu.Unlock()
					}
					select {
					case <-stop:
						return
					case <-time.After(2 * time.Millisecond):
					}
				}
			}()
			out, err := run(t, bin, args...)
			close(stop)
			wg.Wait()
			t.Cleanup(func() {
				run(t, bin, "destroy", lab)
				fabrictest.AssertGone(t, lab)
			})
			if err == nil || !strings.Contains(out, tt.want) {
				t.Errorf("want a refusal containing %q, got %v:\n%s", tt.want, err, out)
			}
			if len(seen) > 0 {
				t.Errorf("namespaces of the lab appeared: %v", seen)
			}
			for _, w := range []string{"creating", "fabric up", "pingall", "TCP transfer", "destroyed"} {
				if strings.Contains(out, w) {
					t.Errorf("output mentions %q: the kernel was touched:\n%s", w, out)
				}
			}
			if _, err := fabric.ReadState(lab); err == nil {
				t.Errorf("lab %s has a state file", lab)
			}
			// A refused plan makes no run: no run directory is left (it
			// would break a later `compare --repeat results/<lab>/2026*`).
			if runs, _ := filepath.Glob(filepath.Join(results, lab, "2*")); len(runs) > 0 {
				t.Errorf("a refused run left its directory: %v", runs)
			}
		})
	}
}

// A closed terminal (SIGHUP) stops `emu run` as Ctrl-C does, removing the
// lab; a closed pipe on its output (`emu run 2>&1 | head -2`) does not kill
// it half way: it runs on and tears the lab down. Both once left all of
// the lab's namespaces and its OCS process behind.
func TestCLIRunStopsCleanlyOnHangupAndClosedPipe(t *testing.T) {
	fabrictest.SkipUnlessRoot(t)
	bin := buildEmu(t)
	results := t.TempDir()

	lab := fabrictest.UniqueLab("hup")
	cmd := exec.Command(bin, "run", "--lab-name", lab, "--results", results)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	for i := 0; ; i++ { // hang up once the lab's namespaces exist
		if left, _ := netns.List(names.LabPrefix(lab)); len(left) > 0 {
			break
		}
		if i > 500 {
			t.Fatalf("no namespace of %s appeared within 5 s:\n%s", lab, stderr.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
	_ = cmd.Process.Signal(syscall.SIGHUP)
	err := cmd.Wait()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 130 {
		t.Errorf("run after SIGHUP: %v, want exit 130\n%s", err, stderr.String())
	}
	if left, _ := netns.List(names.LabPrefix(lab)); len(left) > 0 {
		run(t, bin, "destroy", lab)
		t.Errorf("SIGHUP left namespaces behind: %v", left)
	}

	lab = fabrictest.UniqueLab("pipe")
	cmd = exec.Command(bin, "run", "--lab-name", lab, "--results", results)
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = w, w
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	w.Close()
	buf := make([]byte, 64)
	if _, err := r.Read(buf); err != nil { // the first line, then the reader goes away
		t.Fatal(err)
	}
	r.Close()
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err = <-done:
	case <-time.After(2 * time.Minute):
		_ = cmd.Process.Kill()
		t.Fatal("run with its output closed did not end within 2 minutes")
	}
	if errors.As(err, &ee) && ee.ProcessState.Sys().(syscall.WaitStatus).Signal() == syscall.SIGPIPE {
		t.Errorf("run was killed by SIGPIPE")
	}
	if left, _ := netns.List(names.LabPrefix(lab)); len(left) > 0 {
		run(t, bin, "destroy", lab)
		t.Errorf("a closed pipe left namespaces behind: %v", left)
	}
}

// While emu run measures a lab, another process's circuit and loss
// changes to it are refused (a classmate's `ocs schedule --stop` and
// `loss` once broke a run unannounced: 0.9 s became 408 s), and so is a
// destroy; reading it is not.
func TestCLIChangesRefusedWhileRunning(t *testing.T) {
	fabrictest.SkipUnlessRoot(t)
	bin := buildEmu(t)
	lab := fabrictest.UniqueLab("busy")
	cmd := exec.Command(bin, "run", "plan-demo", "--lab-name", lab, "--results", t.TempDir())
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		_ = cmd.Wait()
		if left, _ := netns.List(names.LabPrefix(lab)); len(left) > 0 {
			run(t, bin, "destroy", lab)
			t.Errorf("namespaces left: %v", left)
		}
	}()
	for i := 0; ; i++ {
		if st, err := fabric.ReadState(lab); err == nil && st.Status == fabric.StatusUp {
			if _, held := fabric.Held(lab, fabric.UseLock); held {
				break
			}
		}
		if i > 1000 {
			t.Fatalf("the run's lab never came up:\n%s", stderr.String())
		}
		time.Sleep(5 * time.Millisecond)
	}
	for _, args := range [][]string{
		{"ocs", "schedule", "--stop", "--lab", lab},
		{"ocs", "disconnect", "--lab", lab, "tor0:0"},
		{"ocs", "connect", "--lab", lab, "tor0:0", "tor1:0"},
		{"loss", lab, "tor0:up0", "both", "20"},
		{"loss", lab, "--clear"},
		{"destroy", lab},
	} {
		if out, err := run(t, bin, args...); err == nil || !strings.Contains(out, "in use by pid") {
			t.Errorf("emu %s during the run: want a refusal, got %v: %s", strings.Join(args, " "), err, out)
		}
	}
	if out, err := run(t, bin, "ocs", "show", "--lab", lab); err != nil && strings.Contains(out, "in use") {
		t.Errorf("ocs show during the run was refused: %s", out)
	}
}
