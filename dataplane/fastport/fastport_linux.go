// Package fastport keeps, per port of a lab's OCS switches and ToRs, the
// flag that lets the OCS and ToR programs hand a frame leaving by that
// port straight to the ingress of the port's veth peer (bpf_redirect_peer)
// instead of transmitting it on the port (bpf_redirect to its egress).
// The peer's ingress gets the frame a veth hop sooner, but the port's
// egress never sees it: its root qdisc (a tbf shaper), its clsact egress
// filters (loss rules) and the packet taps that see what it sends
// (captures) would be skipped. So a port is fast only while it has none of
// these, and slow, the flag absent, is the default: a port nobody vouched
// for keeps every egress feature.
//
// Each OCS and ToR program has its own flag map (MapName), a hash keyed by
// the ifindex a frame would leave by. Whoever adds an egress feature to a
// port calls Off before adding it and again after; whoever removes one
// calls Refresh, which sets the flag from the port's state in the kernel
// and checks it again once set. Off then, whatever interleaves, leaves the
// flag off while the feature exists. A process that dies leaves the flag
// off (slow): safe, and the next Refresh of the port or OCS start makes it
// fast again.
package fastport

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/ocsemu/ocsemu/dataplane/netns"
	"github.com/ocsemu/ocsemu/dataplane/nlsafe"
	"github.com/ocsemu/ocsemu/dataplane/tcprio"
)

// MapName is the flag map's name in bpftool, the same in the OCS and ToR
// programs: Off and Refresh find it from the program on a port's ingress.
const MapName = "emu_fast_ports"

// maxEntries bounds the ports of one program's namespace.
const maxEntries = 1 << 16

// NewMap creates an empty flag map: every port slow.
func NewMap() (*ebpf.Map, error) {
	m, err := ebpf.NewMap(&ebpf.MapSpec{Name: MapName, Type: ebpf.Hash, KeySize: 4, ValueSize: 4,
		MaxEntries: maxEntries, Flags: unix.BPF_F_NO_PREALLOC})
	if err != nil {
		return nil, fmt.Errorf("create fast-port map: %w", err)
	}
	return m, nil
}

// Redirect is the tail of a tc ingress program: redirect the frame to
// ifindex reg, to its peer's ingress when the flag map fast (a map fd)
// holds that ifindex, else to its egress; return the helper's verdict.
// It uses the stack word at fp+slot; label prefixes its jump label.
func Redirect(fast int, reg asm.Register, slot int16, label string) asm.Instructions {
	plain := label + "_plain"
	return asm.Instructions{
		asm.StoreMem(asm.RFP, slot, reg, asm.Word),
		asm.Mov.Reg(asm.R2, asm.RFP),
		asm.Add.Imm(asm.R2, int32(slot)),
		asm.LoadMapPtr(asm.R1, fast),
		asm.FnMapLookupElem.Call(),
		asm.LoadMem(asm.R1, asm.RFP, slot, asm.Word),
		asm.Mov.Imm(asm.R2, 0),
		asm.JEq.Imm(asm.R0, 0, plain),
		asm.FnRedirectPeer.Call(),
		asm.Return(),
		asm.FnRedirect.Call().WithSymbol(plain),
		asm.Return(),
	}
}

// Check tells, for each of links (ports of the namespace ns that h
// works in), why frames must leave it through its egress: "" means
// nothing there needs them, the port may be fast. What counts: a root
// qdisc other than noqueue (a shaper), a clsact egress filter other
// than emu's forwarding programs (tcprio.FastPath: a loss rule, anyone's
// filter), and a packet socket bound to the port or to every interface
// of the namespace (a capture, tcpdump).
func Check(h *netlink.Handle, ns string, links []netlink.Link) ([]string, error) {
	qs, err := nlsafe.Retry1(h.QdiscList, nil)
	if err != nil {
		return nil, fmt.Errorf("list qdiscs of %s: %w", ns, err)
	}
	root := map[int]string{}
	clsact := map[int]bool{}
	for _, q := range qs {
		a := q.Attrs()
		switch {
		case a.Parent == netlink.HANDLE_ROOT && q.Type() != "noqueue":
			root[a.LinkIndex] = q.Type()
		case q.Type() == "clsact":
			clsact[a.LinkIndex] = true
		}
	}
	taps, err := packetSockets(ns)
	if err != nil {
		return nil, err
	}
	out := make([]string, len(links))
	for i, l := range links {
		idx := l.Attrs().Index
		switch {
		case root[idx] != "":
			out[i] = "root qdisc " + root[idx]
		case taps[0]:
			out[i] = "a packet socket on every interface"
		case taps[idx]:
			out[i] = "a packet socket"
		case clsact[idx]:
			fs, err := nlsafe.Retry2(h.FilterList, l, netlink.HANDLE_MIN_EGRESS)
			if err != nil {
				return nil, fmt.Errorf("list egress filters of %s: %w", l.Attrs().Name, err)
			}
			for _, f := range fs {
				if f.Attrs().Priority != tcprio.FastPath {
					out[i] = fmt.Sprintf("egress filter (%s, priority %d)", f.Type(), f.Attrs().Priority)
					break
				}
			}
		}
	}
	return out, nil
}

// packetSockets returns the interfaces the namespace's packet sockets are
// bound to (0: every interface), from /proc/net/packet read inside it.
func packetSockets(ns string) (map[int]bool, error) {
	out := map[int]bool{}
	err := netns.Do(ns, func() error {
		f, err := os.Open("/proc/thread-self/net/packet")
		if err != nil {
			return err
		}
		defer f.Close()
		sc := bufio.NewScanner(f)
		col := -1
		for sc.Scan() {
			fs := strings.Fields(sc.Text())
			if col < 0 {
				col = indexOf(fs, "Iface")
				if col < 0 {
					return fmt.Errorf("no Iface column in %q", sc.Text())
				}
				continue
			}
			if col >= len(fs) {
				continue
			}
			i, err := strconv.Atoi(fs[col])
			if err != nil {
				return fmt.Errorf("packet socket interface %q: %w", fs[col], err)
			}
			out[i] = true
		}
		return sc.Err()
	})
	if err != nil {
		return nil, fmt.Errorf("packet sockets of %s: %w", ns, err)
	}
	return out, nil
}

func indexOf(s []string, v string) int {
	for i, x := range s {
		if x == v {
			return i
		}
	}
	return -1
}

// Sync sets the flags of links in m from Check: on where nothing needs
// the port's egress, off elsewhere. Ports it set on are checked once more
// afterwards and turned off if something appeared meanwhile. It returns
// why each slow port is slow ("" for the fast ones). On error it turns
// every port of links off: one set on but never checked again must not
// stay fast.
func Sync(m *ebpf.Map, h *netlink.Handle, ns string, links []netlink.Link) ([]string, error) {
	why, err := Check(h, ns, links)
	if err != nil {
		return nil, err
	}
	var on []netlink.Link
	for i, l := range links {
		if why[i] == "" {
			on = append(on, l)
			err = put(m, l)
		} else {
			err = del(m, l)
		}
		if err != nil {
			return nil, errors.Join(err, delAll(m, links))
		}
	}
	again, err := Check(h, ns, on)
	if err != nil {
		return nil, errors.Join(err, delAll(m, on))
	}
	j := 0
	for i, l := range links {
		if why[i] != "" {
			continue
		}
		if why[i] = again[j]; why[i] != "" {
			if err := del(m, l); err != nil {
				return nil, errors.Join(err, delAll(m, links))
			}
		}
		j++
	}
	return why, nil
}

func put(m *ebpf.Map, l netlink.Link) error {
	if err := m.Put(uint32(l.Attrs().Index), uint32(1)); err != nil {
		return fmt.Errorf("set %s fast: %w", l.Attrs().Name, err)
	}
	return nil
}

func del(m *ebpf.Map, l netlink.Link) error {
	if err := m.Delete(uint32(l.Attrs().Index)); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
		return fmt.Errorf("set %s slow: %w", l.Attrs().Name, err)
	}
	return nil
}

func delAll(m *ebpf.Map, links []netlink.Link) error {
	var errs []error
	for _, l := range links {
		errs = append(errs, del(m, l))
	}
	return errors.Join(errs...)
}

// Fast reports whether m lets frames leave by ifindex the fast way.
func Fast(m *ebpf.Map, ifindex uint32) (bool, error) {
	var v uint32
	err := m.Lookup(ifindex, &v)
	if errors.Is(err, ebpf.ErrKeyNotExist) {
		return false, nil
	}
	return err == nil, err
}

// Find returns the flag map of the emu program on link's ingress (the
// OCS or ToR program of the port's node), or nil when there is none: no
// program, or one loaded by an emu without flags; every port of that
// program is then slow.
func Find(h *netlink.Handle, link netlink.Link) (*ebpf.Map, error) {
	m, err := tcprio.FindMap(h, link, netlink.HANDLE_MIN_INGRESS, tcprio.FastPath, "", MapName)
	if errors.Is(err, tcprio.ErrNoMap) {
		return nil, nil
	}
	return m, err
}

// Off makes frames leaving by link (a port of the namespace h works in)
// take its egress: call it before adding an egress feature to the port,
// and again after. A port without an emu program is slow already.
func Off(h *netlink.Handle, link netlink.Link) error {
	m, err := Find(h, link)
	if err != nil || m == nil {
		return err
	}
	defer m.Close()
	return del(m, link)
}

// Refresh sets the flag of link (a port of namespace ns, h a handle
// there) from what its egress now holds (Sync): call it after removing an
// egress feature.
func Refresh(h *netlink.Handle, ns string, link netlink.Link) error {
	m, err := Find(h, link)
	if err != nil || m == nil {
		return err
	}
	defer m.Close()
	_, err = Sync(m, h, ns, []netlink.Link{link})
	return err
}

// OffNS is Off for the port iface of namespace ns.
func OffNS(ns, iface string) error {
	return withPort(ns, iface, func(h *netlink.Handle, l netlink.Link) error { return Off(h, l) })
}

// RefreshNS is Refresh for the port iface of namespace ns.
func RefreshNS(ns, iface string) error {
	return withPort(ns, iface, func(h *netlink.Handle, l netlink.Link) error { return Refresh(h, ns, l) })
}

// OffAll turns every port of namespace ns slow (Off on each link), for a
// packet capture started by hand there; it returns how many ports have a
// flag map (an OCS or ToR namespace). They stay slow until the OCS
// restarts or a loss rule or capture on the port is removed (Refresh).
func OffAll(ns string) (int, error) {
	h, err := netns.Handle(ns)
	if err != nil {
		return 0, err
	}
	defer h.Close()
	links, err := nlsafe.Retry(h.LinkList)
	if err != nil {
		return 0, fmt.Errorf("list links of %s: %w", ns, err)
	}
	n := 0
	var errs []error
	for _, l := range links {
		m, err := Find(h, l)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if m == nil {
			continue
		}
		n++
		errs = append(errs, del(m, l))
		m.Close()
	}
	return n, errors.Join(errs...)
}

// withPort runs fn with a handle in ns and the port.
func withPort(ns, iface string, fn func(*netlink.Handle, netlink.Link) error) error {
	h, err := netns.Handle(ns)
	if err != nil {
		return err
	}
	defer h.Close()
	l, err := nlsafe.Retry1(h.LinkByName, iface)
	if err != nil {
		return fmt.Errorf("%s in %s: %w", iface, ns, err)
	}
	if err := fn(h, l); err != nil {
		return fmt.Errorf("%s in %s: %w", iface, ns, err)
	}
	return nil
}
