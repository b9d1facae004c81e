package workers_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ocsemu/ocsemu/dataplane/fabric"
	"github.com/ocsemu/ocsemu/dataplane/names"
	"github.com/ocsemu/ocsemu/dataplane/netns"
	"github.com/ocsemu/ocsemu/workers"
)

// labPIDs returns the processes in a lab's server namespaces.
func labPIDs(t *testing.T, lab *fabric.Lab) []int {
	t.Helper()
	inodes := map[uint64]bool{}
	for _, n := range lab.Topo.Servers() {
		ino, err := netns.Inode(n.NS)
		if err != nil {
			t.Fatal(err)
		}
		inodes[ino] = true
	}
	return netns.PIDsIn(inodes)
}

// waitFor polls cond until it holds or the time is up.
func waitFor(d time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(20 * time.Millisecond)
	}
	return true
}

// launcher is a child process running a launch.
type launcher struct {
	cmd    *exec.Cmd
	exited chan struct{} // closed when the child has been waited for
	err    error         // its exit, once exited is closed
}

// startLauncher runs a long launch of three rank processes in a child
// process and waits until every rank has finished a phase.
func startLauncher(t *testing.T, lab *fabric.Lab) *launcher {
	t.Helper()
	dir := t.TempDir()
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), launchLabEnv+"="+lab.Topo.Lab, launchDirEnv+"="+dir)
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	l := &launcher{cmd: cmd, exited: make(chan struct{})}
	go func() {
		l.err = cmd.Wait()
		close(l.exited)
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-l.exited
	})
	running := func() bool {
		for r := range 3 {
			data, _ := os.ReadFile(filepath.Join(dir, "long-rank"+string(rune('0'+r))+".jsonl"))
			if !strings.Contains(string(data), `"phase":"allreduce"`) {
				return false
			}
		}
		return true
	}
	// Generous: under -race on a busy machine, starting takes a while.
	deadline := time.Now().Add(2 * time.Minute)
	for !running() {
		select {
		case <-l.exited:
			t.Fatalf("the launcher ended before its ranks ran: %v\n%s", l.err, out.String())
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("ranks never finished a phase\n%s", out.String())
		}
	}
	if n := len(labPIDs(t, lab)); n != 3 {
		t.Fatalf("%d processes in the lab's servers, want the 3 ranks", n)
	}
	return l
}

// TestRanksDieWithTheirParent: SIGKILL of the process that launched the
// rank processes (emu run, emu collective) ends the ranks too; they used
// to play their job to the end on the abandoned lab.
func TestRanksDieWithTheirParent(t *testing.T) {
	lab := lab4x2(t)
	l := startLauncher(t, lab)
	if err := l.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-l.exited
	t0 := time.Now()
	if !waitFor(10*time.Second, func() bool { return len(labPIDs(t, lab)) == 0 }) {
		t.Fatalf("rank processes %v still alive %v after their parent was killed", labPIDs(t, lab), time.Since(t0).Round(time.Millisecond))
	}
	t.Logf("ranks gone %v after their parent was killed", time.Since(t0).Round(time.Millisecond))
}

// TestDestroyEndsARunningLaunch: `emu destroy` during a launch ends the
// rank processes, and the launch fails instead of hanging.
func TestDestroyEndsARunningLaunch(t *testing.T) {
	lab := lab4x2(t)
	l := startLauncher(t, lab)
	if err := fabric.Destroy(context.Background(), lab.Topo.Lab, nil); err != nil {
		t.Fatal(err)
	}
	if left, _ := netns.List(names.LabPrefix(lab.Topo.Lab)); len(left) > 0 {
		t.Fatalf("namespaces left after destroy: %v", left)
	}
	select {
	case <-l.exited:
		if l.err == nil {
			t.Error("the launch succeeded on a destroyed lab")
		}
	case <-time.After(time.Minute):
		t.Fatal("the launch hung after its lab was destroyed")
	}
}

// TestRanksRunAtRankNice: every thread of every rank process runs at
// workers.RankNice, inherited from the thread that started it, and the
// launcher's own threads keep their priority.
func TestRanksRunAtRankNice(t *testing.T) {
	lab := lab4x2(t)
	l := startLauncher(t, lab)
	for _, pid := range labPIDs(t, lab) {
		for tid, nice := range threadNices(t, pid) {
			if nice != workers.RankNice {
				t.Errorf("rank process %d thread %d runs at nice %d, want %d", pid, tid, nice, workers.RankNice)
			}
		}
	}
	for tid, nice := range threadNices(t, l.cmd.Process.Pid) {
		// The thread that starts the ranks holds RankNice while the launch runs.
		if nice != 0 && nice != workers.RankNice {
			t.Errorf("launcher thread %d runs at nice %d", tid, nice)
		}
	}
}

// threadNices reads the nice value of every thread of a process.
func threadNices(t *testing.T, pid int) map[int]int {
	t.Helper()
	tasks, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
	if err != nil {
		t.Fatal(err)
	}
	out := map[int]int{}
	for _, e := range tasks {
		tid, _ := strconv.Atoi(e.Name())
		data, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/stat", pid, tid))
		if err != nil {
			continue // the thread ended
		}
		// Fields after the command name, which ends at the last ')': state
		// is field 3, nice field 19.
		f := strings.Fields(string(data[strings.LastIndexByte(string(data), ')')+1:]))
		nice, err := strconv.Atoi(f[19-3])
		if err != nil {
			t.Fatalf("/proc/%d/task/%d/stat: %v", pid, tid, err)
		}
		out[tid] = nice
	}
	return out
}
