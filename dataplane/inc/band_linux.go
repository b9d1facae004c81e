package inc

import (
	"errors"
	"fmt"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netlink/nl"
	"golang.org/x/sys/unix"

	"github.com/ocsemu/ocsemu/dataplane/fastport"
)

// Band gives INC packets a band of their own at every shaped port of
// one namespace (h): each root tbf (the fabric's shaper, dataplane/fabric
// Shape) is replaced by an htb of the same rate with two classes, INC
// (UDP port Port, either direction) at priority 0 with the whole rate
// guaranteed, and everything else at priority 1 with 1 % guaranteed and
// the rest borrowed. INC is then served first whenever it has a packet,
// as a switch would serve a strict-priority queue, and a TCP job in the
// same port no longer fills the FIFO it waits in (docs/inc.md, "INC
// beside TCP"). This kernel has htb and u32 but no prio qdisc. Each class
// queues at most what the tbf held (10 ms of the rate), in a tbf leaf
// used as a byte-limited FIFO. It returns how many ports it changed;
// ports already banded are left alone.
func Band(h *netlink.Handle) (int, error) {
	links, err := h.LinkList()
	if err != nil {
		return 0, fmt.Errorf("inc band: links: %w", err)
	}
	n := 0
	for _, ln := range links {
		qs, err := h.QdiscList(ln)
		if err != nil {
			return n, fmt.Errorf("inc band: qdiscs of %s: %w", ln.Attrs().Name, err)
		}
		for _, q := range qs {
			t, ok := q.(*netlink.Tbf)
			if !ok || t.Attrs().Parent != netlink.HANDLE_ROOT {
				continue
			}
			if err := band(h, ln, t); err != nil {
				return n, fmt.Errorf("inc band on %s: %w", ln.Attrs().Name, err)
			}
			n++
		}
	}
	return n, nil
}

// Band classes: 1:1 the port, 1:10 INC, 1:20 the rest (the default).
const (
	bandINC   = 0x10
	bandOther = 0x20
)

func band(h *netlink.Handle, ln netlink.Link, t *netlink.Tbf) (err error) {
	idx := ln.Attrs().Index
	rate := t.Rate // bytes/s
	root := netlink.NewHtb(netlink.QdiscAttrs{LinkIndex: idx, Handle: netlink.MakeHandle(1, 0), Parent: netlink.HANDLE_ROOT})
	root.Defcls = bandOther
	// Between the tbf's removal and the htb the port has no root qdisc,
	// so a fast-port Refresh or Sync there may set it fast and frames
	// would bypass the htb: turn it slow before and again after, as loss
	// rules and captures do (dataplane/fastport).
	if err := fastport.Off(h, ln); err != nil {
		return fmt.Errorf("slow the port: %w", err)
	}
	defer func() {
		if oerr := fastport.Off(h, ln); oerr != nil {
			err = errors.Join(err, fmt.Errorf("slow the port: %w", oerr))
		}
	}()
	// A qdisc of another kind cannot replace the tbf in place.
	if err := h.QdiscDel(t); err != nil {
		return fmt.Errorf("remove the tbf: %w", err)
	}
	if err := buildBand(h, idx, rate, root, t); err != nil {
		// Put the port back as it was: unshaped or half built it would
		// keep running so (emu run --keep).
		_ = h.QdiscDel(root)
		if rerr := h.QdiscAdd(t); rerr != nil {
			return fmt.Errorf("%w; restoring the tbf also failed: %v", err, rerr)
		}
		return err
	}
	return nil
}

// buildBand puts the htb root, its classes, their tbf leaves and the u32
// filters for INC on a port whose tbf t was removed.
func buildBand(h *netlink.Handle, idx int, rate uint64, root *netlink.Htb, t *netlink.Tbf) error {
	if err := h.QdiscAdd(root); err != nil {
		return fmt.Errorf("htb: %w", err)
	}
	burst := uint32(max(rate/1000, 64<<10))
	class := func(minor uint16, parent uint32, rateBytes uint64, prio uint32) error {
		c := netlink.NewHtbClass(netlink.ClassAttrs{LinkIndex: idx, Parent: parent, Handle: netlink.MakeHandle(1, minor)},
			netlink.HtbClassAttrs{Rate: 8 * rateBytes, Ceil: 8 * rate, Buffer: burst, Cbuffer: burst, Prio: prio})
		if err := h.ClassReplace(c); err != nil {
			return fmt.Errorf("htb class 1:%x: %w", minor, err)
		}
		return nil
	}
	if err := class(1, netlink.MakeHandle(1, 0), rate, 0); err != nil {
		return err
	}
	for _, c := range []struct {
		minor uint16
		rate  uint64
		prio  uint32
	}{{bandINC, rate, 0}, {bandOther, max(rate/100, 1), 1}} {
		if err := class(c.minor, netlink.MakeHandle(1, 1), c.rate, c.prio); err != nil {
			return err
		}
		leaf := &netlink.Tbf{QdiscAttrs: netlink.QdiscAttrs{LinkIndex: idx, Parent: netlink.MakeHandle(1, c.minor), Handle: netlink.MakeHandle(c.minor, 0)},
			Rate: rate, Limit: t.Limit, Buffer: t.Buffer}
		if err := h.QdiscReplace(leaf); err != nil {
			return fmt.Errorf("leaf of 1:%x: %w", c.minor, err)
		}
	}
	// UDP (IPv4 protocol 17) to or from the INC port; the lab's IPv4
	// headers carry no options, so the UDP ports sit at offset 20.
	for i, ports := range []struct{ mask, val uint32 }{{0x0000ffff, Port}, {0xffff0000, Port << 16}} {
		f := &netlink.U32{
			FilterAttrs: netlink.FilterAttrs{LinkIndex: idx, Parent: netlink.MakeHandle(1, 0), Priority: uint16(1 + i), Protocol: unix.ETH_P_IP},
			ClassId:     netlink.MakeHandle(1, bandINC),
			Sel: &nl.TcU32Sel{Flags: nl.TC_U32_TERMINAL, Keys: []nl.TcU32Key{
				{Mask: 0x00ff0000, Val: 17 << 16, Off: 8}, // netlink puts them in network order
				{Mask: ports.mask, Val: ports.val, Off: 20},
			}},
		}
		if err := h.FilterReplace(f); err != nil {
			return fmt.Errorf("u32 filter: %w", err)
		}
	}
	return nil
}
