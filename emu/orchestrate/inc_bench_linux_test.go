package orchestrate_test

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/ocsemu/ocsemu/dataplane/fabric"
	"github.com/ocsemu/ocsemu/dataplane/fabric/fabrictest"
	"github.com/ocsemu/ocsemu/dataplane/inc"
	"github.com/ocsemu/ocsemu/dataplane/names"
	"github.com/ocsemu/ocsemu/dataplane/netns"
	"github.com/ocsemu/ocsemu/dataplane/topo"
	"github.com/ocsemu/ocsemu/ocsfabric/circuit"
	"github.com/ocsemu/ocsemu/ocsfabric/ocs"
	"github.com/ocsemu/ocsemu/workers"
	"github.com/ocsemu/ocsemu/workers/job"
)

// BenchmarkINCOCSBytes measures the traffic reshaping paper 000 claims
// for in-network aggregation, on an OCS fabric: a 3-rack job (2 workers
// per rack, 16 MiB, ps pattern) with a CPU parameter server on r0s0, then
// with the ToR aggregators rooted at tor0, over the same circuits (tor1
// and tor2 each patched to tor0). It prints the bytes that crossed the
// OCS, read from the OCS's per-port counters (bytes forwarded at each
// port's ingress: every crossing counted once). Run with
// `sudo scripts/bench inc`.
func BenchmarkINCOCSBytes(b *testing.B) {
	fabrictest.SkipUnlessRoot(b)
	name := fabrictest.UniqueLab("hio")
	lab := fabrictest.Deploy(b, fabrictest.Fabric(b, name,
		"{kind: ocs, racks: 3, servers_per_rack: 2, uplinks_per_tor: 2, ocs: {switches: 1, reconfig_delay: 0ms}, rates: {server: 1Gbit, uplink: 1Gbit}}"))
	ctl, err := ocs.New(context.Background(), lab, ocs.Options{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { ctl.Close() })
	var cfg circuit.Config
	for _, p := range [][2]string{{"tor0:0", "tor1:0"}, {"tor0:1", "tor2:0"}} {
		x, _ := circuit.ParseUplink(p[0])
		y, _ := circuit.ParseUplink(p[1])
		cfg.Circuits = append(cfg.Circuits, circuit.Circuit{A: x, B: y})
	}
	if _, err := ctl.Apply(context.Background(), cfg, 0, 0); err != nil {
		b.Fatal(err)
	}
	engines := serveAggregators(b, lab)
	six := []string{"r0s0", "r0s1", "r1s0", "r1s1", "r2s0", "r2s1"}
	const S, iters = 16 << 20, 2
	for range b.N {
		ps := ocsBytes(b, ctl, func() {
			launch(b, lab, job.Job{Name: "cpups", Pattern: "ps", Workers: six, PS: "r0s0", Bytes: S, Iterations: iters})
		})
		for i, e := range engines {
			c := inc.JobConfig{ID: 1, ToRs: 3, Index: i}
			if i > 0 {
				c.Parent = netip.AddrPortFrom(topo.GatewayAddr(0), inc.Port)
			}
			if err := e.Admit(c); err != nil {
				b.Fatal(err)
			}
		}
		withINC := ocsBytes(b, ctl, func() {
			launch(b, lab, job.Job{Name: "incps", Pattern: "ps", Workers: six, Bytes: S, Iterations: iters, INC: &job.INC{ID: 1, Window: 256}})
		})
		for _, e := range engines {
			e.Release(1)
		}
		load, _ := os.ReadFile("/proc/loadavg")
		fmt.Printf("\nbytes that crossed the OCS (its port counters), 3 racks x 2 workers, 16 MiB, %d iterations, circuits tor1-tor0 and tor2-tor0 (load %s)\n", iters, strings.Fields(string(load))[0])
		fmt.Printf("CPU parameter server on r0s0: %7.1f MiB (%.2f S per iteration)\n", float64(ps)/(1<<20), float64(ps)/iters/S)
		fmt.Printf("INC rooted at tor0:           %7.1f MiB (%.2f S per iteration)\n", float64(withINC)/(1<<20), float64(withINC)/iters/S)
		b.ReportMetric(float64(ps)/float64(withINC), "ocs-bytes-ps/inc")
	}
}

// ocsBytes runs fn and returns the bytes the OCS forwarded meanwhile.
func ocsBytes(b *testing.B, ctl *ocs.Controller, fn func()) uint64 {
	sum := func() uint64 {
		cs, err := ctl.Counters()
		if err != nil {
			b.Fatal(err)
		}
		var n uint64
		for _, c := range cs {
			n += c.FwdBytes
		}
		return n
	}
	before := sum()
	fn()
	return sum() - before
}

// launch runs one job with its ranks in this process, verified.
func launch(b *testing.B, lab *fabric.Lab, j job.Job) {
	if _, err := workers.Launch(context.Background(), &workers.Options{Lab: lab, Jobs: []job.Job{j}, Dir: b.TempDir(),
		TCPInfoEvery: -1, Verify: true, Timeout: 120 * time.Second}); err != nil {
		b.Fatal(err)
	}
}

// serveAggregators serves one engine in every ToR namespace of the lab
// (in this process), as emu agg serve does, until the benchmark ends.
func serveAggregators(b *testing.B, lab *fabric.Lab) []*inc.Engine {
	var es []*inc.Engine
	for r := 0; r < lab.Topo.Spec.Racks; r++ {
		e, err := inc.NewEngine(inc.Config{Slots: inc.DefaultSlots, Capacity: 1})
		if err != nil {
			b.Fatal(err)
		}
		var conn *net.UDPConn
		if err := netns.Do(names.NSName(lab.Topo.Lab, names.ToRName(r)), func() (err error) {
			conn, err = inc.Listen()
			return err
		}); err != nil {
			b.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() {
			defer close(done)
			_ = inc.Serve(ctx, conn, e, inc.ServeOptions{Src: topo.GatewayAddr(r), GSO: true})
		}()
		b.Cleanup(func() { cancel(); <-done })
		es = append(es, e)
	}
	return es
}
