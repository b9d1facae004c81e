package inc

import (
	"context"
	"fmt"
	"net"
	"syscall"
	"testing"

	"golang.org/x/sync/errgroup"

	wire "github.com/ocsemu/ocsemu/dataplane/inc"
)

// BenchmarkAggregator measures one aggregator's throughput on loopback:
// 4 workers all-reduce 4 MiB each through it, with the server reading one
// datagram per system call (batch 1) or many (recvmmsg/sendmmsg), with
// or without UDP GSO/GRO. It reports the elements the aggregator added per
// second and the CPU cores the whole process (workers and aggregator)
// used.
func BenchmarkAggregator(b *testing.B) {
	for _, mode := range []struct {
		batch int
		gso   bool
	}{{1, false}, {64, false}, {64, true}} {
		batch := mode.batch
		b.Run(fmt.Sprintf("batch=%d/gso=%v", batch, mode.gso), func(b *testing.B) {
			e, err := wire.NewEngine(wire.Config{Slots: 1024, Capacity: 4})
			if err != nil {
				b.Fatal(err)
			}
			if err := e.Admit(wire.JobConfig{ID: 1, ToRs: 1}); err != nil {
				b.Fatal(err)
			}
			conn, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
			if err != nil {
				b.Fatal(err)
			}
			_ = conn.SetReadBuffer(8 << 20)
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan struct{})
			var cpu0, cpu1 syscall.Rusage
			go func() {
				defer close(done)
				_ = wire.Serve(ctx, conn, e, wire.ServeOptions{Batch: batch, GSO: mode.gso})
			}()
			const workers, size = 4, 1 << 20
			clients := make([]*Client, workers)
			for w := range clients {
				if clients[w], err = Dial(Config{Job: 1, Worker: w, Workers: workers, Total: workers, Aggregator: conn.LocalAddr().(*net.UDPAddr).AddrPort(), GSO: mode.gso}); err != nil {
					b.Fatal(err)
				}
				defer clients[w].Close()
			}
			data := make([][]int32, workers)
			for w := range data {
				data[w] = make([]int32, size)
			}
			_ = syscall.Getrusage(syscall.RUSAGE_SELF, &cpu0)
			b.ResetTimer()
			for range b.N {
				var g errgroup.Group
				for w, c := range clients {
					g.Go(func() error { return c.AllReduce(context.Background(), data[w]) })
				}
				if err := g.Wait(); err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			_ = syscall.Getrusage(syscall.RUSAGE_SELF, &cpu1)
			cancel()
			<-done
			st := e.Stats()
			b.ReportMetric(float64(st.Elements)/b.Elapsed().Seconds(), "elem/s")
			b.ReportMetric(float64(st.Duplicates)/float64(st.Packets), "dup/pkt")
			cpu := float64(cpu1.Utime.Nano()+cpu1.Stime.Nano()-cpu0.Utime.Nano()-cpu0.Stime.Nano()) / 1e9
			b.ReportMetric(cpu/b.Elapsed().Seconds(), "cores(all)")
		})
	}
}
