package fabric

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/vishvananda/netlink"
	"golang.org/x/sync/errgroup"
	"golang.org/x/sys/unix"

	"github.com/ocsemu/ocsemu/dataplane/fairq"
	"github.com/ocsemu/ocsemu/dataplane/names"
	"github.com/ocsemu/ocsemu/dataplane/netns"
	"github.com/ocsemu/ocsemu/dataplane/nlsafe"
	"github.com/ocsemu/ocsemu/dataplane/shaper"
	"github.com/ocsemu/ocsemu/dataplane/topo"
)

// ErrNotRoot is returned by operations that need CAP_NET_ADMIN.
var ErrNotRoot = errors.New("this needs root (CAP_NET_ADMIN and CAP_SYS_ADMIN): run it with sudo")

// Progress receives a line of progress for long operations; may be nil.
type Progress func(format string, args ...any)

// Options tune Deploy.
type Options struct {
	Log      *slog.Logger
	Progress Progress
	Source   string // scenario file, recorded in the state
	// Scenario is the scenario as JSON, recorded in the state for the emu
	// side (optional).
	Scenario json.RawMessage
	// Parallel bounds concurrent kernel operations; 0 means 4 × CPUs.
	Parallel int
	// QuietCC leaves out the warning that the congestion control cannot
	// be the namespaces' default (the caller has said it already).
	QuietCC bool
	// HoldUse takes the lab's UseLock before the deploy lock is released,
	// and leaves it held by the returned Lab until ReleaseUse: a workload
	// that deploys its own lab (emu run) holds it from the first instant,
	// so no destroy or collective of another process slips in before it.
	HoldUse bool
	// Owner is recorded in the lab's state (State.Owner).
	Owner string
}

// Lab is a deployed fabric with a netlink handle per namespace.
type Lab struct {
	Topo *topo.Topology
	// Steps is how long each step of Deploy took, in order.
	Steps     []Step
	log       *slog.Logger
	mu        sync.Mutex
	handles   map[string]*netlink.Handle // by node name
	ifindex   map[string]map[string]int  // by node name, then interface
	fairPorts int                        // fairSwitchPorts, set by Deploy
	use       *LabLock                   // the use lock, with Options.HoldUse
}

// Step is one timed step of Deploy: its wall time, and the CPU time this
// process spent in it (user and system, the kernel's work on its behalf
// included), which depends less on what else the machine runs.
type Step struct {
	Name string
	Took time.Duration
	CPU  time.Duration
}

// stepClock times the steps of Deploy.
type stepClock struct {
	wall time.Time
	cpu  time.Duration
}

func startSteps() stepClock { return stepClock{wall: time.Now(), cpu: processCPU()} }

// step records how long a step of Deploy took since the clock was last
// read, and restarts it.
func (l *Lab) step(name string, c *stepClock) {
	now, cpu := time.Now(), processCPU()
	s := Step{Name: name, Took: now.Sub(c.wall), CPU: cpu - c.cpu}
	l.Steps = append(l.Steps, s)
	l.log.Debug("deploy step", "step", name, "took", s.Took, "cpu", s.CPU)
	c.wall, c.cpu = now, cpu
}

// processCPU is the user and system time this process has used.
func processCPU() time.Duration {
	var ru unix.Rusage
	if unix.Getrusage(unix.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// ReleaseUse gives up the use lock Deploy took with Options.HoldUse (if
// any); call it after the lab's teardown.
func (l *Lab) ReleaseUse() {
	if l == nil {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.use.Release()
	l.use = nil
}

// Close releases the netlink handles; the fabric stays up.
func (l *Lab) Close() {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, h := range l.handles {
		h.Close()
	}
	l.handles = nil
}

// Handle returns the netlink handle of a node's namespace, opening it once.
func (l *Lab) Handle(node string) (*netlink.Handle, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if h, ok := l.handles[node]; ok {
		return h, nil
	}
	n, ok := l.Topo.Node(node)
	if !ok {
		return nil, fmt.Errorf("lab %q has no node %q", l.Topo.Lab, node)
	}
	h, err := netns.Handle(n.NS)
	if err != nil {
		return nil, fmt.Errorf("node %s: %w", node, err)
	}
	if l.handles == nil {
		l.handles = map[string]*netlink.Handle{}
	}
	l.handles[node] = h
	return h, nil
}

// Open attaches to a deployed lab from its state file.
func Open(lab string, log *slog.Logger) (*Lab, error) {
	st, err := ReadState(lab)
	if err != nil {
		return nil, err
	}
	return &Lab{Topo: topo.Build(st.Spec), log: orDiscard(log)}, nil
}

func orDiscard(l *slog.Logger) *slog.Logger {
	if l == nil {
		return slog.New(slog.DiscardHandler)
	}
	return l
}

// Deploy brings a topology up in the kernel: namespaces, veths, addresses,
// routes, permanent neighbours and shaping. On failure or cancellation it
// removes whatever it made.
func Deploy(ctx context.Context, t *topo.Topology, opt Options) (lab *Lab, err error) {
	if os.Geteuid() != 0 {
		return nil, ErrNotRoot
	}
	log := orDiscard(opt.Log).With("lab", t.Lab)
	progress := opt.Progress
	if progress == nil {
		progress = func(string, ...any) {}
	}
	par := opt.Parallel
	if par <= 0 {
		par = 4 * runtime.NumCPU()
	}
	// One deploy per lab at a time: a second one would race the first
	// for the same namespace names and leave neither lab.
	lock, err := Lock(t.Lab, "deploy")
	if errors.Is(err, ErrLocked) {
		return nil, fmt.Errorf("lab %q is being deployed by another emu process (%w)", t.Lab, err)
	}
	if err != nil {
		return nil, err
	}
	defer lock.Release()
	if err := checkOpenFiles(len(t.Nodes)); err != nil {
		return nil, err
	}
	if pid, held := heldByCheck(t.Lab); held {
		return nil, fmt.Errorf("lab %q is the name of the private copy of the emu lab check of pid %d: deploy under another name (--lab-name)", t.Lab, pid)
	}
	if _, err := ReadState(t.Lab); err == nil {
		if pid, held := Held(t.Lab, UseLock); held {
			return nil, fmt.Errorf("lab %q is already deployed, and in use by pid %d (emu run or emu collective): deploy under a name of your own with --lab-name", t.Lab, pid)
		}
		return nil, fmt.Errorf("lab %q is already deployed: if it is yours, `emu destroy %s` first; otherwise deploy under a name of your own with --lab-name", t.Lab, t.Lab)
	}
	if left, _ := netns.List(names.LabPrefix(t.Lab)); len(left) > 0 {
		return nil, fmt.Errorf("lab %q has %d leftover namespaces (e.g. %s): run `emu destroy %s` first", t.Lab, len(left), left[0], t.Lab)
	}
	// The use lock comes before the state file: refused, it leaves nothing.
	var use *LabLock
	if opt.HoldUse {
		if use, err = Lock(t.Lab, UseLock); err != nil {
			return nil, fmt.Errorf("lab %q: %w", t.Lab, err)
		}
	}
	st := &State{Lab: t.Lab, Status: StatusDeploying, Source: opt.Source, Spec: t.Spec, Scenario: opt.Scenario, Created: time.Now(), Owner: opt.Owner}
	for _, n := range t.Nodes {
		st.Namespace = append(st.Namespace, n.NS)
	}
	// The state file comes first, so that a deploy killed half-way is
	// still found and removed by `emu destroy <lab>`.
	if err := WriteState(st); err != nil {
		use.Release()
		return nil, err
	}
	lab = &Lab{Topo: t, log: log, ifindex: planIndexes(t), fairPorts: fairSwitchPorts(t), use: use}
	defer func() {
		if err != nil {
			lab.Close()
			log.Warn("deploy failed, removing the partial lab", "err", err)
			if derr := Destroy(context.WithoutCancel(ctx), t.Lab, log); derr != nil {
				err = errors.Join(err, fmt.Errorf("cleanup after failed deploy: %w", derr))
			}
			lab.ReleaseUse()
			lab = nil
		}
	}()

	cc := t.Spec.CongestionControl
	warn, err := CheckCongestionControl(cc)
	if err != nil {
		return lab, err
	}
	if warn != "" && !opt.QuietCC {
		log.Warn(warn)
	}
	start := time.Now()
	clock := startSteps()
	progress("creating %d namespaces", len(t.Nodes))
	serverCC := serversNeedCC(cc)
	anchor := names.LabPrefix(t.Lab) + ".anchor" // not a node name: nodes never start with '.'
	if err := netns.NewAnchor(anchor); err != nil {
		return lab, err
	}
	err = forEach(ctx, par, t.Nodes, func(n topo.Node) error {
		return netns.CreateLinked(n.NS, anchor, func() error { return setupNS(n.Kind, cc, serverCC) })
	})
	if derr := netns.Delete(anchor); derr != nil && err == nil {
		err = derr
	}
	if err != nil {
		return lab, err
	}
	lab.step("namespaces", &clock)

	progress("creating %d veth links", len(t.Links))
	var done atomic.Int64
	if err := forEachIndexed(ctx, par, t.Links, func(i int, l topo.Link) error {
		err := lab.addLink(i, l)
		if n := done.Add(1); n%500 == 0 {
			progress("  %d/%d links", n, len(t.Links))
		}
		return err
	}); err != nil {
		return lab, err
	}
	lab.step("links", &clock)

	progress("installing routes and neighbours")
	if err := forEach(ctx, par, t.Nodes, func(n topo.Node) error { return lab.addRoutes(n) }); err != nil {
		return lab, err
	}
	lab.step("routes", &clock)
	// The kernel reports carrier, and activates qdiscs, asynchronously
	// (linkwatch); a lab is up only when every port is.
	if err := forEach(ctx, par, t.Nodes, func(n topo.Node) error { return lab.waitCarrier(ctx, n, 5*time.Second) }); err != nil {
		return lab, err
	}
	lab.step("carrier", &clock)
	st.Status = StatusUp
	if err := WriteState(st); err != nil {
		return lab, err
	}
	log.Debug("lab up", "nodes", len(t.Nodes), "links", len(t.Links), "took", time.Since(start).Round(time.Millisecond))
	return lab, nil
}

// checkOpenFiles refuses a lab this process could not hold: Deploy keeps
// a netlink socket per namespace open, plus a few per worker. (Go raises
// the soft limit to the hard one at start.)
func checkOpenFiles(nodes int) error {
	var lim unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &lim); err != nil {
		return nil // unknown: let the kernel say
	}
	if need := uint64(nodes) + 256; lim.Cur < need {
		return fmt.Errorf("a lab of %d namespaces needs about %d open files, but this process may open %d: raise the limit (ulimit -n %d)", nodes, need, lim.Cur, need)
	}
	return nil
}

// forEach runs fn over items with bounded parallelism and stops at the
// first error or when ctx is cancelled.
func forEach[T any](ctx context.Context, par int, items []T, fn func(T) error) error {
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(par)
	for _, it := range items {
		if gctx.Err() != nil {
			break
		}
		g.Go(func() error {
			if err := gctx.Err(); err != nil {
				return err
			}
			return fn(it)
		})
	}
	if err := g.Wait(); err != nil {
		return err
	}
	return ctx.Err()
}

// forEachIndexed is forEach with the item's index.
func forEachIndexed[T any](ctx context.Context, par int, items []T, fn func(int, T) error) error {
	idx := make([]int, len(items))
	for i := range idx {
		idx[i] = i
	}
	return forEach(ctx, par, idx, func(i int) error { return fn(i, items[i]) })
}

// serversNeedCC tells whether server namespaces must set their default
// congestion control: not when they inherit it from the root namespace
// (the kernel copies init_net's default into a new namespace), nor when
// the host does not allow it (CheckCongestionControl warned; emu's own
// sockets set it per socket).
func serversNeedCC(cc string) bool {
	cur, _ := os.ReadFile("/proc/sys/net/ipv4/tcp_congestion_control")
	if trimNL(cur) == cc {
		return false
	}
	allowed, _ := os.ReadFile("/proc/sys/net/ipv4/tcp_allowed_congestion_control")
	return slices.Contains(strings.Fields(string(allowed)), cc)
}

// setupNS runs inside a fresh namespace: sysctls and the loopback.
//
// Server namespaces, most of a large lab, write no sysctl: every lookup
// under /proc/sys compares the name against the entries of every network
// namespace on the host (proc_sys_compare), so per-namespace sysctls make
// creating n namespaces cost O(n²) (31.9 s of 44 s for 4,161 namespaces).
// A server has one port and a default route through it, so rp_filter
// never drops its traffic, and its port gets no IPv6 address (addrgenmode
// none, see addLink), so it sends no DAD or router solicitation. The
// congestion control is written only when the root namespace's default,
// which a new namespace inherits, differs (serversNeedCC).
func setupNS(kind, cc string, serverCC bool) error {
	if kind == topo.KindServer {
		if serverCC {
			if err := SetNSCongestionControl(cc); err != nil && !errors.Is(err, ErrCCRestricted) {
				return err
			}
		}
		return netns.LoopbackUp()
	}
	sysctls := [][2]string{
		// No IPv6 on the fabric: no DAD delay, no router solicitations.
		{"net.ipv6.conf.all.disable_ipv6", "1"},
		{"net.ipv6.conf.default.disable_ipv6", "1"},
		// Ring traffic is asymmetric; reverse-path filtering would drop it.
		{"net.ipv4.conf.all.rp_filter", "0"},
		{"net.ipv4.conf.default.rp_filter", "0"},
	}
	if kind == topo.KindToR || kind == topo.KindEPS {
		sysctls = append(sysctls, [2]string{"net.ipv4.ip_forward", "1"})
	}
	for _, kv := range sysctls {
		if err := netns.WriteSysctl(kv[0], kv[1]); err != nil {
			return err
		}
	}
	return netns.LoopbackUp()
}

// ErrCCRestricted means the kernel has the congestion control but the host
// does not allow it as a default outside the root namespace (it is missing
// from net.ipv4.tcp_allowed_congestion_control). emu's own sockets still
// use it, set per socket with TCP_CONGESTION.
var ErrCCRestricted = errors.New("congestion control not allowed as a namespace default")

// SetNSCongestionControl sets the default congestion control of the
// calling thread's namespace.
func SetNSCongestionControl(cc string) error {
	err := netns.WriteSysctl("net.ipv4.tcp_congestion_control", cc)
	if err == nil {
		return nil
	}
	avail, _ := os.ReadFile("/proc/sys/net/ipv4/tcp_available_congestion_control")
	if !slices.Contains(strings.Fields(string(avail)), cc) {
		return fmt.Errorf("congestion control %q is not available in this kernel (available: %s)", cc, trimNL(avail))
	}
	if errors.Is(err, unix.EPERM) {
		return fmt.Errorf("%q: %w", cc, ErrCCRestricted)
	}
	return err
}

// CheckCongestionControl tells whether cc can be the default of lab
// namespaces, and if not, why. It returns an error only for a congestion
// control the kernel lacks.
func CheckCongestionControl(cc string) (warning string, err error) {
	avail, _ := os.ReadFile("/proc/sys/net/ipv4/tcp_available_congestion_control")
	if !slices.Contains(strings.Fields(string(avail)), cc) {
		return "", fmt.Errorf("congestion control %q is not available in this kernel (available: %s)", cc, trimNL(avail))
	}
	allowed, _ := os.ReadFile("/proc/sys/net/ipv4/tcp_allowed_congestion_control")
	if !slices.Contains(strings.Fields(string(allowed)), cc) {
		return fmt.Sprintf("congestion control %q is not in the host's net.ipv4.tcp_allowed_congestion_control (%s), so it cannot be the default of lab namespaces; emu's own traffic sets it per socket, other programs get the namespace default", cc, trimNL(allowed)), nil
	}
	return "", nil
}

func trimNL(b []byte) string {
	for len(b) > 0 && (b[len(b)-1] == '\n' || b[len(b)-1] == ' ') {
		b = b[:len(b)-1]
	}
	return string(b)
}

// addLink creates a veth pair with each end directly in its namespace and
// its planned ifindex, then gives both ends their address and shaping.
// Ends come up at creation, except a server's: it first gets addrgenmode
// none (no IPv6 address, so no DAD or router solicitation; see setupNS).
func (l *Lab) addLink(i int, ln topo.Link) error {
	ha, err := l.Handle(ln.A.Node)
	if err != nil {
		return err
	}
	hb, err := l.Handle(ln.B.Node)
	if err != nil {
		return err
	}
	na, _ := l.Topo.Node(ln.A.Node)
	nb, _ := l.Topo.Node(ln.B.Node)
	fdA, err := netns.Open(na.NS)
	if err != nil {
		return err
	}
	defer unix.Close(fdA)
	fdB, err := netns.Open(nb.NS)
	if err != nil {
		return err
	}
	defer unix.Close(fdB)
	mtu := l.Topo.Spec.MTU
	ia, ib := l.plannedIndex(ln.A.Node, ln.A.Iface), l.plannedIndex(ln.B.Node, ln.B.Iface)
	// Only the first end of the request can come up at creation (the
	// kernel opens the peer before the pair is joined: ENOTCONN), and a
	// server's end must not (addrgenmode first), so the first end is A
	// unless A is a server.
	sp := l.Topo.Spec
	ea := vethEnd{nsFd: fdA, name: ln.A.Iface, index: ia, mac: ln.A.MAC, mtu: mtu, txqueue: txqueue(sp, na.Kind, ln)}
	eb := vethEnd{nsFd: fdB, name: ln.B.Iface, index: ib, mac: ln.B.MAC, mtu: mtu, txqueue: txqueue(sp, nb.Kind, ln)}
	aFirst := na.Kind != topo.KindServer
	ea.up = aFirst
	eb.up = !aFirst && nb.Kind != topo.KindServer
	first, peer := ea, eb
	if !aFirst {
		first, peer = eb, ea
	}
	if err := newVeth(first, peer); err != nil {
		return fmt.Errorf("create veth %s:%s <-> %s:%s: %w", ln.A.Node, ln.A.Iface, ln.B.Node, ln.B.Iface, err)
	}
	for _, e := range []struct {
		h    *netlink.Handle
		ep   topo.Endpoint
		end  vethEnd
		kind string
	}{{ha, ln.A, ea, na.Kind}, {hb, ln.B, eb, nb.Kind}} {
		link := &netlink.Device{LinkAttrs: netlink.LinkAttrs{Index: e.end.index, Name: e.ep.Iface}}
		if e.kind == topo.KindServer {
			// Below IPv6's minimum MTU (1280) the kernel runs no IPv6 on the
			// link, so there is no link-local address to turn off.
			if err := e.h.LinkSetIP6AddrGenMode(link, addrGenModeNone); err != nil && !(mtu < ipv6MinMTU && errors.Is(err, unix.EAFNOSUPPORT)) {
				return fmt.Errorf("addrgenmode none on %s:%s: %w", e.ep.Node, e.ep.Iface, err)
			}
		}
		if !e.end.up {
			if err := e.h.LinkSetUp(link); err != nil {
				return fmt.Errorf("set %s:%s up: %w", e.ep.Node, e.ep.Iface, err)
			}
		}
		if e.ep.Addr.IsValid() {
			a := &netlink.Addr{IPNet: ipnet(netip.PrefixFrom(e.ep.Addr, 32))}
			if err := e.h.AddrAdd(link, a); err != nil {
				return fmt.Errorf("address %s on %s:%s: %w", e.ep.Addr, e.ep.Node, e.ep.Iface, err)
			}
		}
		if err := Shape(e.h, link, ln.Rate.BytesPerSec(), mtu); err != nil {
			return fmt.Errorf("shape %s:%s: %w", e.ep.Node, e.ep.Iface, err)
		}
		if key, fair := fairKey(sp, e.kind, ln); fair {
			p := fairq.Port{Key: key, Rate: ln.Rate.BytesPerSec(), MTU: mtu, Racks: sp.Racks, PerRack: sp.ServersPerRack, FairSwitchPorts: l.fairPorts}
			if err := fairq.Install(e.h, link, p); err != nil {
				return fmt.Errorf("%s:%s: %w", e.ep.Node, e.ep.Iface, err)
			}
		}
	}
	return nil
}

// fairKey reports whether the end of link ln on a node of kind is a fair
// port (Spec.ServerQueue, Spec.SwitchQueue: only shaped ports are), and
// which address keys its classes.
func fairKey(sp topo.Spec, kind string, ln topo.Link) (fairq.Key, bool) {
	if ln.Rate.BytesPerSec() == 0 {
		return 0, false
	}
	switch kind {
	case topo.KindServer:
		return fairq.ByDestination, sp.ServerQueue == topo.QueueFair
	case topo.KindToR, topo.KindEPS:
		return fairq.ByPair, sp.SwitchQueue == topo.QueueFair
	}
	return 0, false
}

// fairSwitchPorts counts a fabric's fair switch ports (fairq.ClassesFor).
func fairSwitchPorts(t *topo.Topology) int {
	n := 0
	for _, ln := range t.Links {
		for _, ep := range []topo.Endpoint{ln.A, ln.B} {
			node, _ := t.Node(ep.Node)
			if key, fair := fairKey(t.Spec, node.Kind, ln); fair && key == fairq.ByPair {
				n++
			}
		}
	}
	return n
}

// txqueue is the txqueuelen of the end of link ln on a node of kind: a
// fair switch port's leaves queue that many packets (fairq.LeafPackets).
func txqueue(sp topo.Spec, kind string, ln topo.Link) int {
	if key, fair := fairKey(sp, kind, ln); fair && key == fairq.ByPair {
		return fairq.LeafPackets(ln.Rate.BytesPerSec(), sp.MTU)
	}
	return defaultTxqueue
}

// defaultTxqueue is a veth end's txqueuelen: what a server's fair port's
// leaves queue (fairq).
const defaultTxqueue = 1000

// planIndexes gives every veth end its ifindex before anything is made:
// link i's near (A) end gets nearIfindexBase+i, and the far (B) ends of a
// node get farIfindexBase, farIfindexBase+1, ... in link order. The kernel treats a carrier
// change as urgent only when a veth's ifindex differs from its peer's;
// otherwise linkwatch defers it up to 1 s and the qdisc stays inactive
// meanwhile. OCS ports are far ends, so they stay below limits.MaxIfindex,
// which the OCS fast path's port map is indexed by.
func planIndexes(t *topo.Topology) map[string]map[string]int {
	idx := map[string]map[string]int{}
	set := func(node, iface string, i int) {
		if idx[node] == nil {
			idx[node] = map[string]int{}
		}
		idx[node][iface] = i
	}
	next := map[string]int{}
	for i, ln := range t.Links {
		set(ln.A.Node, ln.A.Iface, nearIfindexBase+i)
		if next[ln.B.Node] == 0 {
			next[ln.B.Node] = farIfindexBase
		}
		set(ln.B.Node, ln.B.Iface, next[ln.B.Node])
		next[ln.B.Node]++
	}
	return idx
}

func (l *Lab) plannedIndex(node, iface string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.ifindex[node][iface]
}

// Ifindex returns the interface index of a node's port: the one Deploy
// gave it or, in a lab opened from its state, from one link dump of the
// node's namespace (a lookup per port costs a netlink round trip each,
// thousands on a large lab).
func (l *Lab) Ifindex(node, iface string) (int, error) {
	l.mu.Lock()
	i, ok := l.ifindex[node][iface]
	l.mu.Unlock()
	if ok {
		return i, nil
	}
	h, err := l.Handle(node)
	if err != nil {
		return 0, err
	}
	links, err := nlsafe.Retry(h.LinkList)
	if err != nil {
		return 0, fmt.Errorf("list links of %s: %w", node, err)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.ifindex == nil {
		l.ifindex = map[string]map[string]int{}
	}
	m := map[string]int{}
	for _, ln := range links {
		m[ln.Attrs().Name] = ln.Attrs().Index
	}
	l.ifindex[node] = m
	if i, ok := m[iface]; ok {
		return i, nil
	}
	return 0, fmt.Errorf("%s has no interface %q", node, iface)
}

// Port returns a node's port as a netlink.Link that carries its index and
// name only: enough for tc, addresses, routes and neighbours.
func (l *Lab) Port(node, iface string) (netlink.Link, error) {
	i, err := l.Ifindex(node, iface)
	if err != nil {
		return nil, err
	}
	return &netlink.Device{LinkAttrs: netlink.LinkAttrs{Index: i, Name: iface}}, nil
}

// ipv6MinMTU is IPv6's minimum link MTU.
const ipv6MinMTU = 1280

// addrGenModeNone is IN6_ADDR_GEN_MODE_NONE: no IPv6 link-local address.
const addrGenModeNone = 1

// nearIfindexBase numbers the near end of every veth far above the
// far ends' automatic indexes.
const nearIfindexBase = 100000

// farIfindexBase is the first index of a node's far veth ends. A new
// namespace holds lo at 1 and, on a host with the ipip, gre, sit or
// ip6_tunnel modules loaded (and net.core.fb_tunnels_only_for_init_net
// 0, the default), their fallback devices from 2 up; a planned index one
// of them holds would fail the deploy with EBUSY. limits.MaxPortsPerOCS
// leaves this room below limits.MaxIfindex.
const farIfindexBase = 16

// Shape puts a tbf root qdisc on a link's egress at rate bytes/s, or
// removes shaping when rate is 0, with shaper.Burst's bucket and
// shaper.Limit's queue.
func Shape(h *netlink.Handle, link netlink.Link, rate uint64, mtu int) error {
	if rate == 0 {
		return nil
	}
	burst, limit := shaper.Burst(rate, mtu), shaper.Limit(rate, mtu)
	q := &netlink.Tbf{
		QdiscAttrs: netlink.QdiscAttrs{LinkIndex: link.Attrs().Index, Handle: netlink.MakeHandle(1, 0), Parent: netlink.HANDLE_ROOT},
		Rate:       rate,
		Limit:      uint32(min(limit, 1<<31)),
		Buffer:     netlink.Xmittime(rate, uint32(burst)),
	}
	if err := h.QdiscReplace(q); err != nil {
		return fmt.Errorf("tbf rate %d B/s: %w", rate, err)
	}
	return nil
}

// waitCarrier waits until every veth of a node reports operstate up.
func (l *Lab) waitCarrier(ctx context.Context, n topo.Node, timeout time.Duration) error {
	h, err := l.Handle(n.Name)
	if err != nil {
		return err
	}
	deadline := time.Now().Add(timeout)
	for {
		links, err := nlsafe.Retry(h.LinkList)
		if err != nil {
			return fmt.Errorf("list links of %s: %w", n.Name, err)
		}
		var down string
		for _, ln := range links {
			if ln.Type() == "veth" && ln.Attrs().OperState != netlink.OperUp {
				down = ln.Attrs().Name
				break
			}
		}
		if down == "" {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s:%s has no carrier after %v", n.Name, down, timeout)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(2 * time.Millisecond):
		}
	}
}

// addRoutes installs a node's routes and permanent neighbours.
func (l *Lab) addRoutes(n topo.Node) error {
	routes, neighs := l.Topo.Routes[n.Name], l.Topo.Neighbors[n.Name]
	if len(routes) == 0 && len(neighs) == 0 {
		return nil
	}
	h, err := l.Handle(n.Name)
	if err != nil {
		return err
	}
	index := func(iface string) (int, error) { return l.Ifindex(n.Name, iface) }
	for _, nb := range neighs {
		i, err := index(nb.Iface)
		if err != nil {
			return err
		}
		if err := h.NeighSet(&netlink.Neigh{LinkIndex: i, Family: unix.AF_INET, State: netlink.NUD_PERMANENT,
			IP: nb.IP.AsSlice(), HardwareAddr: nb.MAC}); err != nil {
			return fmt.Errorf("neighbour %s on %s:%s: %w", nb.IP, n.Name, nb.Iface, err)
		}
	}
	for _, r := range routes {
		i, err := index(r.Iface)
		if err != nil {
			return err
		}
		rt := &netlink.Route{LinkIndex: i, Dst: ipnet(r.Dst)}
		if r.Via.IsValid() {
			rt.Gw = r.Via.AsSlice()
		} else {
			rt.Scope = netlink.SCOPE_LINK
		}
		if err := h.RouteReplace(rt); err != nil {
			return fmt.Errorf("route %s via %v dev %s on %s: %w", r.Dst, r.Via, r.Iface, n.Name, err)
		}
	}
	return nil
}

func ipnet(p netip.Prefix) *net.IPNet {
	return &net.IPNet{IP: p.Addr().AsSlice(), Mask: net.CIDRMask(p.Bits(), p.Addr().BitLen())}
}

// Destroy removes a lab by name: it ends the lab's processes, deletes its
// namespaces (and with them every link) and its state file. It is
// idempotent and best-effort: what is already gone counts as removed, and
// it keeps going past errors, returning them all at the end.
func Destroy(ctx context.Context, lab string, log *slog.Logger) error {
	if err := names.ValidLab(lab); err != nil {
		return err
	}
	if os.Geteuid() != 0 {
		return ErrNotRoot
	}
	// A deploy in progress in another process owns the lab until it ends
	// (a deploy cleaning up after itself holds the lock in this process).
	if pid, held := Held(lab, "deploy"); held && pid != os.Getpid() {
		return fmt.Errorf("lab %q is being deployed by pid %d: let it finish (or end it), then destroy", lab, pid)
	}
	// So is a lab check's private copy, and a lab a workload runs on (emu
	// run, emu collective): pulled from under it, that would fail with
	// nothing but "context canceled".
	if pid, held := heldByCheck(lab); held {
		return fmt.Errorf("lab %q is the private copy of the emu lab check of pid %d: it destroys the copy itself when it ends", lab, pid)
	}
	if pid, held := UsedElsewhere(lab); held {
		return fmt.Errorf("lab %q is in use by pid %d (emu run or emu collective): let it finish or stop it (Ctrl-C), then destroy; emu run without --keep destroys its lab itself", lab, pid)
	}
	log = orDiscard(log).With("lab", lab)
	var errs []error
	nsNames := map[string]bool{}
	if st, err := ReadState(lab); err == nil {
		for _, n := range st.Namespace {
			nsNames[n] = true
		}
	} else if !errors.Is(err, ErrNoLab) {
		// The namespaces are found by their prefix below, and the file is
		// removed with the rest: an unreadable one does not fail destroy.
		log.Warn("state file unreadable; destroying what the lab's namespace names find", "err", err)
	}
	found, err := netns.List(names.LabPrefix(lab))
	if err != nil {
		errs = append(errs, err)
	}
	for _, n := range found {
		nsNames[n] = true
	}
	inodes := map[uint64]bool{}
	for n := range nsNames {
		// Only a mounted namespace has a namespace inode; a bare file's
		// (a crashed deploy's anchor or mount point) could equal an
		// unrelated process's namespace inode.
		if !netns.Exists(n) {
			continue
		}
		if ino, err := netns.Inode(n); err == nil {
			inodes[ino] = true
		}
	}
	// Every process a lab starts (OCS, aggregators, workers, `emu exec`)
	// lives in one of its namespaces, so membership finds them all without
	// trusting PIDs that may have been reused.
	if n := killAll(ctx, netns.PIDsIn(inodes)); n > 0 {
		log.Debug("ended lab processes", "n", n)
	}
	list := make([]string, 0, len(nsNames))
	for n := range nsNames {
		list = append(list, n)
	}
	var mu sync.Mutex
	_ = forEach(context.WithoutCancel(ctx), 4*runtime.NumCPU(), list, func(n string) error {
		if err := netns.Delete(n); err != nil {
			mu.Lock()
			errs = append(errs, err)
			mu.Unlock()
		}
		return nil
	})
	if err := removeState(lab); err != nil {
		errs = append(errs, err)
	}
	log.Debug("lab destroyed", "namespaces", len(list))
	return errors.Join(errs...)
}

// Exists reports whether anything of a lab is on this machine: its state
// file or any of its namespaces.
func Exists(lab string) (bool, error) {
	if err := names.ValidLab(lab); err != nil {
		return false, err
	}
	if _, err := os.Stat(statePath(lab)); err == nil {
		return true, nil
	}
	found, err := netns.List(names.LabPrefix(lab))
	return len(found) > 0, err
}

// FindLabs lists every lab on this machine: those with a state file and
// those whose namespaces were left behind by a crashed run.
func FindLabs() ([]string, error) {
	labs := map[string]bool{}
	var errs []error
	known, err := Labs()
	if err != nil {
		errs = append(errs, err)
	}
	for _, l := range known {
		labs[l] = true
	}
	nss, err := netns.List(names.NSPrefix)
	if err != nil {
		errs = append(errs, err)
	}
	for _, n := range nss {
		if l, ok := names.LabOfNS(n); ok {
			labs[l] = true
		}
	}
	out := make([]string, 0, len(labs))
	for l := range labs {
		out = append(out, l)
	}
	slices.Sort(out)
	return out, errors.Join(errs...)
}

// DestroyAll removes every lab FindLabs finds and returns those it
// destroyed; a lab in use elsewhere is refused, its error joined.
func DestroyAll(ctx context.Context, log *slog.Logger) ([]string, error) {
	if os.Geteuid() != 0 {
		return nil, ErrNotRoot
	}
	labs, err := FindLabs()
	errs := []error{err}
	var gone []string // those destroyed: a lab in use is refused, not counted
	for _, l := range labs {
		if err := Destroy(ctx, l, log); err != nil {
			errs = append(errs, err)
			continue
		}
		gone = append(gone, l)
	}
	return gone, errors.Join(errs...)
}

// killAll sends SIGTERM, waits up to 2 s, then SIGKILLs what is left.
// It returns how many processes it signalled.
func killAll(ctx context.Context, pids []int) int {
	alive := func(pid int) bool { return unix.Kill(pid, 0) == nil && !isZombie(pid) }
	n := 0
	for _, p := range pids {
		if p > 1 && p != os.Getpid() && alive(p) {
			_ = unix.Kill(p, syscall.SIGTERM)
			n++
		}
	}
	deadline := time.Now().Add(2 * time.Second)
	for _, p := range pids {
		for p > 1 && alive(p) && time.Now().Before(deadline) && ctx.Err() == nil {
			time.Sleep(10 * time.Millisecond)
		}
		if p > 1 && p != os.Getpid() && alive(p) {
			_ = unix.Kill(p, syscall.SIGKILL)
		}
	}
	return n
}

func isZombie(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return true
	}
	// Field 3 follows the ")" that closes the command name.
	for i := len(b) - 1; i >= 0; i-- {
		if b[i] == ')' && i+2 < len(b) {
			return b[i+2] == 'Z'
		}
	}
	return false
}
