package tcprio

import (
	"fmt"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// Attach puts a clsact qdisc on link (keeping the filters of one already
// there) and the program fd on its hook parent (netlink.HANDLE_MIN_INGRESS
// or HANDLE_MIN_EGRESS) in direct-action mode at priority prio, replacing
// an earlier filter of the same priority: how every emu BPF program is
// attached.
func Attach(h *netlink.Handle, link netlink.Link, parent uint32, prio uint16, fd int, name string) error {
	q := &netlink.GenericQdisc{QdiscType: "clsact", QdiscAttrs: netlink.QdiscAttrs{
		LinkIndex: link.Attrs().Index, Parent: netlink.HANDLE_CLSACT, Handle: netlink.MakeHandle(0xffff, 0)}}
	if err := h.QdiscReplace(q); err != nil {
		return fmt.Errorf("clsact on %s: %w", link.Attrs().Name, err)
	}
	f := &netlink.BpfFilter{
		FilterAttrs: netlink.FilterAttrs{LinkIndex: link.Attrs().Index, Parent: parent,
			Handle: 1, Protocol: unix.ETH_P_ALL, Priority: prio},
		Fd: fd, Name: name, DirectAction: true,
	}
	if err := h.FilterReplace(f); err != nil {
		return fmt.Errorf("attach %s to %s: %w", name, link.Attrs().Name, err)
	}
	return nil
}
