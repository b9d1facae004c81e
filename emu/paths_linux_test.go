package main

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ocsemu/ocsemu/dataplane/fabric/fabrictest"
	"github.com/ocsemu/ocsemu/dataplane/loss"
	"github.com/ocsemu/ocsemu/dataplane/loss/inject"
	"github.com/ocsemu/ocsemu/dataplane/monoclock"
	"github.com/ocsemu/ocsemu/dataplane/names"
	"github.com/ocsemu/ocsemu/dataplane/netns"
	"github.com/ocsemu/ocsemu/dataplane/probe"
	"github.com/ocsemu/ocsemu/dataplane/topo"
	"github.com/ocsemu/ocsemu/emu/flowmodel"
	"github.com/ocsemu/ocsemu/ocsfabric/circuit"
	"github.com/ocsemu/ocsemu/ocsfabric/ocs"
)

// TestKernelPathsEqualModel sends a UDP flow between every cross-rack
// pair of servers and ToRs of a lab whose racks have several circuits between them and
// a rack reached only over two hops, reads which OCS ports carried each
// flow, and compares them with the flow model's path for that flow
// (flowmodel.FlowPath): they must be the same uplinks, hop by hop.
func TestKernelPathsEqualModel(t *testing.T) {
	fabrictest.SkipUnlessRoot(t)
	name := fabrictest.UniqueLab("bpfpath")
	lab := fabrictest.Deploy(t, fabrictest.Fabric(t, name,
		"{kind: ocs, racks: 3, servers_per_rack: 3, uplinks_per_tor: 3, ocs: {switches: 1, reconfig_delay: 0ms}}"))
	ctl, err := ocs.New(context.Background(), lab, ocs.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer ctl.Close()
	// Two circuits between racks 0 and 1, and rack 2 only behind rack 1,
	// so 0 <-> 2 takes two hops and chooses at the first ToR.
	var cfg circuit.Config
	for _, p := range [][2]string{{"tor0:0", "tor1:0"}, {"tor0:1", "tor1:1"}, {"tor1:2", "tor2:0"}} {
		a, _ := circuit.ParseUplink(p[0])
		b, _ := circuit.ParseUplink(p[1])
		cfg.Circuits = append(cfg.Circuits, circuit.Circuit{A: a, B: b})
	}
	if _, err := ctl.Apply(context.Background(), cfg, 0, 0); err != nil {
		t.Fatal(err)
	}
	// Servers, and the ToRs themselves at their gateway address (traffic
	// a ToR originates, as an in-network aggregator does, leaves by the
	// kernel's route and is steered at the uplink's egress).
	hosts := fabrictest.Hosts(lab)
	for r := range 3 {
		n, _ := lab.Topo.Node(names.ToRName(r))
		hosts = append(hosts, probe.Host{Name: n.Name, NS: n.NS, Addr: topo.GatewayAddr(r)})
	}
	const pkts = 200
	checked, multi, fromToR := 0, 0, 0
	spread := map[string]int{}
	for _, src := range hosts {
		for _, dst := range hosts {
			if rackOf(src) == rackOf(dst) {
				continue
			}
			want, ok := flowmodel.FlowPath(3, cfg, 0, 0, nil, src.Name, dst.Name)
			if !ok {
				t.Fatalf("model: no path %s -> %s", src.Name, dst.Name)
			}
			before := portPackets(t, ctl)
			if err := udpFlow(src, dst, 9100+checked, pkts); err != nil {
				t.Fatal(err)
			}
			after := portPackets(t, ctl)
			var got []string
			for p, n := range after {
				if n-before[p] >= pkts {
					got = append(got, p)
				}
			}
			var wantS []string
			for _, u := range want {
				wantS = append(wantS, u.String())
				spread[u.String()]++
			}
			slices.Sort(got)
			slices.Sort(wantS)
			if !slices.Equal(got, wantS) {
				t.Errorf("%s -> %s: kernel sent it over %v, the model over %v", src.Name, dst.Name, got, wantS)
			}
			if len(want) > 1 {
				multi++
			}
			if strings.HasPrefix(src.Name, "tor") {
				fromToR++
			}
			checked++
		}
	}
	t.Logf("%d flows (%d over two hops, %d from ToRs) took the model's uplinks; flows per uplink: %v", checked, multi, fromToR, spread)
	for _, u := range []string{"tor0:0", "tor0:1", "tor1:0", "tor1:1"} {
		if spread[u] == 0 {
			t.Errorf("no flow took %s: the test does not exercise the choice among circuits (%v)", u, spread)
		}
	}
	cs, err := ctl.Counters()
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range cs {
		if c.UnpatchedPackets != 0 || c.DarkPackets != 0 {
			t.Errorf("port %s dropped %d unpatched, %d dark", c.Uplink, c.UnpatchedPackets, c.DarkPackets)
		}
	}
}

func rackOf(h probe.Host) int {
	if r, _, ok := names.ParseServer(h.Name); ok {
		return r
	}
	r, _ := names.ParseToR(h.Name)
	return r
}

// portPackets reads the forwarded packets of every OCS port.
func portPackets(t *testing.T, ctl *ocs.Controller) map[string]uint64 {
	t.Helper()
	cs, err := ctl.Counters()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]uint64{}
	for _, c := range cs {
		out[c.Uplink.String()] = c.FwdPackets
	}
	return out
}

// udpFlow sends n datagrams from src to dst and waits until they arrived
// (or 2 s passed).
func udpFlow(src, dst probe.Host, port, n int) error {
	laddr := net.UDPAddrFromAddrPort(netip.AddrPortFrom(dst.Addr, uint16(port)))
	var recv, send *net.UDPConn
	if err := netns.Do(dst.NS, func() (err error) { recv, err = net.ListenUDP("udp4", laddr); return err }); err != nil {
		return err
	}
	defer recv.Close()
	_ = recv.SetReadBuffer(8 << 20)
	from := &net.UDPAddr{IP: src.Addr.AsSlice()}
	if err := netns.Do(src.NS, func() (err error) { send, err = net.DialUDP("udp4", from, laddr); return err }); err != nil {
		return err
	}
	defer send.Close()
	got := make(chan int)
	go func() {
		buf := make([]byte, 2048)
		c := 0
		for c < n {
			_ = recv.SetReadDeadline(time.Now().Add(2 * time.Second))
			if _, err := recv.Read(buf); err != nil {
				break
			}
			c++
		}
		got <- c
	}()
	msg := []byte(strings.Repeat("x", 1000))
	for i := range n {
		if _, err := send.Write(msg); err != nil {
			return fmt.Errorf("%s -> %s: send %d: %w", src.Name, dst.Name, i, err)
		}
		if i%32 == 31 {
			time.Sleep(200 * time.Microsecond)
		}
	}
	if c := <-got; c != n {
		return fmt.Errorf("%s -> %s: %d of %d datagrams arrived", src.Name, dst.Name, c, n)
	}
	return nil
}

// TestKernelMakeBeforeBreak: when a circuit joins a lit one to the same
// rack, a flow whose hash picks the new circuit stays on the lit one for
// the dark period (no frame dropped dark) and moves over after it, where
// the model (flowmodel.FlowPath at the same instants) puts it.
func TestKernelMakeBeforeBreak(t *testing.T) {
	fabrictest.SkipUnlessRoot(t)
	name := fabrictest.UniqueLab("bpfmbb")
	lab := fabrictest.Deploy(t, fabrictest.Fabric(t, name,
		"{kind: ocs, racks: 2, servers_per_rack: 1, uplinks_per_tor: 2, ocs: {switches: 1, reconfig_delay: 0ms}}"))
	ctl, err := ocs.New(context.Background(), lab, ocs.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer ctl.Close()
	up := func(s string) circuit.Uplink { u, _ := circuit.ParseUplink(s); return u }
	one := circuit.Config{Circuits: []circuit.Circuit{{A: up("tor0:0"), B: up("tor1:0")}}}
	two := circuit.Config{Circuits: []circuit.Circuit{{A: up("tor0:0"), B: up("tor1:0")}, {A: up("tor0:1"), B: up("tor1:1")}}}
	if _, err := ctl.Apply(context.Background(), one, 0, 0); err != nil {
		t.Fatal(err)
	}
	hs := fabrictest.Hosts(lab)
	src, dst := hs[0], hs[1]
	if after, _ := flowmodel.FlowPath(2, two, 0, 0, nil, src.Name, dst.Name); after[0] != up("tor0:1") {
		t.Fatalf("the test needs a flow that hashes to uplink 1, %s -> %s takes %v", src.Name, dst.Name, after)
	}
	ev, err := ctl.Apply(context.Background(), two, 500*time.Millisecond, 0)
	if err != nil {
		t.Fatal(err)
	}
	darkUntil := func(u circuit.Uplink) int64 {
		if slices.Contains(ev.Dark, u) {
			return ev.DarkUntil
		}
		return 0
	}
	send := func(when string, port int) {
		t.Helper()
		now := monoclock.Now()
		want, _ := flowmodel.FlowPath(2, two, ev.Effective, now, darkUntil, src.Name, dst.Name)
		before := portPackets(t, ctl)
		if err := udpFlow(src, dst, port, 100); err != nil {
			t.Fatalf("%s: %v", when, err)
		}
		if end := monoclock.Now(); (now < ev.DarkUntil) != (end < ev.DarkUntil) {
			t.Skipf("%s: the flow straddled the end of the dark period; the machine is too slow for this test", when)
		}
		after := portPackets(t, ctl)
		if got := after[want[0].String()] - before[want[0].String()]; got < 100 {
			t.Errorf("%s: the model sends %s -> %s over %v, but only %d of 100 frames crossed it (%v -> %v)", when, src.Name, dst.Name, want, got, before, after)
		}
		t.Logf("%s: %s -> %s over %v, as the model", when, src.Name, dst.Name, want)
	}
	send("dark period", 9400)
	_ = monoclock.SleepUntil(context.Background(), ev.DarkUntil)
	send("after it", 9401)
	cs, _ := ctl.Counters()
	for _, c := range cs {
		if c.DarkPackets != 0 || c.UnpatchedPackets != 0 {
			t.Errorf("port %s dropped %d dark, %d unpatched frames", c.Uplink, c.DarkPackets, c.UnpatchedPackets)
		}
	}
}

// TestLossBeforeFastPaths: a loss rule on an OCS port or a ToR's server
// port runs before the OCS and ToR programs there (dataplane/tcprio), so
// what it drops never reaches a circuit.
func TestLossBeforeFastPaths(t *testing.T) {
	fabrictest.SkipUnlessRoot(t)
	name := fabrictest.UniqueLab("bpflfp")
	lab := fabrictest.Deploy(t, fabrictest.Fabric(t, name, "{kind: ocs, racks: 2, servers_per_rack: 1, ocs: {reconfig_delay: 0ms}}"))
	ctl, err := ocs.New(context.Background(), lab, ocs.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer ctl.Close()
	a, _ := circuit.ParseUplink("tor0:0")
	b, _ := circuit.ParseUplink("tor1:0")
	if _, err := ctl.Apply(context.Background(), circuit.Config{Circuits: []circuit.Circuit{{A: a, B: b}}}, 0, 0); err != nil {
		t.Fatal(err)
	}
	hs := fabrictest.Hosts(lab)
	if err := udpFlow(hs[0], hs[1], 9500, 50); err != nil {
		t.Fatalf("before loss: %v", err)
	}
	for _, port := range []string{"ocs0:tor0u0", "tor0:s0"} {
		rules, err := loss.Rules(lab.Topo, port, "ingress", 100)
		if err != nil {
			t.Fatal(err)
		}
		if err := inject.Apply(lab, rules); err != nil {
			t.Fatal(err)
		}
		before, _ := ctl.PathCounters()
		fwd := portPackets(t, ctl)
		if err := udpFlow(hs[0], hs[1], 9501, 50); err == nil || !strings.Contains(err.Error(), "0 of 50") {
			t.Errorf("100%% loss on %s: %v, want no datagram through", port, err)
		}
		after, _ := ctl.PathCounters()
		if got := portPackets(t, ctl)["tor0:0"] - fwd["tor0:0"]; got != 0 {
			t.Errorf("loss on %s: the OCS still forwarded %d frames of tor0:0", port, got)
		}
		if port == "tor0:s0" && after[0].RedirectedPackets != before[0].RedirectedPackets {
			t.Errorf("loss on tor0:s0: the ToR program still saw %d frames", after[0].RedirectedPackets-before[0].RedirectedPackets)
		}
		if _, err := inject.ClearAll(lab); err != nil {
			t.Fatal(err)
		}
	}
	if err := udpFlow(hs[0], hs[1], 9502, 50); err != nil {
		t.Errorf("after clearing loss: %v", err)
	}
}
