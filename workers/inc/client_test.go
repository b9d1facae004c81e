package inc

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"net"
	"net/netip"
	"testing"
	"time"

	"golang.org/x/sync/errgroup"

	wire "github.com/ocsemu/ocsemu/dataplane/inc"
)

// loss returns a seeded random drop function: a fraction p of packets.
func loss(p float64, seed uint64) func() bool {
	if p == 0 {
		return nil
	}
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	return func() bool { return rng.Float64() < p }
}

// aggregator serves an engine on loopback for the test's lifetime.
func aggregator(t *testing.T, cfg wire.Config, drop func() bool, jobs ...wire.JobConfig) (*wire.Engine, netip.AddrPort) {
	t.Helper()
	e, err := wire.NewEngine(cfg)
	if err != nil {
		t.Fatal(err)
	}
	for _, j := range jobs {
		if err := e.Admit(j); err != nil {
			t.Fatal(err)
		}
	}
	conn, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- wire.Serve(ctx, conn, e, wire.ServeOptions{Drop: drop}) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("aggregator: %v", err)
		}
	})
	return e, conn.LocalAddr().(*net.UDPAddr).AddrPort()
}

// rack is one ToR's workers in a test: their aggregator and how many.
type rack struct {
	agg     netip.AddrPort
	workers int
}

// allReduce runs one int32 all-reduce of size elements, iters times, on
// every worker of the racks, and checks every worker's sum exactly.
func allReduce(t *testing.T, job uint16, racks []rack, size, iters int, drop float64, window int, cc bool) []Stats {
	t.Helper()
	total := 0
	for _, r := range racks {
		total += r.workers
	}
	var g errgroup.Group
	stats := make([]Stats, total)
	rank := 0
	for _, r := range racks {
		for w := 0; w < r.workers; w++ {
			me := rank
			rank++
			g.Go(func() error {
				c, err := Dial(Config{Job: job, Worker: w, Workers: r.workers, Total: total, Aggregator: r.agg,
					Window: window, Congestion: cc, Stall: 20 * time.Second, Drop: loss(drop, uint64(me+1))})
				if err != nil {
					return err
				}
				defer c.Close()
				data := make([]int32, size)
				for it := 0; it < iters; it++ {
					for i := range data {
						data[i] = int32(i*(me+1) + it)
					}
					if err := c.AllReduce(context.Background(), data); err != nil {
						return fmt.Errorf("worker %d iteration %d: %w", me, it, err)
					}
					// sum over ranks m of i*(m+1)+it
					for i, v := range data {
						if want := int32(i*total*(total+1)/2 + total*it); v != want {
							return fmt.Errorf("worker %d iteration %d element %d: %d, want %d", me, it, i, v, want)
						}
					}
				}
				stats[me] = c.Stats()
				return nil
			})
		}
	}
	if err := g.Wait(); err != nil {
		t.Fatal(err)
	}
	return stats
}

var pool = wire.Config{Slots: 256, Capacity: 4}

func TestFlatAllReduce(t *testing.T) {
	e, a := aggregator(t, pool, nil, wire.JobConfig{ID: 1, ToRs: 1})
	// 3 iterations of a size that ends in a short tail packet.
	cs := allReduce(t, 1, []rack{{a, 3}}, 10*wire.MaxElems+17, 3, 0, 16, false)
	// Each worker timed the round trips of the blocks it sent once: at
	// most its 33 blocks, at least one, each between a microsecond and
	// the stall limit.
	for w, c := range cs {
		if c.Retransmits == 0 && c.Stall != 0 {
			t.Errorf("worker %d: no block timed out, yet %v stalled", w, c.Stall)
		}
		if c.RTTSamples == 0 || c.RTTSamples > c.Sent || c.RTTSum < time.Duration(c.RTTSamples)*time.Microsecond || c.RTTSum > time.Duration(c.RTTSamples)*30*time.Second {
			t.Errorf("worker %d: %d round trips summing to %v for %d blocks sent", w, c.RTTSamples, c.RTTSum, c.Sent)
		}
		// Every result read was stamped on arrival: its wait in the socket
		// counts, some wait is never nothing, and a result waits only for
		// part of its round trip (10 ms for a resent block's late copy).
		if c.Waited != c.Received || c.Wait <= 0 || c.RTTSamples > 0 && c.Wait/time.Duration(c.Waited) > c.RTTSum/time.Duration(c.RTTSamples)+10*time.Millisecond {
			t.Errorf("worker %d: %d datagrams waited %v in the socket, %d received, round trips %v over %d", w, c.Waited, c.Wait, c.Received, c.RTTSum, c.RTTSamples)
		}
	}
	// Retransmissions may happen (a slow machine, the race detector), but
	// are never counted: 3 workers' elements, 33 sums.
	st := e.Stats()
	if st.Completions != 3*11 || st.Elements != 3*3*(10*wire.MaxElems+17) {
		t.Fatalf("aggregator stats %+v, want 33 completions of 3 workers' elements", st)
	}
	// The aggregator held every datagram it read from its arrival to the
	// end of its batch's send: a positive time per datagram, under a
	// second on loopback.
	if st.Holds != st.Packets || st.HoldNs == 0 || st.HoldNs > st.Holds*uint64(time.Second) {
		t.Errorf("aggregator held %d datagrams %d ns in all, read %d", st.Holds, st.HoldNs, st.Packets)
	}
}

// hierarchy starts a root and two ToRs below it, for one job.
func hierarchy(t *testing.T, drop float64) ([]*wire.Engine, []rack) {
	t.Helper()
	root, ra := aggregator(t, pool, loss(drop, 101), wire.JobConfig{ID: 5, ToRs: 3, Index: 0})
	e1, a1 := aggregator(t, pool, loss(drop, 102), wire.JobConfig{ID: 5, ToRs: 3, Index: 1, Parent: ra})
	e2, a2 := aggregator(t, pool, loss(drop, 103), wire.JobConfig{ID: 5, ToRs: 3, Index: 2, Parent: ra})
	return []*wire.Engine{root, e1, e2}, []rack{{ra, 2}, {a1, 1}, {a2, 3}}
}

func TestHierarchicalAllReduce(t *testing.T) {
	engines, racks := hierarchy(t, 0)
	allReduce(t, 5, racks, 50*wire.MaxElems, 2, 0, 32, false)
	root, child := engines[0].Stats(), engines[1].Stats()
	if root.Completions != 100 || child.Completions != 100 || child.Partials < 100 {
		t.Fatalf("root %+v, child %+v: want 100 sums completed at the root and 100 results at each ToR", root, child)
	}
}

// TestAllReduceUnderLoss drops packets at random in both directions at
// every worker and every aggregator: sums stay exact, with no block
// counted twice; with congestion control, the loss cuts the windows.
func TestAllReduceUnderLoss(t *testing.T) {
	for _, c := range []struct {
		p  float64
		cc bool
	}{{0.01, false}, {0.05, false}, {0.05, true}} {
		t.Run(fmt.Sprintf("%.0f%% congestion control %v", 100*c.p, c.cc), func(t *testing.T) {
			p := c.p
			engines, racks := hierarchy(t, p)
			stats := allReduce(t, 5, racks, 40*wire.MaxElems, 3, p, 64, c.cc)
			var cuts uint64
			for _, s := range stats {
				cuts += s.Decreases
			}
			if c.cc != (cuts > 0) {
				t.Errorf("congestion control %v: %d window decreases", c.cc, cuts)
			}
			var retrans uint64
			for _, s := range stats {
				retrans += s.Retransmits
			}
			var dups uint64
			for _, e := range engines {
				dups += e.Stats().Duplicates
			}
			if retrans == 0 || dups == 0 {
				t.Fatalf("%.0f%% loss: %d retransmissions, %d duplicates: the loss path was not exercised", 100*p, retrans, dups)
			}
			// A lost block holds its slot until it times out (MinRTO):
			// the workers stall, and say so.
			var stall time.Duration
			for _, s := range stats {
				stall += s.Stall
			}
			if stall < MinRTO/3 {
				t.Errorf("%d retransmissions but %v stalled in all, want at least %v", retrans, stall, MinRTO/3)
			}
			t.Logf("%.0f%% loss: %d retransmissions, %d duplicates ignored, %v stalled", 100*p, retrans, dups, stall)
		})
	}
}

func TestFloat32AllReduce(t *testing.T) {
	_, racks := hierarchy(t, 0)
	const n, size = 6, 3000
	in := make([][]float32, n)
	exact := make([]float64, size)
	rng := rand.New(rand.NewPCG(7, 8))
	for w := range in {
		in[w] = make([]float32, size)
		for i := range in[w] {
			in[w][i] = float32(rng.NormFloat64() * math.Pow(10, float64(w%3-1)))
			exact[i] += float64(in[w][i])
		}
	}
	blockMax := make([]float32, (size+wire.MaxElems-1)/wire.MaxElems)
	for _, v := range in {
		for i, x := range v {
			blockMax[i/wire.MaxElems] = max(blockMax[i/wire.MaxElems], float32(math.Abs(float64(x))))
		}
	}
	var g errgroup.Group
	rank := 0
	for _, r := range racks {
		for w := 0; w < r.workers; w++ {
			me := rank
			rank++
			g.Go(func() error {
				c, err := Dial(Config{Job: 5, Worker: w, Workers: r.workers, Total: n, Aggregator: r.agg})
				if err != nil {
					return err
				}
				defer c.Close()
				if err := c.AllReduceFloat32(context.Background(), in[me]); err != nil {
					return err
				}
				for i, v := range in[me] {
					// The result's exponent is the smallest the workers chose
					// for the block: the one its largest element gives.
					e := wire.Exponent(blockMax[i/wire.MaxElems], n)
					if d := math.Abs(float64(v) - exact[i]); d > wire.ErrorBound(n, e)+math.Abs(exact[i])*0x1p-24 {
						return fmt.Errorf("worker %d element %d: %g, exact %g, error %g over the bound %g", me, i, v, exact[i], d, wire.ErrorBound(n, e))
					}
				}
				return nil
			})
		}
	}
	if err := g.Wait(); err != nil {
		t.Fatal(err)
	}
}

func TestRefusedJob(t *testing.T) {
	_, a := aggregator(t, pool, nil)
	c, err := Dial(Config{Job: 9, Worker: 0, Workers: 1, Total: 1, Aggregator: a})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.AllReduce(context.Background(), make([]int32, 10)); !errors.Is(err, ErrRefused) {
		t.Fatalf("all-reduce of a job the aggregator never admitted: %v", err)
	}
}

func TestDialValidates(t *testing.T) {
	a := netip.MustParseAddrPort("127.0.0.1:1")
	for _, cfg := range []Config{
		{Worker: 1, Workers: 1, Total: 1, Aggregator: a},
		{Worker: 0, Workers: 2, Total: 1, Aggregator: a},
		{Worker: 0, Workers: 1, Total: 1},
		{Worker: 0, Workers: 1, Total: 1, Aggregator: a, Elems: wire.MaxElems + 1},
	} {
		if c, err := Dial(cfg); err == nil {
			c.Close()
			t.Errorf("Dial(%+v) accepted", cfg)
		}
	}
}
