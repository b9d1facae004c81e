package workers

import (
	"runtime"

	"golang.org/x/sys/unix"
)

// VerifyNice is the nice value results are verified at: below the ranks
// (RankNice) and every other process at the default, so that a rank
// still checking its last result never keeps another from starting its
// phase on time (the checks land where several ranks' gates open at
// once).
const VerifyNice = 10

// atLowPriority runs f on an OS thread of its own under SCHED_NORMAL at
// VerifyNice and waits for it. The goroutine never unlocks its thread, so
// the runtime discards the thread when the goroutine ends and the rank's
// other threads keep their priority (replacements start from the
// runtime's template thread, not from this one; were it the main thread,
// the runtime parks it for good instead). Where the priority cannot be
// set, f runs anyway.
func atLowPriority(f func() error) error {
	done := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread is discarded
		_ = unix.SchedSetAttr(0, &unix.SchedAttr{Policy: unix.SCHED_NORMAL, Nice: VerifyNice}, 0)
		done <- f()
	}()
	return <-done
}
