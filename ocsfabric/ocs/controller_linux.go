// Package ocs is the optical circuit switch process: a Controller owns the
// circuit map of every OCS of a lab, writes it into the kernel fast path
// (ocsfabric/fastpath) at kernel-timed instants, makes ToR routes follow
// it (ocsfabric/routing), runs time-slotted schedules, logs every event
// with its scheduled and effective times, and serves an HTTP/JSON API on a
// unix socket.
package ocs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sort"
	"sync"
	"time"

	"github.com/vishvananda/netlink"

	"github.com/ocsemu/ocsemu/dataplane/fabric"
	"github.com/ocsemu/ocsemu/dataplane/monoclock"
	"github.com/ocsemu/ocsemu/dataplane/names"
	"github.com/ocsemu/ocsemu/ocsfabric/circuit"
	"github.com/ocsemu/ocsemu/ocsfabric/fastpath"
	"github.com/ocsemu/ocsemu/ocsfabric/reconfig"
	"github.com/ocsemu/ocsemu/ocsfabric/routing"
)

// Event is one OCS event, as logged in JSONL. Times are CLOCK_MONOTONIC
// nanoseconds, the clock every namespace and bpf_ktime_get_ns share.
type Event struct {
	Seq  int    `json:"seq"`
	Kind string `json:"kind"` // "reconfigure", "slot", "schedule-start", "schedule-end"
	// Scheduled is when the change was asked to take effect.
	Scheduled int64 `json:"scheduled_ns"`
	// Effective is when the kernel started using it: Scheduled, or later
	// if the configuration was written too late.
	Effective int64 `json:"effective_ns"`
	LateNs    int64 `json:"late_ns"`
	DelayNs   int64 `json:"delay_ns"`
	// DarkUntil is when the changed ports carry light again.
	DarkUntil int64             `json:"dark_until_ns,omitempty"`
	Dark      []circuit.Uplink  `json:"dark,omitempty"`
	Circuits  []circuit.Circuit `json:"circuits,omitempty"`
	Slot      int               `json:"slot,omitempty"`
	// PathsNs is when the ToRs' kernel paths (ocsfabric/torpath) switched
	// to the new circuits: the same generation switch as the circuits'.
	PathsNs int64 `json:"paths_ns,omitempty"`
	// PathSkewNs is how far apart the ToR paths and the circuits switched:
	// 0 when both were written before the instant.
	PathSkewNs int64 `json:"path_skew_ns"`
	// RoutesChanged and RoutesDoneNs are the netlink routes, which only
	// traffic the ToRs originate themselves still follows.
	RoutesChanged int    `json:"routes_changed"`
	RoutesDoneNs  int64  `json:"routes_done_ns,omitempty"` // when routes matched the circuits
	Unreachable   int    `json:"unreachable_pairs"`
	Error         string `json:"error,omitempty"`
}

// Options configure a Controller.
type Options struct {
	Log       *slog.Logger
	EventPath string // JSONL event log; "" for none
}

// Controller owns the circuits of every OCS switch of one lab.
type Controller struct {
	lab    *fabric.Lab
	layout circuit.Layout
	log    *slog.Logger
	delay  time.Duration // scenario's reconfiguration delay
	router *Router
	paths  *torPaths

	switches []*fastpath.Switch
	gen      *fastpath.Gen             // the one generation switch of every OCS and ToR map
	ifindex  map[circuit.Uplink]uint32 // OCS-side port of each uplink
	uplinkOf []map[uint32]circuit.Uplink

	mu sync.Mutex // serialises reconfigurations
	// cur and dark are the configuration staged last and every port's
	// dark-until in it: the next one's dark periods follow from them.
	cur  circuit.Config
	dark map[circuit.Uplink]uint64
	// live is the configuration in effect as of the last commit; armed,
	// the ones staged ahead of it, in instant order.
	live     circuit.Config
	liveDark map[circuit.Uplink]uint64
	armed    []armedConfig
	seq      int
	// unreach has its own lock: the route worker sets it while a
	// reconfiguration may hold mu.
	unreachMu sync.Mutex
	unreach   []routing.Pair
	stageNs   int64 // how long the last configuration took to write
	routes    *routeWorker

	// fastMu guards the counts of fast and slow ports (dataplane/fastport)
	// that ToRs set up in parallel add to.
	fastMu               sync.Mutex
	fastPorts, slowPorts int

	evMu    sync.Mutex
	evFile  *os.File
	evErr   error // the first failed write to the event log
	evBytes int64 // written to it so far
	subs    map[chan Event]bool
	schedMu sync.Mutex
	sched   context.CancelFunc
	schedWG sync.WaitGroup
	// stageAhead is the schedule's stageAhead; tests lengthen it to have
	// slots armed long before their instant.
	stageAhead time.Duration
}

// New attaches to the OCS switches of a deployed lab. If an earlier OCS
// process left its program on the ports, New takes over the live circuits
// instead of resetting them.
func New(ctx context.Context, lab *fabric.Lab, o Options) (*Controller, error) {
	f := lab.Topo.Spec
	if !f.HasOCS() {
		return nil, fmt.Errorf("lab %q is an %s fabric: it has no OCS", lab.Topo.Lab, f.Kind)
	}
	log := o.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	c := &Controller{
		lab: lab, layout: circuit.LayoutOf(f), log: log.With("lab", lab.Topo.Lab), delay: f.ReconfigDelay.D(),
		ifindex: map[circuit.Uplink]uint32{}, dark: map[circuit.Uplink]uint64{}, subs: map[chan Event]bool{},
		stageAhead: stageAhead,
	}
	if o.EventPath != "" {
		fh, err := os.OpenFile(o.EventPath, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
		if err != nil {
			return nil, fmt.Errorf("open event log: %w", err)
		}
		c.evFile = fh
		// The log is appended to across OCS restarts: its limit counts
		// what is already there.
		if fi, err := fh.Stat(); err == nil {
			c.evBytes = fi.Size()
		}
	}
	if err := c.attach(); err != nil {
		c.Close()
		return nil, err
	}
	r, err := NewRouter(lab)
	if err != nil {
		c.Close()
		return nil, err
	}
	c.router = r
	c.routes = newRouteWorker(c)
	t, unreach := routing.Compute(f.Racks, c.cur)
	if f.HasEPS() {
		unreach = nil // the packet core reaches every rack
	}
	if c.paths, err = newTorPaths(c, t); err != nil {
		c.Close()
		return nil, fmt.Errorf("ToR paths: %w", err)
	}
	if _, err := r.Apply(t); err != nil {
		c.Close()
		return nil, fmt.Errorf("initial routes: %w", err)
	}
	c.setUnreachable(unreach)
	c.log.Info("ports that skip their egress (bpf_redirect_peer)", "fast", c.fastPorts, "slow", c.slowPorts)
	return c, nil
}

// attach loads (or recovers) the program of every switch.
func (c *Controller) attach() error {
	f := c.lab.Topo.Spec
	byIf := make([]map[uint32]circuit.Uplink, f.OCSSwitches)
	for k := range byIf {
		byIf[k] = map[uint32]circuit.Uplink{}
	}
	for _, u := range c.layout.Ports() {
		sw, _ := c.layout.Switch(u)
		i, err := c.lab.Ifindex(names.OCSName(sw), names.OCSPortIface(u.Rack, u.Port))
		if err != nil {
			return fmt.Errorf("ocs%d port for %s: %w", sw, u, err)
		}
		c.ifindex[u] = uint32(i)
		byIf[sw][uint32(i)] = u
	}
	c.uplinkOf = byIf
	edges := map[circuit.Uplink]circuit.Uplink{}
	for k := 0; k < f.OCSSwitches; k++ {
		h, err := c.lab.Handle(names.OCSName(k))
		if err != nil {
			return err
		}
		port := func(i uint32) netlink.Link {
			u := byIf[k][i]
			return &netlink.Device{LinkAttrs: netlink.LinkAttrs{Index: int(i), Name: names.OCSPortIface(u.Rack, u.Port)}}
		}
		var first uint32
		for i := range byIf[k] {
			if first == 0 || i < first {
				first = i
			}
		}
		sw, gen, err := fastpath.Recover(h, port(first), c.gen)
		if err == nil {
			c.gen = gen
			c.log.Info("took over live circuits", "ocs", k)
			entries, err := sw.Read(keys(byIf[k]))
			if err != nil {
				return err
			}
			for i, e := range entries {
				if p, ok := byIf[k][e.Peer]; ok && e.Peer != 0 {
					edges[byIf[k][i]] = p
				}
				c.dark[byIf[k][i]] = e.DarkUntil
			}
		} else if errors.Is(err, fastpath.ErrNotAttached) {
			if c.gen == nil {
				if c.gen, err = fastpath.NewGen(); err != nil {
					return fmt.Errorf("ocs%d: %w", k, err)
				}
			}
			// Fresh maps: every port unpatched in every generation.
			if sw, err = fastpath.New(c.gen, keys(byIf[k])); err != nil {
				return fmt.Errorf("ocs%d: %w", k, err)
			}
		} else {
			return fmt.Errorf("ocs%d: %w", k, err)
		}
		var links []netlink.Link
		for i := range byIf[k] {
			links = append(links, port(i))
		}
		c.switches = append(c.switches, sw)
		for _, l := range links {
			if err := sw.Attach(h, l); err != nil {
				return fmt.Errorf("ocs%d: %w", k, err)
			}
		}
		// Ports without shaper, loss rule or capture hand frames straight
		// to the ToR uplink's ingress (dataplane/fastport). Only now that
		// the program is on the ports: fastport.Off (a loss rule or
		// capture being added) finds the flags through it, so a flag set
		// before would escape it.
		n, _ := c.lab.Topo.Node(names.OCSName(k))
		why, err := sw.SyncFast(h, n.NS, links)
		if err != nil {
			return fmt.Errorf("ocs%d: %w", k, err)
		}
		c.countFast(n.Name, links, why)
	}
	c.cur = configFromEdges(edges)
	c.live, c.liveDark = c.cur, c.dark
	return nil
}

// countFast logs which of a node's ports are slow, and why, and counts
// the fast ones.
func (c *Controller) countFast(node string, links []netlink.Link, why []string) {
	c.fastMu.Lock()
	defer c.fastMu.Unlock()
	for i, l := range links {
		if why[i] == "" {
			c.fastPorts++
			continue
		}
		c.slowPorts++
		c.log.Debug("slow port: frames leave through its egress", "port", node+":"+l.Attrs().Name, "why", why[i])
	}
}

func keys(m map[uint32]circuit.Uplink) []uint32 {
	out := make([]uint32, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

// configFromEdges rebuilds circuits from directed light paths: a pair of
// opposite edges is one full-duplex circuit.
func configFromEdges(e map[circuit.Uplink]circuit.Uplink) circuit.Config {
	var cfg circuit.Config
	var from []circuit.Uplink
	for a := range e {
		from = append(from, a)
	}
	circuit.SortUplinks(from)
	seen := map[circuit.Uplink]bool{}
	for _, a := range from {
		b := e[a]
		if seen[a] {
			continue
		}
		if e[b] == a {
			cfg.Circuits = append(cfg.Circuits, circuit.Circuit{A: a, B: b})
			seen[b] = true
		} else {
			cfg.Circuits = append(cfg.Circuits, circuit.Circuit{A: a, B: b, Simplex: true})
		}
		seen[a] = true
	}
	return cfg
}

// Close stops a running schedule and releases the switches; circuits stay
// in the kernel.
func (c *Controller) Close() {
	c.StopSchedule()
	// A reconfiguration still running (an API handler) finishes first:
	// it writes through the switches and the generation switch.
	c.mu.Lock()
	if c.routes != nil {
		c.routes.stop()
	}
	for _, s := range c.switches {
		s.Close()
	}
	if c.paths != nil {
		c.paths.close()
	}
	if c.gen != nil {
		c.gen.Close()
	}
	c.mu.Unlock()
	c.evMu.Lock()
	if c.evFile != nil {
		c.evFile.Close()
		c.evFile = nil
	}
	for ch := range c.subs {
		close(ch)
		delete(c.subs, ch)
	}
	c.evMu.Unlock()
}

// Layout returns the cabling.
func (c *Controller) Layout() circuit.Layout { return c.layout }

// DefaultDelay is the scenario's reconfiguration delay.
func (c *Controller) DefaultDelay() time.Duration { return c.delay }

// Config returns the circuit map in effect.
func (c *Controller) Config() circuit.Config {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.commitLocked()
	return circuit.Config{Circuits: append([]circuit.Circuit(nil), c.live.Circuits...)}
}

// Unreachable returns the rack pairs without any path in the current map.
func (c *Controller) Unreachable() []routing.Pair {
	c.unreachMu.Lock()
	defer c.unreachMu.Unlock()
	return append([]routing.Pair(nil), c.unreach...)
}

func (c *Controller) setUnreachable(u []routing.Pair) {
	c.unreachMu.Lock()
	c.unreach = u
	c.unreachMu.Unlock()
}

// Apply replaces the whole circuit map. The ports whose circuit changes go
// dark for delay (negative: the scenario's delay; at most
// reconfig.MaxDelay) from the switch instant at (CLOCK_MONOTONIC ns; 0 =
// now; else ahead of now by at most reconfig.MaxAhead). It returns when
// the switch has happened and routes follow it.
func (c *Controller) Apply(ctx context.Context, cfg circuit.Config, delay time.Duration, at int64) (Event, error) {
	return c.apply(ctx, cfg, delay, at, int64(fastpath.Monotonic()))
}

// apply is Apply with at checked against now, when the request came in.
func (c *Controller) apply(ctx context.Context, cfg circuit.Config, delay time.Duration, at, now int64) (Event, error) {
	if c.ScheduleRunning() {
		return Event{}, ErrScheduleRunning
	}
	if delay >= 0 {
		if err := reconfig.CheckDelay(delay); err != nil {
			return Event{}, fmt.Errorf("delay: %w", err)
		}
	}
	if err := reconfig.CheckAt(at, now); err != nil {
		return Event{}, fmt.Errorf("at_ns: %w", err)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.applyLocked(ctx, cfg, delay, at, "reconfigure", 0)
}

func (c *Controller) applyLocked(ctx context.Context, cfg circuit.Config, delay time.Duration, at int64, kind string, slot int) (Event, error) {
	c.routes.flush() // a schedule's last routes land before a manual change's
	gen, err := c.freeGen(ctx)
	if err != nil {
		return Event{}, err
	}
	ev, t, unreach, err := c.stageLocked(gen, cfg, delay, at, kind, slot)
	if err != nil {
		return Event{}, err
	}
	waitUntil(ctx, ev.Scheduled)
	c.commitLocked()
	n, rerr := c.router.Apply(t)
	ev.RoutesChanged, ev.RoutesDoneNs, ev.Unreachable = n, int64(fastpath.Monotonic()), len(unreach)
	c.setUnreachable(unreach)
	if rerr != nil {
		ev.Error = rerr.Error()
	}
	c.emit(&ev)
	if rerr != nil {
		return ev, fmt.Errorf("routes: %w", rerr)
	}
	return ev, nil
}

// armedConfig is a configuration staged and armed for instant at.
type armedConfig struct {
	at   int64
	cfg  circuit.Config
	dark map[circuit.Uplink]uint64
}

// commitLocked records the switches whose instants have passed.
func (c *Controller) commitLocked() {
	now := int64(fastpath.Monotonic())
	c.gen.Commit(uint64(now))
	for len(c.armed) > 0 && c.armed[0].at <= now {
		c.live, c.liveDark = c.armed[0].cfg, c.armed[0].dark
		c.armed = c.armed[1:]
	}
}

// freeGen commits passed switches and returns a free generation, waiting
// (within ctx) for one while every generation is in play.
func (c *Controller) freeGen(ctx context.Context) (uint32, error) {
	for {
		c.commitLocked()
		gen, retry, ok := c.gen.Free()
		if ok {
			return gen, nil
		}
		if len(c.armed) == 0 && retry > fastpath.Monotonic()+uint64(time.Second) {
			return 0, errors.New("no free generation: the lab's generation switch is armed by another process")
		}
		if err := monoclock.SleepUntil(ctx, int64(retry)); err != nil {
			return 0, err
		}
	}
}

// stageLocked writes a configuration into generation gen and arms it for
// instant at (<= 0: as soon as it is written). The ports whose circuit
// changes from the configuration staged before go dark for delay
// (negative: the scenario's). The event it returns has the instant the
// kernel switches at (Effective: later than Scheduled only if the switch
// was armed after its instant) and no routes yet.
func (c *Controller) stageLocked(gen uint32, cfg circuit.Config, delay time.Duration, at int64, kind string, slot int) (Event, routing.Table, []routing.Pair, error) {
	if err := c.layout.Validate(cfg); err != nil {
		return Event{}, nil, nil, fmt.Errorf("invalid configuration: %w", err)
	}
	if delay < 0 {
		delay = c.delay
	}
	darkSet := circuit.Dark(c.cur, cfg)
	t, unreach := routing.Compute(c.layout.Racks, cfg)
	if c.lab.Topo.Spec.HasEPS() {
		unreach = nil // the packet core reaches every rack
	}
	// "Now" (at <= 0) means as soon as the whole configuration is written:
	// a margin of three times the last staging time (at least 200 us)
	// puts the switch at an exact kernel-timed instant, so the dark period
	// is exact too. Should staging overrun the margin (a busy machine), the
	// instant moves on and the configuration is staged again: a late
	// switch would cut the dark period short, since it ends at
	// instant + delay whenever the switch happens.
	asap := at <= 0
	now := int64(fastpath.Monotonic())
	var newDark map[circuit.Uplink]uint64
	for try := 0; ; try++ {
		if asap {
			at = now + max(3*c.stageNs, int64(200*time.Microsecond))
		}
		var err error
		if newDark, err = c.stage(gen, cfg, darkSet, t, at, delay); err != nil {
			return Event{}, nil, nil, err
		}
		done := int64(fastpath.Monotonic())
		if asap {
			c.stageNs = done - now
		}
		if !asap || done+armGuard < at || try == maxRestage {
			break
		}
		now = done
	}
	if err := c.gen.Arm(gen, uint64(at)); err != nil {
		return Event{}, nil, nil, err
	}
	armed := int64(fastpath.Monotonic())
	c.cur = circuit.Config{Circuits: append([]circuit.Circuit(nil), cfg.Circuits...)}
	c.dark = newDark
	c.armed = append(c.armed, armedConfig{at: at, cfg: c.cur, dark: newDark})
	ev := Event{Kind: kind, Scheduled: at, Effective: max(at, armed), DelayNs: int64(delay),
		Dark: darkSet, Circuits: c.cur.Circuits, Slot: slot}
	ev.LateNs = ev.Effective - ev.Scheduled
	// One write armed circuits and ToR paths: they switch together.
	ev.PathsNs, ev.PathSkewNs = ev.Effective, 0
	if len(darkSet) > 0 && delay > 0 {
		ev.DarkUntil = at + int64(delay)
	}
	return ev, t, unreach, nil
}

// cancelLocked disarms the configurations armed more than guard ahead and
// returns the cut (those at or before it stay and will take effect) and
// how many it disarmed. The next configuration's dark periods follow from
// the last one kept.
func (c *Controller) cancelLocked(guard time.Duration) (cut int64, dropped int) {
	cut = int64(c.gen.Cancel(uint64(guard)))
	i := len(c.armed)
	for i > 0 && c.armed[i-1].at > cut {
		i--
	}
	dropped = len(c.armed) - i
	c.armed = c.armed[:i]
	if i > 0 {
		c.cur, c.dark = c.armed[i-1].cfg, c.armed[i-1].dark
	} else {
		c.cur, c.dark = c.live, c.liveDark
	}
	return cut, dropped
}

// Restaging of a configuration meant for "now" whose staging overran its
// margin: at most maxRestage more tries, and a switch instant at least
// armGuard after staging ends (time for the one map write that arms it).
const (
	maxRestage = 3
	armGuard   = int64(20 * time.Microsecond)
)

// stage writes a whole configuration, circuits and ToR paths, into
// generation gen for a switch at monotonic instant at: the ports of
// darkSet go dark until at+delay, the others keep their dark-until in the
// configuration staged before. It returns every port's dark-until.
func (c *Controller) stage(gen uint32, cfg circuit.Config, darkSet []circuit.Uplink, t routing.Table, at int64, delay time.Duration) (map[circuit.Uplink]uint64, error) {
	isDark := map[circuit.Uplink]bool{}
	for _, u := range darkSet {
		isDark[u] = true
	}
	darkUntil := uint64(at) + uint64(delay)
	edges := cfg.Edges()
	newDark := map[circuit.Uplink]uint64{}
	perSwitch := make([]map[uint32]fastpath.Entry, len(c.switches))
	for k := range perSwitch {
		perSwitch[k] = map[uint32]fastpath.Entry{}
	}
	for _, u := range c.layout.Ports() {
		sw, _ := c.layout.Switch(u)
		e := fastpath.Entry{DarkUntil: c.dark[u]}
		if isDark[u] && delay > 0 {
			e.DarkUntil = darkUntil
		}
		if p, ok := edges[u]; ok {
			e.Peer = c.ifindex[p]
		}
		newDark[u] = e.DarkUntil
		perSwitch[sw][c.ifindex[u]] = e
	}
	// The ToRs' paths and the circuits switch at the same instant: both
	// are written whole into generation gen, then one write to the lab's
	// generation switch arms them all for at.
	if err := c.paths.write(gen, t, uint64(at), newDark); err != nil {
		return nil, fmt.Errorf("ToR paths: %w", err)
	}
	for k, sw := range c.switches {
		if err := sw.Write(gen, perSwitch[k]); err != nil {
			return nil, fmt.Errorf("ocs%d: %w", k, err)
		}
	}
	return newDark, nil
}

// waitUntil returns at monotonic time at (or when ctx ends). The kernel
// switches at `at` whatever happens here; this only times the routes.
func waitUntil(ctx context.Context, at int64) { _ = monoclock.SleepUntil(ctx, at) }

func (c *Controller) emit(ev *Event) {
	c.evMu.Lock()
	defer c.evMu.Unlock()
	c.seq++
	ev.Seq = c.seq
	if c.evFile != nil && c.evErr == nil {
		b, _ := json.Marshal(ev)
		if c.evBytes += int64(len(b) + 1); c.evBytes > MaxEventLogBytes {
			// The log lives in /run, in memory: a schedule cycling with
			// short slots for hours must not fill it.
			c.evErr = fmt.Errorf("OCS event log %s reached its limit of %d MiB: events from seq %d on are not written", c.evFile.Name(), MaxEventLogBytes>>20, ev.Seq)
			c.log.Error("event log full", "err", c.evErr)
		} else if _, err := c.evFile.Write(append(b, '\n')); err != nil {
			// Events are the measurement of a run: say so once, loudly,
			// and keep the OCS switching.
			c.evErr = fmt.Errorf("OCS event log %s: %w (events from seq %d on are lost)", c.evFile.Name(), err, ev.Seq)
			c.log.Error("event log write failed", "err", c.evErr)
		}
	}
	for ch := range c.subs {
		select {
		case ch <- *ev:
		default: // slow subscriber: drop rather than stall the OCS
		}
	}
}

// MaxEventLogBytes bounds the OCS event log (in /run, so in memory): a
// plan's run writes a few hundred events; a 1 ms rotor cycling for an
// hour, about 3.6 million. A variable for the tests.
var MaxEventLogBytes int64 = 256 << 20

// EventLogErr returns the first failed write to the event log, if any.
func (c *Controller) EventLogErr() error {
	c.evMu.Lock()
	defer c.evMu.Unlock()
	return c.evErr
}

// Subscribe returns a channel of future events; cancel stops it.
func (c *Controller) Subscribe() (<-chan Event, func()) {
	ch := make(chan Event, 1024)
	c.evMu.Lock()
	c.subs[ch] = true
	c.evMu.Unlock()
	return ch, func() {
		c.evMu.Lock()
		defer c.evMu.Unlock()
		if c.subs[ch] {
			delete(c.subs, ch)
			close(ch)
		}
	}
}

// PortDarkTimes is one port's kernel timestamps of its dark periods
// (fastpath.DarkTimes), named by its uplink.
type PortDarkTimes struct {
	Uplink circuit.Uplink `json:"uplink"`
	OCS    int            `json:"ocs"`
	Iface  string         `json:"iface"`
	fastpath.DarkTimes
}

// DarkTimes reads every port's dark-period timestamps: what frames met,
// timed by the clock that enforces the dark period.
func (c *Controller) DarkTimes() ([]PortDarkTimes, error) {
	var out []PortDarkTimes
	for k, sw := range c.switches {
		m, err := sw.DarkTimes(keys(c.uplinkOf[k]))
		if err != nil {
			return nil, fmt.Errorf("ocs%d: %w", k, err)
		}
		for i, t := range m {
			u := c.uplinkOf[k][i]
			out = append(out, PortDarkTimes{Uplink: u, OCS: k, Iface: names.OCSPortIface(u.Rack, u.Port), DarkTimes: t})
		}
	}
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i].Uplink, out[j].Uplink
		return a.Rack < b.Rack || a.Rack == b.Rack && a.Port < b.Port
	})
	return out, nil
}

// PortCounters is one port's counters, named by its uplink.
type PortCounters struct {
	Uplink circuit.Uplink `json:"uplink"`
	OCS    int            `json:"ocs"`
	Iface  string         `json:"iface"`
	fastpath.Counters
}

// Counters reads every port's counters.
func (c *Controller) Counters() ([]PortCounters, error) {
	var out []PortCounters
	for k, sw := range c.switches {
		m, err := sw.Counters(keys(c.uplinkOf[k]))
		if err != nil {
			return nil, err
		}
		for i, ctr := range m {
			u := c.uplinkOf[k][i]
			out = append(out, PortCounters{Uplink: u, OCS: k, Iface: names.OCSPortIface(u.Rack, u.Port), Counters: ctr})
		}
	}
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i].Uplink, out[j].Uplink
		return a.Rack < b.Rack || a.Rack == b.Rack && a.Port < b.Port
	})
	return out, nil
}
