package fabric_test

import (
	"context"
	"os"
	"sort"
	"testing"
	"time"

	"github.com/ocsemu/ocsemu/dataplane/fabric"
	"github.com/ocsemu/ocsemu/dataplane/fabric/fabrictest"
	"github.com/ocsemu/ocsemu/dataplane/probe"
	"github.com/ocsemu/ocsemu/dataplane/topo"
)

// BenchmarkDeployDestroy deploys and destroys eps fabrics of racks x 4
// servers and reports the median bring-up and teardown times. Goal for
// 64x4: bring-up <= 2 s, teardown <= 1 s. Run it with scripts/bench.
func BenchmarkDeployDestroy(b *testing.B) {
	skipUnlessRoot(b)
	cases := []struct{ name, fabric string }{
		{"4x4", "{kind: eps, racks: 4, servers_per_rack: 4, rates: {server: 1Gbit}}"},
		{"16x4", "{kind: eps, racks: 16, servers_per_rack: 4, rates: {server: 1Gbit}}"},
		{"64x4", "{kind: eps, racks: 64, servers_per_rack: 4, rates: {server: 1Gbit}}"},
		{"64x4-ocs-4uplinks", "{kind: ocs, racks: 64, servers_per_rack: 4, uplinks_per_tor: 4, rates: {server: 1Gbit, uplink: 1Gbit}}"},
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			var up, down []time.Duration
			nodes, links := 0, 0
			for i := 0; i < b.N; i++ {
				name := uniqueLab(benchPrefix())
				t := topo.Build(fabrictest.Fabric(b, name, c.fabric))
				nodes, links = len(t.Nodes), len(t.Links)
				t0 := time.Now()
				lab, err := fabric.Deploy(context.Background(), t, fabric.Options{})
				if err != nil {
					b.Fatal(err)
				}
				up = append(up, time.Since(t0))
				lab.Close()
				t1 := time.Now()
				if err := fabric.Destroy(context.Background(), name, nil); err != nil {
					b.Fatal(err)
				}
				down = append(down, time.Since(t1))
				assertGone(b, name)
			}
			b.ReportMetric(median(up).Seconds()*1000, "deploy-ms")
			b.ReportMetric(median(down).Seconds()*1000, "destroy-ms")
			b.ReportMetric(float64(nodes), "namespaces")
			b.ReportMetric(float64(links), "links")
		})
	}
}

// BenchmarkShapedGoodput reports cross-rack TCP goodput (cubic, 3 s after
// 300 ms of warm-up) as a fraction of the 1 Gbit/s the fabric is shaped
// to. The goal is at least 0.90 (the MTU-1500 ceiling is 0.956); a busy
// machine gets less, which is why TestShapedGoodput does not assert it.
func BenchmarkShapedGoodput(b *testing.B) {
	skipUnlessRoot(b)
	lab := deploy(b, spec(b, uniqueLab("rate"), "{kind: eps, racks: 2, servers_per_rack: 1, rates: {server: 1Gbit}}"))
	hs := hosts(lab)
	var fracs []float64
	for i := 0; i < b.N; i++ {
		res, err := probe.Transfer(context.Background(), hs[0], hs[1], probe.TransferOptions{Duration: 3 * time.Second, Warmup: 300 * time.Millisecond, CongestionControl: "cubic"})
		if err != nil {
			b.Fatal(err)
		}
		fracs = append(fracs, res.GoodputBps/1e9)
	}
	sort.Float64s(fracs)
	b.ReportMetric(fracs[len(fracs)/2], "goodput-frac")
}

// benchPrefix starts the benchmark's lab names: $EMU_BENCH_LAB, or "bench".
func benchPrefix() string {
	if p := os.Getenv("EMU_BENCH_LAB"); p != "" {
		return p
	}
	return "bench"
}

func median(d []time.Duration) time.Duration {
	s := append([]time.Duration(nil), d...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return s[len(s)/2]
}

// BenchmarkQdiscStats reports one pass over plan-demo's fabric (4 racks x
// 2 servers, 3 uplinks per ToR, 40 shaped ports): the run recorder reads
// it every 20 ms, so a pass must cost well under that.
func BenchmarkQdiscStats(b *testing.B) {
	skipUnlessRoot(b)
	lab := deploy(b, spec(b, uniqueLab("qds"), "{kind: ocs, racks: 4, servers_per_rack: 2, uplinks_per_tor: 3, rates: {server: 1Gbit, uplink: 1Gbit}}"))
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		st, err := lab.QdiscStats()
		if err != nil {
			b.Fatal(err)
		}
		if len(st) < 40 {
			b.Fatalf("%d qdiscs, want at least 40", len(st))
		}
	}
}
