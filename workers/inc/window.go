package inc

// window is a worker's congestion window over its slots, in blocks
// (opt-in: Config.Congestion): the worker-side congestion control of ATP
// (Lao et al., NSDI '21). ATP grows the window additively and cuts it
// multiplicatively on a congestion mark, at most once per window of
// data; the switch puts the mark in the aggregated result, so every
// worker of a job sees it on the same block.
// That matters more for INC than for TCP: a block completes only when
// every worker has sent it, so a worker whose window ran ahead of the
// others only waits longer and times out without cause. Our shapers
// (tbf) mark nothing, so the signal is a timeout: a worker resends with
// FlagRetransmit, and the aggregators mark the next sum that completes
// (dataplane/inc). The window grows as TCP's does: by one block per
// clean result up to ssthresh (slow start, after a cut below it), then
// by one block per window of results. It never exceeds the slots in use.
// Loss and timeouts, not delay, are the signal, so beside a TCP (cubic)
// job in the same FIFO it takes a TCP-like share rather than yielding;
// random loss costs it as it costs TCP (docs/inc.md).
type window struct {
	fixed    bool
	cwnd     float64
	ssthresh float64
	max      float64
	// recover is the first block sent after the last decrease: a timeout
	// of an earlier block belongs to the same congestion event.
	recover int
}

// Congestion window bounds, in blocks, and the decrease. A timeout here
// is as often a process that waited for a CPU as a queue (docs/inc.md):
// halving to 4 blocks on each let a loaded machine collapse the window
// (62 decreases in one 16 MiB push, window 15, 9 s instead of 0.7 s), so
// the window keeps 16 blocks and gives up 30 % per event (CUBIC's beta).
//
// The window starts at 256 blocks (emu run's fixed window, docs/inc.md
// "INC beside TCP"), or the slots in use: starting at 32 and slow-starting cost
// every first all-reduce of a job 10-20 % in interleaved runs of
// plan-demo, for nothing the marks did not also do.
const (
	initialWindow = 256
	minWindow     = 16
	decrease      = 0.7
)

func newWindow(slots int, fixed bool) window {
	init := min(initialWindow, float64(slots))
	return window{fixed: fixed, max: float64(slots), cwnd: init, ssthresh: init}
}

// size is how many blocks may be in flight with slots slots in use.
func (w *window) size(slots int) int {
	if w.fixed {
		return slots
	}
	return min(slots, max(int(w.cwnd), 1))
}

// grow counts one block's result.
func (w *window) grow() {
	if w.cwnd < w.ssthresh {
		w.cwnd++
	} else {
		w.cwnd += 1 / w.cwnd
	}
	w.cwnd = min(w.cwnd, w.max)
}

// congestion counts a marked result of block, with next the first block
// not yet sent, and reports whether the window was cut: once per
// congestion event (marks on blocks sent before the last decrease do not
// count again).
func (w *window) congestion(block, next int) bool {
	if w.fixed || block < w.recover {
		return false
	}
	w.ssthresh = max(w.cwnd*decrease, minWindow)
	w.cwnd = w.ssthresh
	w.recover = next
	return true
}
