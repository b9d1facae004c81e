package fairq_test

import (
	"context"
	"os"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ocsemu/ocsemu/dataplane/fabric/fabrictest"
	"github.com/ocsemu/ocsemu/dataplane/probe"
	"github.com/ocsemu/ocsemu/dataplane/topo"
)

// cpuBusy reads the machine's busy and total CPU time from /proc/stat, in
// clock ticks.
func cpuBusy(b *testing.B) (busy, total float64) {
	b.Helper()
	data, err := os.ReadFile("/proc/stat")
	if err != nil {
		b.Fatal(err)
	}
	line, _, _ := strings.Cut(string(data), "\n")
	f := strings.Fields(line)[1:]
	for i, v := range f {
		n, _ := strconv.ParseFloat(v, 64)
		total += n
		if i != 3 && i != 4 { // idle, iowait
			busy += n
		}
	}
	return busy, total
}

// BenchmarkServerQueue streams TCP across two racks (cubic, 2 s after
// 300 ms of warm-up) through a server port queued as fifo and as fair,
// alternately in one run, and reports each mode's goodput as a fraction
// of the rate and the machine's CPU time per GB received: what the htb
// and the classifier cost a single flow. The CPU time is the whole
// machine's busy time over the transfer, so other work adds to both
// modes alike; at low rates it is mostly that, and not reported.
//
//	sudo go test -run XXX -bench BenchmarkServerQueue -benchtime 5x ./dataplane/fairq/
func BenchmarkServerQueue(b *testing.B) {
	fabrictest.SkipUnlessRoot(b)
	for _, rate := range []struct {
		name string
		bps  float64
	}{{"1Gbit", 1e9}, {"10Gbit", 10e9}} {
		b.Run(rate.name, func(b *testing.B) {
			hosts := map[string][]probe.Host{}
			for _, mode := range []string{topo.QueueFIFO, topo.QueueFair} {
				sp := fabrictest.Fabric(b, fabrictest.UniqueLab("fqb"+mode), "{kind: eps, racks: 2, servers_per_rack: 1, rates: {server: "+rate.name+"}}")
				sp.ServerQueue = mode
				hosts[mode] = fabrictest.Hosts(fabrictest.Deploy(b, sp))
			}
			frac := map[string][]float64{}
			cpu := map[string][]float64{}
			for i := 0; i < b.N; i++ {
				for _, mode := range []string{topo.QueueFIFO, topo.QueueFair} {
					hs := hosts[mode]
					busy0, total0 := cpuBusy(b)
					res, err := probe.Transfer(context.Background(), hs[0], hs[1], probe.TransferOptions{Duration: 2 * time.Second, Warmup: 300 * time.Millisecond, CongestionControl: "cubic"})
					if err != nil {
						b.Fatal(err)
					}
					busy1, total1 := cpuBusy(b)
					frac[mode] = append(frac[mode], res.GoodputBps/rate.bps)
					// CPU-seconds over the whole transfer (warm-up too) per
					// GB in the measured window: an upper bound, alike for both.
					secs := (busy1 - busy0) / (total1 - total0) * float64(cpuCount()) * (res.Window + 300*time.Millisecond).Seconds()
					cpu[mode] = append(cpu[mode], secs/(float64(res.Bytes)/1e9))
				}
			}
			for _, mode := range []string{topo.QueueFIFO, topo.QueueFair} {
				b.ReportMetric(median(frac[mode]), mode+"-goodput-frac")
				b.ReportMetric(median(cpu[mode]), mode+"-cpu-s/GB")
			}
		})
	}
}

func cpuCount() int {
	data, _ := os.ReadFile("/proc/stat")
	n := 0
	for _, l := range strings.Split(string(data), "\n") {
		if strings.HasPrefix(l, "cpu") && !strings.HasPrefix(l, "cpu ") {
			n++
		}
	}
	return max(n, 1)
}

func median(v []float64) float64 {
	s := append([]float64(nil), v...)
	sort.Float64s(s)
	return s[len(s)/2]
}
