package ocs_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cilium/ebpf"

	"github.com/ocsemu/ocsemu/dataplane/fabric"
	"github.com/ocsemu/ocsemu/dataplane/fabric/fabrictest"
	"github.com/ocsemu/ocsemu/dataplane/netns"
	"github.com/ocsemu/ocsemu/dataplane/probe"
	"github.com/ocsemu/ocsemu/dataplane/topo"
	"github.com/ocsemu/ocsemu/ocsfabric/circuit"
	"github.com/ocsemu/ocsemu/ocsfabric/ocs"
)

// BenchmarkScale deploys paper 000's fabric (racks x servers, 24 uplinks
// per ToR on one OCS, servers shaped to 1 Gbit/s and uplinks to 400
// Mbit/s) with its OCS program, patches a configuration in which every
// rack reaches every other (12 rings of circuits, multi-hop where no
// circuit is direct), pings a seeded sample of 1,000 server pairs across
// the circuits, then destroys the lab and checks nothing is left. It
// prints each step's time, the kernel's memory growth and the peak RSS of
// this process. Goal at 64x64: deploy <= 15 s, destroy <= 5 s.
//
// It is not part of `go test`: run `sudo scripts/bench scale` (the lab is
// named scale-<size>, or $EMU_BENCH_LAB-<size>; the script destroys it by
// name even if the benchmark crashes).
func BenchmarkScale(b *testing.B) {
	fabrictest.SkipUnlessRoot(b)
	for _, size := range []int{16, 32, 64} {
		b.Run(fmt.Sprintf("%dx%d", size, size), func(b *testing.B) {
			for n := 0; n < b.N; n++ {
				scaleRun(b, size, size, 24)
			}
		})
	}
}

// ScaleLab is the lab name of one BenchmarkScale case.
func scaleLab(racks, servers int) string {
	prefix := os.Getenv("EMU_BENCH_LAB")
	if prefix == "" {
		prefix = "scale"
	}
	return fmt.Sprintf("%s-%dx%d", prefix, racks, servers)
}

func scaleRun(b *testing.B, racks, servers, uplinks int) {
	ctx := context.Background()
	name := scaleLab(racks, servers)
	// A crashed earlier run may have left this lab: remove it by name.
	if err := fabric.Destroy(ctx, name, nil); err != nil {
		b.Fatalf("remove leftovers of %s: %v", name, err)
	}
	sp := fabrictest.Fabric(b, name, fmt.Sprintf("{kind: ocs, racks: %d, servers_per_rack: %d, uplinks_per_tor: %d, ocs: {switches: 1}, rates: {server: 1Gbit, uplink: 400Mbit}}", racks, servers, uplinks))
	t := topo.Build(sp)
	mem0 := readMeminfo()
	resetPeakRSS()

	cpu0 := cpuTime()
	t0 := time.Now()
	lab, err := fabric.Deploy(ctx, t, fabric.Options{})
	if err != nil {
		b.Fatal(err)
	}
	destroyed := false
	defer func() {
		if !destroyed {
			lab.Close()
			_ = fabric.Destroy(ctx, name, nil)
		}
	}()
	tFabric := time.Since(t0)
	t1, cpu1 := time.Now(), cpuTime()
	ctl, err := ocs.New(ctx, lab, ocs.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer ctl.Close()
	tOCS, ocsCPU := time.Since(t1), cpuTime()-cpu1
	deploy := time.Since(t0)
	deployCPU := cpuTime() - cpu0
	progs, maps := ownBPF()

	// Before any circuit, no rack reaches another: the pings below go
	// across the circuits of the configuration, nothing else.
	pairs := samplePairs(fabrictest.Hosts(lab), 1000, 1)
	dark, err := probe.PingPairs(ctx, pairs[:20], 16, 1, 200*time.Millisecond)
	if err != nil {
		b.Fatal(err)
	}
	if len(dark.Failed) != dark.Pairs {
		b.Errorf("%d of %d pairs reached each other before any circuit was patched", dark.Pairs-len(dark.Failed), dark.Pairs)
	}

	t2 := time.Now()
	cfg := ringsConfig(racks, uplinks)
	if _, err := ctl.Apply(ctx, cfg, 0, 0); err != nil {
		b.Fatal(err)
	}
	tConfig := time.Since(t2)
	if u := ctl.Unreachable(); len(u) > 0 {
		b.Errorf("%d rack pairs unreachable in the configuration", len(u))
	}
	mem1 := readMeminfo()

	t3 := time.Now()
	res, err := probe.PingPairs(ctx, pairs, 16, 3, time.Second)
	if err != nil {
		b.Fatal(err)
	}
	tPing := time.Since(t3)
	peak := peakRSS()

	inodes := map[uint64]bool{}
	for _, n := range t.Nodes {
		if ino, err := netns.Inode(n.NS); err == nil {
			inodes[ino] = true
		}
	}
	nsUp := liveNetns()
	t4 := time.Now()
	ctl.Close()
	lab.Close()
	if err := fabric.Destroy(ctx, name, nil); err != nil {
		b.Fatal(err)
	}
	destroyed = true
	tDestroy := time.Since(t4)
	fabrictest.AssertGone(b, name)
	if pids := netns.PIDsIn(inodes); len(pids) > 0 {
		b.Errorf("processes left in the lab's namespaces: %v", pids)
	}
	if pins, _ := filepath.Glob("/sys/fs/bpf/*" + name + "*"); len(pins) > 0 {
		b.Errorf("BPF pins left: %v", pins)
	}
	freed, left := waitBPFGone(progs, maps, 2*time.Minute)
	if left > 0 {
		b.Errorf("%d BPF programs and maps of the lab still loaded %v after destroy", left, freed)
	}
	// Other labs come and go meanwhile: allow them 64 namespaces.
	nsFreed := waitNetnsFreed(nsUp-len(t.Nodes)+64, 3*time.Minute) + tDestroy
	mem2 := readMeminfo()

	fmt.Printf("\nscale %dx%d, %d uplinks per ToR, 1 OCS: %d namespaces, %d links (load %s)\n",
		racks, servers, uplinks, len(t.Nodes), len(t.Links), loadavg())
	for _, s := range lab.Steps {
		fmt.Printf("  deploy  %-12s %8.2f s  %5.2f CPU-s\n", s.Name, s.Took.Seconds(), s.CPU.Seconds())
	}
	fmt.Printf("  deploy  %-12s %8.2f s  %5.2f CPU-s  (%d BPF programs, %d maps)\n", "ocs attach", tOCS.Seconds(), ocsCPU.Seconds(), len(progs), len(maps))
	fmt.Printf("  deploy  total        %8.2f s  (fabric %.2f s + OCS %.2f s; goal <= 15 s), %.1f CPU-s in this process\n", deploy.Seconds(), tFabric.Seconds(), tOCS.Seconds(), deployCPU.Seconds())
	fmt.Printf("  before circuits       %d of %d sampled pairs reached (want 0)\n", dark.Pairs-len(dark.Failed), dark.Pairs)
	fmt.Printf("  configure            %8.2f s  (%d circuits, all rack pairs reachable: %v)\n", tConfig.Seconds(), len(cfg.Circuits), len(ctl.Unreachable()) == 0)
	fmt.Printf("  pingall sample       %8.2f s  (%d pairs, seed 1: %d reached, %d failed, max RTT %v)\n",
		tPing.Seconds(), res.Pairs, res.Pairs-len(res.Failed), len(res.Failed), res.RTTMax.Round(time.Microsecond))
	fmt.Printf("  destroy              %8.2f s  (goal <= 5 s); the kernel freed the lab's BPF objects %.1f s and its namespaces %.1f s after destroy began (in the background)\n",
		tDestroy.Seconds(), (tDestroy + freed).Seconds(), nsFreed.Seconds())
	fmt.Printf("  memory: kernel +%d MiB (MemAvailable), slab +%d MiB; this process peak RSS %d MiB; once the namespaces were freed MemAvailable %+d MiB of before\n",
		(mem0["MemAvailable"]-mem1["MemAvailable"])>>10, (mem1["Slab"]-mem0["Slab"])>>10, peak>>10, (mem2["MemAvailable"]-mem0["MemAvailable"])>>10)
	if len(res.Failed) > 0 {
		b.Errorf("%d of %d sampled pairs unreachable, e.g. %v", len(res.Failed), res.Pairs, res.Failed[0])
	}
	b.ReportMetric(deploy.Seconds(), "deploy-s")
	b.ReportMetric(deployCPU.Seconds(), "deploy-cpu-s")
	b.ReportMetric(tDestroy.Seconds(), "destroy-s")
	b.ReportMetric(tPing.Seconds(), "pingall-s")
	b.ReportMetric(float64((mem0["MemAvailable"]-mem1["MemAvailable"])>>10), "kernel-MiB")
	b.ReportMetric(float64(peak>>10), "peak-rss-MiB")
}

// ringsConfig patches uplinks 2j and 2j+1 of every ToR into a ring of
// stride 1+j: rack r's uplink 2j to rack r+1+j's uplink 2j+1. With 24
// uplinks every rack has direct circuits to 24 others, and routes reach
// the rest in a few hops.
func ringsConfig(racks, uplinks int) circuit.Config {
	var cfg circuit.Config
	if racks < 2 {
		return cfg
	}
	for j := 0; 2*j+1 < uplinks; j++ {
		k := 1 + j%(racks-1)
		for r := 0; r < racks; r++ {
			cfg.Circuits = append(cfg.Circuits, circuit.Circuit{
				A: circuit.Uplink{Rack: r, Port: 2 * j},
				B: circuit.Uplink{Rack: (r + k) % racks, Port: 2*j + 1},
			})
		}
	}
	return cfg
}

// samplePairs draws n distinct (source, destination) pairs of hosts in
// different racks, from a seeded generator.
func samplePairs(hosts []probe.Host, n int, seed int64) [][2]probe.Host {
	rng := rand.New(rand.NewSource(seed))
	seen := map[[2]int]bool{}
	var out [][2]probe.Host
	rackOf := func(h probe.Host) string { r, _, _ := strings.Cut(h.Name, "s"); return r }
	for tries := 0; len(out) < n && tries < 100*n; tries++ {
		i, j := rng.Intn(len(hosts)), rng.Intn(len(hosts))
		if i == j || rackOf(hosts[i]) == rackOf(hosts[j]) || seen[[2]int{i, j}] {
			continue
		}
		seen[[2]int{i, j}] = true
		out = append(out, [2]probe.Host{hosts[i], hosts[j]})
	}
	return out
}

// ownBPF lists the IDs of the BPF programs and maps this process holds
// open (the OCS and ToR programs it loaded).
func ownBPF() (progs, maps []uint32) {
	fds, _ := os.ReadDir("/proc/self/fd")
	for _, fd := range fds {
		target, err := os.Readlink(filepath.Join("/proc/self/fd", fd.Name()))
		if err != nil || !strings.HasPrefix(target, "anon_inode:bpf-") {
			continue
		}
		info, err := os.ReadFile(filepath.Join("/proc/self/fdinfo", fd.Name()))
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(info), "\n") {
			k, v, _ := strings.Cut(line, ":")
			id, err := strconv.ParseUint(strings.TrimSpace(v), 10, 32)
			switch {
			case err != nil:
			case k == "prog_id":
				progs = append(progs, uint32(id))
			case k == "map_id":
				maps = append(maps, uint32(id))
			}
		}
	}
	return progs, maps
}

// waitBPFGone waits until none of the programs and maps is loaded any
// more (the kernel frees a destroyed lab's namespaces, and with them the
// tc filters holding the programs, in the background) and returns how
// long that took and how many were left at the timeout.
func waitBPFGone(progs, maps []uint32, timeout time.Duration) (time.Duration, int) {
	start := time.Now()
	for {
		left := 0
		for _, id := range progs {
			if p, err := ebpf.NewProgramFromID(ebpf.ProgramID(id)); err == nil {
				p.Close()
				left++
			} else if !errors.Is(err, os.ErrNotExist) {
				left++
			}
		}
		for _, id := range maps {
			if m, err := ebpf.NewMapFromID(ebpf.MapID(id)); err == nil {
				m.Close()
				left++
			} else if !errors.Is(err, os.ErrNotExist) {
				left++
			}
		}
		if left == 0 || time.Since(start) > timeout {
			return time.Since(start), left
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// liveNetns counts the network namespaces the kernel holds (every one on
// the host, the slab objects of struct net).
func liveNetns() int {
	b, _ := os.ReadFile("/proc/slabinfo")
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) > 1 && f[0] == "net_namespace" {
			n, _ := strconv.Atoi(f[1])
			return n
		}
	}
	return 0
}

// waitNetnsFreed waits until the kernel holds at most n namespaces: it
// frees a destroyed lab's in a background worker. (Reading slabinfo is
// itself costly, hence the slow poll.)
func waitNetnsFreed(n int, timeout time.Duration) time.Duration {
	start := time.Now()
	for liveNetns() > n && time.Since(start) < timeout {
		time.Sleep(500 * time.Millisecond)
	}
	return time.Since(start)
}

// readMeminfo returns /proc/meminfo in KiB by field.
func readMeminfo() map[string]int64 {
	out := map[string]int64{}
	f, err := os.Open("/proc/meminfo")
	if err != nil {
		return out
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if !ok {
			continue
		}
		fs := strings.Fields(v)
		if len(fs) > 0 {
			out[k], _ = strconv.ParseInt(fs[0], 10, 64)
		}
	}
	return out
}

// resetPeakRSS restarts this process's peak RSS (VmHWM) from its current
// RSS, so that each case reports its own peak.
func resetPeakRSS() { _ = os.WriteFile("/proc/self/clear_refs", []byte("5"), 0) }

// peakRSS is this process's VmHWM in KiB.
func peakRSS() int64 {
	b, _ := os.ReadFile("/proc/self/status")
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			n, _ := strconv.ParseInt(strings.Fields(v)[0], 10, 64)
			return n
		}
	}
	return 0
}

// cpuTime is the user and system CPU time this process has used.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func loadavg() string {
	b, _ := os.ReadFile("/proc/loadavg")
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "?"
	}
	return strings.Join(f[:3], " ")
}
