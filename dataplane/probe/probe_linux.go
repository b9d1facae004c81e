// Package probe checks a deployed fabric from inside its namespaces:
// all-pairs ICMP reachability (Mininet's pingall) and TCP goodput between
// two nodes. Sockets are opened inside the namespaces and then driven from
// ordinary goroutines, so no helper binaries (ping, iperf3) are needed.
package probe

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"slices"
	"sync"
	"syscall"
	"time"

	"golang.org/x/net/icmp"
	"golang.org/x/net/ipv4"
	"golang.org/x/sync/errgroup"

	"github.com/ocsemu/ocsemu/dataplane/netns"
	"github.com/ocsemu/ocsemu/dataplane/sockopt"
)

// Host is a probe endpoint: a namespace and the address it answers on.
type Host struct {
	Name string
	NS   string
	Addr netip.Addr
}

// Pair is a (source, destination) pair that did not reach.
type Pair struct{ From, To string }

// PingAllResult is the outcome of an all-pairs check.
type PingAllResult struct {
	Pairs  int           // pairs tried
	Failed []Pair        // pairs that never got a reply
	RTTMax time.Duration // largest RTT seen
	Took   time.Duration
}

// PingAll sends ICMP echo requests from every host to every other host and
// retries the missing ones up to `tries` times, timeout each round.
func PingAll(ctx context.Context, hosts []Host, tries int, timeout time.Duration) (*PingAllResult, error) {
	jobs := make([]pingJob, len(hosts))
	for i, src := range hosts {
		jobs[i] = pingJob{src: src, hosts: hosts, self: i}
	}
	return pingJobs(ctx, jobs, 8, tries, timeout)
}

// PingPairs is PingAll over chosen (source, destination) pairs, for a
// sampled pingall on fabrics too large for all pairs. Pairs from one
// source share its ICMP socket; par sources ping at once (8 if 0).
func PingPairs(ctx context.Context, pairs [][2]Host, par, tries int, timeout time.Duration) (*PingAllResult, error) {
	var srcs []Host
	dsts := map[Host][]Host{}
	for _, p := range pairs {
		if p[0] == p[1] {
			return nil, fmt.Errorf("pair %s -> %s: a host cannot ping itself here", p[0].Name, p[1].Name)
		}
		if _, ok := dsts[p[0]]; !ok {
			srcs = append(srcs, p[0])
		}
		if !slices.Contains(dsts[p[0]], p[1]) {
			dsts[p[0]] = append(dsts[p[0]], p[1])
		}
	}
	if par <= 0 {
		par = 8
	}
	jobs := make([]pingJob, len(srcs))
	for i, src := range srcs {
		jobs[i] = pingJob{src: src, hosts: append([]Host{src}, dsts[src]...), self: 0}
	}
	return pingJobs(ctx, jobs, par, tries, timeout)
}

// pingJob is one source pinging hosts, hosts[self] being the source.
type pingJob struct {
	src   Host
	hosts []Host
	self  int
}

// pingJobs runs the jobs, par at once, and adds up what they found.
func pingJobs(ctx context.Context, jobs []pingJob, par, tries int, timeout time.Duration) (*PingAllResult, error) {
	start := time.Now()
	res := &PingAllResult{}
	var mu sync.Mutex
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(par)
	for _, j := range jobs {
		g.Go(func() error {
			missing, rttMax, err := pingFrom(gctx, j.src, j.hosts, j.self, tries, timeout)
			mu.Lock()
			defer mu.Unlock()
			res.Pairs += len(j.hosts) - 1
			for _, m := range missing {
				res.Failed = append(res.Failed, Pair{From: j.src.Name, To: m})
			}
			res.RTTMax = max(res.RTTMax, rttMax)
			return err
		})
	}
	err := g.Wait()
	res.Took = time.Since(start)
	return res, err
}

func pingFrom(ctx context.Context, src Host, hosts []Host, self, tries int, timeout time.Duration) ([]string, time.Duration, error) {
	var conn *icmp.PacketConn
	if err := netns.Do(src.NS, func() (err error) {
		conn, err = icmp.ListenPacket("ip4:icmp", "0.0.0.0")
		return err
	}); err != nil {
		return nil, 0, fmt.Errorf("icmp socket in %s: %w", src.Name, err)
	}
	defer conn.Close()
	id := (os.Getpid() + self) & 0xffff
	pending := map[netip.Addr]int{} // addr -> host index
	sent := map[int]time.Time{}
	for j, h := range hosts {
		if j != self {
			pending[h.Addr] = j
		}
	}
	var rttMax time.Duration
	buf := make([]byte, 1500)
	for try := 0; try < tries && len(pending) > 0; try++ {
		for a, j := range pending {
			msg := icmp.Message{Type: ipv4.ICMPTypeEcho, Body: &icmp.Echo{ID: id, Seq: j, Data: []byte("emu-pingall")}}
			b, _ := msg.Marshal(nil)
			if _, err := conn.WriteTo(b, &net.IPAddr{IP: a.AsSlice()}); err != nil {
				return nil, 0, fmt.Errorf("ping %s -> %s: %w", src.Name, hosts[j].Name, err)
			}
			sent[j] = time.Now()
		}
		deadline := time.Now().Add(timeout)
		_ = conn.SetReadDeadline(deadline)
		for len(pending) > 0 && ctx.Err() == nil {
			n, peer, err := conn.ReadFrom(buf)
			if err != nil {
				if errors.Is(err, os.ErrDeadlineExceeded) {
					break
				}
				return nil, 0, err
			}
			m, err := icmp.ParseMessage(1, buf[:n])
			if err != nil || m.Type != ipv4.ICMPTypeEchoReply {
				continue
			}
			e, ok := m.Body.(*icmp.Echo)
			if !ok || e.ID != id {
				continue
			}
			pa, _ := netip.AddrFromSlice(peer.(*net.IPAddr).IP.To4())
			if j, ok := pending[pa]; ok && j == e.Seq {
				rttMax = max(rttMax, time.Since(sent[j]))
				delete(pending, pa)
			}
		}
		if ctx.Err() != nil {
			return nil, 0, ctx.Err()
		}
	}
	var missing []string
	for _, j := range pending {
		missing = append(missing, hosts[j].Name)
	}
	return missing, rttMax, nil
}

// TransferResult is a measured TCP bulk transfer.
type TransferResult struct {
	Bytes      int64         // bytes received in the measured window
	CC         string        // congestion control the sender used
	Window     time.Duration // measured window (after warm-up)
	GoodputBps float64       // application bits per second in the window
}

// TransferOptions tune Transfer.
type TransferOptions struct {
	Port              int           // TCP port on dst; 5201 if 0
	Duration          time.Duration // measured window; 2 s if 0
	Warmup            time.Duration // ignored start (slow start)
	CongestionControl string        // TCP_CONGESTION for both sockets; "" keeps the default
}

// Transfer streams TCP from src to dst and measures goodput at the
// receiver, ignoring the warm-up.
func Transfer(ctx context.Context, src, dst Host, o TransferOptions) (*TransferResult, error) {
	if o.Port == 0 {
		o.Port = 5201
	}
	if o.Duration == 0 {
		o.Duration = 2 * time.Second
	}
	d, warmup := o.Duration, o.Warmup
	var ln net.Listener
	addr := netip.AddrPortFrom(dst.Addr, uint16(o.Port)).String()
	if err := netns.Do(dst.NS, func() (err error) {
		lc := net.ListenConfig{Control: sockopt.Control(o.CongestionControl)}
		ln, err = lc.Listen(ctx, "tcp4", addr)
		return err
	}); err != nil {
		return nil, fmt.Errorf("listen in %s on %s: %w", dst.Name, addr, err)
	}
	defer ln.Close()

	type recv struct {
		res *TransferResult
		err error
	}
	rc := make(chan recv, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			rc <- recv{err: fmt.Errorf("accept: %w", err)}
			return
		}
		defer c.Close()
		buf := make([]byte, 256<<10)
		// The window opens at the first read after the warm-up and closes
		// at the last read; bytes of the opening read arrived before it.
		var started, winStart, last time.Time
		var counted int64
		for {
			n, err := c.Read(buf)
			now := time.Now()
			if started.IsZero() && n > 0 {
				started = now
			}
			if n > 0 && now.Sub(started) >= warmup {
				if winStart.IsZero() {
					winStart = now
				} else {
					counted += int64(n)
					last = now
				}
			}
			if err == io.EOF {
				break
			}
			if err != nil {
				rc <- recv{err: fmt.Errorf("receive: %w", err)}
				return
			}
		}
		r := &TransferResult{Window: last.Sub(winStart)}
		if r.Window > 0 {
			r.Bytes = counted
			r.GoodputBps = float64(counted) * 8 / r.Window.Seconds()
		}
		rc <- recv{res: r}
	}()

	var c net.Conn
	if err := netns.Do(src.NS, func() (err error) {
		dl := net.Dialer{Control: sockopt.Control(o.CongestionControl)}
		dctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		c, err = dl.DialContext(dctx, "tcp4", addr)
		return err
	}); err != nil {
		return nil, fmt.Errorf("connect %s -> %s (%s): %w", src.Name, dst.Name, addr, err)
	}
	var cc string
	if sc, ok := c.(syscall.Conn); ok {
		if raw, err := sc.SyscallConn(); err == nil {
			cc, _ = sockopt.CongestionControl(raw)
		}
	}
	buf := make([]byte, 256<<10)
	end := time.Now().Add(d + warmup)
	_ = c.SetWriteDeadline(end.Add(5 * time.Second))
	var werr error
	for time.Now().Before(end) && ctx.Err() == nil {
		if _, werr = c.Write(buf); werr != nil {
			break
		}
	}
	c.Close()
	if werr != nil {
		return nil, fmt.Errorf("send %s -> %s: %w", src.Name, dst.Name, werr)
	}
	select {
	case r := <-rc:
		if r.err == nil && r.res.Window <= 0 {
			return nil, fmt.Errorf("transfer %s -> %s: no data after warm-up", src.Name, dst.Name)
		}
		if r.res != nil {
			r.res.CC = cc
		}
		return r.res, r.err
	case <-time.After(10 * time.Second):
		return nil, fmt.Errorf("transfer %s -> %s: receiver did not finish", src.Name, dst.Name)
	}
}
