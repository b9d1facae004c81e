// Package fastpath is the kernel data path of an optical circuit switch: a
// tc BPF program (cls_bpf, direct-action) on the clsact ingress of every
// OCS port that redirects each frame to the peer port, or drops it when
// the port is dark or unpatched. Frames never reach user space.
//
// The program is assembled in Go (cilium/ebpf's asm), so no BPF toolchain
// is needed on the user's machine. Its maps:
//
//   - meta: the switch committed last (the generation in use) and a short
//     queue of armed switches, each (instant, generation), Generations u64
//     words (Gen). The program uses the generation of the latest switch
//     whose instant has passed by bpf_ktime_get_ns(). A whole configuration is written into a free
//     generation first and takes effect atomically, at a kernel-timed
//     instant; up to Generations-1 are staged ahead. One meta map is
//     shared by every OCS switch of a lab and by the ToRs' path programs
//     (ocsfabric/torpath): a single word write switches circuits and
//     routes together.
//   - pidx: array indexed by ifindex: 1 + the port's index in the switch
//     (0: not a port of it).
//   - ports: array indexed by gen*ports + port index, holding the peer
//     ifindex (0: unpatched) and the CLOCK_MONOTONIC time until which the
//     port is dark. Darkness is enforced by the kernel clock, not by Go
//     timers.
//   - counters: per-CPU array indexed by ifindex: forwarded, dropped-dark
//     and dropped-unpatched packets and bytes.
//   - fast: the ports a frame may leave by straight into the peer's
//     ingress, skipping the port's egress (dataplane/fastport): those
//     with no shaper, egress loss rule or capture.
//   - times: array indexed by ifindex: when the port last forwarded a
//     frame and last dropped one as dark, and the last whole dark period
//     as frames met it (DarkTimes). It is how a probe measures the dark
//     period in the fabric itself, with the clock that enforces it.
//
// Circuits survive the OCS process exiting: the tc filters keep the
// program and maps alive, and Recover finds them again from a port.
package fastpath

import (
	"errors"
	"fmt"
	"slices"
	"sync"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/vishvananda/netlink"

	"github.com/ocsemu/ocsemu/dataplane/fastport"
	"github.com/ocsemu/ocsemu/dataplane/limits"
	"github.com/ocsemu/ocsemu/dataplane/monoclock"
	"github.com/ocsemu/ocsemu/dataplane/nlsafe"
	"github.com/ocsemu/ocsemu/dataplane/tcprio"
)

// MaxIfindex bounds the ifindex of OCS ports inside one OCS namespace.
const MaxIfindex = limits.MaxIfindex

// Map and program names, visible in bpftool.
const (
	progName     = "emu_ocs"
	metaName     = "emu_ocs_meta"
	portsName    = "emu_ocs_ports"
	pidxName     = "emu_ocs_pidx"
	countersName = "emu_ocs_ctrs"
	timesName    = "emu_ocs_times"
	filterName   = "emu-ocs"
)

// tc actions.
const (
	actShot     = 2
	actRedirect = 7
)

// __sk_buff offsets.
const (
	skbLen            = 0
	skbIngressIfindex = 36
)

// Entry is one port's state in one generation.
type Entry struct {
	Peer      uint32 // ifindex of the port frames are redirected to; 0 = unpatched
	_         uint32
	DarkUntil uint64 // CLOCK_MONOTONIC ns until which the port drops everything
}

// Counters are one port's packet and byte counts, summed over CPUs.
type Counters struct {
	FwdPackets, FwdBytes             uint64
	DarkPackets, DarkBytes           uint64
	UnpatchedPackets, UnpatchedBytes uint64
}

// DarkTimes are one port's kernel timestamps (CLOCK_MONOTONIC ns, taken
// by the fast path as it handles each frame arriving on the port). A dark
// period, as frames meet it, runs from the first frame dropped as dark
// after a forwarded one to the next forwarded frame; the last complete one
// is kept. 0 means "none yet".
type DarkTimes struct {
	LastFwd   uint64 `json:"last_fwd_ns"`   // last frame forwarded
	LastDark  uint64 `json:"last_dark_ns"`  // last frame dropped as dark
	FirstDark uint64 `json:"first_dark_ns"` // first frame dropped as dark since the frame at LastFwd
	// The last complete dark period: the last frame forwarded before it,
	// the first and the last frame dropped in it, and the first forwarded
	// after it. The true start lies in (Before, DarkFrom], the true end in
	// (DarkTo, After].
	Before   uint64 `json:"before_ns"`
	DarkFrom uint64 `json:"dark_from_ns"`
	DarkTo   uint64 `json:"dark_to_ns"`
	After    uint64 `json:"after_ns"`
	Periods  uint64 `json:"periods"` // complete dark periods so far
}

// DarkTimes field offsets, for the program.
const (
	tLastFwd   = 0
	tLastDark  = 8
	tFirstDark = 16
	tBefore    = 24
	tDarkFrom  = 32
	tDarkTo    = 40
	tAfter     = 48
	tPeriods   = 56
	timesSize  = 64
)

// Switch is the BPF state of one OCS switch (one namespace).
type Switch struct {
	gen                          *Gen
	prog                         *ebpf.Program
	pidx, ports, counters, times *ebpf.Map
	fast                         *ebpf.Map // nil: a program loaded by an older emu, every port slow
	nports                       uint32    // the stride of a generation in ports

	mu  sync.Mutex
	idx map[uint32]uint32 // ifindex -> port index, as in pidx
}

// New creates the maps and loads the program of one switch with the given
// ports (ifindexes), reading the lab's generation switch gen. Every port
// starts unpatched in every generation.
func New(gen *Gen, ports []uint32) (*Switch, error) {
	if len(ports) == 0 || len(ports) >= MaxIfindex {
		return nil, fmt.Errorf("%d ports: want 1 to %d", len(ports), MaxIfindex-1)
	}
	s := &Switch{gen: gen, nports: uint32(len(ports)), idx: map[uint32]uint32{}}
	var err error
	if s.pidx, err = ebpf.NewMap(&ebpf.MapSpec{Name: pidxName, Type: ebpf.Array, KeySize: 4, ValueSize: 4, MaxEntries: MaxIfindex}); err != nil {
		s.Close()
		return nil, fmt.Errorf("create port index map: %w", err)
	}
	for n, i := range ports {
		if i == 0 || i >= MaxIfindex || s.idx[i] != 0 {
			s.Close()
			return nil, fmt.Errorf("port ifindex %d out of range or repeated", i)
		}
		if err := s.pidx.Put(i, uint32(n+1)); err != nil {
			s.Close()
			return nil, fmt.Errorf("write port index of %d: %w", i, err)
		}
		s.idx[i] = uint32(n + 1)
	}
	if s.ports, err = ebpf.NewMap(&ebpf.MapSpec{Name: portsName, Type: ebpf.Array, KeySize: 4, ValueSize: 16, MaxEntries: Generations * s.nports}); err != nil {
		s.Close()
		return nil, fmt.Errorf("create ports map: %w", err)
	}
	if s.counters, err = ebpf.NewMap(&ebpf.MapSpec{Name: countersName, Type: ebpf.PerCPUArray, KeySize: 4, ValueSize: 48, MaxEntries: MaxIfindex}); err != nil {
		s.Close()
		return nil, fmt.Errorf("create counters map: %w", err)
	}
	if s.times, err = ebpf.NewMap(&ebpf.MapSpec{Name: timesName, Type: ebpf.Array, KeySize: 4, ValueSize: timesSize, MaxEntries: MaxIfindex}); err != nil {
		s.Close()
		return nil, fmt.Errorf("create times map: %w", err)
	}
	if s.fast, err = fastport.NewMap(); err != nil {
		s.Close()
		return nil, err
	}
	if s.prog, err = ebpf.NewProgram(&ebpf.ProgramSpec{
		Name: progName, Type: ebpf.SchedCLS, License: "GPL",
		Instructions: program(gen.FD(), s.pidx.FD(), s.ports.FD(), s.counters.FD(), s.times.FD(), s.fast.FD(), s.nports),
	}); err != nil {
		s.Close()
		return nil, fmt.Errorf("load OCS program: %w", err)
	}
	return s, nil
}

// program assembles the classifier of a switch of nports ports.
// Registers: r6 ctx, r8 now, r7 peer, r9 dark-until. The ingress ifindex,
// the key of counters and times, is kept at fp-12.
func program(meta, pidx, ports, counters, times, fast int, nports uint32) asm.Instructions {
	prologue := asm.Instructions{
		asm.Mov.Reg(asm.R6, asm.R1),
		asm.FnKtimeGetNs.Call(),
		asm.Mov.Reg(asm.R8, asm.R0),
		// r9 = gen: that of the latest armed switch now has passed.
		asm.StoreImm(asm.RFP, -4, 0, asm.Word),
		asm.Mov.Reg(asm.R2, asm.RFP),
		asm.Add.Imm(asm.R2, -4),
		asm.LoadMapPtr(asm.R1, meta),
		asm.FnMapLookupElem.Call(),
		asm.JEq.Imm(asm.R0, 0, "shot"),
	}
	prologue = slices.Concat(prologue, SelectGen(asm.R0, asm.R8, asm.R9, asm.R7, asm.R1, asm.R2, "gen"), asm.Instructions{
		// key := gen*nports + pidx[ingress_ifindex] - 1
		asm.LoadMem(asm.R1, asm.R6, skbIngressIfindex, asm.Word),
		asm.JGE.Imm(asm.R1, MaxIfindex, "shot"),
		asm.StoreMem(asm.RFP, -12, asm.R1, asm.Word),
		asm.Mov.Reg(asm.R2, asm.RFP),
		asm.Add.Imm(asm.R2, -12),
		asm.LoadMapPtr(asm.R1, pidx),
		asm.FnMapLookupElem.Call(),
		asm.JEq.Imm(asm.R0, 0, "shot"),
		asm.LoadMem(asm.R1, asm.R0, 0, asm.Word),
		asm.JEq.Imm(asm.R1, 0, "shot"),
		asm.Mul.Imm(asm.R9, int32(nports)),
		asm.Add.Reg(asm.R9, asm.R1),
		asm.Sub.Imm(asm.R9, 1),
		asm.StoreMem(asm.RFP, -8, asm.R9, asm.Word),
		asm.Mov.Reg(asm.R2, asm.RFP),
		asm.Add.Imm(asm.R2, -8),
		asm.LoadMapPtr(asm.R1, ports),
		asm.FnMapLookupElem.Call(),
		asm.JEq.Imm(asm.R0, 0, "shot"),
		asm.LoadMem(asm.R7, asm.R0, 0, asm.Word),
		asm.LoadMem(asm.R9, asm.R0, 8, asm.DWord),
		// counters of the ingress port
		asm.Mov.Reg(asm.R2, asm.RFP),
		asm.Add.Imm(asm.R2, -12),
		asm.LoadMapPtr(asm.R1, counters),
		asm.FnMapLookupElem.Call(),
		asm.LoadMem(asm.R1, asm.R6, skbLen, asm.Word),
		asm.JLT.Reg(asm.R8, asm.R9, "dark"),
		asm.JEq.Imm(asm.R7, 0, "unpatched"),
		asm.JEq.Imm(asm.R0, 0, "fwdtimes"),
	})
	// A forwarded frame after dark drops closes a dark period: keep it.
	fwdTimes := slices.Concat(lookupTimes(times, "fwdtimes", "redirect"), asm.Instructions{
		asm.LoadMem(asm.R2, asm.R0, tLastDark, asm.DWord),
		asm.LoadMem(asm.R3, asm.R0, tLastFwd, asm.DWord),
		asm.JLE.Reg(asm.R2, asm.R3, "fwdstamp"),
		asm.StoreMem(asm.R0, tBefore, asm.R3, asm.DWord),
		asm.LoadMem(asm.R4, asm.R0, tFirstDark, asm.DWord),
		asm.StoreMem(asm.R0, tDarkFrom, asm.R4, asm.DWord),
		asm.StoreMem(asm.R0, tDarkTo, asm.R2, asm.DWord),
		asm.StoreMem(asm.R0, tAfter, asm.R8, asm.DWord),
		asm.LoadMem(asm.R4, asm.R0, tPeriods, asm.DWord),
		asm.Add.Imm(asm.R4, 1),
		asm.StoreMem(asm.R0, tPeriods, asm.R4, asm.DWord),
		asm.StoreMem(asm.R0, tLastFwd, asm.R8, asm.DWord).WithSymbol("fwdstamp"),
	})
	// To the peer port: straight into the ingress of its veth peer (the
	// ToR's uplink) when the port is fast, else through its egress, so
	// that its shaper, loss rule and capture apply (dataplane/fastport).
	redirect := fastport.Redirect(fast, asm.R7, -16, "redirect")
	redirect[0] = redirect[0].WithSymbol("redirect")
	dark := append(asm.Instructions{asm.JEq.Imm(asm.R0, 0, "darktimes").WithSymbol("dark")}, bump(16)...)
	// The first dark drop after a forwarded frame opens a dark period.
	dark = slices.Concat(dark, lookupTimes(times, "darktimes", "shot"), asm.Instructions{
		asm.LoadMem(asm.R2, asm.R0, tLastDark, asm.DWord),
		asm.LoadMem(asm.R3, asm.R0, tLastFwd, asm.DWord),
		asm.JGT.Reg(asm.R2, asm.R3, "darkstamp"),
		asm.StoreMem(asm.R0, tFirstDark, asm.R8, asm.DWord),
		asm.StoreMem(asm.R0, tLastDark, asm.R8, asm.DWord).WithSymbol("darkstamp"),
		asm.Ja.Label("shot"),
	})
	unpatched := append(asm.Instructions{asm.JEq.Imm(asm.R0, 0, "shot").WithSymbol("unpatched")}, bump(32)...)
	shot := asm.Instructions{asm.Mov.Imm(asm.R0, actShot).WithSymbol("shot"), asm.Return()}
	return slices.Concat(prologue, bump(0), fwdTimes, redirect, dark, unpatched, shot)
}

// lookupTimes sets r0 to the ingress port's times entry (key at fp-12),
// jumping to none when there is none. The first instruction carries
// symbol sym.
func lookupTimes(times int, sym, none string) asm.Instructions {
	return asm.Instructions{
		asm.Mov.Reg(asm.R2, asm.RFP).WithSymbol(sym),
		asm.Add.Imm(asm.R2, -12),
		asm.LoadMapPtr(asm.R1, times),
		asm.FnMapLookupElem.Call(),
		asm.JEq.Imm(asm.R0, 0, none),
	}
}

// bump adds one packet (r1 bytes) to the counter pair at offset off of
// the per-CPU counters entry r0 points to: forwarded 0, dark 16,
// unpatched 32.
func bump(off int16) asm.Instructions {
	return asm.Instructions{
		asm.LoadMem(asm.R2, asm.R0, off, asm.DWord),
		asm.Add.Imm(asm.R2, 1),
		asm.StoreMem(asm.R0, off, asm.R2, asm.DWord),
		asm.LoadMem(asm.R2, asm.R0, off+8, asm.DWord),
		asm.Add.Reg(asm.R2, asm.R1),
		asm.StoreMem(asm.R0, off+8, asm.R2, asm.DWord),
	}
}

// Close releases this process's references; attached filters keep the
// program and maps alive in the kernel.
func (s *Switch) Close() {
	if s.prog != nil {
		s.prog.Close()
	}
	for _, m := range []*ebpf.Map{s.pidx, s.ports, s.counters, s.times, s.fast} {
		if m != nil {
			m.Close()
		}
	}
}

// Attach puts a clsact qdisc and the program, in direct-action mode, on
// the ingress of one OCS port.
func (s *Switch) Attach(h *netlink.Handle, link netlink.Link) error {
	return tcprio.Attach(h, link, netlink.HANDLE_MIN_INGRESS, tcprio.FastPath, s.prog.FD(), filterName)
}

// ErrNotAttached means a port carries no OCS program.
var ErrNotAttached = errors.New("no OCS program attached")

// Recover finds the program and maps attached to a port by an earlier OCS
// process, so a restarted OCS takes over live circuits. gen is the lab's
// generation switch recovered from an earlier switch, or nil: then the
// program's own meta map becomes it (a switch that was armed counts as
// done). Every switch of a lab must read the same meta map.
func Recover(h *netlink.Handle, link netlink.Link, gen *Gen) (*Switch, *Gen, error) {
	filters, err := nlsafe.Retry2(h.FilterList, link, netlink.HANDLE_MIN_INGRESS)
	if err != nil {
		return nil, nil, fmt.Errorf("list filters of %s: %w", link.Attrs().Name, err)
	}
	for _, f := range filters {
		bf, ok := f.(*netlink.BpfFilter)
		if !ok || bf.Id == 0 {
			continue
		}
		prog, err := ebpf.NewProgramFromID(ebpf.ProgramID(bf.Id))
		if err != nil {
			return nil, nil, fmt.Errorf("open program %d: %w", bf.Id, err)
		}
		info, err := prog.Info()
		if err != nil || info.Name != progName {
			prog.Close()
			continue
		}
		s := &Switch{prog: prog}
		var meta *ebpf.Map
		ids, _ := info.MapIDs()
		for _, id := range ids {
			m, err := ebpf.NewMapFromID(id)
			if err != nil {
				s.Close()
				return nil, nil, fmt.Errorf("open map %d: %w", id, err)
			}
			mi, _ := m.Info()
			switch mi.Name {
			case metaName:
				meta = m
			case portsName:
				s.ports = m
			case pidxName:
				s.pidx = m
			case countersName:
				s.counters = m
			case timesName:
				s.times = m
			case fastport.MapName:
				s.fast = m
			default:
				m.Close()
			}
		}
		if meta == nil || s.ports == nil || s.counters == nil {
			if meta != nil {
				meta.Close()
			}
			s.Close()
			return nil, nil, fmt.Errorf("program on %s lacks its maps", link.Attrs().Name)
		}
		pi, err := s.ports.Info()
		if s.pidx == nil || err != nil || pi.MaxEntries%Generations != 0 {
			meta.Close()
			s.Close()
			return nil, nil, fmt.Errorf("%s: %w", link.Attrs().Name, ErrOldMeta)
		}
		s.nports, s.idx = pi.MaxEntries/Generations, map[uint32]uint32{}
		if gen == nil {
			if gen, err = recoverGen(meta); err != nil {
				meta.Close()
				s.Close()
				return nil, nil, err
			}
		} else {
			mi, _ := meta.Info()
			id, _ := mi.ID()
			gid, _ := gen.ID()
			meta.Close()
			if id != gid {
				s.Close()
				return nil, nil, fmt.Errorf("the OCS switches of this lab do not share one generation switch (%s reads meta map %d, the others %d): it was deployed by an older emu; redeploy it", link.Attrs().Name, id, gid)
			}
		}
		s.gen = gen
		return s, gen, nil
	}
	return nil, nil, fmt.Errorf("%s: %w", link.Attrs().Name, ErrNotAttached)
}

// key is the ports map key of ifindex i in generation gen.
func (s *Switch) key(gen, i uint32) (uint32, error) {
	if i == 0 || i >= MaxIfindex {
		return 0, fmt.Errorf("ifindex %d out of range", i)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	n, ok := s.idx[i]
	if !ok { // a recovered switch learns its ports' indexes from pidx
		if err := s.pidx.Lookup(i, &n); err != nil {
			return 0, fmt.Errorf("read port index of %d: %w", i, err)
		}
		s.idx[i] = n
	}
	if n == 0 || n > s.nports {
		return 0, fmt.Errorf("ifindex %d is not a port of this switch", i)
	}
	return gen*s.nports + n - 1, nil
}

// SyncFast sets the fast flag of the switch's ports links (in namespace
// ns, h a handle there) from what their egress holds (fastport.Sync) and
// returns why each slow port is slow ("" for fast ones). A program
// loaded by an older emu keeps no flags: every port stays slow.
func (s *Switch) SyncFast(h *netlink.Handle, ns string, links []netlink.Link) ([]string, error) {
	if s.fast == nil {
		why := make([]string, len(links))
		for i := range why {
			why[i] = "program loaded by an older emu"
		}
		return why, nil
	}
	return fastport.Sync(s.fast, h, ns, links)
}

// Fast reports whether frames leave by port ifindex straight into its
// peer's ingress.
func (s *Switch) Fast(ifindex uint32) (bool, error) {
	if s.fast == nil {
		return false, nil
	}
	return fastport.Fast(s.fast, ifindex)
}

// Read returns the entries of the generation in use, by ifindex.
func (s *Switch) Read(ifindexes []uint32) (map[uint32]Entry, error) {
	cur := s.gen.Cur()
	out := map[uint32]Entry{}
	for _, i := range ifindexes {
		k, err := s.key(cur, i)
		if err != nil {
			return nil, err
		}
		var e Entry
		if err := s.ports.Lookup(k, &e); err != nil {
			return nil, fmt.Errorf("read port %d: %w", i, err)
		}
		out[i] = e
	}
	return out, nil
}

// Write writes a whole configuration (every port of the switch) into
// generation gen, one Gen.Free gave; the lab's Gen then arms it, together
// with every other switch and ToR, for one instant.
func (s *Switch) Write(gen uint32, entries map[uint32]Entry) error {
	if gen >= Generations {
		return fmt.Errorf("generation %d out of range", gen)
	}
	ifs := make([]uint32, 0, len(entries))
	keys := make([]uint32, 0, len(entries))
	vals := make([]Entry, 0, len(entries))
	for i, e := range entries {
		k, err := s.key(gen, i)
		if err != nil {
			return err
		}
		ifs = append(ifs, i)
		keys = append(keys, k)
		vals = append(vals, e)
	}
	_, err := s.ports.BatchUpdate(keys, vals, nil)
	if errors.Is(err, ebpf.ErrNotSupported) { // kernels without batch ops
		for j := range keys {
			if err := s.ports.Put(keys[j], vals[j]); err != nil {
				return fmt.Errorf("write port %d: %w", ifs[j], err)
			}
		}
		return nil
	}
	if err != nil {
		return fmt.Errorf("write ports: %w", err)
	}
	return nil
}

// Counters returns the counters of the given ports, summed over CPUs.
func (s *Switch) Counters(ifindexes []uint32) (map[uint32]Counters, error) {
	out := map[uint32]Counters{}
	for _, i := range ifindexes {
		var per []Counters
		if err := s.counters.Lookup(i, &per); err != nil {
			return nil, fmt.Errorf("read counters of port %d: %w", i, err)
		}
		var c Counters
		for _, p := range per {
			c.FwdPackets += p.FwdPackets
			c.FwdBytes += p.FwdBytes
			c.DarkPackets += p.DarkPackets
			c.DarkBytes += p.DarkBytes
			c.UnpatchedPackets += p.UnpatchedPackets
			c.UnpatchedBytes += p.UnpatchedBytes
		}
		out[i] = c
	}
	return out, nil
}

// ErrNoTimes means a port's program keeps no timestamps: it was loaded by
// an older emu.
var ErrNoTimes = errors.New("the OCS program keeps no dark-period timestamps (loaded by an older emu; redeploy the lab)")

// DarkTimes returns the kernel timestamps of the given ports.
func (s *Switch) DarkTimes(ifindexes []uint32) (map[uint32]DarkTimes, error) {
	if s.times == nil {
		return nil, ErrNoTimes
	}
	out := map[uint32]DarkTimes{}
	for _, i := range ifindexes {
		var t DarkTimes
		if err := s.times.Lookup(i, &t); err != nil {
			return nil, fmt.Errorf("read times of port %d: %w", i, err)
		}
		out[i] = t
	}
	return out, nil
}

// Monotonic returns CLOCK_MONOTONIC in ns, the clock bpf_ktime_get_ns reads.
func Monotonic() uint64 { return uint64(monoclock.Now()) }
