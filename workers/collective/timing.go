package collective

import (
	"net"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Timing is when a phase's bytes moved, as one rank saw them: every field
// is CLOCK_MONOTONIC ns, 0 when nothing of that kind happened since the
// last Reset.
type Timing struct {
	FirstRecvNs int64 // the first byte received from any peer
	LastRecvNs  int64 // the last byte received
	LastSendNs  int64 // the last write handed to the kernel
	// PeerRecvNs[p] is when the last byte from rank p arrived, for the
	// transfers that mark it (all-to-all: one flow per peer; a pipelined
	// ring or halving-doubling all-reduce: each peer it receives from);
	// nil when none did.
	PeerRecvNs []int64
}

// clock is CLOCK_MONOTONIC in ns (time.Now's monotonic reading is not
// comparable across processes, CLOCK_MONOTONIC is).
func clock() int64 {
	var ts unix.Timespec
	_ = unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts)
	return ts.Nano()
}

// timing holds Comm's marks; atomic because transfers run concurrently.
type timing struct {
	firstRecv, lastRecv, lastSend atomic.Int64
	peerRecv                      []atomic.Int64 // per peer rank; sized by ResetTiming
}

func (t *timing) recv(now int64) {
	t.firstRecv.CompareAndSwap(0, now) // a read that returned nothing first
	maxStore(&t.lastRecv, now)
}

func maxStore(a *atomic.Int64, v int64) {
	for {
		old := a.Load()
		if v <= old || a.CompareAndSwap(old, v) {
			return
		}
	}
}

// ResetTiming starts a new phase's marks.
func (c *Comm) ResetTiming() {
	c.tm.firstRecv.Store(0)
	c.tm.lastRecv.Store(0)
	c.tm.lastSend.Store(0)
	if len(c.tm.peerRecv) != len(c.Conns) {
		c.tm.peerRecv = make([]atomic.Int64, len(c.Conns))
	}
	for i := range c.tm.peerRecv {
		c.tm.peerRecv[i].Store(0)
	}
}

// peerDone marks the last byte from peer in (a transfer of one flow).
func (c *Comm) peerDone(peer int, now int64) {
	if peer >= 0 && peer < len(c.tm.peerRecv) {
		c.tm.peerRecv[peer].Store(now)
	}
}

// Timing returns the marks since the last ResetTiming.
func (c *Comm) Timing() Timing {
	t := Timing{FirstRecvNs: c.tm.firstRecv.Load(), LastRecvNs: c.tm.lastRecv.Load(), LastSendNs: c.tm.lastSend.Load()}
	for i := range c.tm.peerRecv {
		if v := c.tm.peerRecv[i].Load(); v != 0 {
			if t.PeerRecvNs == nil {
				t.PeerRecvNs = make([]int64, len(c.tm.peerRecv))
			}
			t.PeerRecvNs[i] = v
		}
	}
	return t
}

// WaitAcked waits until the kernel holds no unacknowledged byte on any of
// the given peers' connections (SIOCOUTQ is 0) and returns that instant,
// or 0 when some connection still had bytes in flight after limit: the
// last byte acknowledged, as TCP saw it.
func (c *Comm) WaitAcked(peers []int, limit time.Duration) int64 {
	deadline := clock() + int64(limit)
	for {
		pending := false
		for _, p := range peers {
			if p < 0 || p >= len(c.Conns) || c.Conns[p] == nil {
				continue
			}
			if n, ok := outq(c.Conns[p]); ok && n > 0 {
				pending = true
				break
			}
		}
		now := clock()
		if !pending {
			return now
		}
		if now > deadline {
			return 0
		}
		time.Sleep(50 * time.Microsecond)
	}
}

// outq is the bytes a TCP socket has not had acknowledged yet.
func outq(cn net.Conn) (int, bool) { return sockInt(cn, unix.SIOCOUTQ) }

// unsent is the bytes a TCP socket holds that it has not sent yet.
func unsent(cn net.Conn) (int, bool) { return sockInt(cn, unix.SIOCOUTQNSD) }

// sockInt reads one integer ioctl of a connection's socket.
func sockInt(cn net.Conn, req uint) (int, bool) {
	sc, ok := cn.(syscall.Conn)
	if !ok {
		return 0, false
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		return 0, false
	}
	var n int
	var ierr error
	if err := raw.Control(func(fd uintptr) { n, ierr = unix.IoctlGetInt(int(fd), req) }); err != nil || ierr != nil {
		return 0, false
	}
	return n, true
}
