package inc_test

import (
	"net"
	"net/netip"
	"testing"

	"github.com/vishvananda/netlink"

	"github.com/ocsemu/ocsemu/dataplane/fabric/fabrictest"
	"github.com/ocsemu/ocsemu/dataplane/inc"
	"github.com/ocsemu/ocsemu/dataplane/names"
	"github.com/ocsemu/ocsemu/dataplane/netns"
	"github.com/ocsemu/ocsemu/dataplane/topo"
)

// TestBand puts the INC band on a server's shaped port and checks that
// INC packets (to the INC port and from it) take the INC class and other
// UDP the default class, and that a second Band changes nothing.
func TestBand(t *testing.T) {
	fabrictest.SkipUnlessRoot(t)
	lab := fabrictest.Deploy(t, fabrictest.Fabric(t, fabrictest.UniqueLab("hiband"), "{kind: eps, racks: 1, servers_per_rack: 2, rates: {server: 1Gbit}}"))
	h, err := lab.Handle("r0s0")
	if err != nil {
		t.Fatal(err)
	}
	if n, err := inc.Band(h); err != nil || n != 1 {
		t.Fatalf("Band: %d ports, %v; want the server's one port", n, err)
	}
	if n, err := inc.Band(h); err != nil || n != 0 {
		t.Fatalf("Band again: %d ports, %v; want none", n, err)
	}
	dst := topo.ServerAddr(0, 1)
	send := func(from, to int, count int) {
		t.Helper()
		if err := netns.Do(names.NSName(lab.Topo.Lab, "r0s0"), func() error {
			c, err := net.ListenUDP("udp4", &net.UDPAddr{Port: from})
			if err != nil {
				return err
			}
			defer c.Close()
			for range count {
				if _, err := c.WriteToUDPAddrPort(make([]byte, 1000), netip.AddrPortFrom(dst, uint16(to))); err != nil {
					return err
				}
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	send(0, inc.Port, 30)     // a worker to an aggregator
	send(inc.Port, 40000, 20) // an aggregator to a worker
	send(0, 40000, 10)        // not INC
	link, err := h.LinkByName("eth0")
	if err != nil {
		t.Fatal(err)
	}
	classes, err := h.ClassList(link, netlink.MakeHandle(1, 0))
	if err != nil {
		t.Fatal(err)
	}
	got := map[uint32]uint32{}
	for _, c := range classes {
		if s := c.Attrs().Statistics; s != nil && s.Basic != nil {
			got[c.Attrs().Handle] = s.Basic.Packets
		}
	}
	if got[netlink.MakeHandle(1, 0x10)] != 50 || got[netlink.MakeHandle(1, 0x20)] < 10 {
		t.Errorf("packets per class %v: want 50 in the INC class 1:10 and the other 10 (and any ARP) in 1:20", got)
	}
}
