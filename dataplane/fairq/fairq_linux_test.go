package fairq_test

import (
	"net"
	"net/netip"
	"sync"
	"testing"
	"time"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/ocsemu/ocsemu/dataplane/fabric"
	"github.com/ocsemu/ocsemu/dataplane/fabric/fabrictest"
	"github.com/ocsemu/ocsemu/dataplane/fairq"
	"github.com/ocsemu/ocsemu/dataplane/netns"
	"github.com/ocsemu/ocsemu/dataplane/probe"
	"github.com/ocsemu/ocsemu/dataplane/topo"
	"github.com/ocsemu/ocsemu/dataplane/units"
)

// deployQueue deploys a 2 x 2 packet-core lab with 4 Mbit/s server ports
// queued as mode says, and returns it with its hosts by name.
func deployQueue(t *testing.T, prefix, mode string) (map[string]probe.Host, func(node string) netlink.Link, *netlink.Handle) {
	t.Helper()
	hosts, port, h, _ := deployLab(t, prefix, func(sp *topo.Spec) {
		sp.ServerRate = units.Rate(4e6)
		sp.CoreRate = 2 * sp.ServerRate
		sp.ServerQueue = mode
	})
	return hosts, port, h
}

// deployLab deploys a 2 x 2 packet-core lab as set says, and returns its
// hosts by name, its server ports, r0s0's handle and the lab.
func deployLab(t *testing.T, prefix string, set func(*topo.Spec)) (map[string]probe.Host, func(node string) netlink.Link, *netlink.Handle, *fabric.Lab) {
	t.Helper()
	sp := fabrictest.Fabric(t, fabrictest.UniqueLab(prefix), "{kind: eps, racks: 2, servers_per_rack: 2}")
	set(&sp)
	lab := fabrictest.Deploy(t, sp)
	hosts := map[string]probe.Host{}
	for _, h := range fabrictest.Hosts(lab) {
		hosts[h.Name] = h
	}
	h, err := lab.Handle("r0s0")
	if err != nil {
		t.Fatal(err)
	}
	port := func(node string) netlink.Link {
		l, err := lab.Port(node, "eth0")
		if err != nil {
			t.Fatal(err)
		}
		return l
	}
	return hosts, port, h, lab
}

// sendUDP sends n datagrams of size bytes from src to dst:port as fast
// as the socket takes them (its send buffer forced large enough to queue
// them all in the port's qdisc).
func sendUDP(t *testing.T, src, dst probe.Host, port, n, size int) {
	t.Helper()
	var c *net.UDPConn
	raddr := net.UDPAddrFromAddrPort(netip.AddrPortFrom(dst.Addr, uint16(port)))
	// Unconnected: a port nobody listens on answers with ICMP, which a
	// connected socket would report on its next write.
	if err := netns.Do(src.NS, func() (err error) { c, err = net.ListenUDP("udp4", nil); return err }); err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if rc, err := c.SyscallConn(); err == nil {
		_ = rc.Control(func(fd uintptr) { _ = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_SNDBUFFORCE, 32<<20) })
	}
	msg := make([]byte, size)
	for i := range n {
		if _, err := c.WriteToUDP(msg, raddr); err != nil {
			t.Fatalf("send %d to %s: %v", i, dst.Name, err)
		}
	}
}

// lastArrival receives on dst:port until n datagrams came or 3 s passed,
// and returns when the last came and how many did.
func lastArrival(t *testing.T, dst probe.Host, port, n int, ready *sync.WaitGroup) (time.Time, int) {
	t.Helper()
	var c *net.UDPConn
	laddr := net.UDPAddrFromAddrPort(netip.AddrPortFrom(dst.Addr, uint16(port)))
	if err := netns.Do(dst.NS, func() (err error) { c, err = net.ListenUDP("udp4", laddr); return err }); err != nil {
		t.Error(err)
		ready.Done()
		return time.Time{}, 0
	}
	defer c.Close()
	if rc, err := c.SyscallConn(); err == nil {
		_ = rc.Control(func(fd uintptr) { _ = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, 32<<20) })
	}
	ready.Done()
	buf := make([]byte, 2048)
	var last time.Time
	got := 0
	deadline := time.Now().Add(3 * time.Second)
	for got < n {
		_ = c.SetReadDeadline(deadline)
		if _, err := c.Read(buf); err != nil {
			break
		}
		last = time.Now()
		got++
	}
	return last, got
}

// TestFairQueueClasses: every frame r0s0 sends lands in its destination's
// class (short datagrams too: only short TCP control segments are sparse), and a FIFO
// port has no htb.
func TestFairQueueClasses(t *testing.T) {
	fabrictest.SkipUnlessRoot(t)
	hosts, port, h := deployQueue(t, "fairq", topo.QueueFair)
	const n = 20
	for _, d := range []string{"r0s1", "r1s0", "r1s1"} {
		sendUDP(t, hosts["r0s0"], hosts[d], 9000, n, 400)
	}
	sendUDP(t, hosts["r0s0"], hosts["r1s1"], 9001, n, 10) // 52-byte datagrams: data, not sparse
	time.Sleep(200 * time.Millisecond)                    // 60 x 442 B at 500 kB/s: 53 ms
	classes := fairq.Classes(2, 2)
	want := map[uint32]uint64{
		fairq.Class(topo.ServerAddr(0, 1), false, 2, classes): n,
		fairq.Class(topo.ServerAddr(1, 0), false, 2, classes): n,
		fairq.Class(topo.ServerAddr(1, 1), false, 2, classes): 2 * n,
	}
	if len(want) != 3 {
		t.Fatalf("classes collide: %v", want)
	}
	cl, err := h.ClassList(port("r0s0"), 0)
	if err != nil {
		t.Fatal(err)
	}
	seen := 0
	for _, c := range cl {
		hc, ok := c.(*netlink.HtbClass)
		if !ok || c.Attrs().Handle>>16 != fairq.Major {
			continue
		}
		seen++
		minor := hc.Attrs().Handle & 0xffff
		var pk uint64
		if s := c.Attrs().Statistics; s != nil && s.Basic != nil {
			pk = uint64(s.Basic.Packets)
		}
		if pk != want[minor] {
			t.Errorf("class %d: %d packets, want %d", minor, pk, want[minor])
		}
	}
	if seen != classes+1 {
		t.Errorf("%d htb leaves, want %d data classes and the sparse one", seen, classes+1)
	}

	_, fifoPort, fh := deployQueue(t, "fifoq", topo.QueueFIFO)
	qs, err := fh.QdiscList(fifoPort("r0s0"))
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range qs {
		if q.Type() == "htb" {
			t.Errorf("a fifo port has an htb: %v", q)
		}
	}
}

// TestFairQueueShares: r0s0 queues 120 kB for r1s0, then 40 kB for r1s1,
// on its 500 kB/s port (both within the FIFO's 192 KiB queue). One FIFO
// delivers the second batch after the first (both end at about 0.33 s);
// per-destination round robin interleaves them, so the second batch is in
// at about 0.17 s, half-way through the first. The test compares the two
// batches' ends, not absolute times, so a loaded machine does not fail
// it; both modes run, so it shows it can tell them apart.
func TestFairQueueShares(t *testing.T) {
	fabrictest.SkipUnlessRoot(t)
	for _, mode := range []string{topo.QueueFair, topo.QueueFIFO} {
		t.Run(mode, func(t *testing.T) {
			hosts, _, _ := deployQueue(t, "fq"+mode, mode)
			raceBatches(t, mode, 120, hosts["r0s0"], hosts["r0s0"], hosts["r1s0"], hosts["r1s1"])
		})
	}
}

// TestSwitchQueueShares: on a lab whose servers are unshaped and whose
// ToRs reach the core at 500 kB/s, r0s0 sends 60 kB to r1s0 and then
// r0s1 20 kB to r1s1: both batches queue at tor0's core port, which a
// fair switch queue shares per pair of servers (the second batch ends well before
// the first) and a FIFO serves in order. Server ports stay FIFO, and
// the fair port's leaves queue LeafPackets.
func TestSwitchQueueShares(t *testing.T) {
	fabrictest.SkipUnlessRoot(t)
	for _, mode := range []string{topo.QueueFair, topo.QueueFIFO} {
		t.Run(mode, func(t *testing.T) {
			lab := "sq" + mode
			hosts, port, h, l := deployLab(t, lab, func(sp *topo.Spec) {
				sp.ServerRate, sp.CoreRate = 0, units.Rate(4e6)
				sp.SwitchQueue = mode
			})
			checkLeaves(t, l, "tor0", mode)
			if qs, err := h.QdiscList(port("r0s0")); err != nil {
				t.Fatal(err)
			} else {
				for _, q := range qs {
					if q.Type() == "htb" {
						t.Errorf("a server port has an htb under switch_queue %s", mode)
					}
				}
			}
			// 60 frames: a fair leaf at 4 Mbit/s holds 130 packets
			// (LeafPackets), frames here, and the FIFO 196 kB.
			raceBatches(t, mode, 60, hosts["r0s0"], hosts["r0s1"], hosts["r1s0"], hosts["r1s1"])
		})
	}
}

// checkLeaves checks node's shaped ports: with a fair switch queue each
// has the htb and LeafPackets of txqueuelen (its leaves' queue), with a
// FIFO neither.
func checkLeaves(t *testing.T, lab *fabric.Lab, node, mode string) {
	t.Helper()
	h, err := lab.Handle(node)
	if err != nil {
		t.Fatal(err)
	}
	links, err := h.LinkList()
	if err != nil {
		t.Fatal(err)
	}
	shaped := 0
	for _, ln := range links {
		qs, err := h.QdiscList(ln)
		if err != nil {
			t.Fatal(err)
		}
		var tbf *netlink.Tbf
		hasHtb := false
		for _, q := range qs {
			switch q := q.(type) {
			case *netlink.Tbf:
				tbf = q
			case *netlink.Htb:
				hasHtb = true
			}
		}
		if tbf == nil {
			continue
		}
		shaped++
		want, wantQ := false, 1000
		if mode == topo.QueueFair {
			want, wantQ = true, fairq.LeafPackets(tbf.Rate, 1500)
		}
		if hasHtb != want || ln.Attrs().TxQLen != wantQ {
			t.Errorf("%s:%s (%s): htb %v, txqueuelen %d; want htb %v, txqueuelen %d", node, ln.Attrs().Name, mode, hasHtb, ln.Attrs().TxQLen, want, wantQ)
		}
	}
	if shaped == 0 {
		t.Errorf("%s has no shaped port", node)
	}
}

// raceBatches sends big one-kB datagrams from srcBig to dstBig, then a
// third as many from srcSmall to dstSmall, and checks where the second
// batch ended against the first: well before it if mode is fair, not
// before it if FIFO.
func raceBatches(t *testing.T, mode string, big int, srcBig, srcSmall, dstBig, dstSmall probe.Host) {
	t.Helper()
	const size = 1000
	small := big / 3
	var ready, done sync.WaitGroup
	ready.Add(2)
	done.Add(2)
	var lastSmall, lastBig time.Time
	var gotSmall, gotBig int
	go func() {
		defer done.Done()
		lastSmall, gotSmall = lastArrival(t, dstSmall, 9100, small, &ready)
	}()
	go func() {
		defer done.Done()
		lastBig, gotBig = lastArrival(t, dstBig, 9101, big, &ready)
	}()
	ready.Wait()
	start := time.Now()
	sendUDP(t, srcBig, dstBig, 9101, big, size)
	sendUDP(t, srcSmall, dstSmall, 9100, small, size)
	done.Wait()
	if gotSmall != small || gotBig != big {
		t.Fatalf("%d of %d and %d of %d datagrams arrived", gotBig, big, gotSmall, small)
	}
	s, b := lastSmall.Sub(start).Seconds(), lastBig.Sub(start).Seconds()
	t.Logf("%s: the second batch was in after %.3f s, the first after %.3f s", mode, s, b)
	switch {
	case mode == topo.QueueFair && s > 0.75*b:
		t.Errorf("fair: the second batch ended at %.3f s, not well before the first (%.3f s)", s, b)
	case mode == topo.QueueFIFO && s < b:
		t.Errorf("fifo: the second batch ended at %.3f s, before the first (%.3f s)", s, b)
	}
}
