package fairq

import (
	"fmt"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/vishvananda/netlink"

	"github.com/ocsemu/ocsemu/dataplane/tcprio"
)

// Names visible in bpftool and tc.
const (
	progName   = "emu_fairq"
	filterName = "emu-fairq"
)

// leafSpeedup is how much faster than the port every leaf class is: htb
// never holds a leaf back for its rate, so it only picks whose frame goes
// next, and the tbf above keeps the port's rate.
const leafSpeedup = 10

// frame is the most an Ethernet header adds to the MTU (tbf and htb count
// a frame from its MAC header on).
const frame = 14

// __sk_buff field offsets (include/uapi/linux/bpf.h).
const (
	skbLen      = 0
	skbProtocol = 16
	skbPriority = 32
)

// ipv4 is ETH_P_IP as __sk_buff.protocol holds it (network order, read as
// a little-endian word).
const ipv4 = 0x0008

// daddrOffset is the IPv4 destination in an Ethernet frame.
const daddrOffset = 14 + 16

const actUnspec = -1

// build assembles the classifier for a port with classes leaves in a
// fabric of perRack servers per rack: Class, in the kernel. r6 ctx, r2 the
// destination's four bytes as a little-endian word (b0 in the low byte).
func build(perRack, classes int) asm.Instructions {
	other := int32(Major<<16 | classes)
	sparse := int32(Major<<16) | int32(Sparse(classes))
	return asm.Instructions{
		asm.Mov.Reg(asm.R6, asm.R1),
		asm.LoadMem(asm.R0, asm.R6, skbLen, asm.Word),
		asm.JGE.Imm(asm.R0, SparseBytes, "data"),
		asm.Mov.Imm(asm.R4, sparse),
		asm.Ja.Label("set"),
		asm.LoadMem(asm.R0, asm.R6, skbProtocol, asm.Word).WithSymbol("data"),
		asm.JNE.Imm(asm.R0, ipv4, "other"),
		asm.Mov.Reg(asm.R1, asm.R6),
		asm.Mov.Imm(asm.R2, daddrOffset),
		asm.Mov.Reg(asm.R3, asm.RFP),
		asm.Add.Imm(asm.R3, -4),
		asm.Mov.Imm(asm.R4, 4),
		asm.FnSkbLoadBytes.Call(),
		asm.JNE.Imm(asm.R0, 0, "other"),
		asm.LoadMem(asm.R2, asm.RFP, -4, asm.Word),
		asm.Mov.Reg(asm.R3, asm.R2),
		asm.And.Imm(asm.R3, 0xff),
		asm.JNE.Imm(asm.R3, 10, "other"),
		asm.Mov.Reg(asm.R4, asm.R2),
		asm.RSh.Imm(asm.R4, 8),
		asm.And.Imm(asm.R4, 0xff), // b1: rack >> 8, or 255 for routers
		asm.JEq.Imm(asm.R4, 255, "other"),
		asm.Mov.Reg(asm.R5, asm.R2),
		asm.RSh.Imm(asm.R5, 16),
		asm.And.Imm(asm.R5, 0xff), // b2: rack & 255
		asm.RSh.Imm(asm.R2, 24),   // b3: host + 1
		asm.JEq.Imm(asm.R2, 0, "other"),
		asm.Sub.Imm(asm.R2, 1),
		asm.JGE.Imm(asm.R2, int32(perRack), "other"),
		asm.LSh.Imm(asm.R4, 8),
		asm.Or.Reg(asm.R4, asm.R5), // rack
		asm.Mul.Imm(asm.R4, int32(perRack)),
		asm.Add.Reg(asm.R4, asm.R2),
		asm.Mod.Imm(asm.R4, int32(classes-1)),
		asm.Add.Imm(asm.R4, 1),
		asm.Or.Imm(asm.R4, Major<<16),
		asm.StoreMem(asm.R6, skbPriority, asm.R4, asm.Word).WithSymbol("set"),
		asm.Mov.Imm(asm.R0, actUnspec),
		asm.Return(),
		asm.Mov.Imm(asm.R4, other).WithSymbol("other"),
		asm.StoreMem(asm.R6, skbPriority, asm.R4, asm.Word),
		asm.Mov.Imm(asm.R0, actUnspec),
		asm.Return(),
	}
}

// Install makes a server's shaped port fair, through h, a handle of the
// port's namespace: an htb of Classes(racks, perRack) leaves under the
// port's tbf (which fabric.Shape must have put at the root), and the
// classifier on the port's clsact egress. rate is the port's, in bytes/s.
func Install(h *netlink.Handle, link netlink.Link, rate uint64, mtu, racks, perRack int) error {
	name := link.Attrs().Name
	classes := Classes(racks, perRack)
	htb := netlink.NewHtb(netlink.QdiscAttrs{LinkIndex: link.Attrs().Index,
		Handle: netlink.MakeHandle(Major, 0), Parent: netlink.MakeHandle(1, 1)}) // the tbf's one class
	htb.Defcls = uint32(classes)
	if err := h.QdiscReplace(htb); err != nil {
		return fmt.Errorf("fair queue on %s: htb under the tbf: %w (without htb, set fabric.server_queue: fifo)", name, err)
	}
	leafBits := max(rate*8*leafSpeedup, 1_000_000_000)
	// A leaf's bucket holds 1 ms of its rate (10 ms of the port's): a
	// GSO packet never leaves it in debt long enough to be held back.
	bucket := uint32(min(leafBits/8/1000, 1<<30))
	for k := 1; k <= int(Sparse(classes)); k++ {
		prio := uint32(1) // data: round-robin among themselves
		if k == int(Sparse(classes)) {
			prio = 0 // short frames first
		}
		c := netlink.NewHtbClass(netlink.ClassAttrs{LinkIndex: link.Attrs().Index,
			Parent: netlink.MakeHandle(Major, 0), Handle: netlink.MakeHandle(Major, uint16(k))},
			netlink.HtbClassAttrs{Rate: leafBits, Ceil: leafBits, Buffer: bucket, Cbuffer: bucket, Quantum: uint32(mtu + frame), Prio: prio})
		if err := h.ClassReplace(c); err != nil {
			return fmt.Errorf("fair queue on %s: class %d: %w", name, k, err)
		}
	}
	prog, err := ebpf.NewProgram(&ebpf.ProgramSpec{Name: progName, Type: ebpf.SchedCLS,
		License: "GPL", Instructions: build(perRack, classes)})
	if err != nil {
		return fmt.Errorf("fair queue on %s: load classifier: %w", name, err)
	}
	defer prog.Close()
	if err := tcprio.Attach(h, link, netlink.HANDLE_MIN_EGRESS, tcprio.FairQueue, prog.FD(), filterName); err != nil {
		return fmt.Errorf("fair queue: %w", err)
	}
	return nil
}
