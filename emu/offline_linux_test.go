package main

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// An offline command (here `emu plan` of an all-to-all that takes the
// flow model about a minute) ends at the first Ctrl-C, with 130, and
// writes no output.
func TestOfflineCommandStopsAtInterrupt(t *testing.T) {
	bin := buildEmu(t)
	dir := t.TempDir()
	w := make([]string, 700)
	for i := range w {
		w[i] = fmt.Sprintf("r%ds0", i)
	}
	scen := filepath.Join(dir, "big.yaml")
	os.WriteFile(scen, []byte("name: big\nfabric: {kind: eps, racks: 700, servers_per_rack: 1}\njobs:\n  - {name: a, pattern: alltoall, workers: ["+
		strings.Join(w, ", ")+"], bytes: 1MiB, iterations: 2}\n"), 0o644)
	out := filepath.Join(dir, "big.plan.json")
	cmd := exec.Command(bin, "plan", scen, "-o", out)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(500 * time.Millisecond)
	sent := time.Now()
	cmd.Process.Signal(syscall.SIGINT)
	err := cmd.Wait()
	took := time.Since(sent)
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 130 || !strings.Contains(stderr.String(), "interrupted") {
		t.Errorf("exit %v, stderr %q; want 130 and \"interrupted\"", err, stderr.String())
	}
	if took > 5*time.Second {
		t.Errorf("it took %v to stop after the interrupt", took)
	}
	if _, err := os.Stat(out); err == nil {
		t.Errorf("an interrupted plan wrote %s", out)
	}
	if left, _ := filepath.Glob(filepath.Join(dir, ".*tmp*")); len(left) > 0 {
		t.Errorf("an interrupted plan left %v", left)
	}
}

// Without an interrupt an offline command ends with 0, every time: the
// interrupt handler must not take the end of the command for one (it once
// did, 7 times in 10).
func TestOfflineCommandExitsZero(t *testing.T) {
	bin := buildEmu(t)
	for i := 0; i < 20; i++ {
		if out, err := exec.Command(bin, "scenarios").CombinedOutput(); err != nil {
			t.Fatalf("try %d: emu scenarios: %v\n%s", i, err, out)
		}
	}
}
