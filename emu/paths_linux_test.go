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
	"github.com/ocsemu/ocsemu/dataplane/netns"
	"github.com/ocsemu/ocsemu/dataplane/probe"
	"github.com/ocsemu/ocsemu/emu/flowmodel"
	"github.com/ocsemu/ocsemu/ocsfabric/circuit"
	"github.com/ocsemu/ocsemu/ocsfabric/ocs"
)

// TestKernelPathsEqualModel sends a UDP flow between every cross-rack
// server pair of a lab whose racks have several circuits between them and
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
	hosts := fabrictest.Hosts(lab)
	const pkts = 200
	checked, multi := 0, 0
	spread := map[string]int{}
	for _, src := range hosts {
		for _, dst := range hosts {
			if rackOf(src) == rackOf(dst) {
				continue
			}
			want, ok := flowmodel.FlowPath(3, cfg, src.Name, dst.Name)
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
			checked++
		}
	}
	t.Logf("%d flows (%d over two hops) took the model's uplinks; flows per uplink: %v", checked, multi, spread)
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
	var r, s int
	fmt.Sscanf(h.Name, "r%ds%d", &r, &s)
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
	if err := netns.Do(src.NS, func() (err error) { send, err = net.DialUDP("udp4", nil, laddr); return err }); err != nil {
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
