package collective

import (
	"sync"
)

// Push sends this worker's gradient to the parameter server (rank ps)
// and returns when the server has all of it (it acknowledges each
// worker's last byte), not when the bytes merely sit in a socket buffer.
func (c *Comm) Push(ps int, data []int32) error {
	if err := c.Send(ps, asBytes(data)); err != nil {
		return err
	}
	return c.Recv(ps, make([]byte, 1))
}

// Pull asks the parameter server for the sum and receives it into out.
// The request makes the pull start when the worker's pull phase starts,
// as the plan gates it, not when the server happens to finish.
func (c *Comm) Pull(ps int, out []int32) error {
	if err := c.Send(ps, []byte{1}); err != nil {
		return err
	}
	return c.Recv(ps, asBytes(out))
}

// pieceElems is how much the server receives before adding, per worker.
const pieceElems = 256 << 10 // 1 MiB

// ServePush receives every worker's gradient at once and sums them into
// sum (which it zeroes first), then tells each worker it has it all.
func (c *Comm) ServePush(sum []int32) error {
	clear(sum)
	var mu sync.Mutex
	return c.eachWorker(func(w int) error {
		piece := c.scratchFor(w, min(pieceElems, len(sum)))
		for off := 0; off < len(sum); off += len(piece) {
			p := piece[:min(len(piece), len(sum)-off)]
			if err := c.Recv(w, asBytes(p)); err != nil {
				return err
			}
			mu.Lock()
			add(sum[off:off+len(p)], p)
			mu.Unlock()
		}
		return c.Send(w, []byte{1}) // received in full
	})
}

// ServePull answers every worker's pull request with the sum.
func (c *Comm) ServePull(sum []int32) error {
	return c.eachWorker(func(w int) error {
		if err := c.Recv(w, make([]byte, 1)); err != nil {
			return err
		}
		return c.Send(w, asBytes(sum))
	})
}

// eachWorker runs fn for every worker (every rank but the server's own)
// at once; the first error ends the others' transfers and is returned.
func (c *Comm) eachWorker(fn func(w int) error) error {
	f := &failure{c: c}
	var wg sync.WaitGroup
	for w := 0; w < c.N; w++ {
		if w == c.Rank {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			f.add(fn(w))
		}()
	}
	wg.Wait()
	return f.err
}
