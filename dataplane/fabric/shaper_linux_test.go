package fabric_test

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/netip"
	"sort"
	"testing"
	"time"

	"github.com/ocsemu/ocsemu/dataplane/fabric"
	"github.com/ocsemu/ocsemu/dataplane/netns"
	"github.com/ocsemu/ocsemu/dataplane/probe"
)

// sendBytes sends n bytes over a fresh TCP connection from src to dst and
// returns the time from the sender's first write to the receiver's last
// byte (the connection is set up before the clock starts).
func sendBytes(ctx context.Context, src, dst probe.Host, n int, port uint16) (time.Duration, error) {
	addr := netip.AddrPortFrom(dst.Addr, port).String()
	var ln net.Listener
	if err := netns.Do(dst.NS, func() (err error) {
		ln, err = (&net.ListenConfig{}).Listen(ctx, "tcp4", addr)
		return err
	}); err != nil {
		return 0, fmt.Errorf("listen in %s on %s: %w", dst.Name, addr, err)
	}
	defer ln.Close()
	type recv struct {
		at  time.Time
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
		_ = c.SetReadDeadline(time.Now().Add(30 * time.Second))
		if _, err := io.ReadFull(c, make([]byte, n)); err != nil {
			rc <- recv{err: fmt.Errorf("receive %d bytes: %w", n, err)}
			return
		}
		rc <- recv{at: time.Now()}
	}()
	var c net.Conn
	if err := netns.Do(src.NS, func() (err error) {
		c, err = (&net.Dialer{Timeout: 5 * time.Second}).DialContext(ctx, "tcp4", addr)
		return err
	}); err != nil {
		return 0, fmt.Errorf("connect %s -> %s: %w", src.Name, addr, err)
	}
	defer c.Close()
	t0 := time.Now()
	if _, err := c.Write(make([]byte, n)); err != nil {
		return 0, fmt.Errorf("send %d bytes %s -> %s: %w", n, src.Name, dst.Name, err)
	}
	r := <-rc
	if r.err != nil {
		return 0, r.err
	}
	return r.at.Sub(t0), nil
}

// A small transfer over a 1 Mbit/s path takes about its bytes over the
// rate: the shapers' buckets hold about a millisecond of line rate (two
// frames here), not a burst that lets the whole transfer through at veth
// speed (the old 64 KiB floor did: 32 KiB arrived in a few ms).
func TestSmallTransferAtLowRateIsShaped(t *testing.T) {
	skipUnlessRoot(t)
	lab := deploy(t, spec(t, uniqueLab("burst"), "{kind: eps, racks: 2, servers_per_rack: 1, rates: {server: 1Mbit}}"))
	hs := hosts(lab)
	const n = 32 << 10
	ideal := time.Duration(float64(n) * 8 / 1e6 * float64(time.Second)) // payload only: 262 ms
	took, err := sendBytes(context.Background(), hs[0], hs[1], n, 5301)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d bytes over 1 Mbit/s in %v (payload over the rate: %v)", n, took, ideal)
	// Less than one bucket per hop may pass early; frames add 4.6% of headers.
	if took < ideal*3/4 {
		t.Errorf("%d bytes took %v, under 3/4 of %v: the shapers let the transfer through unshaped", n, took, ideal)
	}
	// Far slower means frames were lost and waited for a retransmission timeout.
	if took > 3*ideal {
		t.Errorf("%d bytes took %v, over 3x %v: the shapers lost frames", n, took, ideal)
	}
}

// BenchmarkShapedRates reports, at rates from 1 Mbit/s to 1 Gbit/s, a TCP
// stream's goodput as a fraction of the rate (cubic, 2 s after 0.5 s of
// warm-up), the frames every tbf of the lab dropped meanwhile, and how long
// 32 KiB take after a second idle, against their bytes over the rate
// (small-ratio; below 1 by what the buckets pass at once).
func BenchmarkShapedRates(b *testing.B) {
	skipUnlessRoot(b)
	for _, rate := range []struct {
		name string
		bps  float64
	}{{"1Mbit", 1e6}, {"10Mbit", 10e6}, {"100Mbit", 100e6}, {"1Gbit", 1e9}} {
		b.Run(rate.name, func(b *testing.B) {
			lab := deploy(b, spec(b, uniqueLab(benchPrefix()), "{kind: eps, racks: 2, servers_per_rack: 1, rates: {server: "+rate.name+"}}"))
			hs := hosts(lab)
			var fracs, ratios []float64
			var drops uint64
			for i := 0; i < b.N; i++ {
				before, err := lab.QdiscStats()
				if err != nil {
					b.Fatal(err)
				}
				res, err := probe.Transfer(context.Background(), hs[0], hs[1], probe.TransferOptions{Duration: 2 * time.Second, Warmup: 500 * time.Millisecond, CongestionControl: "cubic"})
				if err != nil {
					b.Fatal(err)
				}
				after, err := lab.QdiscStats()
				if err != nil {
					b.Fatal(err)
				}
				drops += tbfDrops(after) - tbfDrops(before)
				fracs = append(fracs, res.GoodputBps/rate.bps)
				time.Sleep(time.Second) // the buckets refill (64 KiB at 1 Mbit/s: 0.52 s)
				const n = 32 << 10
				took, err := sendBytes(context.Background(), hs[0], hs[1], n, 5301)
				if err != nil {
					b.Fatal(err)
				}
				ratios = append(ratios, took.Seconds()/(n*8/rate.bps))
			}
			b.ReportMetric(medianOf(fracs), "goodput-frac")
			b.ReportMetric(float64(drops)/float64(b.N), "tbf-drops/op")
			b.ReportMetric(medianOf(ratios), "small-ratio")
		})
	}
}

func tbfDrops(st []fabric.QdiscStat) uint64 {
	var d uint64
	for _, s := range st {
		if s.Kind == "tbf" {
			d += uint64(s.Drops)
		}
	}
	return d
}

func medianOf(v []float64) float64 {
	s := append([]float64(nil), v...)
	sort.Float64s(s)
	return s[len(s)/2]
}
