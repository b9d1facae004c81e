package workers

import (
	"errors"
	"log/slog"
	"os"
	"runtime"
	"testing"

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
// SCHED_OTHER, returns its error, and leaves the caller's thread as it was.
func TestVerifyAtLowPriority(t *testing.T) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	before, err := unix.SchedGetAttr(0, 0)
	if err != nil {
		t.Skipf("sched_getattr: %v", err)
	}
	var inside *unix.SchedAttr
	want := errors.New("sum is wrong")
	got := atLowPriority(func() error {
		inside, err = unix.SchedGetAttr(0, 0)
		return want
	})
	if got != want {
		t.Errorf("error %v, want %v", got, want)
	}
	if err != nil || inside.Policy != unix.SCHED_NORMAL || inside.Nice != VerifyNice {
		t.Errorf("inside: %+v (%v), want SCHED_NORMAL at nice %d", inside, err, VerifyNice)
	}
	after, err := unix.SchedGetAttr(0, 0)
	if err != nil || after.Policy != before.Policy || after.Nice != before.Nice || after.Priority != before.Priority {
		t.Errorf("the caller's thread changed: %+v, was %+v", after, before)
	}
}
