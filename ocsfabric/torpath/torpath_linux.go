// Package torpath is the ToR's kernel path onto circuits: a tc BPF
// program (cls_bpf, direct-action) on the clsact ingress of every server
// port and every uplink of a ToR chooses the uplink of each IPv4 frame
// bound for another rack and bpf_redirects it there, with the MACs and
// TTL that IP forwarding would write. The choice lives in a map with the
// same generations and kernel-timed switches as the OCS port map
// (ocsfabric/fastpath): the OCS process stages circuits and ToR paths
// for the same instant, so routes and circuits change together, and no
// frame is sent into a circuit that is gone.
//
// Among equal next hops, a flow (its source and destination addresses)
// takes the hop routing.Choice.Pick(routing.FlowHash(src, dst), now)
// gives: the program computes the same 32-bit hash and the same choice
// between the hops lit at the switch and all hops, so the flow model and
// the kernel route every flow alike.
//
// On ingress, the program hands a frame to the ingress of the chosen
// port's veth peer (bpf_redirect_peer, one veth hop less) when that port
// is fast: nothing on its egress (shaper, loss rule, capture) needs the
// frame (dataplane/fastport). Frames for a server of the ToR's own rack
// whose port is fast are delivered the same way by the program, as IP
// forwarding would (MACs, TTL, checksum); frames for a slow server port
// are left to the kernel's IP forwarding, which transmits on that port.
//
// What the program leaves to the kernel (TC_ACT_OK): frames that are not
// IPv4 without options, frames for the ToR itself (its gateway and router
// addresses: the INC aggregator lives there), for addresses outside the
// racks' (the packet core), frames whose TTL would expire (the kernel
// answers with ICMP), and destinations the maps have no entry for. Traffic
// the ToR itself originates never passes an ingress hook: the kernel
// routes it (by the netlink routes the OCS process keeps installing) onto
// an uplink or the core port, where an egress variant of the program
// moves it onto the chosen hop.
//
// Maps (per ToR):
//
//   - meta: the lab's generation switch (fastpath.Gen), the very map the
//     OCS switches read: one write arms circuits and ToR paths alike.
//   - routes: array indexed by gen*racks + destination rack
//     (fastpath.Generations generations): a count of
//     hops, a flag (1: unreachable, drop), a count of lit hops and the
//     instant until which only they are used (make-before-break,
//     routing.Choice), then the hops and the lit hops, each the 12 bytes
//     of Ethernet addresses to write and the ifindex to redirect to.
//   - local: array indexed by the last byte of a server address of the
//     own rack: the server's port, as a hop (no entry: the kernel).
//   - fast: the ports frames may leave by straight into the peer's
//     ingress (dataplane/fastport).
//   - counters: per-CPU: redirected (to another rack or a local server)
//     and dropped-unreachable packets and bytes.
package torpath

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"sync"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/ocsemu/ocsemu/dataplane/fastport"
	"github.com/ocsemu/ocsemu/dataplane/limits"
	"github.com/ocsemu/ocsemu/dataplane/tcprio"
	"github.com/ocsemu/ocsemu/ocsfabric/fastpath"
	"github.com/ocsemu/ocsemu/ocsfabric/routing"
)

// Names visible in bpftool and tc.
const (
	progName       = "emu_torpath"
	egressProgName = "emu_torpath_eg"
	routesName     = "emu_tor_routes"
	localName      = "emu_tor_local"
	countersName   = "emu_tor_ctrs"
	filterName     = "emu-torpath"
)

// tc actions.
const (
	actOK       = 0
	actShot     = 2
	actRedirect = 7
)

// Frame offsets: Ethernet, then IPv4 without options.
const (
	offEtherType = 12
	offVerIHL    = 14
	offTTL       = 22
	offCsum      = 24
	offSrc       = 26
	offDst       = 30
	skbIfindex   = 40 // __sk_buff.ifindex: the device at egress
	skbData      = 76 // __sk_buff.data
	skbDataEnd   = 80 // __sk_buff.data_end
	hdrLen       = 34 // Ethernet and IPv4 headers: what rewrite writes
)

const (
	hopSize    = 16 // dst MAC, src MAC, ifindex
	headerSize = 24 // n, flags, nLit, pad, litUntil
)

// Config sizes the program of one ToR.
type Config struct {
	Rack    int // this ToR's rack: frames for it go to the kernel
	Racks   int // racks of the lab
	MaxHops int // most next hops of one destination (uplinks, +1 for a packet core)
}

// Hop is one way out: the Ethernet addresses to write and the interface
// (ifindex in the ToR's namespace) to send on.
type Hop struct {
	Dst, Src net.HardwareAddr
	Ifindex  uint32
}

// Route is the way to one destination rack. No hops: the frame is dropped
// when Unreachable, else left to the kernel's routes. Until LitUntil
// (CLOCK_MONOTONIC ns) frames take the Lit hops instead, when there are.
type Route struct {
	Hops        []Hop
	Lit         []Hop
	LitUntil    uint64
	Unreachable bool
}

// Counters of one ToR, summed over CPUs. A GSO super-packet counts once.
type Counters struct {
	RedirectedPackets, RedirectedBytes   uint64
	UnreachablePackets, UnreachableBytes uint64
}

// ToR is the BPF state of one ToR.
type ToR struct {
	cfg                     Config
	gen                     *fastpath.Gen
	mu                      sync.Mutex
	prog, egress            *ebpf.Program
	routes, local, counters *ebpf.Map
	fast                    *ebpf.Map
}

func (c Config) check() error {
	if c.Racks < 1 || c.Racks > limits.MaxRacks || c.Rack < 0 || c.Rack >= c.Racks {
		return fmt.Errorf("rack %d of %d: want 0 <= rack < racks <= %d", c.Rack, c.Racks, limits.MaxRacks)
	}
	if c.MaxHops < 1 || c.MaxHops > limits.MaxUplinks+1 {
		return fmt.Errorf("%d hops per destination: want 1 to %d", c.MaxHops, limits.MaxUplinks+1)
	}
	return nil
}

func (c Config) valueSize() int { return headerSize + 2*hopSize*c.MaxHops }

// New creates the maps and loads the program of one ToR, reading the
// lab's generation switch gen. Until routes are written, every
// destination is left to the kernel.
func New(cfg Config, gen *fastpath.Gen) (*ToR, error) {
	if err := cfg.check(); err != nil {
		return nil, err
	}
	t := &ToR{cfg: cfg, gen: gen}
	var err error
	if t.routes, err = ebpf.NewMap(&ebpf.MapSpec{Name: routesName, Type: ebpf.Array, KeySize: 4,
		ValueSize: uint32(cfg.valueSize()), MaxEntries: uint32(fastpath.Generations * cfg.Racks)}); err != nil {
		t.Close()
		return nil, fmt.Errorf("tor%d: create routes map: %w", cfg.Rack, err)
	}
	if t.local, err = ebpf.NewMap(&ebpf.MapSpec{Name: localName, Type: ebpf.Array, KeySize: 4, ValueSize: hopSize, MaxEntries: 256}); err != nil {
		t.Close()
		return nil, fmt.Errorf("tor%d: create local map: %w", cfg.Rack, err)
	}
	if t.counters, err = ebpf.NewMap(&ebpf.MapSpec{Name: countersName, Type: ebpf.PerCPUArray, KeySize: 4, ValueSize: 32, MaxEntries: 1}); err != nil {
		t.Close()
		return nil, fmt.Errorf("tor%d: create counters map: %w", cfg.Rack, err)
	}
	if t.fast, err = fastport.NewMap(); err != nil {
		t.Close()
		return nil, fmt.Errorf("tor%d: %w", cfg.Rack, err)
	}
	if t.prog, err = ebpf.NewProgram(&ebpf.ProgramSpec{Name: progName, Type: ebpf.SchedCLS, License: "GPL",
		Instructions: program(cfg, gen.FD(), t.routes.FD(), t.local.FD(), t.counters.FD(), t.fast.FD(), false)}); err != nil {
		t.Close()
		return nil, fmt.Errorf("tor%d: load path program: %w", cfg.Rack, err)
	}
	if t.egress, err = ebpf.NewProgram(&ebpf.ProgramSpec{Name: egressProgName, Type: ebpf.SchedCLS, License: "GPL",
		Instructions: program(cfg, gen.FD(), t.routes.FD(), t.local.FD(), t.counters.FD(), t.fast.FD(), true)}); err != nil {
		t.Close()
		return nil, fmt.Errorf("tor%d: load egress path program: %w", cfg.Rack, err)
	}
	return t, nil
}

// program assembles the classifier. Registers: r6 ctx, r7 destination
// address then rack, r8 flow hash, r9 the destination's host byte, then
// generation, then route entry or local hop.
//
// The egress variant steers what the ToR sends itself (routed by the
// kernel onto some uplink or the core port) onto the chosen hop: it
// writes the MACs but leaves the TTL (nothing was forwarded), and lets
// the frame go on (TC_ACT_OK) when the kernel already picked that port.
// Frames the ingress program redirected pass it again and stay.
func program(cfg Config, meta, routes, local, counters, fast int, egress bool) asm.Instructions {
	ok := "ok"
	// What egress sees for its own rack is the ToR's own traffic on its
	// way to the kernel's choice: leave it.
	ownRack := "local"
	if egress {
		ownRack = ok
	}
	ins := asm.Instructions{
		asm.Mov.Reg(asm.R6, asm.R1),
		// The headers, by direct packet access (r2: data); when they are
		// not all in the linear part, "short" pulls them in.
		asm.LoadMem(asm.R2, asm.R6, skbData, asm.Word),
		asm.LoadMem(asm.R3, asm.R6, skbDataEnd, asm.Word),
		asm.Mov.Reg(asm.R4, asm.R2),
		asm.Add.Imm(asm.R4, hdrLen),
		asm.JGT.Reg(asm.R4, asm.R3, "short"),
		// IPv4 without options, TTL > 1.
		asm.LoadMem(asm.R1, asm.R2, offEtherType, asm.Half).WithSymbol("parse"),
		asm.JNE.Imm(asm.R1, tcprio.NetOrder16(unix.ETH_P_IP), ok),
		asm.LoadMem(asm.R1, asm.R2, offVerIHL, asm.Byte),
		asm.JNE.Imm(asm.R1, 0x45, ok),
		asm.LoadMem(asm.R1, asm.R2, offTTL, asm.Byte),
		asm.JLE.Imm(asm.R1, 1, ok),
		// r7 = destination, r8 = source, in host order.
		asm.LoadMem(asm.R7, asm.R2, offDst, asm.Word),
		asm.HostTo(asm.BE, asm.R7, asm.Word),
		asm.LoadMem(asm.R8, asm.R2, offSrc, asm.Word),
		asm.HostTo(asm.BE, asm.R8, asm.Word),
		// r8 = routing.FlowHash(src, dst), in 32-bit arithmetic.
		asm.Mul.Imm32(asm.R8, imm32(routing.HashMul1)),
		asm.Xor.Reg32(asm.R8, asm.R7),
		asm.Mov.Reg32(asm.R1, asm.R8),
		asm.RSh.Imm32(asm.R1, 15),
		asm.Xor.Reg32(asm.R8, asm.R1),
		asm.Mul.Imm32(asm.R8, imm32(routing.HashMul2)),
		asm.Mov.Reg32(asm.R1, asm.R8),
		asm.RSh.Imm32(asm.R1, 13),
		asm.Xor.Reg32(asm.R8, asm.R1),
		// r7 = destination rack: 10.(r>>8).(r&255).x, or a ToR's router
		// address 10.255.(r>>8).(r&255).
		asm.Mov.Reg(asm.R1, asm.R7),
		asm.RSh.Imm(asm.R1, 24),
		asm.JNE.Imm(asm.R1, 10, ok),
		asm.Mov.Reg(asm.R1, asm.R7),
		asm.RSh.Imm(asm.R1, 16),
		asm.And.Imm(asm.R1, 0xff),
		asm.JEq.Imm(asm.R1, 255, "router"),
		asm.Mov.Reg(asm.R9, asm.R7),
		asm.And.Imm(asm.R9, 0xff),
		asm.RSh.Imm(asm.R7, 8),
		asm.And.Imm(asm.R7, 0xffff).WithSymbol("rack"),
		asm.JGE.Imm(asm.R7, int32(cfg.Racks), ok),
		asm.JEq.Imm(asm.R7, int32(cfg.Rack), ownRack),
		// r9 = generation: that of the latest armed switch now (fp-24)
		// has passed.
		asm.FnKtimeGetNs.Call(),
		asm.StoreMem(asm.RFP, -24, asm.R0, asm.DWord),
		asm.StoreImm(asm.RFP, -4, 0, asm.Word),
		asm.Mov.Reg(asm.R2, asm.RFP),
		asm.Add.Imm(asm.R2, -4),
		asm.LoadMapPtr(asm.R1, meta),
		asm.FnMapLookupElem.Call(),
		asm.JEq.Imm(asm.R0, 0, ok),
		asm.LoadMem(asm.R4, asm.RFP, -24, asm.DWord),
	}
	ins = append(ins, fastpath.SelectGen(asm.R0, asm.R4, asm.R9, asm.R3, asm.R1, asm.R2, "gen")...)
	ins = append(ins,
		// r9 = routes[gen*racks + rack]
		asm.Mul.Imm(asm.R9, int32(cfg.Racks)),
		asm.Add.Reg(asm.R9, asm.R7),
		asm.StoreMem(asm.RFP, -8, asm.R9, asm.Word),
		asm.Mov.Reg(asm.R2, asm.RFP),
		asm.Add.Imm(asm.R2, -8),
		asm.LoadMapPtr(asm.R1, routes),
		asm.FnMapLookupElem.Call(),
		asm.JEq.Imm(asm.R0, 0, ok),
		asm.Mov.Reg(asm.R9, asm.R0),
		asm.LoadMem(asm.R1, asm.R9, 0, asm.Word),
		asm.JEq.Imm(asm.R1, 0, "nohops"),
		// The lit hops (r1 = their count, r5 = their offset) before
		// litUntil, else all hops.
		asm.Mov.Imm(asm.R5, headerSize),
		asm.LoadMem(asm.R2, asm.R9, 8, asm.Word),
		asm.JEq.Imm(asm.R2, 0, "pick"),
		asm.LoadMem(asm.R3, asm.R9, 16, asm.DWord),
		asm.LoadMem(asm.R4, asm.RFP, -24, asm.DWord),
		asm.JGE.Reg(asm.R4, asm.R3, "pick"),
		asm.Mov.Reg(asm.R1, asm.R2),
		asm.Mov.Imm(asm.R5, int32(headerSize+hopSize*cfg.MaxHops)),
		// r9 = &list[hash % n]
		asm.Mov.Reg32(asm.R2, asm.R8).WithSymbol("pick"),
		asm.Mod.Reg32(asm.R2, asm.R1),
		asm.JGE.Imm(asm.R2, int32(cfg.MaxHops), ok),
		asm.LSh.Imm(asm.R2, 4),
		asm.Add.Reg(asm.R2, asm.R5),
		asm.Add.Reg(asm.R9, asm.R2),
	)
	// Ethernet addresses (r9: the hop) and, on ingress, the TTL.
	ins = append(ins, rewrite(egress)...)
	if egress {
		// Already on the chosen port: go on.
		ins = append(ins,
			asm.LoadMem(asm.R1, asm.R6, skbIfindex, asm.Word),
			asm.LoadMem(asm.R2, asm.R9, 12, asm.Word),
			asm.JEq.Reg(asm.R1, asm.R2, ok),
		)
	}
	c := count(counters, 0)
	ins = append(ins, c...)
	ins = append(ins, asm.LoadMem(asm.R1, asm.R9, 12, asm.Word))
	if egress {
		// bpf_redirect_peer works on ingress only.
		ins = append(ins, asm.Mov.Imm(asm.R2, 0), asm.FnRedirect.Call(), asm.Return())
	} else {
		// A server of the own rack: "local" found its port fast already.
		ins = append(ins, asm.JEq.Imm(asm.R7, int32(cfg.Rack), "peer"))
		ins = append(ins, fastport.Redirect(fast, asm.R1, -28, "out")...)
	}
	// Headers not all in the linear part: pull them in and parse. Shorter
	// frames, or none to pull, go to the kernel, as when LD_ABS loads
	// failed.
	ins = append(ins,
		asm.LoadMem(asm.R1, asm.R6, 0, asm.Word).WithSymbol("short"), // skb->len
		asm.JLT.Imm(asm.R1, hdrLen, ok),
		asm.Mov.Reg(asm.R1, asm.R6),
		asm.Mov.Imm(asm.R2, hdrLen),
		asm.FnSkbPullData.Call(),
		asm.JNE.Imm(asm.R0, 0, ok),
		asm.LoadMem(asm.R2, asm.R6, skbData, asm.Word),
		asm.LoadMem(asm.R3, asm.R6, skbDataEnd, asm.Word),
		asm.Mov.Reg(asm.R4, asm.R2),
		asm.Add.Imm(asm.R4, hdrLen),
		asm.JGT.Reg(asm.R4, asm.R3, ok),
		asm.Ja.Label("parse"),
	)
	ins = append(ins,
		// a ToR's router address: rack = low 16 bits, no host byte
		asm.Mov.Imm(asm.R9, 0).WithSymbol("router"),
		asm.Ja.Label("rack"),
		// no hops: drop if unreachable, else the kernel decides
		asm.LoadMem(asm.R1, asm.R9, 4, asm.Word).WithSymbol("nohops"),
		asm.JEq.Imm(asm.R1, 0, ok),
	)
	ins = append(ins, count(counters, 16)...)
	ins = append(ins,
		asm.Mov.Imm(asm.R0, actShot).WithSymbol("shot"),
		asm.Return(),
		asm.Mov.Imm(asm.R0, actOK).WithSymbol(ok),
		asm.Return(),
	)
	if egress {
		return ins
	}
	// a server of this rack: its port from the local map, when the port
	// is fast; else the kernel forwards (and transmits on the port)
	return append(ins,
		asm.StoreMem(asm.RFP, -8, asm.R9, asm.Word).WithSymbol("local"),
		asm.Mov.Reg(asm.R2, asm.RFP),
		asm.Add.Imm(asm.R2, -8),
		asm.LoadMapPtr(asm.R1, local),
		asm.FnMapLookupElem.Call(),
		asm.JEq.Imm(asm.R0, 0, ok),
		asm.Mov.Reg(asm.R9, asm.R0),
		asm.LoadMem(asm.R1, asm.R9, 12, asm.Word),
		asm.JEq.Imm(asm.R1, 0, ok),
		asm.StoreMem(asm.RFP, -32, asm.R1, asm.Word),
		asm.Mov.Reg(asm.R2, asm.RFP),
		asm.Add.Imm(asm.R2, -32),
		asm.LoadMapPtr(asm.R1, fast),
		asm.FnMapLookupElem.Call(),
		asm.JEq.Imm(asm.R0, 0, ok),
		asm.Ja.Label("hop"),
		// r1: the ifindex of a fast port
		asm.Mov.Imm(asm.R2, 0).WithSymbol("peer"),
		asm.FnRedirectPeer.Call(),
		asm.Return(),
	)
}

// rewrite writes the hop's Ethernet addresses (r9: the hop, r6 ctx) and,
// on ingress, decrements the TTL and patches the header checksum as IP
// forwarding does (ip_decrease_ttl), by direct packet access. The parse
// left the headers in the linear part and nothing since changed the
// frame; the bounds check is the verifier's (failing it: the kernel).
// Clobbers r1-r4.
func rewrite(egress bool) asm.Instructions {
	ins := asm.Instructions{
		asm.LoadMem(asm.R2, asm.R6, skbData, asm.Word).WithSymbol("hop"),
		asm.LoadMem(asm.R3, asm.R6, skbDataEnd, asm.Word),
		asm.Mov.Reg(asm.R4, asm.R2),
		asm.Add.Imm(asm.R4, hdrLen),
		asm.JGT.Reg(asm.R4, asm.R3, "ok"),
		asm.LoadMem(asm.R1, asm.R9, 0, asm.Word),
		asm.StoreMem(asm.R2, 0, asm.R1, asm.Word),
		asm.LoadMem(asm.R1, asm.R9, 4, asm.Word),
		asm.StoreMem(asm.R2, 4, asm.R1, asm.Word),
		asm.LoadMem(asm.R1, asm.R9, 8, asm.Word),
		asm.StoreMem(asm.R2, 8, asm.R1, asm.Word),
	}
	if egress {
		return ins
	}
	return append(ins,
		asm.LoadMem(asm.R1, asm.R2, offTTL, asm.Byte),
		asm.Sub.Imm(asm.R1, 1),
		asm.StoreMem(asm.R2, offTTL, asm.R1, asm.Byte),
		// The checksum as it sits in memory, plus htons(0x0100), with the
		// end-around carry.
		asm.LoadMem(asm.R1, asm.R2, offCsum, asm.Half),
		asm.Add.Imm(asm.R1, int32(binary.NativeEndian.Uint16([]byte{1, 0}))),
		asm.JLT.Imm(asm.R1, 0xffff, "csum"),
		asm.Add.Imm(asm.R1, 1),
		asm.StoreMem(asm.R2, offCsum, asm.R1, asm.Half).WithSymbol("csum"),
	)
}

// ntohs is a 16-bit constant as a load from the frame reads it.

// imm32 is a 32-bit constant as the signed immediate BPF encodes.
func imm32(v uint32) int32 { return int32(v) }

// count adds the frame to the per-CPU counter pair at off (redirected 0,
// unreachable 16). Clobbers r0-r5.
func count(counters int, off int16) asm.Instructions {
	return asm.Instructions{
		asm.StoreImm(asm.RFP, -16, 0, asm.Word),
		asm.Mov.Reg(asm.R2, asm.RFP),
		asm.Add.Imm(asm.R2, -16),
		asm.LoadMapPtr(asm.R1, counters),
		asm.FnMapLookupElem.Call(),
		asm.JEq.Imm(asm.R0, 0, fmt.Sprintf("counted%d", off)),
		asm.LoadMem(asm.R1, asm.R6, 0, asm.Word), // skb->len
		asm.LoadMem(asm.R2, asm.R0, off, asm.DWord),
		asm.Add.Imm(asm.R2, 1),
		asm.StoreMem(asm.R0, off, asm.R2, asm.DWord),
		asm.LoadMem(asm.R2, asm.R0, off+8, asm.DWord),
		asm.Add.Reg(asm.R2, asm.R1),
		asm.StoreMem(asm.R0, off+8, asm.R2, asm.DWord),
		asm.Mov.Imm(asm.R0, 0).WithSymbol(fmt.Sprintf("counted%d", off)),
	}
}

// Close releases this process's references; attached filters keep the
// program and maps alive in the kernel.
func (t *ToR) Close() {
	for _, p := range []*ebpf.Program{t.prog, t.egress} {
		if p != nil {
			p.Close()
		}
	}
	for _, m := range []*ebpf.Map{t.routes, t.local, t.counters, t.fast} {
		if m != nil {
			m.Close()
		}
	}
}

// Attach puts a clsact qdisc and the program on the ingress of one ToR
// port (server port or uplink), replacing an earlier OCS process's.
func (t *ToR) Attach(h *netlink.Handle, link netlink.Link) error {
	return t.attach(h, link, netlink.HANDLE_MIN_INGRESS, t.prog)
}

// AttachEgress puts the egress variant on an uplink or core port, so that
// traffic the ToR originates takes the chosen hop too.
func (t *ToR) AttachEgress(h *netlink.Handle, link netlink.Link) error {
	return t.attach(h, link, netlink.HANDLE_MIN_EGRESS, t.egress)
}

func (t *ToR) attach(h *netlink.Handle, link netlink.Link, parent uint32, prog *ebpf.Program) error {
	if err := tcprio.Attach(h, link, parent, tcprio.FastPath, prog.FD(), filterName); err != nil {
		return fmt.Errorf("tor%d: %w", t.cfg.Rack, err)
	}
	return nil
}

// encode lays out one route entry.
func (t *ToR) encode(r Route) ([]byte, error) {
	if len(r.Hops) > t.cfg.MaxHops || len(r.Lit) > len(r.Hops) {
		return nil, fmt.Errorf("%d hops (%d lit), at most %d", len(r.Hops), len(r.Lit), t.cfg.MaxHops)
	}
	b := make([]byte, t.cfg.valueSize())
	binary.NativeEndian.PutUint32(b[0:], uint32(len(r.Hops)))
	if r.Unreachable && len(r.Hops) == 0 {
		binary.NativeEndian.PutUint32(b[4:], 1)
	}
	if len(r.Hops) > 0 && r.LitUntil > 0 {
		binary.NativeEndian.PutUint32(b[8:], uint32(len(r.Lit)))
		binary.NativeEndian.PutUint64(b[16:], r.LitUntil)
	}
	put := func(base int, hops []Hop) error {
		for i, h := range hops {
			if len(h.Dst) != 6 || len(h.Src) != 6 || h.Ifindex == 0 {
				return fmt.Errorf("hop %d: want two 6-byte MACs and an ifindex, got %v %v %d", i, h.Dst, h.Src, h.Ifindex)
			}
			o := base + i*hopSize
			copy(b[o:], h.Dst)
			copy(b[o+6:], h.Src)
			binary.NativeEndian.PutUint32(b[o+12:], h.Ifindex)
		}
		return nil
	}
	if err := put(headerSize, r.Hops); err != nil {
		return nil, err
	}
	if err := put(headerSize+hopSize*t.cfg.MaxHops, r.Lit); err != nil {
		return nil, err
	}
	return b, nil
}

// WriteLocal writes the ports of the rack's own servers, by the last byte
// of their addresses; frames for other addresses of the rack, and for a
// server whose port is not fast, go to the kernel. Servers do not move:
// this is not part of a generation.
func (t *ToR) WriteLocal(servers map[byte]Hop) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	for host, h := range servers {
		if len(h.Dst) != 6 || len(h.Src) != 6 || h.Ifindex == 0 {
			return fmt.Errorf("tor%d: server .%d: want two 6-byte MACs and an ifindex, got %v %v %d", t.cfg.Rack, host, h.Dst, h.Src, h.Ifindex)
		}
		b := make([]byte, hopSize)
		copy(b, h.Dst)
		copy(b[6:], h.Src)
		binary.NativeEndian.PutUint32(b[12:], h.Ifindex)
		if err := t.local.Put(uint32(host), b); err != nil {
			return fmt.Errorf("tor%d: write server .%d: %w", t.cfg.Rack, host, err)
		}
	}
	return nil
}

// Write writes the routes to every destination rack (a rack missing from
// routes, and this ToR's own, is left to the kernel) into generation gen,
// one fastpath.Gen.Free gave; the lab's Gen then arms it, with the
// circuits, for one instant.
func (t *ToR) Write(gen uint32, routes map[int]Route) error {
	if gen >= fastpath.Generations {
		return fmt.Errorf("tor%d: generation %d out of range", t.cfg.Rack, gen)
	}
	return t.write(gen, routes)
}

// WriteCurrent writes the routes into the generation in use: only for a
// program not attached yet, whose maps no frame reads.
func (t *ToR) WriteCurrent(routes map[int]Route) error {
	return t.write(t.gen.Cur(), routes)
}

func (t *ToR) write(gen uint32, routes map[int]Route) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	for d := range routes {
		if d < 0 || d >= t.cfg.Racks {
			return fmt.Errorf("tor%d: destination rack %d out of range", t.cfg.Rack, d)
		}
	}
	keys := make([]uint32, 0, t.cfg.Racks)
	vals := make(values, 0, t.cfg.Racks)
	for d := 0; d < t.cfg.Racks; d++ {
		var r Route
		if d != t.cfg.Rack {
			r = routes[d]
		}
		b, err := t.encode(r)
		if err != nil {
			return fmt.Errorf("tor%d: route to rack %d: %w", t.cfg.Rack, d, err)
		}
		keys = append(keys, gen*uint32(t.cfg.Racks)+uint32(d))
		vals = append(vals, b)
	}
	_, err := t.routes.BatchUpdate(keys, vals, nil)
	if errors.Is(err, ebpf.ErrNotSupported) { // kernels without batch ops
		for j, k := range keys {
			if err := t.routes.Put(k, vals[j]); err != nil {
				return fmt.Errorf("tor%d: write route %d: %w", t.cfg.Rack, j, err)
			}
		}
		return nil
	}
	if err != nil {
		return fmt.Errorf("tor%d: write routes: %w", t.cfg.Rack, err)
	}
	return nil
}

// values are encoded route entries, one per key of a batch update (a flat
// []byte would count as one value per byte).
type values [][]byte

func (v values) MarshalBinary() ([]byte, error) { return bytes.Join(v, nil), nil }

// SyncFast sets the fast flag of the ToR's ports links (uplinks and
// server ports, in namespace ns, h a handle there) from what their egress
// holds (fastport.Sync) and returns why each slow port is slow ("" for
// fast ones).
func (t *ToR) SyncFast(h *netlink.Handle, ns string, links []netlink.Link) ([]string, error) {
	why, err := fastport.Sync(t.fast, h, ns, links)
	if err != nil {
		return nil, fmt.Errorf("tor%d: %w", t.cfg.Rack, err)
	}
	return why, nil
}

// Fast reports whether frames leave by port ifindex straight into its
// peer's ingress.
func (t *ToR) Fast(ifindex uint32) (bool, error) { return fastport.Fast(t.fast, ifindex) }

// Counters returns the ToR's counters, summed over CPUs.
func (t *ToR) Counters() (Counters, error) {
	var per []Counters
	if err := t.counters.Lookup(uint32(0), &per); err != nil {
		return Counters{}, fmt.Errorf("tor%d: read counters: %w", t.cfg.Rack, err)
	}
	var c Counters
	for _, p := range per {
		c.RedirectedPackets += p.RedirectedPackets
		c.RedirectedBytes += p.RedirectedBytes
		c.UnreachablePackets += p.UnreachablePackets
		c.UnreachableBytes += p.UnreachableBytes
	}
	return c, nil
}

// Routes turns one ToR's routing choices (by destination rack) into
// kernel routes: each hop's uplink ifindex (ifindex[uplink]) and the MACs
// of the two ToRs (every uplink of a ToR carries the ToR's MAC). A
// destination without hops gets core (when the fabric has a packet core:
// the frame goes there), or is unreachable.
func Routes(racks int, next map[int]routing.Choice, ifindex []uint32, mac func(rack int) net.HardwareAddr, self int, core *Hop) (map[int]Route, error) {
	out := make(map[int]Route, racks)
	conv := func(d int, hops []routing.Hop) ([]Hop, error) {
		var hs []Hop
		for _, h := range hops {
			if h.Uplink < 0 || h.Uplink >= len(ifindex) {
				return nil, fmt.Errorf("tor%d: route to rack %d over uplink %d: no such uplink", self, d, h.Uplink)
			}
			hs = append(hs, Hop{Dst: mac(h.Via), Src: mac(self), Ifindex: ifindex[h.Uplink]})
		}
		return hs, nil
	}
	for d := 0; d < racks; d++ {
		if d == self {
			continue
		}
		ch := next[d]
		if len(ch.All) == 0 {
			if core != nil {
				out[d] = Route{Hops: []Hop{*core}}
			} else {
				out[d] = Route{Unreachable: true}
			}
			continue
		}
		var r Route
		var err error
		if r.Hops, err = conv(d, ch.All); err != nil {
			return nil, err
		}
		if ch.Lit != nil && ch.LitUntil > 0 {
			if r.Lit, err = conv(d, ch.Lit); err != nil {
				return nil, err
			}
			r.LitUntil = uint64(ch.LitUntil)
		}
		out[d] = r
	}
	return out, nil
}

// Choices are the routing choices of every destination of one ToR with no
// port dark: all next hops, always.
func Choices(next map[int][]routing.Hop) map[int]routing.Choice {
	out := make(map[int]routing.Choice, len(next))
	for d, hs := range next {
		out[d] = routing.Choice{All: hs}
	}
	return out
}
