package ocs

import (
	"sync"

	"github.com/ocsemu/ocsemu/ocsfabric/fastpath"
	"github.com/ocsemu/ocsemu/ocsfabric/routing"
)

// routeJob is one slot's routing table waiting to be installed.
type routeJob struct {
	table   routing.Table
	unreach []routing.Pair
	ev      Event
}

// routeWorker installs schedule slots' routes off the switching path. It
// keeps only the newest table: if slots come faster than routes can be
// written, the skipped slots' events say so, and the routes jump to the
// newest circuits.
type routeWorker struct {
	c       *Controller
	mu      sync.Mutex
	cond    *sync.Cond
	pending *routeJob
	busy    bool
	done    bool
	wg      sync.WaitGroup
}

func newRouteWorker(c *Controller) *routeWorker {
	w := &routeWorker{c: c}
	w.cond = sync.NewCond(&w.mu)
	w.wg.Add(1)
	go w.loop()
	return w
}

func (w *routeWorker) submit(j *routeJob) {
	w.mu.Lock()
	if old := w.pending; old != nil {
		old.ev.Error = "routes skipped: the next slot came before they could be written"
		w.c.emit(&old.ev)
	}
	w.pending = j
	w.mu.Unlock()
	w.cond.Broadcast()
}

func (w *routeWorker) loop() {
	defer w.wg.Done()
	for {
		w.mu.Lock()
		for w.pending == nil && !w.done {
			w.cond.Wait()
		}
		if w.pending == nil && w.done {
			w.mu.Unlock()
			return
		}
		j := w.pending
		w.pending, w.busy = nil, true
		w.mu.Unlock()

		n, err := w.c.router.Apply(j.table)
		j.ev.RoutesChanged, j.ev.RoutesDoneNs = n, int64(fastpath.Monotonic())
		if err != nil {
			j.ev.Error = err.Error()
		}
		w.c.setUnreachable(j.unreach)
		w.c.emit(&j.ev)

		w.mu.Lock()
		w.busy = false
		w.mu.Unlock()
		w.cond.Broadcast()
	}
}

// flush waits until every submitted table is installed.
func (w *routeWorker) flush() {
	w.mu.Lock()
	defer w.mu.Unlock()
	for w.pending != nil || w.busy {
		w.cond.Wait()
	}
}

func (w *routeWorker) stop() {
	w.mu.Lock()
	w.done = true
	w.mu.Unlock()
	w.cond.Broadcast()
	w.wg.Wait()
}
