package workers

import (
	"errors"
	"log/slog"
	"os"
	"runtime"
	"strconv"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// raisePriority gives the thread the ranks' scheduling (nice RankNice,
// or SCHED_RR) and its restore puts the old one back.
func TestRaisePriority(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("raising a thread's priority needs root")
	}
	for _, tt := range []struct {
		name     string
		realtime bool
		policy   uint32
		nice     int32
	}{
		{"nice", false, unix.SCHED_NORMAL, RankNice},
		{"realtime", true, unix.SCHED_RR, 0},
	} {
		t.Run(tt.name, func(t *testing.T) {
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			tid := unix.Gettid()
			before, err := unix.SchedGetAttr(tid, 0)
			if err != nil {
				t.Fatal(err)
			}
			restore := raisePriority(slog.New(slog.DiscardHandler), tt.realtime)
			got, err := unix.SchedGetAttr(tid, 0)
			restore()
			if err != nil {
				t.Fatal(err)
			}
			if got.Policy != tt.policy || (tt.policy == unix.SCHED_NORMAL && got.Nice != tt.nice) {
				t.Errorf("raised: policy %d nice %d, want policy %d nice %d", got.Policy, got.Nice, tt.policy, tt.nice)
			}
			after, err := unix.SchedGetAttr(tid, 0)
			if err != nil {
				t.Fatal(err)
			}
			if after.Policy != before.Policy || after.Nice != before.Nice || after.Priority != before.Priority {
				t.Errorf("restored: policy %d nice %d prio %d, want %d %d %d", after.Policy, after.Nice, after.Priority, before.Policy, before.Nice, before.Priority)
			}
		})
	}
}

// TestVerifyAtLowPriority: the check runs on a thread at VerifyNice under
// SCHED_NORMAL and returns its error, and once it is done no thread of the
// process is left at that priority (the runtime discards the thread, or
// parks it for good if it was the main thread: at most one).
func TestVerifyAtLowPriority(t *testing.T) {
	var inside *unix.SchedAttr
	var err error
	want := errors.New("sum is wrong")
	for range 20 {
		got := atLowPriority(func() error {
			inside, err = unix.SchedGetAttr(0, 0)
			return want
		})
		if got != want {
			t.Fatalf("error %v, want %v", got, want)
		}
		if err != nil || inside.Policy != unix.SCHED_NORMAL || inside.Nice != VerifyNice {
			t.Fatalf("inside: %+v (%v), want SCHED_NORMAL at nice %d", inside, err, VerifyNice)
		}
	}
	// A discarded thread exits after its goroutine has handed the result
	// over: give the exits a moment before counting.
	var low int
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		low = threadsAtNice(t, VerifyNice)
		if low <= 1 || time.Now().After(deadline) {
			break
		}
	}
	if low > 1 {
		t.Errorf("%d threads left at nice %d 5 s after 20 checks, want at most 1", low, VerifyNice)
	}
}

// threadsAtNice counts the process's threads at a nice value.
func threadsAtNice(t *testing.T, nice int32) int {
	t.Helper()
	tasks, err := os.ReadDir("/proc/self/task")
	if err != nil {
		t.Skipf("no /proc: %v", err)
	}
	n := 0
	for _, task := range tasks {
		tid, err := strconv.Atoi(task.Name())
		if err != nil {
			continue
		}
		if a, err := unix.SchedGetAttr(tid, 0); err == nil && a.Nice == nice {
			n++
		}
	}
	return n
}
