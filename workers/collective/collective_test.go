package collective

import (
	"errors"
	"fmt"
	"io"
	"net"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"
)

// mesh connects n in-memory ranks pairwise.
func mesh(n int) [][]net.Conn {
	conns := make([][]net.Conn, n)
	for i := range conns {
		conns[i] = make([]net.Conn, n)
	}
	for i := 0; i < n; i++ {
		for j := i + 1; j < n; j++ {
			a, b := net.Pipe()
			conns[i][j], conns[j][i] = a, b
		}
	}
	return conns
}

func runRanks(t *testing.T, n int, fn func(c *Comm) error) []error {
	t.Helper()
	conns := mesh(n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for r := 0; r < n; r++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[r] = fn(&Comm{Rank: r, N: n, Conns: conns[r], Timeout: 5 * time.Second})
		}()
	}
	wg.Wait()
	return errs
}

func TestAllReduceExact(t *testing.T) {
	tests := []struct {
		name  string
		n     int
		elems int
		hd    bool
		order []int
		steps bool // one step at a time (Steps), not pipelined
	}{
		{"ring 2", 2, 1000, false, nil, false},
		{"ring 3 uneven chunks", 3, 1001, false, nil, false},
		{"ring 4 custom order", 4, 4096, false, []int{0, 2, 1, 3}, false},
		{"ring fewer elements than ranks", 5, 3, false, nil, false},
		// Many pieces per chunk: the pipeline forwards pieces mid-chunk.
		{"ring 2 pipelined", 2, 5*pipePiece + 7, false, nil, false},
		{"ring 4 pipelined", 4, 9*pipePiece + 3, false, []int{3, 1, 0, 2}, false},
		{"hd 2", 2, 1000, true, nil, false},
		{"hd 4", 4, 1003, true, nil, false},
		{"hd 8", 8, 8192, true, nil, false},
		{"hd 4 pipelined", 4, 9*pipePiece + 3, true, nil, false},
		{"hd 8 pipelined", 8, 17*pipePiece + 5, true, nil, false},
		{"ring 4 step by step", 4, 3*pipePiece + 1, false, []int{2, 0, 3, 1}, true},
		{"hd 4 step by step", 4, 3*pipePiece + 1, true, nil, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			order := tt.order
			if order == nil {
				for i := 0; i < tt.n; i++ {
					order = append(order, i)
				}
			}
			for it := 0; it < 2; it++ {
				errs := runRanks(t, tt.n, func(c *Comm) error {
					data := make([]int32, tt.elems)
					Gradient(data, c.Rank, it)
					var err error
					switch {
					case tt.steps:
						err = runSteps(c, data, tt.hd, order)
					case tt.hd:
						err = c.HDAllReduce(data)
					default:
						err = c.RingAllReduce(data, order)
					}
					if err != nil {
						return err
					}
					return CheckSum(data, tt.n, it)
				})
				for r, err := range errs {
					if err != nil {
						t.Errorf("rank %d: %v", r, err)
					}
				}
			}
		})
	}
}

func runSteps(c *Comm, data []int32, hd bool, order []int) error {
	var s *Steps
	var err error
	if hd {
		s, err = c.NewHDSteps(data)
	} else {
		s, err = c.NewRingSteps(data, order)
	}
	for k := 0; err == nil && k < s.Steps(); k++ {
		err = s.Step(k)
	}
	return err
}

// A schedule whose step receives into the range it sends is refused:
// the pipeline could send a value it is changing.
func TestCheckSchedule(t *testing.T) {
	tests := []struct {
		name  string
		steps []pipeStep
		ok    bool
	}{
		{"disjoint", []pipeStep{{send: span{1, 0, 10}, recv: span{1, 10, 20}}}, true},
		{"empty receive", []pipeStep{{send: span{1, 0, 10}, recv: span{1, 5, 5}}}, true},
		{"overlap", []pipeStep{{send: span{1, 0, 10}, recv: span{2, 9, 20}}}, false},
		{"same range", []pipeStep{{send: span{1, 0, 10}, recv: span{1, 10, 20}}, {send: span{1, 3, 8}, recv: span{1, 3, 8}}}, false},
	}
	for _, tt := range tests {
		if err := checkSchedule(tt.steps); (err == nil) != tt.ok {
			t.Errorf("%s: got %v, want ok %v", tt.name, err, tt.ok)
		}
	}
}

func TestAllToAll(t *testing.T) {
	const n, elems = 4, 777
	errs := runRanks(t, n, func(c *Comm) error {
		send, recv := make([][]int32, n), make([][]int32, n)
		for p := range send {
			send[p], recv[p] = make([]int32, elems), make([]int32, elems)
			Tokens(send[p], c.Rank, p, 1)
		}
		c.ResetTiming()
		before := clock()
		if err := c.AllToAll(send, recv); err != nil {
			return err
		}
		// Every peer's flow is timed, within the phase's marks.
		tm := c.Timing()
		if len(tm.PeerRecvNs) != n {
			return fmt.Errorf("per-peer marks %v, want %d", tm.PeerRecvNs, n)
		}
		for p, at := range tm.PeerRecvNs {
			if p == c.Rank && at != 0 || p != c.Rank && (at < before || at > clock() || at < tm.FirstRecvNs) {
				return fmt.Errorf("peer %d's last byte marked at %d (phase from %d, first byte %d)", p, at, before, tm.FirstRecvNs)
			}
		}
		if got, want := c.Sent(), int64((n-1)*elems*4); got != want {
			return fmt.Errorf("sent %d bytes, counted %d", want, got)
		}
		for p := range recv {
			if err := CheckTokens(recv[p], p, c.Rank, 1); err != nil {
				return err
			}
		}
		return nil
	})
	for r, err := range errs {
		if err != nil {
			t.Errorf("rank %d: %v", r, err)
		}
	}
}

func TestParameterServerSums(t *testing.T) {
	const n, elems = 4, 600_000 // workers 0..2, server 3; more than one piece
	errs := runRanks(t, n, func(c *Comm) error {
		data := make([]int32, elems)
		if c.Rank == 3 {
			if err := c.ServePush(data); err != nil {
				return err
			}
			return c.ServePull(data)
		}
		Gradient(data, c.Rank, 0)
		if err := c.Push(3, data); err != nil {
			return err
		}
		if err := c.Pull(3, data); err != nil {
			return err
		}
		return CheckSum(data, 3, 0)
	})
	for r, err := range errs {
		if err != nil {
			t.Errorf("rank %d: %v", r, err)
		}
	}
}

func TestCheckSumCatchesCorruption(t *testing.T) {
	data := make([]int32, 100)
	Gradient(data, 0, 0)
	if CheckSum(data, 1, 0) != nil {
		t.Fatal("a single rank's gradient is its own sum")
	}
	data[42]++
	if err := CheckSum(data, 1, 0); err == nil || !strings.Contains(err.Error(), "element 42") {
		t.Errorf("corruption not caught: %v", err)
	}
}

func TestLostPeerFailsWithItsRank(t *testing.T) {
	conns := mesh(2)
	conns[1][0].Close()
	c := &Comm{Rank: 0, N: 2, Conns: conns[0], Timeout: time.Second}
	err := c.RingAllReduce(make([]int32, 10), []int{0, 1})
	var pe *PeerError
	if !errors.As(err, &pe) || pe.Peer != 1 {
		t.Errorf("want an error naming rank 1, got %v", err)
	}
}

// TestSentCountsConcurrentSends: a rank writes to many peers at once in
// all-to-all and in the server's per-worker loops; every byte is counted
// once (run with -race: the counter is shared by those goroutines).
func TestSentCountsConcurrentSends(t *testing.T) {
	const n, elems = 8, 3000
	errs := runRanks(t, n, func(c *Comm) error {
		data := make([]int32, elems)
		if c.Rank == n-1 { // the server: n-1 acks of 1 byte, then n-1 sums
			if err := c.ServePush(data); err != nil {
				return err
			}
			if got, want := c.Sent(), int64(n-1); got != want {
				return fmt.Errorf("server: %d acks counted as %d bytes", want, got)
			}
			if err := c.ServePull(data); err != nil {
				return err
			}
			if got, want := c.Sent(), int64(n-1)*(1+elems*4); got != want {
				return fmt.Errorf("server: sent %d bytes, counted %d", want, got)
			}
			return nil
		}
		if err := c.Push(n-1, data); err != nil {
			return err
		}
		if err := c.Pull(n-1, data); err != nil {
			return err
		}
		if got, want := c.Sent(), int64(elems*4+1); got != want {
			return fmt.Errorf("worker: sent %d bytes, counted %d", want, got)
		}
		return nil
	})
	for r, err := range errs {
		if err != nil {
			t.Errorf("rank %d: %v", r, err)
		}
	}
}

// A failed send ends the rank's receive stream at once (and the reverse),
// with the send's error, instead of leaving it blocked until the transfer
// timeout.
func TestPipelineFailureUnblocksTheOtherStream(t *testing.T) {
	conns := mesh(3)
	// Rank 0 sends to rank 1 and receives from rank 2 in a ring; rank 1
	// is gone, rank 2 never sends.
	_ = conns[1][0].Close()
	c := &Comm{Rank: 0, N: 3, Conns: conns[0], Timeout: time.Minute}
	done := make(chan error, 1)
	go func() { done <- c.RingAllReduce(make([]int32, 3*pipePiece), []int{0, 1, 2}) }()
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "closed pipe") {
			t.Fatalf("all-reduce with a dead peer: %v, want the send's closed-pipe error", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the receive stream stayed blocked after the send stream failed")
	}
}

// A failed transfer ends a collective's other transfers at once, with
// the failure's error, instead of leaving them blocked until the
// timeout: rank 0 talks to rank 1, which is gone, and to rank 2, which
// never sends.
func TestFailureEndsTheOtherTransfers(t *testing.T) {
	for _, tc := range []struct {
		name string
		run  func(c *Comm) error
	}{
		{"all-to-all", func(c *Comm) error {
			bufs := func() [][]int32 { return [][]int32{make([]int32, 8), make([]int32, 8), make([]int32, 8)} }
			return c.AllToAll(bufs(), bufs())
		}},
		{"send and receive", func(c *Comm) error { return c.SendRecv(1, make([]byte, 8), 2, make([]byte, 8)) }},
		{"send and add", func(c *Comm) error {
			return c.SendRecvAdd(1, make([]byte, 8), 2, make([]int32, 2), make([]int32, 2))
		}},
		{"parameter server", func(c *Comm) error { return c.ServePush(make([]int32, 8)) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			conns := mesh(3)
			_ = conns[1][0].Close()
			c := &Comm{Rank: 0, N: 3, Conns: conns[0], Timeout: time.Minute}
			done := make(chan error, 1)
			go func() { done <- tc.run(c) }()
			select {
			case err := <-done:
				var pe *PeerError
				if !errors.As(err, &pe) || pe.Peer != 1 || (!errors.Is(err, io.EOF) && !errors.Is(err, io.ErrClosedPipe)) {
					t.Errorf("with rank 1 gone: %v, want the closed connection to rank 1", err)
				}
			case <-time.After(20 * time.Second):
				t.Fatal("the transfers with rank 2 stayed blocked after the one with rank 1 failed")
			}
		})
	}
}

// The collectives' receive buffers are allocated once per user and
// reused, so steady iterations allocate nothing (no collection inside a
// measured phase): the same backing array comes back, larger requests
// grow it, users do not share one.
func TestScratchIsReused(t *testing.T) {
	c := &Comm{}
	a := c.scratchFor(0, 1024)
	b := c.scratchFor(0, 512)
	if len(a) != 1024 || len(b) != 512 || &a[0] != &b[0] {
		t.Errorf("slot 0 not reused: len %d, %d, same array %v", len(a), len(b), &a[0] == &b[0])
	}
	w := c.scratchFor(3, 256)
	if len(w) != 256 || &w[0] == &a[0] || len(c.scratch) != 4 {
		t.Errorf("slot 3: len %d, shares slot 0's array %v, %d slots", len(w), &w[0] == &a[0], len(c.scratch))
	}
	g := c.scratchFor(0, 2048)
	if len(g) != 2048 || &g[0] == &a[0] {
		t.Errorf("a larger request: len %d, the old array %v; want 2048 in a new one", len(g), &g[0] == &a[0])
	}
	if h := c.scratchFor(0, 100); &h[0] != &g[0] {
		t.Error("a smaller request after growing: not the grown array")
	}
	if n := testing.AllocsPerRun(100, func() { _ = c.scratchFor(0, 1500) }); n != 0 {
		t.Errorf("a request that fits allocated %.0f times, want 0", n)
	}
}

// Preparing a step-wise all-reduce every iteration (paper003's
// per-step schedule) allocates its schedule, not a new 1 MiB buffer.
func TestStepsReuseTheirBuffer(t *testing.T) {
	c := &Comm{Rank: 0, N: 4}
	data := make([]int32, 1<<18)
	if _, err := c.NewHDSteps(data); err != nil {
		t.Fatal(err)
	}
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for range 10 {
		if _, err := c.NewHDSteps(data); err != nil {
			t.Fatal(err)
		}
		if _, err := c.NewRingSteps(data, []int{0, 1, 2, 3}); err != nil {
			t.Fatal(err)
		}
	}
	runtime.ReadMemStats(&after)
	if got := after.TotalAlloc - before.TotalAlloc; got > 64<<10 {
		t.Errorf("20 step schedules allocated %d B, want under 64 KiB (a 1 MiB buffer each before)", got)
	}
}

// One Comm per rank through six iterations, as a rank runs them: the
// reserved buffers are reused by pipelined and step-by-step all-reduces
// of both kinds in turn, and every sum still checks. With the buffers
// reserved first, the iterations allocate no buffer of their own.
func TestCollectivesReuseOneComm(t *testing.T) {
	const n, elems = 4, 3*pipePiece + 1
	order := []int{0, 2, 1, 3}
	var grown [n]uint64
	errs := runRanks(t, n, func(c *Comm) error {
		c.ReserveAllReduce()
		before := &c.scratch[0][0]
		for it := range 6 {
			data := make([]int32, elems)
			Gradient(data, c.Rank, it)
			var err error
			switch it % 4 {
			case 0:
				err = c.HDAllReduce(data)
			case 1:
				err = runSteps(c, data, true, nil)
			case 2:
				err = c.RingAllReduce(data, order)
			default:
				err = runSteps(c, data, false, order)
			}
			if err != nil {
				return fmt.Errorf("iteration %d: %w", it, err)
			}
			if err := CheckSum(data, n, it); err != nil {
				return fmt.Errorf("iteration %d: %w", it, err)
			}
		}
		if len(c.scratch) != 1 || &c.scratch[0][0] != before {
			grown[c.Rank] = 1
		}
		return nil
	})
	for r, err := range errs {
		if err != nil {
			t.Errorf("rank %d: %v", r, err)
		}
		if grown[r] != 0 {
			t.Errorf("rank %d: a collective allocated a new buffer after ReserveAllReduce", r)
		}
	}
}

// A parameter server serves two iterations with the same Comm: its
// per-worker pieces, reserved first, are reused, and both sums check.
func TestServerReusesItsPieces(t *testing.T) {
	const n, elems = 4, pieceElems + 5 // the server is rank 3; more than one piece
	errs := runRanks(t, n, func(c *Comm) error {
		ps := n - 1
		if c.Rank == ps {
			c.ReserveServer(elems)
			first := &c.scratch[0][0]
			sum := make([]int32, elems)
			for it := range 2 {
				if err := c.ServePush(sum); err != nil {
					return err
				}
				if err := CheckSum(sum, n-1, it); err != nil {
					return fmt.Errorf("iteration %d: %w", it, err)
				}
			}
			if &c.scratch[0][0] != first {
				return errors.New("the server allocated a new piece after ReserveServer")
			}
			return nil
		}
		for it := range 2 {
			data := make([]int32, elems)
			Gradient(data, c.Rank, it)
			if err := c.Push(ps, data); err != nil {
				return err
			}
		}
		return nil
	})
	for r, err := range errs {
		if err != nil {
			t.Errorf("rank %d: %v", r, err)
		}
	}
}
