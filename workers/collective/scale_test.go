package collective

import (
	"fmt"
	"net"
	"sync"
	"testing"
	"time"
)

// sparseMesh connects n in-memory ranks only where a pattern talks:
// mesh's n² pipes do not scale to thousands of ranks.
func sparseMesh(n int, peers func(r int) []int) [][]net.Conn {
	conns := make([][]net.Conn, n)
	for i := range conns {
		conns[i] = make([]net.Conn, n)
	}
	for r := 0; r < n; r++ {
		for _, p := range peers(r) {
			if p != r && conns[r][p] == nil {
				a, b := net.Pipe()
				conns[r][p], conns[p][r] = a, b
			}
		}
	}
	return conns
}

// TestCollectivesAtScale: all-reduces and the parameter server stay
// exact with thousands of ranks: hd and ps at workers.MaxRanks (4096;
// 1024 under the race detector, which allows 8128 goroutines). A ring's
// 2(n-1) steps per rank make its in-memory cost quadratic, not its
// logic: it runs at 256 ranks (128 under -race) with a shuffled order.
func TestCollectivesAtScale(t *testing.T) {
	if testing.Short() {
		t.Skip("thousands of ranks")
	}
	big, ring := 4096, 256
	if raceEnabled {
		big, ring = 1024, 128
	}
	tests := []struct {
		name string
		n    int
		kind string
	}{
		{"ring", ring, "ring"},
		{"hd", big, "hd"},
		{"ps", big, "ps"},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%s %d", tt.name, tt.n), func(t *testing.T) {
			n, elems := tt.n, 2*tt.n+3
			order := make([]int, n)
			for i := range order {
				order[i] = (i * 7) % n // a ring order that is not the identity
			}
			var peers func(int) []int
			switch tt.kind {
			case "ring":
				pos := make([]int, n)
				for i, r := range order {
					pos[r] = i
				}
				peers = func(r int) []int { return []int{order[(pos[r]+1)%n]} }
			case "hd":
				peers = func(r int) []int {
					var p []int
					for k := 1; k < n; k <<= 1 {
						p = append(p, r^k)
					}
					return p
				}
			case "ps": // rank n is the server
				n++
				peers = func(r int) []int { return []int{n - 1} }
			}
			conns := sparseMesh(n, peers)
			start := time.Now()
			errs := make([]error, n)
			var wg sync.WaitGroup
			for r := 0; r < n; r++ {
				wg.Add(1)
				go func() {
					defer wg.Done()
					c := &Comm{Rank: r, N: n, Conns: conns[r], Timeout: time.Minute}
					data := make([]int32, elems)
					switch {
					case tt.kind == "ps" && r == n-1:
						if err := c.ServePush(data); err != nil {
							errs[r] = err
							return
						}
						if errs[r] = CheckSum(data, n-1, 0); errs[r] != nil {
							return
						}
						errs[r] = c.ServePull(data)
						return
					case tt.kind == "ps":
						Gradient(data, r, 0)
						if errs[r] = c.Push(n-1, data); errs[r] == nil {
							errs[r] = c.Pull(n-1, data)
						}
						if errs[r] == nil {
							errs[r] = CheckSum(data, n-1, 0)
						}
						return
					case tt.kind == "hd":
						Gradient(data, r, 1)
						errs[r] = c.HDAllReduce(data)
					default:
						Gradient(data, r, 1)
						errs[r] = c.RingAllReduce(data, order)
					}
					if errs[r] == nil {
						errs[r] = CheckSum(data, n, 1)
					}
				}()
			}
			wg.Wait()
			bad := 0
			for r, err := range errs {
				if err != nil && bad < 5 {
					t.Errorf("rank %d: %v", r, err)
					bad++
				}
			}
			t.Logf("%d ranks in %v", n, time.Since(start).Round(time.Millisecond))
		})
	}
}
