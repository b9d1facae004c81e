package probe

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"sync"
	"time"

	"github.com/ocsemu/ocsemu/dataplane/netns"
	"github.com/ocsemu/ocsemu/dataplane/sockopt"
)

// Stream is a steady TCP bulk stream whose receiver records when data
// arrives, so that stalls (a dark circuit, an RTO) can be measured.
type Stream struct {
	cancel context.CancelFunc
	done   chan struct{}
	mu     sync.Mutex
	reads  []Read
	err    error
}

// Read is one receive: when, and how many bytes.
type Read struct {
	At time.Time
	N  int
}

// StreamStats summarises a stream.
type StreamStats struct {
	Bytes  int64
	MaxGap time.Duration // longest time without data
	GapAt  time.Time     // when that gap started
	// BytesAfterGap is what arrived after the longest gap: > 0 means the
	// stream resumed.
	BytesAfterGap int64
	Reads         []Read
}

// StartStream connects src to dst and sends until Stop.
func StartStream(ctx context.Context, src, dst Host, port int, cc string) (*Stream, error) {
	addr := netip.AddrPortFrom(dst.Addr, uint16(port)).String()
	var ln net.Listener
	if err := netns.Do(dst.NS, func() (err error) {
		lc := net.ListenConfig{Control: sockopt.Control(cc)}
		ln, err = lc.Listen(ctx, "tcp4", addr)
		return err
	}); err != nil {
		return nil, fmt.Errorf("listen in %s: %w", dst.Name, err)
	}
	var c net.Conn
	if err := netns.Do(src.NS, func() (err error) {
		d := net.Dialer{Control: sockopt.Control(cc), Timeout: 5 * time.Second}
		c, err = d.DialContext(ctx, "tcp4", addr)
		return err
	}); err != nil {
		ln.Close()
		return nil, fmt.Errorf("connect %s -> %s: %w", src.Name, dst.Name, err)
	}
	rc, err := ln.Accept()
	ln.Close()
	if err != nil {
		c.Close()
		return nil, err
	}
	sctx, cancel := context.WithCancel(ctx)
	s := &Stream{cancel: cancel, done: make(chan struct{})}
	go func() { // sender
		buf := make([]byte, 64<<10)
		for sctx.Err() == nil {
			_ = c.SetWriteDeadline(time.Now().Add(200 * time.Millisecond))
			if _, err := c.Write(buf); err != nil && !isTimeout(err) {
				break
			}
		}
		c.Close()
	}()
	go func() { // receiver
		defer close(s.done)
		defer rc.Close()
		buf := make([]byte, 256<<10)
		for {
			n, err := rc.Read(buf)
			if n > 0 {
				s.mu.Lock()
				s.reads = append(s.reads, Read{At: time.Now(), N: n})
				s.mu.Unlock()
			}
			if err != nil {
				return
			}
		}
	}()
	return s, nil
}

func isTimeout(err error) bool {
	ne, ok := err.(net.Error)
	return ok && ne.Timeout()
}

// Received is how many bytes have arrived so far, for tests that wait for
// a stream to flow (or to resume) rather than sleep.
func (s *Stream) Received() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	var n int64
	for _, r := range s.reads {
		n += int64(r.N)
	}
	return n
}

// Stop ends the stream and returns its statistics.
func (s *Stream) Stop() StreamStats {
	s.cancel()
	select {
	case <-s.done:
	case <-time.After(5 * time.Second):
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	st := StreamStats{Reads: s.reads}
	gapIdx := -1
	for i, r := range s.reads {
		st.Bytes += int64(r.N)
		if i > 0 {
			if g := r.At.Sub(s.reads[i-1].At); g > st.MaxGap {
				st.MaxGap, st.GapAt, gapIdx = g, s.reads[i-1].At, i
			}
		}
	}
	if gapIdx >= 0 {
		for _, r := range s.reads[gapIdx:] {
			st.BytesAfterGap += int64(r.N)
		}
	}
	return st
}
