package ocs

import (
	"context"
	"sync"
	"time"

	"github.com/ocsemu/ocsemu/dataplane/monoclock"
	"github.com/ocsemu/ocsemu/ocsfabric/fastpath"
	"github.com/ocsemu/ocsemu/ocsfabric/routing"
)

// routeJob is one slot's routing table waiting to be installed once the
// slot has taken effect (ev.Effective).
type routeJob struct {
	table   routing.Table
	unreach []routing.Pair
	ev      Event
}

// routeWorker installs schedule slots' netlink routes off the switching
// path, each once its slot has taken effect; slots are staged ahead, so
// jobs wait in instant order. If a newer slot has taken effect too before
// a job's routes are written, the job is skipped and its event says so:
// the routes jump to the newest circuits.
type routeWorker struct {
	c    *Controller
	mu   sync.Mutex
	idle *sync.Cond // signalled when jobs shrink or a job is done
	jobs []*routeJob
	busy bool
	done bool
	wake chan struct{}
	wg   sync.WaitGroup
}

func newRouteWorker(c *Controller) *routeWorker {
	w := &routeWorker{c: c, wake: make(chan struct{}, 1)}
	w.idle = sync.NewCond(&w.mu)
	w.wg.Add(1)
	go w.loop()
	return w
}

func (w *routeWorker) poke() {
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

func (w *routeWorker) submit(j *routeJob) {
	w.mu.Lock()
	w.jobs = append(w.jobs, j)
	w.mu.Unlock()
	w.poke()
}

// next returns the job to install now, waiting for its instant; nil when
// the worker is stopped.
func (w *routeWorker) next() *routeJob {
	for {
		w.mu.Lock()
		if len(w.jobs) == 0 || w.done {
			done := w.done
			if done {
				w.jobs = nil // slots that never took effect
				w.idle.Broadcast()
			}
			w.mu.Unlock()
			if done {
				return nil
			}
			<-w.wake
			continue
		}
		now := int64(fastpath.Monotonic())
		if at := w.jobs[0].ev.Effective; at > now {
			w.mu.Unlock()
			if time.Duration(at-now) <= 2*time.Millisecond {
				// Precisely (a Go timer can overshoot by more); a job
				// cancelled meanwhile is dropped on the next turn.
				_ = monoclock.SleepUntil(context.Background(), at)
				continue
			}
			t := time.NewTimer(time.Duration(at-now) - time.Millisecond)
			select {
			case <-t.C:
			case <-w.wake:
			}
			t.Stop()
			continue
		}
		for len(w.jobs) > 1 && w.jobs[1].ev.Effective <= now {
			old := w.jobs[0]
			old.ev.Error = "routes skipped: the next slot came before they could be written"
			w.c.emit(&old.ev)
			w.jobs = w.jobs[1:]
		}
		j := w.jobs[0]
		w.jobs, w.busy = w.jobs[1:], true
		w.mu.Unlock()
		return j
	}
}

func (w *routeWorker) loop() {
	defer w.wg.Done()
	for {
		j := w.next()
		if j == nil {
			return
		}
		n, err := w.c.router.Apply(j.table)
		j.ev.RoutesChanged, j.ev.RoutesDoneNs = n, int64(fastpath.Monotonic())
		if err != nil {
			j.ev.Error = err.Error()
		}
		w.c.setUnreachable(j.unreach)
		w.c.emit(&j.ev)

		w.mu.Lock()
		w.busy = false
		w.idle.Broadcast()
		w.mu.Unlock()
	}
}

// cancel drops the jobs of slots scheduled after cut: they were disarmed.
func (w *routeWorker) cancel(cut int64) {
	w.mu.Lock()
	defer w.mu.Unlock()
	i := len(w.jobs)
	for i > 0 && w.jobs[i-1].ev.Scheduled > cut {
		i--
	}
	w.jobs = w.jobs[:i]
	w.idle.Broadcast()
	w.poke()
}

// flush waits until every submitted table is installed (or skipped).
func (w *routeWorker) flush() {
	w.mu.Lock()
	defer w.mu.Unlock()
	for (len(w.jobs) > 0 || w.busy) && !w.done {
		w.idle.Wait()
	}
}

func (w *routeWorker) stop() {
	w.mu.Lock()
	w.done = true
	w.mu.Unlock()
	w.poke()
	w.wg.Wait()
}
