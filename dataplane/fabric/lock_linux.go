package fabric

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/ocsemu/ocsemu/dataplane/names"
)

// ErrLocked is returned by Lock when another process holds the lock.
var ErrLocked = errors.New("held by another process")

// LabLock is an exclusive, advisory lock on one activity of a lab (its
// deploy, its OCS process). The kernel releases it when the holder exits,
// however it exits, so a killed holder never leaves a stale lock behind.
type LabLock struct {
	f         *os.File
	lab, path string
}

// Lock takes the lock "<lab>.<what>.lock" in StateDir without waiting. If
// another process holds it, the error wraps ErrLocked and names that
// process's PID. Lock files are removed (by destroy, or by the last
// holder of a lab that is gone), so a lock taken on a file that was
// unlinked meanwhile is let go and taken again on the file the path names.
func Lock(lab, what string) (*LabLock, error) {
	if err := names.ValidLab(lab); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(StateDir, 0o755); err != nil {
		return nil, fmt.Errorf("create state dir: %w", err)
	}
	path := LabFile(lab, what+".lock")
	busy, gone := 0, 0 // retries: a probe in the way, a file unlinked under us
	for {
		f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
		if err != nil {
			return nil, fmt.Errorf("open lock %s: %w", path, err)
		}
		err = unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
		if errors.Is(err, unix.EWOULDBLOCK) && busy < 3 {
			// Held's probe and removeUnheldLock take the lock for an
			// instant; a real holder still holds it a few ms later.
			f.Close()
			busy++
			time.Sleep(2 * time.Millisecond)
			continue
		}
		if err != nil {
			pid := readPID(f)
			f.Close()
			if errors.Is(err, unix.EWOULDBLOCK) {
				if pid == 0 {
					return nil, fmt.Errorf("%s of lab %q: %w (by a process that has just started)", what, lab, ErrLocked)
				}
				return nil, fmt.Errorf("%s of lab %q: %w (pid %d)", what, lab, ErrLocked, pid)
			}
			return nil, fmt.Errorf("lock %s: %w", path, err)
		}
		if !samePath(f, path) {
			f.Close() // unlinked (or replaced) while we took it
			if gone++; gone > 3 {
				return nil, fmt.Errorf("lock %s: the file was removed again and again while taking it", path)
			}
			continue
		}
		_ = f.Truncate(0)
		_, _ = f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
		return &LabLock{f: f, lab: lab, path: path}, nil
	}
}

// samePath says whether the open file is the one path names now.
func samePath(f *os.File, path string) bool {
	var a, b unix.Stat_t
	if unix.Fstat(int(f.Fd()), &a) != nil || unix.Stat(path, &b) != nil {
		return false
	}
	return a.Dev == b.Dev && a.Ino == b.Ino
}

// UseLock names the lock a workload holds while it runs on a lab (emu run
// from deploy to teardown, emu collective): one at a time per lab, since
// they share the lab's coordinator socket, and destroy waits for it.
const UseLock = "use"

// CheckLock names the lock an `emu lab check` holds on the private copy it
// deploys, from before it removes an earlier copy until it has destroyed
// its own: another check of the same name is refused, and so is destroy
// from another process.
const CheckLock = "check"

// heldByCheck says whether an emu lab check other than this process (or
// the emu deploy it runs for its copy, whose parent it is) holds lab's
// CheckLock, and its pid.
func heldByCheck(lab string) (int, bool) {
	pid, held := Held(lab, CheckLock)
	return pid, held && pid != os.Getpid() && pid != os.Getppid()
}

// UsedElsewhere says whether a process other than this one holds lab's
// UseLock (an emu run or emu collective works on it), and its pid.
func UsedElsewhere(lab string) (int, bool) {
	pid, held := Held(lab, UseLock)
	return pid, held && pid != os.Getpid()
}

// LockUse takes a lab's UseLock, or says who holds it.
func LockUse(lab string) (*LabLock, error) {
	// The lab must exist first: a lock file of a lab that does not would
	// stay behind.
	st, err := ReadState(lab)
	if err != nil {
		return nil, err
	}
	if st.Status != StatusUp {
		return nil, fmt.Errorf("lab %q is %s, not up", lab, st.Status)
	}
	l, err := Lock(lab, UseLock)
	if errors.Is(err, ErrLocked) {
		return nil, fmt.Errorf("lab %q is busy: %w; one emu run or emu collective at a time per lab", lab, err)
	}
	return l, err
}

// Held reports whether some live process holds the lock, and its PID.
func Held(lab, what string) (pid int, held bool) {
	if names.ValidLab(lab) != nil {
		return 0, false
	}
	f, err := os.Open(LabFile(lab, what+".lock"))
	if err != nil {
		return 0, false
	}
	defer f.Close()
	if err := unix.Flock(int(f.Fd()), unix.LOCK_SH|unix.LOCK_NB); err == nil {
		_ = unix.Flock(int(f.Fd()), unix.LOCK_UN)
		return 0, false
	}
	return readPID(f), true
}

// readPID reads the holder's PID. A holder writes it just after it takes
// the lock: an empty file is read again for up to 50 ms before 0 is
// returned (a refusal once named "pid 0").
func readPID(f *os.File) int {
	for range 5 {
		if pid := readPIDOnce(f); pid > 0 {
			return pid
		}
		time.Sleep(10 * time.Millisecond)
	}
	return readPIDOnce(f)
}

func readPIDOnce(f *os.File) int {
	b := make([]byte, 16)
	n, _ := f.ReadAt(b, 0)
	pid, _ := strconv.Atoi(strings.TrimSpace(string(b[:n])))
	return pid
}

// Release gives the lock up. The file stays while the lab does (destroy
// removes it once nobody holds it); the last holder of a lab that is gone
// removes it first. A process that took the lock on the file just as it
// went sees that (Lock compares the file with the path) and takes it
// again.
func (l *LabLock) Release() {
	if l != nil && l.f != nil {
		// Emptied while still held: a reader waits a moment for an empty
		// file (readPID), but would take an old pid for the next holder's.
		_ = l.f.Truncate(0)
		if _, err := ReadState(l.lab); errors.Is(err, ErrNoLab) && samePath(l.f, l.path) {
			_ = os.Remove(l.path)
		}
		_ = l.f.Close()
		l.f = nil
	}
}

// removeUnheldLock removes a lock file nobody holds, this process
// included. It takes the lock before it unlinks the file, so that no Lock
// takes it in between (a Lock that took it just before sees the file gone
// and takes the new one).
func removeUnheldLock(path string) error {
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("open %s: %w", path, err)
	}
	defer f.Close()
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		return nil // held: its holder removes it (Release)
	}
	if !samePath(f, path) {
		return nil // unlinked meanwhile, and the path may be a new holder's
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("remove %s: %w", path, err)
	}
	return nil
}
