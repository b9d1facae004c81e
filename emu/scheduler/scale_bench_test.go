package scheduler

import (
	"fmt"
	"runtime"
	"runtime/metrics"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/ocsemu/ocsemu/emu/flowmodel"
	"github.com/ocsemu/ocsemu/emu/plan"
)

// BenchmarkFlowModelScale plans and simulates paper 000's setup at 1x, 2x
// and 4x its size: racks (64, 128, 256, of 64 servers each), jobs (1,400,
// 2,800, 5,600) and the arrival rate (20, 40, 80 per slot) grow together,
// so every rack sees the same load and the work (flows, slots) grows with
// the scale. For each of paper 000's four designs it prints plan and
// simulate time (wall clock, and the process's CPU time), the memory
// allocated and the peak live heap, and the same per 1,000 flows: cost
// that follows the work stays flat there. The ljf designs also print
// their route-and-add rounds (ljfRounds), each of which routes the slot's
// demand over the whole fabric, and the wall clock spent choosing
// circuits (ljfNanos) per round and 64 racks: flat if ljf's cost follows
// its rounds times the fabric. Goal (issue 15): 4x plans and
// simulates in at most 5 s per design.
//
//	go test -run '^$' -bench FlowModelScale -benchtime 1x ./emu/scheduler
func BenchmarkFlowModelScale(b *testing.B) {
	for _, x := range []int{1, 2, 4} {
		for _, d := range Paper000Designs {
			b.Run(fmt.Sprintf("%dx/%s", x, d.Name), func(b *testing.B) {
				s := Paper000(Paper000Options{Jobs: 1400 * x, Racks: 64 * x, ArrivalsPerSlot: 20 * float64(x),
					Seed: 1, Scheduler: d.Scheduler, INC: d.INC})
				var planT, simT, cpu []time.Duration
				var allocMB, peakMB float64
				var flows, slots, rounds int
				var ljfT []time.Duration
				for i := 0; i < b.N; i++ {
					runtime.GC()
					var before, after runtime.MemStats
					runtime.ReadMemStats(&before)
					peak := sampleHeap()
					r0, l0 := ljfRounds.Load(), ljfNanos.Load()
					c0 := cpuTime()
					t0 := time.Now()
					p, err := Plan(s)
					if err != nil {
						b.Fatal(err)
					}
					t1 := time.Now()
					rounds = int(ljfRounds.Load() - r0)
					ljfT = append(ljfT, time.Duration(ljfNanos.Load()-l0))
					if _, err := flowmodel.Simulate(p, s); err != nil {
						b.Fatal(err)
					}
					t2 := time.Now()
					cpu = append(cpu, cpuTime()-c0)
					peakMB = peak() / 1e6
					runtime.ReadMemStats(&after)
					allocMB = float64(after.TotalAlloc-before.TotalAlloc) / 1e6
					planT, simT = append(planT, t1.Sub(t0)), append(simT, t2.Sub(t1))
					flows, slots = planFlows(p), len(p.Stages)
				}
				pl, sm := med(planT), med(simT)
				ms := float64((pl + sm).Microseconds()) / 1e3
				cpuMS := float64(med(cpu).Microseconds()) / 1e3
				b.ReportMetric(ms, "ms")
				b.ReportMetric(cpuMS, "cpu-ms")
				b.ReportMetric(allocMB, "alloc-MB")
				b.ReportMetric(peakMB, "peak-MB")
				b.ReportMetric(float64(flows), "flows")
				b.ReportMetric(float64(rounds), "ljf-rounds")
				ljfMS := float64(med(ljfT).Microseconds()) / 1e3
				b.ReportMetric(ljfMS, "ljf-ms")
				fmt.Printf("  %dx (%3d racks, %4d jobs) %-10s plan %6.0f ms, simulate %5.0f ms, total %6.0f ms (CPU %6.0f ms); allocated %5.0f MB, peak heap %4.0f MB; %6d flows, %3d slots, ljf %4d rounds (%.2f a slot) in %4.0f ms (%5.1f µs a round and 64 racks); per 1,000 flows %5.1f ms, %5.1f MB\n",
					x, 64*x, 1400*x, d.Name, float64(pl.Microseconds())/1e3, float64(sm.Microseconds())/1e3, ms, cpuMS,
					allocMB, peakMB, flows, slots, rounds, float64(rounds)/float64(slots), ljfMS,
					ljfMS*1e3/float64(max(rounds, 1))/float64(x), ms/float64(flows)*1e3, allocMB/float64(flows)*1e3)
			})
		}
	}
}

// planFlows counts the flows a plan's jobs send over their whole life
// (every iteration's communication phases, with the INC decisions the
// plan made): the work the flow model does.
func planFlows(p *plan.Plan) int {
	n := 0
	for i := range p.Jobs {
		j := &p.Jobs[i]
		for _, k := range j.Phases() {
			n += len(j.Flows(k.Phase))
		}
	}
	return n
}

// cpuTime is the CPU time the process has used (all threads, the
// garbage collector's too): less sensitive to other work on the machine
// than the wall clock.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// sampleHeap samples the live heap every 5 ms until the returned function
// is called, which returns the largest sample in bytes.
func sampleHeap() func() float64 {
	const name = "/memory/classes/heap/objects:bytes"
	sample := []metrics.Sample{{Name: name}}
	var mu sync.Mutex
	var peak uint64
	read := func() {
		metrics.Read(sample)
		mu.Lock()
		peak = max(peak, sample[0].Value.Uint64())
		mu.Unlock()
	}
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(5 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-stop:
				return
			case <-t.C:
				read()
			}
		}
	}()
	return func() float64 {
		close(stop)
		<-done
		read()
		mu.Lock()
		defer mu.Unlock()
		return float64(peak)
	}
}
