package workers_test

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"os"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/ocsemu/ocsemu/dataplane/fabric"
	"github.com/ocsemu/ocsemu/dataplane/fabric/fabrictest"
	wire "github.com/ocsemu/ocsemu/dataplane/inc"
	"github.com/ocsemu/ocsemu/dataplane/names"
	"github.com/ocsemu/ocsemu/dataplane/netns"
	"github.com/ocsemu/ocsemu/dataplane/topo"
	"github.com/ocsemu/ocsemu/workers"
	"github.com/ocsemu/ocsemu/workers/job"
)

// aggregators serves one engine per ToR of the lab in the ToR's namespace
// (in this process) and returns the engines by rack, and the OS thread
// each serves on (locked to it, so that its CPU time is the aggregator's).
func aggregators(b *testing.B, lab *fabric.Lab) ([]*wire.Engine, []int) {
	var es []*wire.Engine
	var tids []int
	for r := 0; r < lab.Topo.Spec.Racks; r++ {
		e, err := wire.NewEngine(wire.Config{Slots: wire.DefaultSlots, Capacity: envInt("EMU_INC_CAPACITY", 4)})
		if err != nil {
			b.Fatal(err)
		}
		var conn *net.UDPConn
		if err := netns.Do(names.NSName(lab.Topo.Lab, names.ToRName(r)), func() (err error) {
			conn, err = wire.Listen()
			return err
		}); err != nil {
			b.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		tid := make(chan int)
		go func() {
			defer close(done)
			runtime.LockOSThread()
			if nice := envInt("EMU_INC_AGG_NICE", 0); nice > 0 {
				_ = unix.Setpriority(unix.PRIO_PROCESS, 0, -nice) // this thread only
			}
			tid <- unix.Gettid()
			_ = wire.Serve(ctx, conn, e, wire.ServeOptions{Src: topo.GatewayAddr(r), GSO: gso})
		}()
		tids = append(tids, <-tid)
		b.Cleanup(func() { cancel(); <-done })
		es = append(es, e)
	}
	return es, tids
}

// threadCPU is the CPU time (user and system) of one thread of this
// process, in seconds (clock ticks of 10 ms).
func threadCPU(b *testing.B, tid int) float64 {
	data, err := os.ReadFile(fmt.Sprintf("/proc/self/task/%d/stat", tid))
	if err != nil {
		b.Fatal(err)
	}
	f := strings.Fields(string(data[strings.LastIndexByte(string(data), ')')+2:]))
	ut, _ := strconv.ParseFloat(f[11], 64)
	st, _ := strconv.ParseFloat(f[12], 64)
	return (ut + st) / 100
}

// processCPU is this process's CPU time so far (user and system), in
// seconds.
func processCPU() float64 {
	var ru unix.Rusage
	_ = unix.Getrusage(unix.RUSAGE_SELF, &ru)
	return float64(ru.Utime.Nano()+ru.Stime.Nano()) / 1e9
}

// threadWait is the time one thread of this process spent runnable but
// waiting for a CPU, in seconds, and its number of timeslices
// (/proc/<tid>/schedstat).
func threadWait(b *testing.B, tid int) (wait float64, slices uint64) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/self/task/%d/schedstat", tid))
	if err != nil {
		b.Fatal(err)
	}
	f := strings.Fields(string(data))
	if len(f) < 3 {
		b.Fatalf("schedstat %q", data)
	}
	w, _ := strconv.ParseFloat(f[1], 64)
	n, _ := strconv.ParseUint(f[2], 10, 64)
	return w / 1e9, n
}

// admit admits job id on the ToRs of its workers: rooted at the first,
// or with the root spread over them by slot.
func admit(b *testing.B, es []*wire.Engine, id uint16, workers []string, spread bool) {
	var racks []int
	seen := map[int]bool{}
	for _, w := range workers {
		if r, _, _ := names.ParseServer(w); !seen[r] {
			seen[r] = true
			racks = append(racks, r)
		}
	}
	var roots []netip.AddrPort
	for _, r := range racks {
		roots = append(roots, netip.AddrPortFrom(topo.GatewayAddr(r), wire.Port))
	}
	for i, r := range racks {
		cfg := wire.JobConfig{ID: id, ToRs: len(racks), Index: i}
		switch {
		case spread:
			cfg.Roots = roots
		case i > 0:
			cfg.Parent = roots[0]
		}
		if err := es[r].Admit(cfg); err != nil {
			b.Fatal(err)
		}
	}
}

// drops counts the packets the lab dropped so far: at its shapers (root
// qdiscs) and at UDP sockets whose receive buffer was full.
func drops(b *testing.B, lab *fabric.Lab) (qdisc, rcvbuf uint64) {
	qs, err := lab.QdiscStats()
	if err != nil {
		b.Fatal(err)
	}
	for _, q := range qs {
		qdisc += uint64(q.Drops)
	}
	for _, n := range lab.Topo.Nodes {
		if err := netns.Do(names.NSName(lab.Topo.Lab, n.Name), func() error {
			data, err := os.ReadFile("/proc/thread-self/net/snmp")
			if err != nil {
				return err
			}
			var head []string
			for _, l := range strings.Split(string(data), "\n") {
				f := strings.Fields(l)
				if len(f) == 0 || f[0] != "Udp:" {
					continue
				}
				if head == nil {
					head = f
					continue
				}
				for i := range f {
					if i < len(head) && head[i] == "RcvbufErrors" {
						v, _ := strconv.ParseUint(f[i], 10, 64)
						rcvbuf += v
					}
				}
			}
			return nil
		}); err != nil {
			b.Fatal(err)
		}
	}
	return qdisc, rcvbuf
}

func median(v []float64) float64 {
	sort.Float64s(v)
	return v[len(v)/2]
}

// phaseTimes runs a job and returns the median time of one phase over
// iterations after the first, and the sum over all iterations.
func phaseTimes(b *testing.B, lab *fabric.Lab, j job.Job, phase string) (med, total float64) {
	out, err := workers.Launch(context.Background(), &workers.Options{Lab: lab, Jobs: []job.Job{j}, Dir: b.TempDir(), TCPInfoEvery: -1, Verify: true, Timeout: 120 * time.Second})
	if err != nil {
		b.Fatal(err)
	}
	stats, _, _ := workers.Summarize([]job.Job{j}, out)
	var ts []float64
	for _, s := range stats {
		if s.Phase == phase {
			total += float64(s.DurationNs) / 1e9
			if s.Iteration > 0 {
				ts = append(ts, float64(s.DurationNs)/1e9)
			}
		}
	}
	return median(ts), total
}

// BenchmarkINC measures, on one 4-rack fabric with 1 Gbit/s links (a
// packet core between racks, 2 Gbit/s per ToR): INC all-reduce (ps job
// with the ToR aggregators, 1 worker per rack; rooted at tor0, and with
// the root spread over the ToRs by slot) against the TCP ring all-reduce
// for 16 and 64 MiB; per ToR the aggregator's element rate, its thread's
// CPU and run-queue wait; the spurious resends and drops; and the CPU
// seconds per GiB reduced. The OCS bytes with and without INC are
// BenchmarkINCOCSBytes's (emu/orchestrate). Knobs: EMU_INC_WINDOW (slots
// per worker, default 256), EMU_INC_CAPACITY (jobs per ToR, default 4),
// EMU_INC_AGG_NICE (raise the aggregator threads' priority by this
// much). Run with `sudo scripts/bench inc`.
func BenchmarkINC(b *testing.B) {
	fabrictest.SkipUnlessRoot(b)
	lab := fabrictest.Deploy(b, fabrictest.Fabric(b, fabrictest.UniqueLab("hib"),
		"{kind: eps, racks: 4, servers_per_rack: 2, rates: {server: 1Gbit}}"))
	// Every aggregator is locked to a thread of its own, as emu run's are
	// processes of their own. With GOMAXPROCS at the machine's 2, a
	// locked aggregator waits for one of 2 Ps behind the ranks'
	// goroutines (up to a 10 ms preemption slice each): measured, INC
	// took twice as long and resent 52,000 blocks without a drop
	// (docs/inc.md). Enough Ps for the aggregators and the ranks leave the
	// arbitration to the kernel, as between emu run's processes.
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(max(runtime.GOMAXPROCS(0), envInt("EMU_INC_GOMAXPROCS", 8))))
	es, tids := aggregators(b, lab)
	four := []string{"r0s0", "r1s0", "r2s0", "r3s0"}
	id := uint16(0)
	for range b.N {
		fmt.Printf("\nINC against TCP ring all-reduce, 4 racks x 1 worker, 1 Gbit/s, median of iterations 2-4 (load %s)\n", loadavg())
		fmt.Printf("%-6s %-12s %9s %9s %9s %6s %14s %14s %14s %11s %11s %11s %13s %9s %9s\n", "size", "INC roots", "time ms", "bound ms", "speed-up", "ideal", "Melem/s/ToR", "agg CPU/ToR", "max agg CPU", "resends", "qdisc drops", "UDP rcvbuf", "agg wait µs", "CPU s/GiB", "agg s/GiB")
		for _, S := range []int64{16 << 20, 64 << 20} {
			// CPU seconds of this process (ranks, aggregators and the
			// kernel work done in their threads) per GiB of tensor
			// reduced (4 ranks x 4 iterations x S).
			gib := float64(16*S) / (1 << 30)
			p0 := processCPU()
			ring, _ := phaseTimes(b, lab, job.Job{Name: "ring", Pattern: "ring", Workers: four, Bytes: S, Iterations: 4}, "allreduce")
			fmt.Printf("%4dMiB %-12s %9.1f %9.1f %9s %6s %14s %14s %14s %11s %11s %11s %13s %9.2f\n", S>>20, "(TCP ring)", ring*1e3, 1e3*ringBound(S), "", "", "", "", "", "", "", "", "", (processCPU()-p0)/gib)
			for _, spread := range []bool{false, true} {
				id++
				admit(b, es, id, four, spread)
				var d0 uint64
				q0, r0 := drops(b, lab)
				for _, e := range es {
					d0 += e.Stats().Duplicates
				}
				e0, n0 := make([]uint64, len(es)), make([]uint64, len(es))
				c0, w0 := make([]float64, len(tids)), make([]float64, len(tids))
				for i, tid := range tids {
					c0[i], e0[i] = threadCPU(b, tid), es[i].Stats().Elements
					w0[i], n0[i] = threadWait(b, tid)
				}
				p0 := processCPU()
				incT, total := phaseTimes(b, lab, job.Job{Name: "inc", Pattern: "ps", Workers: four, Bytes: S, Iterations: 4,
					INC: &job.INC{ID: id, Window: window, Congestion: envInt("EMU_INC_CC", 0) > 0}}, "push")
				// Elements each ToR added (its worker's and, where it
				// roots, the other ToRs' partial sums) and its
				// aggregator thread's CPU, as a fraction of one core,
				// over the pushes.
				proc := (processCPU() - p0) / gib
				var rate, cpu, maxCPU, wait, aggSec float64
				var slices uint64
				for i, tid := range tids {
					w, n := threadWait(b, tid)
					wait, slices = wait+w-w0[i], slices+n-n0[i]
					c := (threadCPU(b, tid) - c0[i]) / total
					aggSec += threadCPU(b, tid) - c0[i]
					rate += float64(es[i].Stats().Elements-e0[i]) / total / float64(len(es))
					cpu += c / float64(len(tids))
					maxCPU = max(maxCPU, c)
				}
				var dups uint64
				for _, e := range es {
					dups += e.Stats().Duplicates
				}
				dups -= d0
				q1, r1 := drops(b, lab)
				ideal := 2 * float64(3) / 4
				roots := map[bool]string{false: "one (tor0)", true: "spread"}[spread]
				fmt.Printf("%4dMiB %-12s %9.1f %9.1f %9.2f %6.2f %14.1f %13.0f%% %13.0f%% %11d %11d %11d %13.0f %9.2f %9.2f\n", S>>20, roots, incT*1e3, 1e3*incBound(S, spread), ring/incT, ideal, rate/1e6, 100*cpu, 100*maxCPU, dups, q1-q0, r1-r0, 1e6*wait/float64(max(slices, 1)), proc, aggSec/gib)
				if spread {
					b.ReportMetric(ring/incT/ideal, fmt.Sprintf("of-ideal-speedup-%dMiB", S>>20))
				}
				for r := range es {
					_ = es[r].Release(id)
				}
			}
		}
	}
}

// ringBound is the least time of a ring all-reduce of S bytes over 4
// ranks on 1 Gbit/s server links: 2(n-1)/n S, in frames of 1448 bytes of
// data and 1514 on the wire (TCP/IP and Ethernet headers; tbf counts them).
func ringBound(S int64) float64 { return 1.5 * float64(S) * 1514 / 1448 * 8 / 1e9 }

// incBound is the least time of an INC all-reduce of S bytes on the
// benchmark's fabric: every worker sends and receives S on its 1 Gbit/s
// link; with one root, the root ToR's 2 Gbit/s core link takes 3 partial
// sums in (and sends 3 results out); spread, each ToR's core link carries
// 3/4 S of partials and 3/4 S of results each way. Frames: 1440 bytes of
// elements, 1502 on the wire.
func incBound(S int64, spread bool) float64 {
	wire := float64(S) * 1502 / 1440 * 8
	if spread {
		return max(wire/1e9, 1.5*wire/2e9)
	}
	return max(wire/1e9, 3*wire/2e9)
}

// loadavg is the 1-minute load average, printed beside every figure.
func loadavg() string {
	data, _ := os.ReadFile("/proc/loadavg")
	f := strings.Fields(string(data))
	if len(f) == 0 {
		return "?"
	}
	return f[0]
}

// gso: the aggregators coalesce with UDP GSO/GRO, as emu agg does.
const gso = true

// window is the slots each INC worker uses, as emu run gives
// (orchestrate.DefaultINCWindow); the congestion window decides how many
// of them are in flight.
var window = envInt("EMU_INC_WINDOW", 256)

// envInt reads a benchmark knob from the environment.
func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}
