package fastpath

import (
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"golang.org/x/sys/unix"
)

// Generations is how many configurations the OCS port maps and the ToR
// path maps hold: the one in use and up to Generations-1 staged ahead,
// each armed for its own kernel-timed instant, so a time-slotted schedule
// is staged several slots ahead and the kernel switches on its own.
const Generations = 16

// genBits is log2(Generations): the low bits of a meta word.
const genBits = 4

// reuseGuard: a generation that stopped being used at instant t is not
// handed out for writing before t+reuseGuard, so a frame that chose it
// just before the switch finishes with the entries it started with.
const reuseGuard = uint64(100 * time.Microsecond)

// ErrOldMeta means a lab's meta map has the layout of an older emu.
var ErrOldMeta = errors.New("the lab's generation switch has an older layout (deployed by an older emu): redeploy the lab")

// Gen is the generation switch of a lab: the meta map every program
// reads. Its value is Generations u64 words, each instant<<genBits |
// generation: word 0 the switch committed last (the generation in use),
// words 1.. the armed switches (0: none). A program uses the generation
// of the latest switch whose instant has passed by bpf_ktime_get_ns(),
// among the armed ones and word 0 (SelectGen).
//
// A configuration is written whole into a Free generation, then Arm
// stores its switch in one aligned 8-byte write into the memory-mapped
// value (no syscall); Commit records switches that have passed. Every
// store is a single atomic word, and each word read by a program is
// consistent on its own, so no frame sees half a switch. Commit stores
// word 0 before it clears the switch word, and a program reads the
// switch words before word 0: a program that finds a committed switch's
// word cleared finds word 0 holding that switch or a later one, never the
// generation it replaced. This relies on stores being seen in program
// order and loads not being reordered with loads (x86-64, the machine
// the emulator runs on; the BPF JIT keeps the loads in order).
type Gen struct {
	mu   sync.Mutex
	meta *ebpf.Map
	mem  []byte   // the meta value, memory-mapped; nil once closed
	cur  uint32   // generation in use (word 0)
	done uint64   // instant of word 0's switch
	armd []uint64 // armd[i] mirrors word i (1..): instant<<genBits | gen
	// retired[g]: when g stopped being used (see reuseGuard).
	retired [Generations]uint64
	last    uint32 // generation armed last: Free goes round from it
}

// NewGen creates a lab's meta map, generation 0 in use.
func NewGen() (*Gen, error) {
	m, err := ebpf.NewMap(&ebpf.MapSpec{Name: metaName, Type: ebpf.Array, KeySize: 4,
		ValueSize: 8 * Generations, MaxEntries: 1, Flags: unix.BPF_F_MMAPABLE})
	if err != nil {
		return nil, fmt.Errorf("create meta map: %w", err)
	}
	g, err := openGen(m)
	if err != nil {
		m.Close()
		return nil, err
	}
	return g, nil
}

// openGen maps the meta value of m into memory and reads its words.
func openGen(m *ebpf.Map) (*Gen, error) {
	info, err := m.Info()
	if err != nil {
		return nil, fmt.Errorf("meta map info: %w", err)
	}
	if info.ValueSize != 8*Generations || info.MaxEntries != 1 || info.Flags&unix.BPF_F_MMAPABLE == 0 {
		return nil, ErrOldMeta
	}
	mem, err := unix.Mmap(m.FD(), 0, os.Getpagesize(), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		return nil, fmt.Errorf("map meta into memory: %w", err)
	}
	g := &Gen{meta: m, mem: mem, armd: make([]uint64, Generations)}
	g.cur = uint32(g.load(0) & (Generations - 1))
	g.done = g.load(0) >> genBits
	for i := 1; i < Generations; i++ {
		g.armd[i] = g.load(i)
	}
	g.last = g.cur
	return g, nil
}

func (g *Gen) word(i int) *uint64 { return (*uint64)(unsafe.Pointer(&g.mem[8*i])) }
func (g *Gen) load(i int) uint64  { return atomic.LoadUint64(g.word(i)) }
func (g *Gen) store(i int, v uint64) {
	atomic.StoreUint64(g.word(i), v)
	if i > 0 {
		g.armd[i] = v
	}
}

// recoverGen takes over a meta map left by an earlier process: the
// newest switch whose instant has passed is the generation in use, and
// switches still ahead are disarmed (the process that armed them is gone).
func recoverGen(m *ebpf.Map) (*Gen, error) {
	g, err := openGen(m)
	if err != nil {
		return nil, err
	}
	g.Commit(g.Cancel(0))
	return g, nil
}

// FD is the meta map's file descriptor, for programs that read it.
func (g *Gen) FD() int { return g.meta.FD() }

// ID identifies the meta map in the kernel.
func (g *Gen) ID() (ebpf.MapID, error) {
	info, err := g.meta.Info()
	if err != nil {
		return 0, err
	}
	id, _ := info.ID()
	return id, nil
}

// Cur is the generation in use (as of the last Commit).
func (g *Gen) Cur() uint32 {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.cur
}

// Pending is how many armed switches are not committed yet.
func (g *Gen) Pending() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	n := 0
	for _, w := range g.armd[1:] {
		if w != 0 {
			n++
		}
	}
	return n
}

func (g *Gen) armed(gen uint32) bool {
	for _, w := range g.armd[1:] {
		if w != 0 && uint32(w&(Generations-1)) == gen {
			return true
		}
	}
	return false
}

// Free returns a generation to write the next configuration into: not in
// use, not armed, and not used for reuseGuard; the next such in turn
// after the one armed last, so the same one until it is armed. ok is false
// while every generation is in play: then one is free from retry (a
// monotonic instant) on, once Commit has recorded the switch that frees it.
func (g *Gen) Free() (gen uint32, retry uint64, ok bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	now := Monotonic()
	retry = ^uint64(0)
	for k := uint32(1); k < Generations; k++ {
		x := (g.last + k) % Generations
		if x == g.cur || g.armed(x) {
			continue
		}
		if at := g.retired[x] + reuseGuard; now < at {
			retry = min(retry, at)
			continue
		}
		return x, 0, true
	}
	for _, w := range g.armd[1:] {
		if w != 0 {
			retry = min(retry, w>>genBits+reuseGuard)
		}
	}
	return 0, retry, false
}

// Arm tells every program to use generation gen from monotonic time at
// (ns; 0 or past: at once). One word write: every OCS port and ToR
// switches at the same instant. An instant at or before the committed
// switch's (word 0) is stored just after it, so that it still wins over
// word 0 (SelectGen).
func (g *Gen) Arm(gen uint32, at uint64) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.mem == nil {
		return errClosed
	}
	if gen >= Generations || gen == g.cur || g.armed(gen) {
		return fmt.Errorf("generation %d is in use or armed", gen)
	}
	at = max(at, g.done+1)
	if at >= 1<<(64-genBits) {
		return fmt.Errorf("switch instant %d out of range", at)
	}
	for i := 1; i < Generations; i++ {
		if g.armd[i] == 0 {
			g.store(i, at<<genBits|uint64(gen))
			g.last = gen
			return nil
		}
	}
	return errors.New("every switch slot is armed")
}

// Commit records every armed switch whose instant is at or before now (a
// monotonic time already reached): the kernel has made them, reading the
// same clock. The newest becomes the generation in use. After Close it
// does nothing.
func (g *Gen) Commit(now uint64) {
	g.mu.Lock()
	defer g.mu.Unlock()
	for g.mem != nil {
		i := g.due(now)
		if i == 0 {
			return
		}
		w := g.armd[i]
		// Word 0 first: until the switch word is cleared, both say the
		// same generation (see Gen).
		old := g.cur
		g.cur, g.done = uint32(w&(Generations-1)), w>>genBits
		atomic.StoreUint64(g.word(0), w)
		g.store(i, 0)
		// A frame may have chosen the old generation up to now, not
		// only up to the instant: a late or at-once switch is committed
		// after it.
		g.retired[old] = max(g.done, Monotonic())
	}
}

// due is the word of the earliest armed switch at or before now, or 0.
func (g *Gen) due(now uint64) int {
	best := 0
	for i := 1; i < Generations; i++ {
		if at := g.armd[i] >> genBits; g.armd[i] != 0 && at <= now && (best == 0 || at < g.armd[best]>>genBits) {
			best = i
		}
	}
	return best
}

// Cancel disarms every switch more than guard ahead of now and returns
// the cut: switches at or before it stay armed. A switch whose instant
// passed while it was being disarmed (the thread was held up) is armed
// again and kept, as the kernel may have made it. After Close it
// disarms nothing.
func (g *Gen) Cancel(guard uint64) (cut uint64) {
	g.mu.Lock()
	defer g.mu.Unlock()
	cut = Monotonic() + guard
	if g.mem == nil {
		return cut
	}
	var cleared []uint64
	for i := 1; i < Generations; i++ {
		if w := g.armd[i]; w != 0 && w>>genBits > cut {
			g.store(i, 0)
			cleared = append(cleared, w)
		}
	}
	now := Monotonic()
	for _, w := range cleared {
		if w>>genBits <= now {
			for i := 1; i < Generations; i++ {
				if g.armd[i] == 0 {
					g.store(i, w)
					break
				}
			}
			cut = max(cut, w>>genBits)
		}
	}
	return cut
}

// errClosed: the Gen was closed, its meta value is no longer mapped.
var errClosed = errors.New("generation switch closed")

// Close releases this process's reference to the meta map; Arm fails and
// Commit and Cancel do nothing after it.
func (g *Gen) Close() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.mem != nil {
		_ = unix.Munmap(g.mem)
		g.mem = nil
	}
	if g.meta != nil {
		g.meta.Close()
	}
}

// SelectGen assembles the choice of generation every program makes. ptr
// points to the meta value, now holds bpf_ktime_get_ns(); it leaves the
// generation in gen: that of the latest armed switch whose instant has
// passed, unless word 0's committed switch is as late or later. best and
// tmp are clobbered; label prefixes the labels it uses. A loop unrolled
// over the Generations-1 switch words, each read once, then word 0, read
// last (see Gen for why that order).
func SelectGen(ptr, now, gen, best, tmp, instant asm.Register, label string) asm.Instructions {
	ins := asm.Instructions{
		asm.Mov.Imm(gen, 0),
		asm.Mov.Imm(best, 0),
	}
	for i := 1; i < Generations; i++ {
		next := fmt.Sprintf("%s%d", label, i+1)
		ins = append(ins,
			asm.LoadMem(tmp, ptr, int16(8*i), asm.DWord).WithSymbol(fmt.Sprintf("%s%d", label, i)),
			asm.Mov.Reg(instant, tmp),
			asm.RSh.Imm(instant, genBits),
			asm.JEq.Imm(instant, 0, next),
			asm.JGT.Reg(instant, now, next),
			asm.JLT.Reg(instant, best, next),
			asm.Mov.Reg(best, instant),
			asm.Mov.Reg(gen, tmp),
		)
	}
	end := label + "_end"
	return append(ins,
		asm.LoadMem(tmp, ptr, 0, asm.DWord).WithSymbol(fmt.Sprintf("%s%d", label, Generations)),
		asm.Mov.Reg(instant, tmp),
		asm.RSh.Imm(instant, genBits),
		asm.JLT.Reg(instant, best, end),
		asm.Mov.Reg(gen, tmp),
		asm.And.Imm(gen, Generations-1).WithSymbol(end),
	)
}
