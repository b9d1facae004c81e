package workers_test

import (
	"context"
	"fmt"
	"sort"
	"testing"

	"github.com/ocsemu/ocsemu/workers"
	"github.com/ocsemu/ocsemu/workers/job"
)

// BenchmarkCollectives measures every pattern at 1 to 64 MiB between four
// racks of a 1 Gbit/s packet fabric, like nccl-tests: one warm-up
// iteration, then the median of five. It prints algbw, busbw, busbw as a
// fraction of the 1 Gbit/s bottleneck, and the time the alpha-beta model
// t = alpha + beta * W predicts (W: bytes a rank's link carries; alpha
// fitted on the smallest size, beta on the two largest), with the signed
// error of each measurement against it.
func BenchmarkCollectives(b *testing.B) {
	lab := lab4x2(b)
	sizes := []int64{1 << 20, 4 << 20, 16 << 20, 64 << 20}
	pats := []struct {
		name, pattern, phase string
		workers              []string
		ps                   string
	}{
		{"ring", "ring", "allreduce", []string{"r0s0", "r1s0", "r2s0", "r3s0"}, ""},
		{"hd", "hd", "allreduce", []string{"r0s0", "r1s0", "r2s0", "r3s0"}, ""},
		{"alltoall", "alltoall", "alltoall", []string{"r0s0", "r1s0", "r2s0", "r3s0"}, ""},
		{"ps push", "ps", "push", []string{"r0s0", "r1s0", "r2s0"}, "r3s0"},
		{"ps pull", "ps", "pull", []string{"r0s0", "r1s0", "r2s0"}, "r3s0"},
	}
	const link = 1e9
	for n := 0; n < b.N; n++ {
		fmt.Printf("\ncollectives on 4 racks, 1 Gbit/s links, median of 5 after 1 warm-up\n")
		fmt.Printf("%-9s %8s %9s %11s %11s %8s %10s %8s\n", "pattern", "size", "time ms", "algbw Gb/s", "busbw Gb/s", "of link", "model ms", "error")
		for _, pt := range pats {
			var ts, ws []float64
			for _, S := range sizes {
				j := job.Job{Name: "bench", Pattern: pt.pattern, Workers: pt.workers, PS: pt.ps, Bytes: S, Iterations: 6}
				out, err := workers.Launch(context.Background(), &workers.Options{Lab: lab, Jobs: []job.Job{j}, Dir: b.TempDir(), TCPInfoEvery: -1})
				if err != nil {
					b.Fatal(err)
				}
				stats, _, _ := workers.Summarize([]job.Job{j}, out)
				var times []float64
				for _, s := range stats {
					if s.Phase == pt.phase && s.Iteration > 0 {
						times = append(times, float64(s.DurationNs)/1e9)
					}
				}
				sort.Float64s(times)
				t := times[len(times)/2]
				ts = append(ts, t)
				ws = append(ws, float64(S)*workers.BusFactor(pt.phase, len(pt.workers)))
			}
			beta := (ts[3] - ts[2]) / (ws[3] - ws[2])
			alpha := ts[0] - beta*ws[0]
			for i, S := range sizes {
				alg := float64(S) * 8 / ts[i]
				bus := alg * workers.BusFactor(pt.phase, len(pt.workers))
				model := alpha + beta*ws[i]
				fmt.Printf("%-9s %6dMiB %9.2f %11.3f %11.3f %7.0f%% %10.2f %+7.1f%%\n", pt.name, S>>20, ts[i]*1e3, alg/1e9, bus/1e9, 100*bus/link, model*1e3, 100*(ts[i]-model)/model)
				if S == sizes[len(sizes)-1] {
					b.ReportMetric(bus/link, "busbw-frac-64MiB-"+pt.pattern+"-"+pt.phase)
				}
			}
			fmt.Printf("%-9s alpha %.2f ms, beta %.3f ns/byte (%.3f Gbit/s)\n", "", alpha*1e3, beta*1e9, 8/beta/1e9)
		}
	}
}
