package fabric

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ocsemu/ocsemu/dataplane/names"
	"github.com/ocsemu/ocsemu/dataplane/topo"
)

// withStateDir points StateDir at a fresh directory for one test.
func withStateDir(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "labs")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	old := StateDir
	StateDir = dir
	t.Cleanup(func() { StateDir = old })
	return dir
}

func touch(t *testing.T, path string) {
	t.Helper()
	if err := os.WriteFile(path, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
}

// A hostile lab name never reaches a path: files outside the state
// directory and files of other labs survive destroy of any such name.
func TestDestroyHostileNames(t *testing.T) {
	dir := withStateDir(t)
	outside := filepath.Join(t.TempDir(), "v")
	os.MkdirAll(outside, 0o755)
	victim := filepath.Join(outside, "d.txt")
	touch(t, victim)
	for _, f := range []string{"rel-ga.json", "rel-ga.ocs.sock", "rel-gb.json", "a-b.json", "a.json"} {
		touch(t, filepath.Join(dir, f))
	}
	rel, _ := filepath.Rel(dir, filepath.Join(outside, "d"))
	for _, name := range []string{
		rel, "../v/d", "/tmp/x", "rel-g*", "rel-g?", "*", "[a-z]*", "a/../a", "a.", ".", "..", "", "A", "a b", "0abc",
		"abcdefghijklmnopqrstuvwxyz",
	} {
		err := Destroy(context.Background(), name, nil)
		if !errors.Is(err, names.ErrBadLab) {
			t.Errorf("Destroy(%q): want a refusal of the name, got %v", name, err)
		}
		if err := removeState(name); !errors.Is(err, names.ErrBadLab) {
			t.Errorf("removeState(%q): want a refusal, got %v", name, err)
		}
		if _, err := ReadState(name); !errors.Is(err, names.ErrBadLab) {
			t.Errorf("ReadState(%q): want a refusal, got %v", name, err)
		}
	}
	if _, err := os.Stat(victim); err != nil {
		t.Errorf("file outside the state dir was touched: %v", err)
	}
	// Removing lab "a" removes a.* and nothing of lab a-b.
	if err := removeState("a"); err != nil {
		t.Fatal(err)
	}
	for f, want := range map[string]bool{"a.json": false, "a-b.json": true, "rel-ga.json": true, "rel-ga.ocs.sock": true, "rel-gb.json": true} {
		_, err := os.Stat(filepath.Join(dir, f))
		if got := err == nil; got != want {
			t.Errorf("%s exists = %v, want %v", f, got, want)
		}
	}
}

// A second holder of a lab lock is refused with the holder's PID, and
// the lock is free again once released.
func TestLabLock(t *testing.T) {
	withStateDir(t)
	l, err := Lock("lk", "deploy")
	if err != nil {
		t.Fatal(err)
	}
	if pid, held := Held("lk", "deploy"); !held || pid != os.Getpid() {
		t.Errorf("Held = %d, %v; want %d, true", pid, held, os.Getpid())
	}
	if _, err := Lock("lk", "deploy"); !errors.Is(err, ErrLocked) {
		t.Errorf("second Lock: want ErrLocked, got %v", err)
	}
	if _, err := Lock("lk", "ocs"); err != nil {
		t.Errorf("another activity's lock: %v", err)
	}
	l.Release()
	if _, held := Held("lk", "deploy"); held {
		t.Error("lock still held after Release")
	}
	if _, err := Lock("../lk", "deploy"); !errors.Is(err, names.ErrBadLab) {
		t.Errorf("Lock of a bad name: %v", err)
	}
}

// A deploy that died before the lab came up reads as interrupted.
func TestStateInterrupted(t *testing.T) {
	withStateDir(t)
	if err := WriteState(&State{Lab: "st", Status: StatusDeploying, Spec: topo.Spec{Lab: "st"}}); err != nil {
		t.Fatal(err)
	}
	st, err := ReadState("st")
	if err != nil || st.Status != StatusInterrupted {
		t.Fatalf("ReadState = %+v, %v; want interrupted", st, err)
	}
	l, err := Lock("st", "deploy")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Release()
	if st, _ := ReadState("st"); st.Status != StatusDeploying {
		t.Errorf("with the deploy lock held: status %q, want deploying", st.Status)
	}
}

// While another process deploys a lab (holds its deploy lock), destroy
// refuses and leaves its lock file in place.
func TestDestroyWaitsForAnotherDeploy(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("destroy needs root (CI runs as root)")
	}
	dir := withStateDir(t)
	lock := filepath.Join(dir, "busy.deploy.lock")
	cmd := exec.Command("flock", "-x", lock, "sleep", "30")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	for i := 0; ; i++ { // until flock(1) holds it
		if _, held := Held("busy", "deploy"); held {
			break
		}
		if i == 500 {
			t.Fatal("flock(1) never took the lock")
		}
		time.Sleep(10 * time.Millisecond)
	}
	err := Destroy(context.Background(), "busy", nil)
	if err == nil || !strings.Contains(err.Error(), "being deployed") {
		t.Errorf("Destroy during another deploy: %v", err)
	}
	if err := removeState("busy"); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(lock); err != nil {
		t.Errorf("a lock held by another process was removed: %v", err)
	}
}

// removeState leaves a held lock file, this process's too (a check that
// removes an earlier copy of its lab keeps its lock, so a second check of
// the name is still refused); Release removes the file once the lab is
// gone, and keeps it while the lab is up.
func TestHeldLockOutlivesRemoveState(t *testing.T) {
	dir := withStateDir(t)
	if err := WriteState(&State{Lab: "ck", Status: StatusUp, Spec: topo.Spec{Lab: "ck"}}); err != nil {
		t.Fatal(err)
	}
	l, err := Lock("ck", CheckLock)
	if err != nil {
		t.Fatal(err)
	}
	if err := removeState("ck"); err != nil {
		t.Fatal(err)
	}
	if _, err := Lock("ck", CheckLock); !errors.Is(err, ErrLocked) {
		t.Errorf("a second check after the first removed the lab's files: want ErrLocked, got %v", err)
	}
	l.Release()
	if left, _ := filepath.Glob(filepath.Join(dir, "ck.*")); len(left) > 0 {
		t.Errorf("files left after the lab went and its lock was released: %v", left)
	}
	// While the lab is up, its lock file stays after Release.
	if err := WriteState(&State{Lab: "up", Status: StatusUp, Spec: topo.Spec{Lab: "up"}}); err != nil {
		t.Fatal(err)
	}
	u, err := Lock("up", UseLock)
	if err != nil {
		t.Fatal(err)
	}
	u.Release()
	if _, err := os.Stat(filepath.Join(dir, "up."+UseLock+".lock")); err != nil {
		t.Errorf("the lock file of an up lab went with its Release: %v", err)
	}
}

// Lock and removeState racing (a destroy while others take the lab's
// locks): never two holders at once. removeState once checked a lock and
// then unlinked it, so a Lock taken in between held an unlinked file and
// the next Lock a new one.
func TestLockSurvivesRemoveState(t *testing.T) {
	withStateDir(t)
	var holders, worst atomic.Int32
	stop := make(chan struct{})
	var wg sync.WaitGroup
	repeat := func(f func()) { // f again and again until stop
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
					f()
				}
			}
		}()
	}
	for range 3 {
		repeat(func() {
			l, err := Lock("x", UseLock)
			if err != nil {
				return
			}
			n := holders.Add(1)
			for w := worst.Load(); n > w && !worst.CompareAndSwap(w, n); w = worst.Load() {
			}
			time.Sleep(50 * time.Microsecond)
			holders.Add(-1)
			l.Release()
		})
	}
	repeat(func() { _ = removeState("x") })
	time.Sleep(1500 * time.Millisecond)
	close(stop)
	wg.Wait()
	if w := worst.Load(); w > 1 {
		t.Errorf("%d holders of one lock at once", w)
	}
}

// samePath tells a file unlinked (and made again) under an open handle.
func TestSamePath(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "l.lock")
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if !samePath(f, p) {
		t.Error("the open file is not the path's")
	}
	os.Remove(p)
	if samePath(f, p) {
		t.Error("an unlinked file counts as the path's")
	}
	os.WriteFile(p, nil, 0o644)
	if samePath(f, p) {
		t.Error("a file made again at the path counts as the open one")
	}
}
