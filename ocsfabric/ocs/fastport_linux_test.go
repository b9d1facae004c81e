package ocs_test

import (
	"context"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/ocsemu/ocsemu/dataplane/capture"
	"github.com/ocsemu/ocsemu/dataplane/fabric"
	"github.com/ocsemu/ocsemu/dataplane/fabric/fabrictest"
	"github.com/ocsemu/ocsemu/dataplane/fastport"
	"github.com/ocsemu/ocsemu/dataplane/inc"
	"github.com/ocsemu/ocsemu/dataplane/loss"
	"github.com/ocsemu/ocsemu/dataplane/loss/inject"
	"github.com/ocsemu/ocsemu/dataplane/netns"
	"github.com/ocsemu/ocsemu/dataplane/probe"
	"github.com/ocsemu/ocsemu/dataplane/topo"
	"github.com/ocsemu/ocsemu/ocsfabric/ocs"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// port is one end of a lab link, for the fast-port test.
type port struct {
	node, iface, ns string
}

func (p port) String() string { return p.node + ":" + p.iface }

// pathPorts are the ports frames from rack 0's server to rack 1's leave
// by, in the order they meet them, on a lab with one circuit tor0:0 -
// tor1:0: tor0's uplink, the OCS port toward tor1, tor1's server port.
func pathPorts(t *testing.T, tp *topo.Topology) []port {
	t.Helper()
	find := func(node, iface string) port {
		n, ok := tp.Node(node)
		if !ok {
			t.Fatalf("no node %s", node)
		}
		return port{node, iface, n.NS}
	}
	var srv string
	for _, l := range tp.Links {
		if l.Kind == topo.LinkServer && l.A.Node == "r1s0" {
			srv = l.B.Iface
		}
	}
	return []port{find("tor0", "up0"), find("ocs0", "tor1u0"), find("tor1", srv)}
}

// portLink opens a port's link through a handle of its node.
func portLink(t *testing.T, lab *fabric.Lab, p port) (*netlink.Handle, netlink.Link) {
	t.Helper()
	h, err := lab.Handle(p.node)
	if err != nil {
		t.Fatal(err)
	}
	l, err := h.LinkByName(p.iface)
	if err != nil {
		t.Fatal(err)
	}
	return h, l
}

// fast reads a port's flag from the program on its ingress.
func fast(t *testing.T, lab *fabric.Lab, p port) bool {
	t.Helper()
	h, l := portLink(t, lab, p)
	m, err := fastport.Find(h, l)
	if err != nil || m == nil {
		t.Fatalf("%s: flag map %v, %v", p, m, err)
	}
	defer m.Close()
	on, err := fastport.Fast(m, uint32(l.Attrs().Index))
	if err != nil {
		t.Fatal(err)
	}
	return on
}

// txPackets is what a port's veth transmitted: a frame handed straight to
// the peer's ingress is not among them.
func txPackets(t *testing.T, lab *fabric.Lab, p port) uint64 {
	t.Helper()
	_, l := portLink(t, lab, p)
	return l.Attrs().Statistics.TxPackets
}

// udpBurst sends n datagrams from src to dst and returns how many arrived.
func udpBurst(t *testing.T, src, dst probe.Host, portNo, n int) int {
	t.Helper()
	laddr := net.UDPAddrFromAddrPort(netip.AddrPortFrom(dst.Addr, uint16(portNo)))
	var r, w *net.UDPConn
	if err := netns.Do(dst.NS, func() (err error) { r, err = net.ListenUDP("udp4", laddr); return err }); err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	_ = r.SetReadBuffer(4 << 20)
	if err := netns.Do(src.NS, func() (err error) { w, err = net.DialUDP("udp4", nil, laddr); return err }); err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	got := make(chan int, 1)
	go func() {
		k := 0
		buf := make([]byte, 2048)
		for {
			_ = r.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
			if _, err := r.Read(buf); err != nil {
				got <- k
				return
			}
			k++
		}
	}()
	msg := make([]byte, 100)
	for i := 0; i < n; i++ {
		if _, err := w.Write(msg); err != nil {
			t.Fatal(err)
		}
		if i%20 == 19 {
			time.Sleep(time.Millisecond) // the receiver keeps up
		}
	}
	return <-got
}

// TestFastPortsKeepEgressFeatures: on an unshaped lab, the ports of the
// path between two racks are fast and their veths transmit nothing of
// the traffic (the frames go straight to the peers' ingress); a loss rule
// or a capture on one of them turns it slow first, so the rule drops and
// the capture sees the frames, and removing them makes it fast again. On
// a lab with shaped uplinks, the uplinks and OCS ports are slow and their
// tbf carries the traffic, while the unshaped server port is fast.
func TestFastPortsKeepEgressFeatures(t *testing.T) {
	ctx := context.Background()
	lab, _, cl := startOCS(t, "pee", "{kind: ocs, racks: 2, servers_per_rack: 1, uplinks_per_tor: 1, rates: {server: unlimited, uplink: unlimited}}")
	if _, err := cl.Connect(ctx, ocs.ConnectRequest{A: upb("tor0:0"), B: upb("tor1:0")}); err != nil {
		t.Fatal(err)
	}
	hs := fabrictest.Hosts(lab)
	ports := pathPorts(t, lab.Topo)
	const n = 500
	// bypassed checks that every port of the path is fast and that a
	// burst crosses without any of their veths transmitting it.
	bypassed := func(step string, portNo int) {
		t.Helper()
		var before []uint64
		for _, p := range ports {
			if !fast(t, lab, p) {
				t.Errorf("%s: %s is slow, want fast", step, p)
			}
			before = append(before, txPackets(t, lab, p))
		}
		if got := udpBurst(t, hs[0], hs[1], portNo, n); got < n*9/10 {
			t.Errorf("%s: %d of %d datagrams arrived", step, got, n)
		}
		for i, p := range ports {
			if d := txPackets(t, lab, p) - before[i]; d > n/10 {
				t.Errorf("%s: %s transmitted %d packets of a %d-datagram burst: not bypassed", step, p, d, n)
			}
		}
	}
	bypassed("unshaped", 6100)

	// A loss rule on the OCS port's egress: slow first, and it drops.
	lp := loss.Port{Node: ports[1].node, Iface: ports[1].iface, NS: ports[1].ns}
	h, err := lab.Handle(lp.Node)
	if err != nil {
		t.Fatal(err)
	}
	if err := inject.Set(h, loss.Rule{Port: lp, Direction: loss.Egress, PPM: loss.MaxPPM}); err != nil {
		t.Fatal(err)
	}
	if fast(t, lab, ports[1]) {
		t.Errorf("%s fast with an egress loss rule", ports[1])
	}
	if got := udpBurst(t, hs[0], hs[1], 6101, n); got != 0 {
		t.Errorf("100%% egress loss on %s: %d of %d datagrams arrived", ports[1], got, n)
	}
	st, err := inject.Read(h, lp)
	if err != nil || len(st) != 1 || st[0].DroppedPackets < n {
		t.Errorf("loss rule on %s: %+v, %v; want >= %d dropped", ports[1], st, err, n)
	}
	if _, err := inject.Clear(h, lp, loss.Both); err != nil {
		t.Fatal(err)
	}
	bypassed("loss rule removed", 6102)

	// A capture of tor1's server port: slow while it runs, and it sees
	// every datagram that leaves the port.
	cp := capture.Port{Node: ports[2].node, Iface: ports[2].iface, NS: ports[2].ns}
	path := filepath.Join(t.TempDir(), "c.pcap")
	cctx, stop := context.WithCancel(ctx)
	c, err := capture.Start(cctx, cp, path, capture.Options{})
	if err != nil {
		stop()
		t.Fatal(err)
	}
	if fast(t, lab, ports[2]) {
		t.Errorf("%s fast while captured", ports[2])
	}
	got := udpBurst(t, hs[0], hs[1], 6103, n)
	stop()
	cs, err := c.Wait()
	if err != nil {
		t.Fatal(err)
	}
	if cs.Packets < uint64(got) || got < n*9/10 {
		t.Errorf("capture of %s: %d packets for %d datagrams delivered of %d sent", ports[2], cs.Packets, got, n)
	}
	_ = os.Remove(path)
	bypassed("capture ended", 6104)

	// A packet socket opened by hand (tcpdump's kind): Refresh keeps the
	// port slow while it exists.
	if err := fastport.OffNS(ports[2].ns, ports[2].iface); err != nil {
		t.Fatal(err)
	}
	var sock int
	if err := netns.Do(ports[2].ns, func() error {
		ifi, err := net.InterfaceByName(ports[2].iface)
		if err != nil {
			return err
		}
		if sock, err = unix.Socket(unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, 0); err != nil {
			return err
		}
		return unix.Bind(sock, &unix.SockaddrLinklayer{Protocol: 0x0300, Ifindex: ifi.Index}) // htons(ETH_P_ALL)
	}); err != nil {
		t.Fatal(err)
	}
	if err := fastport.RefreshNS(ports[2].ns, ports[2].iface); err != nil {
		t.Fatal(err)
	}
	if fast(t, lab, ports[2]) {
		t.Errorf("%s fast with a packet socket bound to it", ports[2])
	}
	unix.Close(sock)
	if err := fastport.RefreshNS(ports[2].ns, ports[2].iface); err != nil {
		t.Fatal(err)
	}
	bypassed("packet socket closed", 6106)

	// Shaped uplinks: their ports keep their tbf, the server port is fast.
	labS, _, clS := startOCS(t, "pes", "{kind: ocs, racks: 2, servers_per_rack: 1, uplinks_per_tor: 1, rates: {server: unlimited, uplink: 1Gbit}}")
	if _, err := clS.Connect(ctx, ocs.ConnectRequest{A: upb("tor0:0"), B: upb("tor1:0")}); err != nil {
		t.Fatal(err)
	}
	psS := pathPorts(t, labS.Topo)
	tbfBytes := func() map[string]uint64 {
		qs, err := labS.QdiscStats()
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]uint64{}
		for _, q := range qs {
			if q.Kind == "tbf" {
				out[q.Node+":"+q.Iface] = q.Bytes
			}
		}
		return out
	}
	b0 := tbfBytes()
	if got := udpBurst(t, fabrictest.Hosts(labS)[0], fabrictest.Hosts(labS)[1], 6105, n); got < n*9/10 {
		t.Errorf("shaped lab: %d of %d datagrams arrived", got, n)
	}
	b1 := tbfBytes()
	for i, p := range psS {
		want := i < 2
		if fast(t, labS, p) == want {
			t.Errorf("shaped uplinks: %s fast %v, want %v", p, !want, !want)
		}
		if want && b1[p.String()]-b0[p.String()] < n*100 {
			t.Errorf("shaped uplinks: %s's tbf carried %d bytes of %d datagrams of 100 bytes", p, b1[p.String()]-b0[p.String()], n)
		}
	}
	t.Logf("shaped lab: tbf bytes %v -> %v", b0, b1)
}

// TestBandLeavesPortSlow: inc.Band swaps a shaped port's tbf for an
// htb, leaving the port briefly without a root qdisc, where a fast-port
// Refresh may set it fast. Band turns it slow again once the htb is on.
// The flag is set by hand here, as such a Refresh would.
func TestBandLeavesPortSlow(t *testing.T) {
	lab, _, _ := startOCS(t, "pbd", "{kind: ocs, racks: 2, servers_per_rack: 1, uplinks_per_tor: 1, rates: {server: unlimited, uplink: 1Gbit}}")
	p := pathPorts(t, lab.Topo)[0] // tor0's shaped uplink
	h, l := portLink(t, lab, p)
	m, err := fastport.Find(h, l)
	if err != nil || m == nil {
		t.Fatalf("%s: flag map %v, %v", p, m, err)
	}
	defer m.Close()
	if err := m.Put(uint32(l.Attrs().Index), uint32(1)); err != nil {
		t.Fatal(err)
	}
	if n, err := inc.Band(h); err != nil || n == 0 {
		t.Fatalf("band: %d ports, %v", n, err)
	}
	if fast(t, lab, p) {
		t.Errorf("%s fast after its tbf was replaced by the INC htb", p)
	}
}
