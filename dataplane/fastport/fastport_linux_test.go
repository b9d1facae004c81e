package fastport

import (
	"fmt"
	"os"
	"testing"

	"github.com/cilium/ebpf"
	"github.com/vishvananda/netlink"
	vnetns "github.com/vishvananda/netns"
	"golang.org/x/sys/unix"

	"github.com/ocsemu/ocsemu/dataplane/netns"
)

// TestSyncErrorLeavesPortsSlow: a flag map with room for one port fails
// the second port's flag; the first, set fast but never checked again,
// must be slow afterwards.
func TestSyncErrorLeavesPortsSlow(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to create namespaces and BPF maps")
	}
	ns := fmt.Sprintf("rfx-fp%d", os.Getpid())
	if err := netns.Create(ns, nil); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = netns.Delete(ns) })
	fd, err := netns.Open(ns)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	h, err := netlink.NewHandleAt(vnetns.NsHandle(fd))
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	if err := h.LinkAdd(&netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: "p0"}, PeerName: "p1"}); err != nil {
		t.Fatal(err)
	}
	var links []netlink.Link
	for _, name := range []string{"p0", "p1"} {
		l, err := h.LinkByName(name)
		if err != nil {
			t.Fatal(err)
		}
		links = append(links, l)
	}
	m, err := ebpf.NewMap(&ebpf.MapSpec{Name: MapName, Type: ebpf.Hash, KeySize: 4, ValueSize: 4, MaxEntries: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if _, err := Sync(m, h, ns, links); err == nil {
		t.Fatal("sync of two ports into a one-port map succeeded")
	}
	for _, l := range links {
		if on, err := Fast(m, uint32(l.Attrs().Index)); err != nil || on {
			t.Errorf("%s fast %v (%v) after a failed sync, want slow", l.Attrs().Name, on, err)
		}
	}
}
