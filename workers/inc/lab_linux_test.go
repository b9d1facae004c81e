package inc

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"testing"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/ocsemu/ocsemu/dataplane/fabric"
	"github.com/ocsemu/ocsemu/dataplane/fabric/fabrictest"
	wire "github.com/ocsemu/ocsemu/dataplane/inc"
	"github.com/ocsemu/ocsemu/dataplane/names"
	"github.com/ocsemu/ocsemu/dataplane/netns"
	"github.com/ocsemu/ocsemu/dataplane/topo"
)

// labAggregators serves one engine in every ToR namespace of a lab (the
// sockets live in the namespaces; the goroutines run here), with the
// job admitted hierarchically, rooted at rack root.
func labAggregators(t testing.TB, lab *fabric.Lab, job uint16, racks []int, root int, drop float64) []*wire.Engine {
	t.Helper()
	var engines []*wire.Engine
	rootIdx := -1
	for i, r := range racks {
		if r == root {
			rootIdx = i
		}
	}
	for i, r := range racks {
		e, err := wire.NewEngine(wire.Config{Slots: wire.DefaultSlots, Capacity: 4})
		if err != nil {
			t.Fatal(err)
		}
		cfg := wire.JobConfig{ID: job, ToRs: len(racks), Index: i}
		if i != rootIdx {
			cfg.Parent = netip.AddrPortFrom(topo.GatewayAddr(root), wire.Port)
		}
		if err := e.Admit(cfg); err != nil {
			t.Fatal(err)
		}
		var conn *net.UDPConn
		if err := netns.Do(names.NSName(lab.Topo.Lab, names.ToRName(r)), func() (err error) {
			conn, err = net.ListenUDP("udp4", &net.UDPAddr{Port: wire.Port})
			return err
		}); err != nil {
			t.Fatal(err)
		}
		_ = conn.SetReadBuffer(8 << 20)
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() {
			done <- wire.Serve(ctx, conn, e, wire.ServeOptions{Src: topo.GatewayAddr(r), GSO: true, Drop: loss(drop, uint64(100+r))})
		}()
		t.Cleanup(func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("aggregator of rack %d: %v", r, err)
			}
		})
		engines = append(engines, e)
	}
	return engines
}

// labClients dials one client per server, inside the server's namespace.
func labClients(t testing.TB, lab *fabric.Lab, job uint16, servers []string, drop float64, stall time.Duration) []*Client {
	t.Helper()
	perRack := map[int]int{}
	for _, s := range servers {
		r, _, _ := names.ParseServer(s)
		perRack[r]++
	}
	seen := map[int]int{}
	var cs []*Client
	for i, s := range servers {
		r, _, _ := names.ParseServer(s)
		var c *Client
		if err := netns.Do(names.NSName(lab.Topo.Lab, s), func() (err error) {
			c, err = Dial(Config{Job: job, Worker: seen[r], Workers: perRack[r], Total: len(servers),
				Aggregator: netip.AddrPortFrom(topo.GatewayAddr(r), wire.Port), Stall: stall, GSO: true, Drop: loss(drop, uint64(i+1))})
			return err
		}); err != nil {
			t.Fatal(err)
		}
		seen[r]++
		t.Cleanup(func() { c.Close() })
		cs = append(cs, c)
	}
	return cs
}

// reduceAll runs one int32 all-reduce of size elements on every client
// and checks the sums exactly; it returns how long it took.
func reduceAll(t testing.TB, cs []*Client, size, iter int) time.Duration {
	t.Helper()
	n := len(cs)
	var g errgroup.Group
	t0 := time.Now()
	for me, c := range cs {
		g.Go(func() error {
			data := make([]int32, size)
			for i := range data {
				data[i] = int32(i*(me+1) + iter)
			}
			if err := c.AllReduce(context.Background(), data); err != nil {
				return fmt.Errorf("worker %d: %w", me, err)
			}
			for i, v := range data {
				if want := int32(i*n*(n+1)/2 + n*iter); v != want {
					return fmt.Errorf("worker %d element %d: %d, want %d", me, i, v, want)
				}
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		t.Fatal(err)
	}
	return time.Since(t0)
}

// TestLabHierarchicalUnderLoss runs a 3-rack, 6-worker INC all-reduce on
// a real lab (namespaces, veths, 1 Gbit/s shaping, the packet core
// between racks) with the aggregators in the ToR namespaces, at 0%, 1%
// and 5% random loss in both directions at every worker and aggregator:
// every sum is exact, nothing lost, nothing counted twice.
func TestLabHierarchicalUnderLoss(t *testing.T) {
	fabrictest.SkipUnlessRoot(t)
	lab := fabrictest.Deploy(t, fabrictest.Fabric(t, fabrictest.UniqueLab("inc"),
		"{kind: eps, racks: 3, servers_per_rack: 2, rates: {server: 1Gbit}}"))
	servers := []string{"r0s0", "r0s1", "r1s0", "r1s1", "r2s0", "r2s1"}
	for k, p := range []float64{0, 0.01, 0.05} {
		t.Run(fmt.Sprintf("loss %.0f%%", 100*p), func(t *testing.T) {
			job := uint16(k + 1)
			engines := labAggregators(t, lab, job, []int{0, 1, 2}, 1, p)
			cs := labClients(t, lab, job, servers, p, 30*time.Second)
			const size = 1 << 18 // 1 MiB
			for it := 0; it < 2; it++ {
				d := reduceAll(t, cs, size, it)
				t.Logf("loss %.0f%%: 1 MiB all-reduce over 3 racks in %v (%.0f Mbit/s per worker)", 100*p, d, 8*4*float64(size)/d.Seconds()/1e6)
			}
			var retrans uint64
			for _, c := range cs {
				retrans += c.Stats().Retransmits
			}
			root := engines[1].Stats()
			if blocks := uint64(2 * ((size + wire.MaxElems - 1) / wire.MaxElems)); root.Completions != blocks {
				t.Errorf("root completed %d sums, want %d (one per block)", root.Completions, blocks)
			}
			if p > 0 && retrans == 0 {
				t.Errorf("%.0f%% loss and no retransmission: the loss hook did nothing", 100*p)
			}
			t.Logf("retransmissions %d; root %+v; worker 0 srtt %v rttvar %v", retrans, root, cs[0].srtt, cs[0].rttvar)
		})
	}
}
