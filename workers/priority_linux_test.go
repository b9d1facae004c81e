package workers

import (
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
