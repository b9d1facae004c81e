package main

import (
	"encoding/csv"
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ocsemu/ocsemu/dataplane/fabric"
	"github.com/ocsemu/ocsemu/dataplane/fabric/fabrictest"
	"github.com/ocsemu/ocsemu/dataplane/names"
	"github.com/ocsemu/ocsemu/dataplane/netns"
	"github.com/ocsemu/ocsemu/dataplane/shaper"
	"github.com/ocsemu/ocsemu/workers"
)

// Goodput is the share of a shaped link's rate that TCP payload gets with
// MTU 1500: 1448 payload bytes (1500 less 20 IP, 20 TCP, 12 timestamp
// option) per 1514-byte frame, the length tbf charges.
const goodput = 1448.0 / 1514.0

// benchPattern is one collective of BenchmarkCollectiveCommands.
type benchPattern struct {
	name    string // as `emu collective` takes it
	phase   string // the timed phase
	ranks   []string
	ps      string
	latency int // α terms: the sequential steps a byte waits for
}

// busFactor is nccl-tests' bus-bandwidth factor (workers.BusFactor).
func (p benchPattern) busFactor() float64 { return workers.BusFactor(p.phase, len(p.ranks)) }

// bound is the α–β lower bound on the phase's time: latency steps of α,
// plus the bytes the busiest link carries (busFactor × S, as frames: over
// the TCP goodput) at the line rate, less the shaper's bucket, which
// passes at once after the link was idle.
func (p benchPattern) bound(size int64, alpha time.Duration, rateBps float64) time.Duration {
	wire := float64(size) * p.busFactor() / goodput
	burst := float64(shaper.Burst(uint64(rateBps/8), 1500))
	beta := max(0, wire-burst) * 8 / rateBps
	return time.Duration(p.latency)*alpha + time.Duration(beta*1e9)
}

var (
	fourRanks = []string{"r0s0", "r1s0", "r2s0", "r3s0"}
	benchPats = []benchPattern{
		{name: "ring", phase: "allreduce", ranks: fourRanks, latency: 2 * 3},
		{name: "hd", phase: "allreduce", ranks: fourRanks, latency: 2 * 2},
		{name: "alltoall", phase: "alltoall", ranks: fourRanks, latency: 1},
		{name: "ps", phase: "push", ranks: fourRanks[:3], ps: "r3s0", latency: 1},
		{name: "ps", phase: "pull", ranks: fourRanks[:3], ps: "r3s0", latency: 2}, // request, then data
	}
	benchSizes = []int64{1 << 20, 16 << 20, 64 << 20}
)

// fullMesh is a circuit between every two of the four racks: every pair
// of ranks has a path of its own.
var fullMesh = []any{
	map[string]any{"a": "tor0:0", "b": "tor1:0"}, map[string]any{"a": "tor0:1", "b": "tor2:0"},
	map[string]any{"a": "tor0:2", "b": "tor3:0"}, map[string]any{"a": "tor1:1", "b": "tor2:1"},
	map[string]any{"a": "tor1:2", "b": "tor3:1"}, map[string]any{"a": "tor2:2", "b": "tor3:2"},
}

// benchIterations per size: the first is a warm-up (fresh connections in
// slow start), as nccl-tests' warm-up, and the rest give the median.
func benchIterations(size int64) int {
	switch {
	case size <= 1<<20:
		return 11
	case size <= 16<<20:
		return 7
	}
	return 5
}

// benchFabric is the quickstart's fabric: 4 racks of 2 servers whose ToRs
// meet only through one OCS, 3 uplinks per ToR, 1 Gbit/s everywhere.
const benchFabric = `fabric:
  kind: ocs
  racks: 4
  servers_per_rack: 2
  uplinks_per_tor: 3
  ocs: {switches: 1, reconfig_delay: 1ms}
  rates: {server: 1Gbit, uplink: 1Gbit}
  mtu: 1500
  tcp: {congestion_control: cubic}
`

// BenchmarkCollectiveCommands runs ring, halving-doubling, all-to-all and
// the parameter server at 1, 16 and 64 MiB through `emu collective` on a
// deployed quickstart fabric whose circuits form a full mesh, and the same
// jobs through `emu run` (one scenario per job, planned by fcfs), and
// prints one table: the median phase time after a warm-up iteration, busbw
// as nccl-tests defines it, and the α–β bound beside them.
func BenchmarkCollectiveCommands(b *testing.B) {
	fabrictest.SkipUnlessRoot(b)
	bin := buildEmu(b)
	work := b.TempDir()
	lab := fabrictest.UniqueLab("cb")
	scen := filepath.Join(work, "lab.yaml")
	if err := os.WriteFile(scen, []byte("version: 1\nname: "+lab+"\n"+benchFabric), 0o644); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		run(b, bin, "destroy", lab)
		fabrictest.AssertGone(b, lab)
	})
	if out, err := run(b, bin, "deploy", scen); err != nil {
		b.Fatalf("deploy: %v\n%s", err, out)
	}
	mesh := filepath.Join(work, "mesh.json")
	data, _ := json.Marshal(map[string]any{"circuits": fullMesh})
	os.WriteFile(mesh, data, 0o644)
	if out, err := run(b, bin, "ocs", "apply", "--lab", lab, mesh); err != nil {
		b.Fatalf("ocs apply: %v\n%s", err, out)
	}
	alpha := tcpLatency(b, lab, "r0s0", "r1s0")
	const rate = 1e9
	for _, sched := range []string{"nice", "realtime"} {
		b.Run(sched, func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				benchCollectiveTable(b, bin, lab, work, alpha, rate, sched == "realtime")
			}
		})
	}
}

// benchCollectiveTable prints one table: every pattern and size through
// both commands, the ranks at nice -10 or (realtime) under SCHED_RR.
func benchCollectiveTable(b *testing.B, bin, lab, work string, alpha time.Duration, rate float64, realtime bool) {
	ranks := "ranks at nice -10"
	if realtime {
		ranks = "ranks under SCHED_RR (--realtime)"
	}
	fmt.Printf("\ncollectives on the quickstart fabric (4 racks, full mesh of circuits, 1 Gbit/s), %s, median after 1 warm-up\n", ranks)
	fmt.Printf("alpha (one-way TCP latency r0s0->r1s0, median of 200 round trips) %.1f us; goodput ceiling 1448/1514 = %.3f of the line rate\n",
		float64(alpha)/1e3, goodput)
	fmt.Printf("%-9s %-5s %6s | %-23s | %-23s | %-17s\n", "pattern", "phase", "size", "emu collective", "emu run", "alpha-beta bound")
	fmt.Printf("%-9s %-5s %6s | %9s %6s %6s | %9s %6s %6s | %9s %7s\n", "", "", "", "ms", "busbw", "of bd", "ms", "busbw", "of bd", "ms", "busbw")
	for _, size := range benchSizes {
		for pi, p := range benchPats {
			if p.phase == "pull" {
				continue // printed with its push: one job has both
			}
			iters := benchIterations(size)
			coll := collectiveTimes(b, bin, lab, work, p, size, iters, realtime)
			runs := runTimes(b, bin, work, p, size, iters, realtime)
			pats := []benchPattern{p}
			if p.name == "ps" {
				pats = append(pats, benchPats[pi+1])
			}
			for _, q := range pats {
				bd := q.bound(size, alpha, rate)
				line := func(ts []time.Duration) string {
					if len(ts) == 0 {
						return fmt.Sprintf("%9s %6s %6s", "-", "-", "-")
					}
					m := median(ts)
					bus := float64(size) * 8 / m.Seconds() * q.busFactor() / rate
					return fmt.Sprintf("%9.2f %6.3f %5.1f%%", float64(m)/1e6, bus, 100*float64(bd)/float64(m))
				}
				bdBus := float64(size) * 8 / bd.Seconds() * q.busFactor() / rate
				fmt.Printf("%-9s %-5s %4dMiB | %s | %s | %9.2f %7.3f\n", q.name, short(q.phase), size>>20,
					line(coll[q.phase]), line(runs[q.phase]), float64(bd)/1e6, bdBus)
				if ts := coll[q.phase]; size == benchSizes[len(benchSizes)-1] && len(ts) > 0 {
					b.ReportMetric(float64(size)*8/median(ts).Seconds()*q.busFactor()/rate, "busbw-64MiB-"+q.name+"-"+q.phase)
				}
			}
		}
	}
	fmt.Printf("busbw: fraction of the 1 Gbit/s line rate (nccl-tests: algbw x 2(n-1)/n all-reduce, (n-1)/n all-to-all; PS: n workers' buffers cross the server's link)\n")
}

func short(phase string) string {
	if phase == "allreduce" {
		return "allr"
	}
	if phase == "alltoall" {
		return "a2a"
	}
	return phase
}

func median(ts []time.Duration) time.Duration {
	s := slices.Clone(ts)
	slices.Sort(s)
	return s[len(s)/2]
}

// collectiveTimes runs one job through `emu collective --json` and returns
// each timed phase's durations after the warm-up iteration.
func collectiveTimes(b *testing.B, bin, lab, work string, p benchPattern, size int64, iters int, realtime bool) map[string][]time.Duration {
	args := []string{"collective", p.name, "--lab", lab, "--ranks", strings.Join(p.ranks, ","),
		"--bytes", fmt.Sprintf("%dMiB", size>>20), "--iterations", strconv.Itoa(iters), "--json", fmt.Sprintf("--realtime=%v", realtime)}
	if p.ps != "" {
		args = append(args, "--ps", p.ps)
	}
	cmd := exec.Command(bin, args...)
	cmd.Dir = work // results/ goes here
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		b.Fatalf("emu %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
	}
	var res collectiveResult
	if err := json.Unmarshal(out, &res); err != nil {
		b.Fatalf("emu %s: output: %v\n%s", strings.Join(args, " "), err, out)
	}
	ts := map[string][]time.Duration{}
	for _, s := range res.Phases {
		if s.Iteration > 0 && s.Bytes > 0 {
			if !s.Verified && s.Phase != "push" {
				b.Fatalf("emu %s: iteration %d %s not verified", strings.Join(args, " "), s.Iteration, s.Phase)
			}
			ts[s.Phase] = append(ts[s.Phase], time.Duration(s.DurationNs))
		}
	}
	return ts
}

// runTimes runs the same job as a scenario of its own through `emu run`
// (its own lab, planned by fcfs, gated by the plan) and returns each timed
// phase's durations after the warm-up iteration, from phases.csv.
func runTimes(b *testing.B, bin, work string, p benchPattern, size int64, iters int, realtime bool) map[string][]time.Duration {
	lab := fabrictest.UniqueLab("cbr")
	ps := ""
	if p.ps != "" {
		ps = ", ps: " + p.ps
	}
	job := fmt.Sprintf("jobs:\n  - {name: j, pattern: %s, workers: [%s]%s, bytes: %dMiB, compute: 0s, iterations: %d}\nscheduler: {name: fcfs, slot: 100ms}\n",
		p.name, strings.Join(p.ranks, ", "), ps, size>>20, iters)
	scen := filepath.Join(work, lab+".yaml")
	if err := os.WriteFile(scen, []byte("version: 1\nname: "+lab+"\n"+benchFabric+job), 0o644); err != nil {
		b.Fatal(err)
	}
	// fcfs plans in clock mode, each phase at the instant the flow model
	// predicts, over a ring of circuits with the spare uplinks doubling
	// it (so hd's distance-2 pairs share circuits). Here every activity
	// gets a barrier stage of its own over the full mesh: each phase
	// starts at one instant on every rank once the phase before has ended
	// everywhere, on the same circuits as `emu collective` above
	// (docs/benchmarks.md says why).
	planFile := filepath.Join(work, lab+".plan.json")
	if out, err := run(b, bin, "plan", scen, "-o", planFile); err != nil {
		b.Fatalf("emu plan %s: %v\n%s", scen, err, out)
	}
	data, err := os.ReadFile(planFile)
	if err != nil {
		b.Fatal(err)
	}
	var pl map[string]any
	if err := json.Unmarshal(data, &pl); err != nil {
		b.Fatal(err)
	}
	pl["mode"] = "barrier"
	var stages []any
	for _, st := range pl["stages"].([]any) {
		st := st.(map[string]any)
		acts, _ := st["activities"].([]any)
		for _, a := range acts {
			delete(a.(map[string]any), "start_ns")
			one := maps.Clone(st)
			one["activities"] = []any{a}
			one["circuits"] = fullMesh
			stages = append(stages, one)
		}
	}
	pl["stages"] = stages
	data, _ = json.Marshal(pl)
	if err := os.WriteFile(planFile, data, 0o644); err != nil {
		b.Fatal(err)
	}
	res := filepath.Join(work, "runs")
	defer fabrictest.AssertGone(b, lab)
	if out, err := run(b, bin, "run", scen, "--plan", planFile, "--duration", "100ms", "--results", res, fmt.Sprintf("--realtime=%v", realtime)); err != nil {
		b.Fatalf("emu run %s: %v\n%s", scen, err, out)
	}
	f, err := os.Open(filepath.Join(res, lab, "latest", "phases.csv"))
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	rows, err := csv.NewReader(f).ReadAll()
	if err != nil || len(rows) < 2 {
		b.Fatalf("phases.csv of %s: %v (%d rows)", lab, err, len(rows))
	}
	col := map[string]int{}
	for i, h := range rows[0] {
		col[h] = i
	}
	ts := map[string][]time.Duration{}
	for _, r := range rows[1:] {
		it, _ := strconv.Atoi(r[col["iteration"]])
		ms, err := strconv.ParseFloat(r[col["time_ms"]], 64)
		if err != nil || it == 0 || r[col["bytes"]] == "0" {
			continue
		}
		ts[r[col["phase"]]] = append(ts[r[col["phase"]]], time.Duration(ms*1e6))
	}
	return ts
}

// tcpLatency is half the median round trip of a 1-byte TCP ping-pong
// between two servers of a lab: the α of the α–β bound.
func tcpLatency(b *testing.B, lab, from, to string) time.Duration {
	l, err := fabric.Open(lab, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	var addr string
	for _, n := range l.Topo.Servers() {
		if n.Name == to {
			addr = net.JoinHostPort(n.Addr.String(), "19999")
		}
	}
	var ln net.Listener
	if err := netns.Do(names.NSName(lab, to), func() (err error) { ln, err = net.Listen("tcp4", addr); return err }); err != nil {
		b.Fatal(err)
	}
	defer ln.Close()
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		buf := make([]byte, 1)
		for {
			if _, err := c.Read(buf); err != nil {
				return
			}
			if _, err := c.Write(buf); err != nil {
				return
			}
		}
	}()
	var c net.Conn
	if err := netns.Do(names.NSName(lab, from), func() (err error) { c, err = net.Dial("tcp4", addr); return err }); err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	c.(*net.TCPConn).SetNoDelay(true)
	var rtts []time.Duration
	buf := make([]byte, 1)
	for i := 0; i < 200; i++ {
		t := time.Now()
		if _, err := c.Write(buf); err != nil {
			b.Fatal(err)
		}
		if _, err := c.Read(buf); err != nil {
			b.Fatal(err)
		}
		rtts = append(rtts, time.Since(t))
	}
	return time.Duration(math.Round(float64(median(rtts)) / 2))
}
