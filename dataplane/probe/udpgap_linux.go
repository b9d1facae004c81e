package probe

import (
	"context"
	"encoding/binary"
	"fmt"
	"net"
	"net/netip"
	"runtime"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/ocsemu/ocsemu/dataplane/netns"
)

// Pacer is a steady UDP probe stream: one small packet every Interval from
// src to dst, with the receiver recording kernel receive timestamps
// (SO_TIMESTAMPNS), so that gaps are measured without user-space jitter.
type Pacer struct {
	Interval time.Duration
	realTime bool
	paused   atomic.Bool
	resume   chan struct{}
	stop     chan struct{}
	wg       sync.WaitGroup
	send     *net.UDPConn
	recv     *net.UDPConn
	mu       sync.Mutex
	rx       []int64 // CLOCK_REALTIME ns of each received packet
	sent     uint64
}

// PacerOptions tune a Pacer.
type PacerOptions struct {
	Interval time.Duration // between two packets
	// RealTime runs the sender at SCHED_FIFO (as root), so that nothing
	// but the kernel preempts it on a busy machine. It spins: pause it
	// between measurements (Pause) to stay under the kernel's real-time
	// throttling (95% of a second by default), which would stop it for
	// the rest of the second.
	RealTime bool
}

// StartPacer starts the stream. The sender spins on one core, at the
// highest nice priority or real-time (as root), to keep the spacing on a
// busy machine; use it for benchmarks, not alongside heavy traffic.
func StartPacer(src, dst Host, port int, o PacerOptions) (*Pacer, error) {
	p := &Pacer{Interval: o.Interval, realTime: o.RealTime, resume: make(chan struct{}, 1), stop: make(chan struct{})}
	laddr := net.UDPAddrFromAddrPort(netip.AddrPortFrom(dst.Addr, uint16(port)))
	if err := netns.Do(dst.NS, func() (err error) {
		p.recv, err = net.ListenUDP("udp4", laddr)
		return err
	}); err != nil {
		return nil, fmt.Errorf("listen in %s: %w", dst.Name, err)
	}
	raw, _ := p.recv.SyscallConn()
	var serr error
	_ = raw.Control(func(fd uintptr) {
		serr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_TIMESTAMPNS, 1)
		if serr == nil {
			serr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_RCVBUF, 8<<20)
		}
	})
	if serr != nil {
		p.recv.Close()
		return nil, fmt.Errorf("SO_TIMESTAMPNS: %w", serr)
	}
	if err := netns.Do(src.NS, func() (err error) {
		p.send, err = net.DialUDP("udp4", nil, laddr)
		return err
	}); err != nil {
		p.recv.Close()
		return nil, fmt.Errorf("udp socket in %s: %w", src.Name, err)
	}
	p.wg.Add(2)
	go p.receive()
	go p.pace()
	return p, nil
}

func (p *Pacer) pace() {
	defer p.wg.Done()
	// The thread keeps its priority and ends with the goroutine (never
	// unlocked), so no other goroutine inherits it.
	runtime.LockOSThread()
	_ = unix.Setpriority(unix.PRIO_PROCESS, unix.Gettid(), -20) // best effort: needs root
	if p.realTime {
		_ = unix.SchedSetAttr(0, &unix.SchedAttr{Policy: unix.SCHED_FIFO, Priority: 1}, 0) // best effort
	}
	buf := make([]byte, 64)
	next := time.Now()
	for seq := uint64(0); ; seq++ {
		select {
		case <-p.stop:
			return
		default:
		}
		if p.paused.Load() {
			select {
			case <-p.stop:
				return
			case <-p.resume:
			}
			next = time.Now()
		}
		for time.Now().Before(next) {
		}
		binary.BigEndian.PutUint64(buf, seq)
		_, _ = p.send.Write(buf)
		p.sent++
		next = next.Add(p.Interval)
		if now := time.Now(); now.Sub(next) > p.Interval { // preempted: do not burst
			next = now
		}
	}
}

func (p *Pacer) receive() {
	defer p.wg.Done()
	buf := make([]byte, 256)
	oob := make([]byte, 128)
	for {
		_, oobn, _, _, err := p.recv.ReadMsgUDP(buf, oob)
		if err != nil {
			return
		}
		msgs, err := unix.ParseSocketControlMessage(oob[:oobn])
		if err != nil {
			continue
		}
		for _, m := range msgs {
			if m.Header.Level == unix.SOL_SOCKET && m.Header.Type == unix.SO_TIMESTAMPNS && len(m.Data) >= 16 {
				sec := int64(binary.NativeEndian.Uint64(m.Data[0:8]))
				nsec := int64(binary.NativeEndian.Uint64(m.Data[8:16]))
				p.mu.Lock()
				p.rx = append(p.rx, sec*1e9+nsec)
				p.mu.Unlock()
			}
		}
	}
}

// Pause stops sending (the sender sleeps) until Resume.
func (p *Pacer) Pause() { p.paused.Store(true) }

// Resume starts sending again after Pause.
func (p *Pacer) Resume() {
	if p.paused.Swap(false) {
		select {
		case p.resume <- struct{}{}:
		default:
		}
	}
}

// Reset forgets the receive times so far.
func (p *Pacer) Reset() {
	p.mu.Lock()
	p.rx = p.rx[:0]
	p.mu.Unlock()
}

// GapAround returns the receive gap that spans realtime instant t (ns):
// the time between the last packet before t and the first after it.
func (p *Pacer) GapAround(t int64) (time.Duration, error) {
	before, after, err := p.Around(t)
	return time.Duration(after - before), err
}

// Around returns the receive times (realtime ns) of the last packet
// before realtime instant t and of the first after it.
func (p *Pacer) Around(t int64) (before, after int64, err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	i := sort.Search(len(p.rx), func(i int) bool { return p.rx[i] > t })
	if i == 0 || i == len(p.rx) {
		return 0, 0, fmt.Errorf("no packets on both sides of the instant (%d received)", len(p.rx))
	}
	return p.rx[i-1], p.rx[i], nil
}

// SpacingMedian is the median time between received packets.
func (p *Pacer) SpacingMedian() time.Duration {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.rx) < 2 {
		return 0
	}
	d := make([]int64, 0, len(p.rx)-1)
	for i := 1; i < len(p.rx); i++ {
		d = append(d, p.rx[i]-p.rx[i-1])
	}
	sort.Slice(d, func(i, j int) bool { return d[i] < d[j] })
	return time.Duration(d[len(d)/2])
}

// Stop ends the stream.
func (p *Pacer) Stop(ctx context.Context) {
	close(p.stop)
	time.Sleep(10 * time.Millisecond)
	p.recv.Close()
	p.send.Close()
	p.wg.Wait()
}
