package inject

import (
	"context"
	"errors"
	"math"
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/ocsemu/ocsemu/dataplane/fabric"
	"github.com/ocsemu/ocsemu/dataplane/fabric/fabrictest"
	"github.com/ocsemu/ocsemu/dataplane/loss"
	"github.com/ocsemu/ocsemu/dataplane/netns"
	"github.com/ocsemu/ocsemu/dataplane/probe"
	"github.com/ocsemu/ocsemu/dataplane/tcprio"
)

// burst sends n small UDP datagrams from src to dst, a few at a time so
// that no socket buffer overflows, and returns how many arrived.
func burst(t *testing.T, src, dst probe.Host, port, n int) int {
	t.Helper()
	laddr := net.UDPAddrFromAddrPort(netip.AddrPortFrom(dst.Addr, uint16(port)))
	var recv *net.UDPConn
	if err := netns.Do(dst.NS, func() (err error) { recv, err = net.ListenUDP("udp4", laddr); return err }); err != nil {
		t.Fatal(err)
	}
	defer recv.Close()
	// SO_RCVBUF is capped at twice net.core.rmem_max (416 KiB on a stock
	// machine, a few hundred datagrams): a receiver descheduled for a few
	// ms would then lose datagrams the rule never saw. As root, force it.
	if rc, err := recv.SyscallConn(); err == nil {
		_ = rc.Control(func(fd uintptr) { _ = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, 8<<20) })
	}
	var send *net.UDPConn
	if err := netns.Do(src.NS, func() (err error) { send, err = net.DialUDP("udp4", nil, laddr); return err }); err != nil {
		t.Fatal(err)
	}
	defer send.Close()
	got := make(chan int)
	go func() {
		buf := make([]byte, 128)
		c := 0
		for {
			_ = recv.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
			if _, err := recv.Read(buf); err != nil {
				got <- c
				return
			}
			c++
		}
	}()
	msg := make([]byte, 64)
	for i := range n {
		if _, err := send.Write(msg); err != nil {
			t.Fatalf("send %d: %v", i, err)
		}
		if i%64 == 63 {
			time.Sleep(100 * time.Microsecond)
		}
	}
	return <-got
}

// TestLossRule: 5% on a ToR's server port drops about 5% of a UDP burst
// (binomial bound), 0% drops none, Clear removes the rule, and destroying
// the lab leaves no program behind.
func TestLossRule(t *testing.T) {
	fabrictest.SkipUnlessRoot(t)
	name := fabrictest.UniqueLab("bpfloss")
	lab := fabrictest.Deploy(t, fabrictest.Fabric(t, name, "{kind: eps, racks: 1, servers_per_rack: 2}"))
	hs := fabrictest.Hosts(lab)
	rules, err := loss.Rules(lab.Topo, "tor0:s1", "egress", 5)
	if err != nil {
		t.Fatal(err)
	}
	if err := Apply(lab, rules); err != nil {
		t.Fatal(err)
	}
	const n = 20000
	rx := burst(t, hs[0], hs[1], 9001, n)
	st, err := List(lab)
	if err != nil {
		t.Fatal(err)
	}
	if len(st) != 1 || st[0].Port.String() != "tor0:s1" || st[0].Direction != loss.Egress || st[0].PPM != 50_000 {
		t.Fatalf("rules = %+v, want tor0:s1 egress 50000 ppm", st)
	}
	s := st[0]
	lost := n - rx
	// Binomial(n, 5%): sd = sqrt(n p (1-p)) = 31 packets; allow 6 sd.
	sd := math.Sqrt(n * 0.05 * 0.95)
	t.Logf("5%%: sent %d, received %d (lost %.2f%%); rule dropped %d, passed %d", n, rx, 100*float64(lost)/n, s.DroppedPackets, s.PassedPackets)
	if math.Abs(float64(s.DroppedPackets)-0.05*n) > 6*sd {
		t.Errorf("rule dropped %d of %d, want %0.f ± %.0f", s.DroppedPackets, n, 0.05*n, 6*sd)
	}
	// Neighbours are permanent, so no ARP crosses the port: every datagram
	// the receiver missed is one the rule dropped.
	if uint64(lost) != s.DroppedPackets {
		t.Errorf("receiver lost %d, rule dropped %d: loss other than the rule's", lost, s.DroppedPackets)
	}
	if s.PassedPackets+s.DroppedPackets < n || s.DroppedBytes < s.DroppedPackets*64 {
		t.Errorf("counters %+v do not cover the %d datagrams", s, n)
	}

	// 0%: nothing lost; counters kept across the update.
	rules[0].PPM = 0
	if err := Apply(lab, rules); err != nil {
		t.Fatal(err)
	}
	if rx := burst(t, hs[0], hs[1], 9002, 5000); rx != 5000 {
		t.Errorf("0%%: received %d of 5000", rx)
	}
	st, _ = List(lab)
	if len(st) != 1 || st[0].DroppedPackets != s.DroppedPackets || st[0].PassedPackets < s.PassedPackets+5000 {
		t.Errorf("after 0%%: %+v, want dropped still %d and passed +5000", st, s.DroppedPackets)
	}

	// Both directions at 100% on r0s0's port: nothing gets through.
	all, _ := loss.Rules(lab.Topo, "r0s0:eth0", "both", 100)
	if err := Apply(lab, all); err != nil {
		t.Fatal(err)
	}
	if rx := burst(t, hs[0], hs[1], 9003, 100); rx != 0 {
		t.Errorf("100%%: received %d of 100", rx)
	}
	st, _ = List(lab)
	if len(st) != 3 {
		t.Fatalf("rules = %+v, want 3", st)
	}

	// The rule runs before a fast-path filter on the same hook.
	h, _ := lab.Handle("tor0")
	link, _ := h.LinkByName("s1")
	filters, _ := h.FilterList(link, netlink.HANDLE_MIN_EGRESS)
	if len(filters) != 1 || filters[0].Attrs().Priority != tcprio.Loss || tcprio.Loss >= tcprio.FastPath {
		t.Errorf("egress filters of tor0:s1 = %+v, want one at priority %d (< fast path %d)", filters, tcprio.Loss, tcprio.FastPath)
	}

	// Clear removes rules; a port without one is fine.
	if n, err := Clear(h, rules[0].Port, loss.Both); err != nil || n != 1 {
		t.Fatalf("clear of tor0:s1 removed %d rules (%v), want its one", n, err)
	}
	if n, err := Clear(h, rules[0].Port, loss.Both); err != nil || n != 0 {
		t.Errorf("second clear: removed %d (%v), want 0", n, err)
	}
	if st, _ = List(lab); len(st) != 2 {
		t.Errorf("after clear of tor0:s1: %+v, want the 2 rules of r0s0:eth0", st)
	}

	// Destroy leaves no program behind.
	ids := progIDs(t, lab)
	if len(ids) != 2 {
		t.Fatalf("loss programs %v, want 2", ids)
	}
	lab.Close()
	if err := fabric.Destroy(context.Background(), name, nil); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(3 * time.Second)
	for _, id := range ids {
		for {
			p, err := ebpf.NewProgramFromID(id)
			if errors.Is(err, unix.ENOENT) {
				break
			}
			if err == nil {
				p.Close()
			}
			if time.Now().After(deadline) {
				t.Errorf("program %d still loaded after destroy (%v)", id, err)
				break
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
}

func progIDs(t *testing.T, lab *fabric.Lab) []ebpf.ProgramID {
	t.Helper()
	h, err := lab.Handle("r0s0")
	if err != nil {
		t.Fatal(err)
	}
	link, err := h.LinkByName("eth0")
	if err != nil {
		t.Fatal(err)
	}
	var ids []ebpf.ProgramID
	for _, par := range []uint32{netlink.HANDLE_MIN_INGRESS, netlink.HANDLE_MIN_EGRESS} {
		fs, err := h.FilterList(link, par)
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range fs {
			if bf, ok := f.(*netlink.BpfFilter); ok {
				ids = append(ids, ebpf.ProgramID(bf.Id))
			}
		}
	}
	return ids
}

func TestSetRefusesBadRule(t *testing.T) {
	for _, r := range []loss.Rule{
		{Port: loss.Port{Node: "x", Iface: "eth0"}, Direction: loss.Both, PPM: 1},
		{Port: loss.Port{Node: "x", Iface: "eth0"}, Direction: loss.Ingress, PPM: loss.MaxPPM + 1},
	} {
		if err := Set(nil, r); err == nil {
			t.Errorf("Set(%v) accepted", r)
		} else {
			t.Log(err)
		}
	}
}
