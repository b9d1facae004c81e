package fairq

import (
	"fmt"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

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

// __sk_buff field offsets (include/uapi/linux/bpf.h).
const (
	skbLen      = 0
	skbProtocol = 16
	skbPriority = 32
)

// ipv4 is ETH_P_IP as a load of __sk_buff.protocol (network order) reads.
var ipv4 = tcprio.NetOrder16(unix.ETH_P_IP)

// Offsets in an Ethernet frame and its IPv4 header.
const (
	ipOffset    = 14
	ipHeaderMin = 20
	ipTotLen    = 2 // big-endian
	ipFragOff   = 6 // flags and fragment offset, big-endian
	ipProto     = 9
	ipSaddr     = 12
	ipDaddr     = 16
	tcpProto    = 6
	tcpDoff     = 12 // data offset in the high nibble
	tcpFlags    = 13
)

const actUnspec = -1

// The stack: the IPv4 header's first 20 bytes at stackHdr, the TCP
// header's bytes tcpDoff and tcpFlags at stackTCP.
const (
	stackHdr = -24
	stackTCP = -28
)

// hdr is where byte off of the IPv4 header is on the stack.
func hdr(off int16) int16 { return stackHdr + off }

// build assembles the classifier for a port with classes data leaves,
// keyed by key, in a fabric of racks x perRack servers: Class or
// PairClass, in the kernel. r6 ctx, r7
// the IPv4 header's length, r8 its total length; bytes are loaded one by
// one, so the program reads the same on any host byte order.
func build(key Key, racks, perRack, classes int) asm.Instructions {
	other := int32(Major<<16 | classes)
	sparse := int32(Major<<16) | int32(Sparse(classes))
	prog := asm.Instructions{
		asm.Mov.Reg(asm.R6, asm.R1),
		asm.LoadMem(asm.R0, asm.R6, skbProtocol, asm.Word),
		asm.JNE.Imm(asm.R0, ipv4, "other"),
		asm.Mov.Reg(asm.R1, asm.R6),
		asm.Mov.Imm(asm.R2, ipOffset),
		asm.Mov.Reg(asm.R3, asm.RFP),
		asm.Add.Imm(asm.R3, stackHdr),
		asm.Mov.Imm(asm.R4, ipHeaderMin),
		asm.FnSkbLoadBytes.Call(),
		asm.JNE.Imm(asm.R0, 0, "other"),

		// A sparse segment (SparseSegment): short, TCP, not a fragment,
		// at most SparsePayload bytes of payload, no SYN, FIN or RST.
		asm.LoadMem(asm.R0, asm.R6, skbLen, asm.Word),
		asm.JGE.Imm(asm.R0, SparseBytes, "dest"),
		asm.LoadMem(asm.R0, asm.RFP, hdr(ipProto), asm.Byte),
		asm.JNE.Imm(asm.R0, tcpProto, "dest"),
		asm.LoadMem(asm.R0, asm.RFP, hdr(ipFragOff), asm.Byte),
		asm.And.Imm(asm.R0, 0x3f), // more fragments, offset's high bits
		asm.JNE.Imm(asm.R0, 0, "dest"),
		asm.LoadMem(asm.R0, asm.RFP, hdr(ipFragOff+1), asm.Byte),
		asm.JNE.Imm(asm.R0, 0, "dest"),
		asm.LoadMem(asm.R7, asm.RFP, hdr(0), asm.Byte),
		asm.And.Imm(asm.R7, 0x0f),
		asm.LSh.Imm(asm.R7, 2), // IPv4 header length
		asm.LoadMem(asm.R8, asm.RFP, hdr(ipTotLen), asm.Byte),
		asm.LSh.Imm(asm.R8, 8),
		asm.LoadMem(asm.R0, asm.RFP, hdr(ipTotLen+1), asm.Byte),
		asm.Or.Reg(asm.R8, asm.R0), // total length
		asm.Mov.Reg(asm.R1, asm.R6),
		asm.Mov.Reg(asm.R2, asm.R7),
		asm.Add.Imm(asm.R2, ipOffset+tcpDoff),
		asm.Mov.Reg(asm.R3, asm.RFP),
		asm.Add.Imm(asm.R3, stackTCP),
		asm.Mov.Imm(asm.R4, 2),
		asm.FnSkbLoadBytes.Call(),
		asm.JNE.Imm(asm.R0, 0, "dest"),
		asm.LoadMem(asm.R0, asm.RFP, stackTCP+tcpFlags-tcpDoff, asm.Byte),
		asm.And.Imm(asm.R0, tcpFinSynRst),
		asm.JNE.Imm(asm.R0, 0, "dest"),
		asm.LoadMem(asm.R0, asm.RFP, stackTCP, asm.Byte),
		asm.RSh.Imm(asm.R0, 4),
		asm.LSh.Imm(asm.R0, 2), // TCP header length
		asm.Add.Reg(asm.R0, asm.R7),
		asm.Sub.Reg(asm.R8, asm.R0), // the payload (huge if malformed)
		asm.JGT.Imm(asm.R8, SparsePayload, "dest"),
		asm.Mov.Imm(asm.R4, sparse),
		asm.Ja.Label("set"),

		// A data frame: its destination's class, or its pair's.
	}
	gateways := 0 // a server's port: its aggregator is "other"
	if key == ByPair {
		gateways = racks
	}
	dst := loadIndex(ipDaddr, asm.R4, perRack, gateways, "d")
	dst[0] = dst[0].WithSymbol("dest")
	prog = append(prog, dst...)
	if key == ByPair {
		prog = append(prog, loadIndex(ipSaddr, asm.R3, perRack, gateways, "s")...)
		prog = append(prog,
			asm.Mul.Imm(asm.R3, int32(Endpoints(racks, perRack))),
			asm.Add.Reg(asm.R4, asm.R3))
	}
	return append(prog,
		asm.Mod.Imm(asm.R4, int32(classes-1)),
		asm.Add.Imm(asm.R4, 1),
		asm.Or.Imm(asm.R4, Major<<16),
		asm.Ja.Label("set"),
		asm.Mov.Imm(asm.R4, other).WithSymbol("other"),
		asm.StoreMem(asm.R6, skbPriority, asm.R4, asm.Word).WithSymbol("set"),
		asm.Mov.Imm(asm.R0, actUnspec),
		asm.Return(),
	)
}

// loadIndex loads the index of the address at offset at of the IPv4
// header into out: a server's (Class), or, with gateways (the fabric's
// racks) set, rack r's gateway's, gateways*perRack+r (Endpoints); or it
// jumps to "other". It uses R2 and R5; tag makes its labels its own.
func loadIndex(at int16, out asm.Register, perRack, gateways int, tag string) asm.Instructions {
	gw, done := "gw_"+tag, "done_"+tag
	ins := asm.Instructions{
		asm.LoadMem(asm.R2, asm.RFP, hdr(at), asm.Byte),
		asm.JNE.Imm(asm.R2, 10, "other"),
		asm.LoadMem(out, asm.RFP, hdr(at+1), asm.Byte), // rack >> 8, or 255 for routers
		asm.JEq.Imm(out, 255, "other"),
		asm.LoadMem(asm.R5, asm.RFP, hdr(at+2), asm.Byte), // rack & 255
		asm.LoadMem(asm.R2, asm.RFP, hdr(at+3), asm.Byte), // host + 1
		asm.LSh.Imm(out, 8),
		asm.Or.Reg(out, asm.R5), // rack
	}
	if gateways > 0 {
		ins = append(ins, asm.JEq.Imm(asm.R2, gatewayHost, gw))
	}
	ins = append(ins,
		asm.JEq.Imm(asm.R2, 0, "other"),
		asm.Sub.Imm(asm.R2, 1),
		asm.JGE.Imm(asm.R2, int32(perRack), "other"),
		asm.Mul.Imm(out, int32(perRack)),
		asm.Add.Reg(out, asm.R2),
	)
	if gateways > 0 {
		ins = append(ins,
			asm.Ja.Label(done),
			asm.Add.Imm(out, int32(gateways*perRack)).WithSymbol(gw),
			asm.Mov.Reg(out, out).WithSymbol(done), // where both ways meet
		)
	}
	return ins
}

// program loads the classifier.
func program(key Key, racks, perRack, classes int) (*ebpf.Program, error) {
	return ebpf.NewProgram(&ebpf.ProgramSpec{Name: progName, Type: ebpf.SchedCLS,
		License: "GPL", Instructions: build(key, racks, perRack, classes)})
}

// Port is what Install needs to know of a port and its fabric.
type Port struct {
	Key  Key    // ByDestination on a server's port, ByPair on a switch's
	Rate uint64 // the port's, in bytes/s
	MTU  int
	// Racks and PerRack are the fabric's; FairSwitchPorts is how many of
	// its switch ports are fair (ClassesFor).
	Racks, PerRack, FairSwitchPorts int
}

// Install makes the shaped port p fair, through h, a handle of the port's
// namespace: an htb of ClassesFor leaves under the port's tbf (which
// fabric.Shape must have put at the root), and the classifier, keyed by
// p.Key, on the port's clsact egress.
func Install(h *netlink.Handle, link netlink.Link, p Port) error {
	name := link.Attrs().Name
	key, rate, mtu, racks, perRack := p.Key, p.Rate, p.MTU, p.Racks, p.PerRack
	classes := ClassesFor(key, racks, perRack, p.FairSwitchPorts)
	htb := netlink.NewHtb(netlink.QdiscAttrs{LinkIndex: link.Attrs().Index,
		Handle: netlink.MakeHandle(Major, 0), Parent: netlink.MakeHandle(1, 1)}) // the tbf's one class
	htb.Defcls = uint32(classes)
	if err := h.QdiscReplace(htb); err != nil {
		return fmt.Errorf("fair queue on %s: htb under the tbf: %w (without htb, set fabric.server_queue and fabric.switch_queue to fifo)", name, err)
	}
	leafBits := max(rate*8*leafSpeedup, 1_000_000_000)
	// A leaf's bucket holds 1 ms of its rate (10 ms of the port's): a
	// GSO packet never leaves it in debt long enough to be held back.
	bucket := uint32(min(leafBits/8/1000, 1<<30))
	for k := 1; k <= int(Sparse(classes)); k++ {
		prio := uint32(1) // data: round-robin among themselves
		if k == int(Sparse(classes)) {
			prio = 0 // short control segments first
		}
		c := netlink.NewHtbClass(netlink.ClassAttrs{LinkIndex: link.Attrs().Index,
			Parent: netlink.MakeHandle(Major, 0), Handle: netlink.MakeHandle(Major, uint16(k))},
			netlink.HtbClassAttrs{Rate: leafBits, Ceil: leafBits, Buffer: bucket, Cbuffer: bucket, Quantum: Quantum(rate, mtu), Prio: prio})
		if err := h.ClassReplace(c); err != nil {
			return fmt.Errorf("fair queue on %s: class %d: %w", name, k, err)
		}
	}
	prog, err := program(key, racks, perRack, classes)
	if err != nil {
		return fmt.Errorf("fair queue on %s: load classifier: %w", name, err)
	}
	defer prog.Close()
	if err := tcprio.Attach(h, link, netlink.HANDLE_MIN_EGRESS, tcprio.FairQueue, prog.FD(), filterName); err != nil {
		return fmt.Errorf("fair queue: %w", err)
	}
	return nil
}
