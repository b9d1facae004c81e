// Package inject puts loss rules (dataplane/loss) into the kernel: a tc
// BPF program (cls_bpf, direct-action) on the clsact ingress or egress of
// a lab port draws bpf_get_prandom_u32() per frame and drops (TC_ACT_SHOT)
// the configured parts per million; every other frame goes on
// (TC_ACT_UNSPEC) to the next filter, such as the OCS or ToR fast path,
// which run at a later priority (dataplane/tcprio). This kernel has no
// netem; this needs only cls_bpf.
//
// Each rule has its own program and a one-entry map holding the fraction
// and the rule's counters (dropped and passed packets and bytes, added
// atomically). Rules live in the kernel, held by their tc filter: Set,
// Clear and Read find them again from the port, so any process can
// change or show them, and destroying the lab removes them with its
// interfaces. A GSO super-packet counts, and is dropped, as one frame.
//
// An egress rule needs the frames to leave through the port's egress: Set
// turns the port's fast flag off before and after it puts the rule there,
// and Clear lets the port be fast again once nothing else needs its egress
// (dataplane/fastport).
package inject

import (
	"errors"
	"fmt"
	"sort"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/ocsemu/ocsemu/dataplane/fabric"
	"github.com/ocsemu/ocsemu/dataplane/fastport"
	"github.com/ocsemu/ocsemu/dataplane/loss"
	"github.com/ocsemu/ocsemu/dataplane/nlsafe"
	"github.com/ocsemu/ocsemu/dataplane/tcprio"
)

// Names visible in bpftool and tc.
const (
	progName   = "emu_loss"
	mapName    = "emu_loss_rule"
	filterName = "emu-loss"
)

// tc actions.
const (
	actUnspec = -1
	actShot   = 2
)

// value is the rule's map entry.
type value struct {
	PPM                          uint32
	_                            uint32
	DroppedPackets, DroppedBytes uint64
	PassedPackets, PassedBytes   uint64
}

// Status is one rule in the kernel with its counters.
type Status struct {
	loss.Rule
	DroppedPackets uint64 `json:"dropped_packets"`
	DroppedBytes   uint64 `json:"dropped_bytes"`
	PassedPackets  uint64 `json:"passed_packets"`
	PassedBytes    uint64 `json:"passed_bytes"`
}

// build assembles the classifier. r6 ctx, r7 the rule's entry, r2 the
// frame's length: a random draw below the fraction drops.
func build(m int) asm.Instructions {
	count := func(off int16) asm.Instructions {
		return asm.Instructions{
			asm.Mov.Imm(asm.R1, 1),
			asm.AddAtomic.Mem(asm.R7, asm.R1, asm.DWord, off),
			asm.AddAtomic.Mem(asm.R7, asm.R2, asm.DWord, off+8),
		}
	}
	ins := asm.Instructions{
		asm.Mov.Reg(asm.R6, asm.R1),
		asm.StoreImm(asm.RFP, -4, 0, asm.Word),
		asm.Mov.Reg(asm.R2, asm.RFP),
		asm.Add.Imm(asm.R2, -4),
		asm.LoadMapPtr(asm.R1, m),
		asm.FnMapLookupElem.Call(),
		asm.JEq.Imm(asm.R0, 0, "unspec"),
		asm.Mov.Reg(asm.R7, asm.R0),
		asm.FnGetPrandomU32.Call(),
		asm.Mod.Imm32(asm.R0, loss.MaxPPM),
		asm.LoadMem(asm.R1, asm.R7, 0, asm.Word),
		asm.LoadMem(asm.R2, asm.R6, 0, asm.Word), // skb->len
		asm.JLT.Reg(asm.R0, asm.R1, "drop"),
	}
	ins = append(ins, count(24)...) // passed
	ins = append(ins, asm.Mov.Imm(asm.R0, actUnspec).WithSymbol("unspec"), asm.Return())
	drop := count(8)
	drop[0] = drop[0].WithSymbol("drop")
	ins = append(ins, drop...)
	return append(ins, asm.Mov.Imm(asm.R0, actShot), asm.Return())
}

func parent(d loss.Direction) (uint32, error) {
	switch d {
	case loss.Ingress:
		return netlink.HANDLE_MIN_INGRESS, nil
	case loss.Egress:
		return netlink.HANDLE_MIN_EGRESS, nil
	}
	return 0, fmt.Errorf("direction %q: want ingress or egress", d)
}

// find returns the map of the loss rule on one hook of a link, or nil.
func find(h *netlink.Handle, link netlink.Link, d loss.Direction) (*ebpf.Map, error) {
	par, err := parent(d)
	if err != nil {
		return nil, err
	}
	return tcprio.FindMap(h, link, par, tcprio.Loss, progName, mapName)
}

// Set puts one rule (a single direction) on its port, through h, a handle
// of the port's namespace. An existing rule on that hook gets the new
// fraction and keeps its counters.
func Set(h *netlink.Handle, r loss.Rule) (err error) {
	if r.PPM > loss.MaxPPM {
		return fmt.Errorf("%s: %d ppm over %d", r.Port, r.PPM, loss.MaxPPM)
	}
	par, err := parent(r.Direction)
	if err != nil {
		return fmt.Errorf("%s: %w", r.Port, err)
	}
	link, err := nlsafe.Retry1(h.LinkByName, r.Port.Iface)
	if err != nil {
		return fmt.Errorf("%s: %w", r.Port, err)
	}
	if r.Direction == loss.Egress {
		// Off before the rule exists and again after: a concurrent
		// Refresh cannot leave the port fast with the rule in place.
		if err := fastport.Off(h, link); err != nil {
			return fmt.Errorf("%s: %w", r.Port, err)
		}
		defer func() {
			if oerr := fastport.Off(h, link); oerr != nil && err == nil {
				err = fmt.Errorf("%s: %w", r.Port, oerr)
			}
		}()
	}
	m, err := find(h, link, r.Direction)
	if err != nil {
		return err
	}
	if m != nil {
		defer m.Close()
		var v value
		if err := m.Lookup(uint32(0), &v); err != nil {
			return fmt.Errorf("%s: read rule: %w", r.Port, err)
		}
		v.PPM = r.PPM
		if err := m.Put(uint32(0), v); err != nil {
			return fmt.Errorf("%s: update rule: %w", r.Port, err)
		}
		return nil
	}
	m, err = ebpf.NewMap(&ebpf.MapSpec{Name: mapName, Type: ebpf.Array, KeySize: 4, ValueSize: 40, MaxEntries: 1})
	if err != nil {
		return fmt.Errorf("%s: create loss map: %w", r.Port, err)
	}
	defer m.Close()
	if err := m.Put(uint32(0), value{PPM: r.PPM}); err != nil {
		return fmt.Errorf("%s: write rule: %w", r.Port, err)
	}
	prog, err := ebpf.NewProgram(&ebpf.ProgramSpec{Name: progName, Type: ebpf.SchedCLS, License: "GPL", Instructions: build(m.FD())})
	if err != nil {
		return fmt.Errorf("%s: load loss program: %w", r.Port, err)
	}
	defer prog.Close()
	if err := tcprio.Attach(h, link, par, tcprio.Loss, prog.FD(), filterName); err != nil {
		return fmt.Errorf("%s (%s): %w", r.Port, r.Direction, err)
	}
	return nil
}

// Clear removes the rule of one port and direction (Both: both) and
// says how many it removed; a port without one is fine.
func Clear(h *netlink.Handle, p loss.Port, d loss.Direction) (int, error) {
	link, err := nlsafe.Retry1(h.LinkByName, p.Iface)
	if err != nil {
		return 0, fmt.Errorf("%s: %w", p, err)
	}
	removed := 0
	for _, dd := range d.Hooks() {
		m, err := find(h, link, dd)
		if err != nil {
			return removed, err
		}
		if m == nil {
			continue
		}
		m.Close()
		par, _ := parent(dd)
		f := &netlink.BpfFilter{FilterAttrs: netlink.FilterAttrs{LinkIndex: link.Attrs().Index, Parent: par,
			Handle: 1, Protocol: unix.ETH_P_ALL, Priority: tcprio.Loss}}
		switch err := h.FilterDel(f); {
		case err == nil:
			removed++
		case !errors.Is(err, unix.ENOENT): // gone already: nothing to count
			return removed, fmt.Errorf("%s: remove %s loss rule: %w", p, dd, err)
		}
		if dd == loss.Egress {
			if err := fastport.Refresh(h, p.NS, link); err != nil {
				return removed, fmt.Errorf("%s: %w", p, err)
			}
		}
	}
	return removed, nil
}

// Read returns the rules on one port (none, one or two) with counters.
func Read(h *netlink.Handle, p loss.Port) ([]Status, error) {
	link, err := nlsafe.Retry1(h.LinkByName, p.Iface)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", p, err)
	}
	var out []Status
	for _, d := range []loss.Direction{loss.Ingress, loss.Egress} {
		m, err := find(h, link, d)
		if err != nil {
			return nil, err
		}
		if m == nil {
			continue
		}
		var v value
		err = m.Lookup(uint32(0), &v)
		m.Close()
		if err != nil {
			return nil, fmt.Errorf("%s: read %s rule: %w", p, d, err)
		}
		out = append(out, Status{Rule: loss.Rule{Port: p, Direction: d, PPM: v.PPM},
			DroppedPackets: v.DroppedPackets, DroppedBytes: v.DroppedBytes,
			PassedPackets: v.PassedPackets, PassedBytes: v.PassedBytes})
	}
	return out, nil
}

// Apply sets every rule on a deployed lab.
func Apply(lab *fabric.Lab, rules []loss.Rule) error {
	for _, r := range rules {
		h, err := lab.Handle(r.Port.Node)
		if err != nil {
			return fmt.Errorf("%s: %w", r.Port, err)
		}
		if err := Set(h, r); err != nil {
			return err
		}
	}
	return nil
}

// List reads every loss rule of a deployed lab, in blueprint order.
func List(lab *fabric.Lab) ([]Status, error) {
	var out []Status
	for _, p := range loss.Ports(lab.Topo) {
		h, err := lab.Handle(p.Node)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", p, err)
		}
		st, err := Read(h, p)
		if err != nil {
			return nil, err
		}
		out = append(out, st...)
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Port.String() < out[j].Port.String() })
	return out, nil
}

// ClearAll removes every loss rule of a deployed lab and returns how
// many it removed.
func ClearAll(lab *fabric.Lab) (int, error) {
	st, err := List(lab)
	if err != nil {
		return 0, err
	}
	for _, s := range st {
		h, err := lab.Handle(s.Port.Node)
		if err != nil {
			return 0, err
		}
		if _, err := Clear(h, s.Port, s.Direction); err != nil {
			return 0, err
		}
	}
	return len(st), nil
}
