// Package monoclock reads and waits on CLOCK_MONOTONIC, the clock every
// namespace shares and bpf_ktime_get_ns reads: one time zero gates every
// process of a lab, and the kernel's switch instants, without clock
// synchronisation.
package monoclock

import (
	"context"
	"runtime"
	"time"

	"golang.org/x/sys/unix"
)

// Now is CLOCK_MONOTONIC in ns.
func Now() int64 {
	var ts unix.Timespec
	_ = unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts)
	return ts.Nano()
}

// SleepUntil waits until monotonic time t without burning CPU: a Go timer
// until 2 ms before (Go timers overshoot by up to a millisecond), then
// clock_nanosleep(TIMER_ABSTIME) with 1 ns timer slack on a locked thread,
// which gives hrtimer precision. It returns ctx's error if ctx ends first.
func SleepUntil(ctx context.Context, t int64) error {
	if d := time.Duration(t-Now()) - 2*time.Millisecond; d > 0 {
		tm := time.NewTimer(d)
		select {
		case <-tm.C:
		case <-ctx.Done():
			tm.Stop()
			return ctx.Err()
		}
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	_ = unix.Prctl(unix.PR_SET_TIMERSLACK, 1, 0, 0, 0)
	ts := unix.NsecToTimespec(t)
	for {
		if err := unix.ClockNanosleep(unix.CLOCK_MONOTONIC, unix.TIMER_ABSTIME, &ts, nil); err != unix.EINTR {
			return ctx.Err()
		}
	}
}
