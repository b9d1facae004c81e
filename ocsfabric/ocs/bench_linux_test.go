package ocs_test

import (
	"context"
	"fmt"
	"math/rand"
	"net"
	"net/netip"
	"os"
	"runtime"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/ocsemu/ocsemu/dataplane/fabric"
	"github.com/ocsemu/ocsemu/dataplane/fabric/fabrictest"
	"github.com/ocsemu/ocsemu/dataplane/fastport"
	"github.com/ocsemu/ocsemu/dataplane/netns"
	"github.com/ocsemu/ocsemu/dataplane/probe"
	"github.com/ocsemu/ocsemu/dataplane/topo"
	"github.com/ocsemu/ocsemu/ocsfabric/circuit"
	"github.com/ocsemu/ocsemu/ocsfabric/fastpath"
	"github.com/ocsemu/ocsemu/ocsfabric/ocs"
)

// realtimeOffset converts CLOCK_MONOTONIC to CLOCK_REALTIME (the clock of
// SO_TIMESTAMPNS), taking the tightest of a few samples.
func realtimeOffset() int64 {
	best, off := time.Duration(1<<62), int64(0)
	for i := 0; i < 50; i++ {
		m0 := fastpath.Monotonic()
		r := time.Now().UnixNano()
		m1 := fastpath.Monotonic()
		if d := time.Duration(m1 - m0); d < best {
			best, off = d, r-int64(m0+m1)/2
		}
	}
	return off
}

func percentile(xs []float64, p float64) float64 {
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	i := int(p * float64(len(s)-1))
	return s[i]
}

// BenchmarkDarkPeriod measures how exactly the fabric enforces a dark
// period. A UDP probe every 10 us crosses two circuits between racks 0 and
// 1; each trial swaps them ("straight" <-> "cross"), which darkens all
// four ports but leaves the ToRs' paths unchanged. The fast path itself
// timestamps what the probe's frames met at the OCS port they enter
// (fastpath.DarkTimes): the last frame forwarded before the switch, the
// first and last dropped as dark, the first forwarded after. Reported per
// delay, against the configured window [switch, switch+delay):
//
//   - err: (first forwarded after - first dropped) - delay, the dark
//     period's length as the probe met it at the OCS. Both ends are "first
//     frame at or after an instant", so the probe's phase cancels; what is
//     left is the fabric's error plus the probe's jitter at the two edges.
//   - steady: trials in which the probe kept its spacing at both edges
//     (a frame within two intervals on each side of each edge), and the
//     error over those: where the probe measures the fabric, not its own
//     stalls on a busy machine.
//   - outside: frames that met the wrong state (forwarded inside the
//     window or dropped as dark outside it). An exact fabric has none.
//   - missed: trials in which the probe sent nothing into the dark period
//     (repeated, up to twice the trials).
//
// A second table explains the end-to-end figure this benchmark used to
// report, the receiver's largest gap (kernel receive timestamps) minus the
// delay: it is the OCS gap (last forwarded before to first forwarded
// after, which exceeds the dark period by one probe spacing on average)
// plus how much longer the first frame after the dark period took from the
// OCS port to the receiver than the last frame before it.
func BenchmarkDarkPeriod(b *testing.B) {
	lab, ctl, _ := startOCS(b, "gap", "{kind: ocs, racks: 2, servers_per_rack: 1, uplinks_per_tor: 2, rates: {server: unlimited, uplink: unlimited}}")
	ctx := context.Background()
	hs := fabrictest.Hosts(lab)
	straight := circuit.Config{Circuits: []circuit.Circuit{{A: upb("tor0:0"), B: upb("tor1:0")}, {A: upb("tor0:1"), B: upb("tor1:1")}}}
	cross := circuit.Config{Circuits: []circuit.Circuit{{A: upb("tor0:0"), B: upb("tor1:1")}, {A: upb("tor0:1"), B: upb("tor1:0")}}}
	if _, err := ctl.Apply(ctx, straight, 0, 0); err != nil {
		b.Fatal(err)
	}
	const interval = 10 * time.Microsecond
	// Real-time, paused between trials: see probe.PacerOptions.
	pacer, err := probe.StartPacer(hs[0], hs[1], 7000, probe.PacerOptions{Interval: interval, RealTime: true})
	if err != nil {
		b.Fatal(err)
	}
	defer pacer.Stop(ctx)
	time.Sleep(100 * time.Millisecond)
	off := realtimeOffset()
	periods := func() map[circuit.Uplink]fastpath.DarkTimes {
		ts, err := ctl.DarkTimes()
		if err != nil {
			b.Fatal(err)
		}
		m := map[circuit.Uplink]fastpath.DarkTimes{}
		for _, t := range ts {
			m[t.Uplink] = t.DarkTimes
		}
		return m
	}
	delays := []time.Duration{100 * time.Microsecond, time.Millisecond, 10 * time.Millisecond, 50 * time.Millisecond}
	const trials = 50
	us := func(ns int64) float64 { return float64(ns) / 1e3 }
	abs := func(x int64) int64 { return max(x, -x) }
	b.ResetTimer()
	for n := 0; n < b.N; n++ {
		type rxRow struct {
			d                          time.Duration
			gap, ocsGap, lastB, firstA []float64
			missed                     int
		}
		var rxRows []rxRow
		fmt.Printf("\ndark period, measured in the fast path: UDP probe every %v, %d trials per delay\n", interval, trials)
		fmt.Printf("%-8s %9s %9s %9s %7s %11s %8s %5s %7s\n", "delay", "err p50", "|err| p99", "|err| max", "steady", "steady p99", "outside", "late", "missed")
		for _, d := range delays {
			var errs, abss, steady []float64
			rr := rxRow{d: d}
			late, outside, missed := 0, 0, 0
			for i := 0; len(errs) < trials && i < 2*trials; i++ {
				cfg := cross
				if i%2 == 1 {
					cfg = straight
				}
				pacer.Reset()
				pacer.Resume()
				time.Sleep(5 * time.Millisecond)
				before := periods()
				ev, err := ctl.Apply(ctx, cfg, d, 0)
				if err != nil {
					b.Fatal(err)
				}
				time.Sleep(d + 5*time.Millisecond)
				pacer.Pause()
				// Idle an eighth of the active time: under the real-time
				// budget, which would stop the sender for the rest of a second.
				time.Sleep(time.Millisecond + (d+10*time.Millisecond)/8)
				// The probe's port: the one that met one more dark period.
				var p *fastpath.DarkTimes
				for u, t := range periods() {
					if t.Periods > before[u].Periods {
						if p != nil || t.Periods != before[u].Periods+1 {
							b.Fatalf("delay %v trial %d: the probe met more than one dark period", d, i)
						}
						p = &t
					}
				}
				if p == nil {
					missed++
					continue
				}
				if ev.LateNs > 0 {
					late++
				}
				at, until := ev.Scheduled, ev.DarkUntil
				e := int64(p.After-p.DarkFrom) - int64(d)
				errs = append(errs, us(e))
				abss = append(abss, us(abs(e)))
				if p.DarkFrom-p.Before <= uint64(2*interval) && p.After-p.DarkTo <= uint64(2*interval) {
					steady = append(steady, us(abs(e)))
				}
				if int64(p.Before) >= at || int64(p.DarkFrom) < at || int64(p.DarkTo) >= until || int64(p.After) < until {
					outside++
				}
				// The receiver may lag on a busy machine: give it time.
				mid := ev.Effective + off + int64(d/2)
				rb, ra, err := pacer.Around(mid)
				for t0 := time.Now(); err != nil && time.Since(t0) < time.Second; {
					time.Sleep(5 * time.Millisecond)
					rb, ra, err = pacer.Around(mid)
				}
				if err != nil {
					rr.missed++
					continue
				}
				rr.gap = append(rr.gap, us(ra-rb-int64(d)))
				rr.ocsGap = append(rr.ocsGap, us(int64(p.After-p.Before)-int64(d)))
				rr.lastB = append(rr.lastB, us(rb-off-int64(p.Before)))
				rr.firstA = append(rr.firstA, us(ra-off-int64(p.After)))
			}
			if len(errs) == 0 {
				b.Fatalf("delay %v: the probe met no dark period in %d trials", d, 2*trials)
			}
			p50, p99 := percentile(errs, .5), percentile(abss, .99)
			sp99 := -1.0
			if len(steady) > 0 {
				sp99 = percentile(steady, .99)
			}
			fmt.Printf("%-8v %7.1fus %7.1fus %7.1fus %7d %9.1fus %8d %5d %7d\n", d, p50, p99, percentile(abss, 1), len(steady), sp99, outside, late, missed)
			b.ReportMetric(p99, fmt.Sprintf("p99-err-us@%v", d))
			b.ReportMetric(p50, fmt.Sprintf("p50-err-us@%v", d))
			b.ReportMetric(sp99, fmt.Sprintf("steady-p99-err-us@%v", d))
			b.ReportMetric(float64(outside), fmt.Sprintf("outside@%v", d))
			rxRows = append(rxRows, rr)
		}
		fmt.Printf("\nthe receiver's gap, end to end, and where its excess comes from (p50s; OCS->receiver: kernel timestamps at the OCS port and at the receiver)\n")
		fmt.Printf("%-8s %11s %11s %11s %18s %18s %7s\n", "delay", "rx gap-d", "rx gap p99", "OCS gap-d", "last before: OCS->rx", "first after: OCS->rx", "missed")
		for _, r := range rxRows {
			if len(r.gap) == 0 {
				fmt.Printf("%-8v %11s\n", r.d, "no samples")
				continue
			}
			fmt.Printf("%-8v %9.1fus %9.1fus %9.1fus %18.1fus %18.1fus %7d\n", r.d, percentile(r.gap, .5), percentile(r.gap, .99), percentile(r.ocsGap, .5), percentile(r.lastB, .5), percentile(r.firstA, .5), r.missed)
		}
		fmt.Printf("probe spacing at the receiver: p50 %.1fus\n", pacer.SpacingMedian().Seconds()*1e6)
	}
}

// BenchmarkControlLatency times a whole-configuration change of a 64-port
// OCS through the HTTP API: call -> kernel switch, call -> routes
// following, call -> reply.
func BenchmarkControlLatency(b *testing.B) {
	_, _, cl := startOCS(b, "ctl", "{kind: ocs, racks: 16, servers_per_rack: 1, uplinks_per_tor: 4, rates: {server: unlimited, uplink: unlimited}}")
	ctx := context.Background()
	rng := rand.New(rand.NewSource(1))
	var ports []circuit.Uplink
	for r := 0; r < 16; r++ {
		for u := 0; u < 4; u++ {
			ports = append(ports, circuit.Uplink{Rack: r, Port: u})
		}
	}
	matching := func() []circuit.Circuit {
		for {
			rng.Shuffle(len(ports), func(i, j int) { ports[i], ports[j] = ports[j], ports[i] })
			var cs []circuit.Circuit
			ok := true
			for i := 0; i < len(ports); i += 2 {
				if ports[i].Rack == ports[i+1].Rack {
					ok = false
					break
				}
				cs = append(cs, circuit.Circuit{A: ports[i], B: ports[i+1]})
			}
			if ok {
				return cs
			}
		}
	}
	const trials = 30
	b.ResetTimer()
	for n := 0; n < b.N; n++ {
		var sw, rt, reply []float64
		zero := scenarioDuration(0)
		for i := 0; i < trials; i++ {
			cs := matching()
			t0 := int64(fastpath.Monotonic())
			ev, err := cl.Apply(ctx, ocs.ConfigRequest{Circuits: cs, Delay: &zero})
			t1 := int64(fastpath.Monotonic())
			if err != nil {
				b.Fatal(err)
			}
			sw = append(sw, float64(ev.Effective-t0)/1e3)
			rt = append(rt, float64(ev.RoutesDoneNs-t0)/1e3)
			reply = append(reply, float64(t1-t0)/1e3)
		}
		fmt.Printf("\ncontrol latency, 64-port OCS (16 racks x 4 uplinks, 32 circuits), %d changes via the API:\n", trials)
		fmt.Printf("  call -> kernel switch   p50 %7.0fus  p99 %7.0fus\n", percentile(sw, .5), percentile(sw, .99))
		fmt.Printf("  call -> routes follow   p50 %7.0fus  p99 %7.0fus\n", percentile(rt, .5), percentile(rt, .99))
		fmt.Printf("  call -> reply           p50 %7.0fus  p99 %7.0fus\n", percentile(reply, .5), percentile(reply, .99))
		b.ReportMetric(percentile(sw, .5), "switch-p50-us")
		b.ReportMetric(percentile(rt, .5), "routes-p50-us")
	}
}

// BenchmarkCircuitThroughput compares, in one interleaved run, TCP goodput
// across server -> ToR -> OCS -> ToR -> server (unshaped) with a bare veth
// pair, and checks a circuit shaped to 1 Gbit/s. The unshaped fabric runs
// twice per round, in the same lab: with its ports fast (frames handed
// straight to each veth peer's ingress, dataplane/fastport) and with every
// port slow (plain bpf_redirect and the kernel's IP forwarding to the
// server, as before fast ports). Beside each median: the process's CPU
// seconds per GB moved (user + system, so the softirq forwarding done in
// the sender's and receiver's own context counts), a figure the machine's
// load disturbs less than goodput. Then where the cycles go: the sending
// thread's CPU time per 64-byte UDP datagram over each path (the whole
// kernel path, every forwarding hop and the delivery to the receiver's
// socket, runs in the sender's softirq context), so the difference is the
// cost of the fabric's extra hops.
func BenchmarkCircuitThroughput(b *testing.B) {
	ctx := context.Background()
	labU, _, clU := startOCS(b, "thr", "{kind: ocs, racks: 2, servers_per_rack: 1, rates: {server: unlimited, uplink: unlimited}}")
	labS, _, clS := startOCS(b, "shp", "{kind: ocs, racks: 2, servers_per_rack: 1, rates: {server: 1Gbit, uplink: 1Gbit}}")
	for _, cl := range []*ocs.Client{clU, clS} {
		if _, err := cl.Connect(ctx, ocs.ConnectRequest{A: upb("tor0:0"), B: upb("tor1:0")}); err != nil {
			b.Fatal(err)
		}
	}
	time.Sleep(100 * time.Millisecond)
	ba, bb := fabrictest.BareVethPair(b)
	paths := []struct {
		name string
		src  probe.Host
		dst  probe.Host
		fast bool // the unshaped lab's ports fast during this path's turn
	}{
		{"fabric, unshaped, fast ports", fabrictest.Hosts(labU)[0], fabrictest.Hosts(labU)[1], true},
		{"fabric, unshaped, slow ports (before)", fabrictest.Hosts(labU)[0], fabrictest.Hosts(labU)[1], false},
		{"bare veth pair", ba, bb, false},
		{"circuit shaped to 1 Gbit/s", fabrictest.Hosts(labS)[0], fabrictest.Hosts(labS)[1], false},
	}
	const fastK, slowK, bareK, shapedK = 0, 1, 2, 3
	cpu := func() time.Duration {
		var ru syscall.Rusage
		_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
		return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	const d, warmup, rounds = 2 * time.Second, 300 * time.Millisecond, 7
	b.ResetTimer()
	for n := 0; n < b.N; n++ {
		load0 := loadAvg()
		gbps := make([][]float64, len(paths))
		cpuGB := make([][]float64, len(paths))
		for i := 0; i < rounds; i++ {
			for k, p := range paths {
				setFast(b, labU, p.fast)
				c0 := cpu()
				r, err := probe.Transfer(ctx, p.src, p.dst, probe.TransferOptions{Port: 5400 + 10*k + i, Duration: d, Warmup: warmup})
				if err != nil {
					b.Fatal(err)
				}
				gbps[k] = append(gbps[k], r.GoodputBps/1e9)
				// bytes of the whole transfer, warm-up included, at the measured rate
				moved := r.GoodputBps / 8 * (d + warmup).Seconds()
				cpuGB[k] = append(cpuGB[k], (cpu()-c0).Seconds()/(moved/1e9))
			}
		}
		med := func(k int) (float64, float64) { return percentile(gbps[k], .5), percentile(cpuGB[k], .5) }
		// Paired: each round's fabric figure over the same round's bare
		// pair, so that load changing between rounds cancels.
		paired := func(k int, xs [][]float64, inv bool) float64 {
			var r []float64
			for i := range xs[k] {
				if inv {
					r = append(r, xs[bareK][i]/xs[k][i])
				} else {
					r = append(r, xs[k][i]/xs[bareK][i])
				}
			}
			return percentile(r, .5)
		}
		bv, bc := med(bareK)
		s, _ := med(shapedK)
		fmt.Printf("\nTCP goodput, medians of %d x %v, interleaved in one run (CPU: the process's seconds per GB moved), load %s:\n", rounds, d, load0)
		for k, p := range paths[:shapedK] {
			g, c := med(k)
			fmt.Printf("  %-40s %6.2f Gbit/s  %5.3f CPU-s/GB  %v\n", p.name, g, c, round2(gbps[k]))
		}
		for _, k := range []int{fastK, slowK} {
			g, c := med(k)
			fmt.Printf("  %-40s by CPU per GB %5.1f%% (per round %5.1f%%; goal >= 95%%), goodput %5.1f%% (per round %5.1f%%)\n",
				paths[k].name+" / bare", 100*bc/c, 100*paired(k, cpuGB, true), 100*g/bv, 100*paired(k, gbps, false))
		}
		fmt.Printf("  circuit shaped to 1 Gbit/s               %6.3f Gbit/s = %.1f%% (goal 90-100%%)\n", s, 100*s)
		ff, fc := med(fastK)
		_, sc := med(slowK)
		b.ReportMetric(100*ff/bv, "fabric-vs-bare-%")
		b.ReportMetric(100*bc/fc, "fabric-vs-bare-cpu-%")
		b.ReportMetric(100*bc/sc, "slow-vs-bare-cpu-%")
		b.ReportMetric(100*s, "shaped-1G-%")

		const datagrams, udpRounds = 20000, 9
		udp := []int{fastK, slowK, bareK}
		per := make([][]float64, len(udp))
		for i := 0; i < udpRounds; i++ {
			for j, k := range udp {
				setFast(b, labU, paths[k].fast)
				us, err := sendCost(paths[k].src, paths[k].dst, 7100+k, datagrams)
				if err != nil {
					b.Fatal(err)
				}
				per[j] = append(per[j], us)
			}
		}
		setFast(b, labU, true)
		uf, us, ub := percentile(per[0], .5), percentile(per[1], .5), percentile(per[2], .5)
		fmt.Printf("sender CPU per 64-byte UDP datagram, medians of %d x %d interleaved (load %s):\n", udpRounds, datagrams, loadAvg())
		fmt.Printf("  fast ports %.2f us, slow ports %.2f us, bare veth pair %.2f us: the fabric's extra hops cost %.2f us fast, %.2f us slow\n", uf, us, ub, uf-ub, us-ub)
		b.ReportMetric(uf, "fabric-us/datagram")
		b.ReportMetric(us, "slow-us/datagram")
		b.ReportMetric(ub, "bare-us/datagram")
	}
}

// setFast makes every OCS and ToR port of lab fast where nothing needs
// its egress (on) or slow (off), as the OCS process and `emu loss` do.
func setFast(t testing.TB, lab *fabric.Lab, on bool) {
	t.Helper()
	for _, n := range lab.Topo.Nodes {
		if n.Kind != topo.KindToR && n.Kind != topo.KindOCS {
			continue
		}
		h, err := lab.Handle(n.Name)
		if err != nil {
			t.Fatal(err)
		}
		for _, iface := range lab.Topo.Ifaces(n.Name) {
			l, err := lab.Port(n.Name, iface)
			if err == nil {
				if on {
					err = fastport.Refresh(h, n.NS, l)
				} else {
					err = fastport.Off(h, l)
				}
			}
			if err != nil {
				t.Fatalf("%s:%s: %v", n.Name, iface, err)
			}
		}
	}
}

// loadAvg is the first three fields of /proc/loadavg.
func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	f := strings.Fields(string(b))
	return strings.Join(f[:min(3, len(f))], " ")
}

// sendCost sends n 64-byte datagrams from src to dst on one locked thread
// and returns the thread's CPU microseconds per datagram: veth transmits
// and the forwarding in the namespaces behind it run in that thread's
// softirq context, up to the receiving socket.
func sendCost(src, dst probe.Host, port, n int) (float64, error) {
	laddr := net.UDPAddrFromAddrPort(netip.AddrPortFrom(dst.Addr, uint16(port)))
	var r, w *net.UDPConn
	if err := netns.Do(dst.NS, func() (err error) { r, err = net.ListenUDP("udp4", laddr); return err }); err != nil {
		return 0, err
	}
	defer r.Close()
	go func() {
		buf := make([]byte, 2048)
		for {
			if _, err := r.Read(buf); err != nil {
				return
			}
		}
	}()
	if err := netns.Do(src.NS, func() (err error) { w, err = net.DialUDP("udp4", nil, laddr); return err }); err != nil {
		return 0, err
	}
	defer w.Close()
	raw, err := w.SyscallConn()
	if err != nil {
		return 0, err
	}
	res := make(chan float64, 1)
	if cerr := raw.Control(func(fd uintptr) {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		msg := make([]byte, 64)
		var t0, t1 unix.Timespec
		_ = unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &t0)
		for i := 0; i < n; i++ {
			_, _ = unix.Write(int(fd), msg) // a full receiver drops; the sender's work is the same
		}
		_ = unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &t1)
		res <- float64(t1.Nano()-t0.Nano()) / 1e3 / float64(n)
	}); cerr != nil {
		return 0, cerr
	}
	return <-res, nil
}

func round2(xs []float64) []float64 {
	out := make([]float64, len(xs))
	for i, x := range xs {
		out[i] = float64(int(x*100+.5)) / 100
	}
	return out
}

func upb(s string) circuit.Uplink {
	u, err := circuit.ParseUplink(s)
	if err != nil {
		panic(err)
	}
	return u
}

// BenchmarkRotorSlots runs a rotor schedule (4 racks, the 3 perfect
// matchings in turn) at shrinking slot lengths while every server sends
// UDP to every other, so paths change at every slot under traffic. Per
// slot length it reports how many slot switches were written too late for
// their kernel-timed instant, the skew between the ToRs' path switch and
// the circuits' (0 when both switched at the same instant), the frames the
// OCS dropped as unpatched (sent into a circuit that was gone) or dark (in
// flight at the switch), and how long the netlink routes, which only
// ToR-originated traffic still follows, lagged. A slot length is faithful
// when no switch is late, the skew is 0 and no frame hit an unpatched port.
func BenchmarkRotorSlots(b *testing.B) {
	lab, ctl, _ := startOCS(b, "rot", "{kind: ocs, racks: 4, servers_per_rack: 1, uplinks_per_tor: 1, rates: {server: unlimited, uplink: unlimited}}")
	c := func(a, z string) circuit.Circuit { return circuit.Circuit{A: upb(a), B: upb(z)} }
	matchings := [][]circuit.Circuit{
		{c("tor0:0", "tor1:0"), c("tor2:0", "tor3:0")},
		{c("tor0:0", "tor2:0"), c("tor1:0", "tor3:0")},
		{c("tor0:0", "tor3:0"), c("tor1:0", "tor2:0")},
	}
	lengths := []time.Duration{10 * time.Millisecond, 2 * time.Millisecond, time.Millisecond, 500 * time.Microsecond, 200 * time.Microsecond, 100 * time.Microsecond}
	traffic, err := startMesh(fabrictest.Hosts(lab), 9300, 200*time.Microsecond)
	if err != nil {
		b.Fatal(err)
	}
	defer traffic.stop()
	sum := func() (unpatched, dark uint64) {
		cs, err := ctl.Counters()
		if err != nil {
			b.Fatal(err)
		}
		for _, c := range cs {
			unpatched += c.UnpatchedPackets
			dark += c.DarkPackets
		}
		return
	}
	b.ResetTimer()
	for n := 0; n < b.N; n++ {
		fmt.Printf("\nrotor schedule, 4 racks, 3 matchings cycled, 10 us dark per switch, UDP between every server pair (%d pairs, one datagram each per %v)\n", traffic.pairs, traffic.every)
		fmt.Printf("%-8s %6s %5s %10s %10s %10s %8s %12s %12s %9s\n", "slot", "slots", "late", "late p99", "path skew", "unpatched", "dark", "routes p50", "routes p99", "faithful")
		for _, L := range lengths {
			var slots []ocs.Slot
			for _, m := range matchings {
				slots = append(slots, ocs.Slot{Circuits: m, Duration: scenarioDuration(L)})
			}
			cycles := max(int(300*time.Millisecond/(3*L)), 10)
			delay := scenarioDuration(10 * time.Microsecond)
			u0, d0 := sum()
			evs, stop := ctl.Subscribe()
			if err := ctl.StartSchedule(ocs.Schedule{Slots: slots, Cycles: cycles, Delay: &delay}); err != nil {
				b.Fatal(err)
			}
			var late, routes []float64
			nLate := 0
			var skew int64
			for ev := range evs {
				if ev.Kind == "schedule-end" {
					break
				}
				if ev.Kind != "slot" {
					continue
				}
				late = append(late, float64(ev.LateNs)/1e3)
				skew = max(skew, ev.PathSkewNs)
				if ev.RoutesDoneNs != 0 { // 0: superseded by the next slot before they were written
					routes = append(routes, float64(ev.RoutesDoneNs-ev.Effective)/1e3)
				}
				if ev.LateNs > 0 {
					nLate++
				}
			}
			stop()
			ctl.StopSchedule()
			u1, d1 := sum()
			faithful := nLate == 0 && skew == 0 && u1 == u0
			rp50, rp99 := -1.0, -1.0
			if len(routes) > 0 {
				rp50, rp99 = percentile(routes, .5), percentile(routes, .99)
			}
			fmt.Printf("%-8v %6d %5d %8.1fus %10v %10d %8d %10.1fus %10.1fus %9v\n", L, len(late), nLate, percentile(late, .99), time.Duration(skew), u1-u0, d1-d0, rp50, rp99, faithful)
			b.ReportMetric(float64(nLate), fmt.Sprintf("late-slots@%v", L))
			b.ReportMetric(float64(u1-u0), fmt.Sprintf("unpatched-pkts@%v", L))
		}
	}
}

// mesh sends one small UDP datagram from every host to every other host
// per interval, into receivers that drain them.
type mesh struct {
	pairs int
	every time.Duration
	conns []*net.UDPConn
	done  chan struct{}
	wg    sync.WaitGroup
}

func startMesh(hosts []probe.Host, port int, every time.Duration) (*mesh, error) {
	m := &mesh{every: every, done: make(chan struct{})}
	var senders []*net.UDPConn
	for _, d := range hosts {
		laddr := net.UDPAddrFromAddrPort(netip.AddrPortFrom(d.Addr, uint16(port)))
		var r *net.UDPConn
		if err := netns.Do(d.NS, func() (err error) { r, err = net.ListenUDP("udp4", laddr); return err }); err != nil {
			m.stop()
			return nil, err
		}
		m.conns = append(m.conns, r)
		m.wg.Add(1)
		go func() {
			defer m.wg.Done()
			buf := make([]byte, 512)
			for {
				if _, err := r.Read(buf); err != nil {
					return
				}
			}
		}()
		for _, s := range hosts {
			if s == d {
				continue
			}
			var w *net.UDPConn
			if err := netns.Do(s.NS, func() (err error) { w, err = net.DialUDP("udp4", nil, laddr); return err }); err != nil {
				m.stop()
				return nil, err
			}
			senders = append(senders, w)
			m.conns = append(m.conns, w)
		}
	}
	m.pairs = len(senders)
	m.wg.Add(1)
	go func() {
		defer m.wg.Done()
		msg := make([]byte, 200)
		for {
			select {
			case <-m.done:
				return
			case <-time.After(every):
			}
			for _, w := range senders {
				_, _ = w.Write(msg) // unreachable racks answer ICMP; ignore
			}
		}
	}()
	return m, nil
}

func (m *mesh) stop() {
	close(m.done)
	for _, c := range m.conns {
		c.Close()
	}
	m.wg.Wait()
}
