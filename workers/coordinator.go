package workers

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"slices"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ocsemu/ocsemu/dataplane/monoclock"
	"github.com/ocsemu/ocsemu/workers/job"
)

// Msg is one line of the control protocol between ranks and the
// coordinator (JSON over a unix socket, which crosses namespaces).
//
//	rank -> coordinator: hello (data connections are up), done (a phase
//	ended), fail, bye (the rank finished)
//	coordinator -> rank: start (time zero), stage (a barrier-mode stage
//	starts at stage_start_ns), task (a task of a task-graph job that the
//	rank waits for has finished: the relay of another rank's done), abort
//	(another rank failed)
type Msg struct {
	Type       string `json:"type"`
	Job        string `json:"job,omitempty"`
	Rank       int    `json:"rank"`
	Iteration  int    `json:"iteration,omitempty"`
	Phase      string `json:"phase,omitempty"`
	T0         int64  `json:"t0_ns,omitempty"`
	Stage      int    `json:"stage,omitempty"`
	StageStart int64  `json:"stage_start_ns,omitempty"`
	EndNs      int64  `json:"end_ns,omitempty"`
	Error      string `json:"error,omitempty"`
}

// control is a rank's side of the protocol.
type control struct {
	conn    net.Conn
	mu      sync.Mutex
	enc     *json.Encoder
	t0      chan int64
	stMu    sync.Mutex
	stages  map[int]int64
	tasks   map[job.Key]int64 // relayed task ends (task-graph jobs)
	changed chan struct{}
	err     error
	t0Once  sync.Once
}

// endStart unblocks start() when no time zero will come.
func (c *control) endStart() { c.t0Once.Do(func() { close(c.t0) }) }

func dialControl(ctx context.Context, spec *Spec) (*control, error) {
	var d net.Dialer
	c, err := d.DialContext(ctx, "unix", spec.Coordinator)
	if err != nil {
		return nil, err
	}
	ct := &control{conn: c, enc: json.NewEncoder(c), t0: make(chan int64, 1), stages: map[int]int64{}, tasks: map[job.Key]int64{}, changed: make(chan struct{})}
	ct.send(Msg{Type: "hello", Job: spec.Job.Name, Rank: spec.Rank})
	go ct.read()
	return ct, nil
}

func (c *control) read() {
	sc := bufio.NewScanner(c.conn)
	for sc.Scan() {
		var m Msg
		if json.Unmarshal(sc.Bytes(), &m) != nil {
			continue
		}
		switch m.Type {
		case "start":
			c.t0Once.Do(func() { c.t0 <- m.T0; close(c.t0) })
		case "stage":
			// A rank can start a stage no sooner than it hears of it: a
			// stage started at once reaches the ranks a little after its
			// instant, and that delay is the barrier's, not the rank's
			// lateness.
			c.stMu.Lock()
			c.stages[m.Stage] = max(m.StageStart, monoclock.Now())
			close(c.changed)
			c.changed = make(chan struct{})
			c.stMu.Unlock()
		case "task":
			c.stMu.Lock()
			c.tasks[job.Key{Job: m.Job, Iteration: m.Iteration, Phase: m.Phase}] = m.EndNs
			close(c.changed)
			c.changed = make(chan struct{})
			c.stMu.Unlock()
		case "abort":
			c.stMu.Lock()
			c.err = fmt.Errorf("aborted: %s", m.Error)
			close(c.changed)
			c.changed = make(chan struct{})
			c.stMu.Unlock()
			c.endStart()
		}
	}
	c.stMu.Lock()
	if c.err == nil {
		c.err = errors.New("coordinator went away")
	}
	close(c.changed)
	c.changed = make(chan struct{})
	c.stMu.Unlock()
	c.endStart()
}

func (c *control) send(m Msg) {
	c.mu.Lock()
	defer c.mu.Unlock()
	_ = c.enc.Encode(m)
}

// start waits for time zero.
func (c *control) start() (int64, error) {
	select {
	case t0, ok := <-c.t0:
		if !ok {
			c.stMu.Lock()
			defer c.stMu.Unlock()
			if c.err != nil {
				return 0, c.err
			}
			return 0, errors.New("coordinator went away before time zero")
		}
		return t0, nil
	case <-time.After(2 * time.Minute):
		return 0, errors.New("no time zero after 2 minutes (did every rank connect?)")
	}
}

// waitStage blocks until stage k has started and returns when the rank
// could start it: the stage's start, or when the rank heard of it if
// that was later.
func (c *control) waitStage(ctx context.Context, k int) (int64, error) {
	return c.waitFor(ctx, func() (int64, bool) { at, ok := c.stages[k]; return at, ok })
}

// waitTask blocks until the coordinator has relayed that task k (of a
// task-graph job) has finished, and returns when it ended.
func (c *control) waitTask(ctx context.Context, k job.Key) (int64, error) {
	return c.waitFor(ctx, func() (int64, bool) { end, ok := c.tasks[k]; return end, ok })
}

// waitFor blocks until get, called with stMu held, reports a time, the
// coordinator's connection fails, or ctx ends.
func (c *control) waitFor(ctx context.Context, get func() (int64, bool)) (int64, error) {
	for {
		c.stMu.Lock()
		at, ok := get()
		err, ch := c.err, c.changed
		c.stMu.Unlock()
		if ok {
			return at, nil
		}
		if err != nil {
			return 0, err
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return 0, ctx.Err()
		}
	}
}

func (c *control) close() {
	c.send(Msg{Type: "bye"})
	c.conn.Close()
}

// Coordinator hands out time zero once every rank has its connections up
// and, in barrier mode, starts each stage when every rank has finished
// every activity of the previous one.
type Coordinator struct {
	Socket string
	// Ranks lists every process that will connect ("job/rank" names).
	Ranks []string
	// Schedule, in barrier mode, drives the stages of Jobs; nil or clock
	// mode: only time zero.
	Schedule *job.Schedule
	Jobs     []job.Job
	// Lead is the time from the last hello to time zero.
	Lead time.Duration
	// OnStage installs stage k's circuits (barrier mode; stage 0 is
	// installed before time zero), for the instant `at` if that is far
	// enough ahead to arm, else as soon as it can, and returns when the
	// stage starts: `at`, or when its circuits took effect if later.
	OnStage func(ctx context.Context, k int, at int64) (int64, error)
	// StageLead: every stage after the first starts at least this far
	// after the one before ended (Options.StageLead).
	StageLead time.Duration
	// OnStart is told time zero before the ranks are.
	OnStart func(t0 int64) error
	Log     *slog.Logger

	T0          int64
	StageStarts []int64
	StageEnds   []int64
	Failures    []string

	mu    sync.Mutex
	conns []*coordConn
}

type coordConn struct {
	name string
	enc  *json.Encoder
	mu   sync.Mutex
	c    net.Conn
	bye  atomic.Bool // set by the connection's reader before it reports the close
}

func (cc *coordConn) send(m Msg) {
	cc.mu.Lock()
	defer cc.mu.Unlock()
	_ = cc.c.SetWriteDeadline(time.Now().Add(5 * time.Second))
	_ = cc.enc.Encode(m)
}

// Listen opens the socket; call it before starting ranks.
func (c *Coordinator) Listen() (net.Listener, error) {
	_ = os.Remove(c.Socket)
	ln, err := net.Listen("unix", c.Socket)
	if err != nil {
		return nil, fmt.Errorf("coordinator socket: %w", err)
	}
	_ = os.Chmod(c.Socket, 0o600)
	return ln, nil
}

// Run serves the ranks until they have all said bye or gone, and returns
// an error listing the failures.
func (c *Coordinator) Run(ctx context.Context, ln net.Listener) error {
	defer ln.Close()
	defer os.Remove(c.Socket)
	log := c.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if c.Lead == 0 {
		c.Lead = 200 * time.Millisecond
	}
	msgs := make(chan connMsg, 1024)
	gone := make(chan *coordConn, len(c.Ranks))
	hellos := map[string]bool{}
	go func() {
		<-ctx.Done()
		ln.Close()
	}()
	accepted := make(chan *coordConn)
	done := make(chan struct{})
	defer close(done)
	defer c.closeConns()
	go acceptRanks(ln, accepted, msgs, gone, done)

	relay, err := newTaskRelay(c.Jobs)
	if err != nil {
		return err
	}
	var bar *barrier
	if c.Schedule != nil && c.Schedule.Mode == job.ModeBarrier {
		bar = newBarrier(c.Schedule, c.Jobs)
		defer func() { c.StageStarts, c.StageEnds = bar.starts, bar.ends }()
	}
	broadcast := func(m Msg) {
		c.mu.Lock()
		defer c.mu.Unlock()
		for _, cc := range c.conns {
			cc.send(m)
		}
	}
	// startStages starts every stage from `from` whose predecessors are done.
	startStages := func(from int) {
		for k := from; k < bar.stages(); k++ {
			at := c.T0 + c.Schedule.Stages[k].StartNs
			if k > 0 {
				// Now, unless the plan says later; the stage starts when
				// its circuits are in (the OCS switches a change about
				// 0.2 ms after it has it, ocs.Controller).
				at = max(at, monoclock.Now()+int64(c.StageLead))
				if c.OnStage != nil {
					var err error
					if at, err = c.OnStage(ctx, k, at); err != nil {
						c.Failures = append(c.Failures, fmt.Sprintf("stage %d circuits: %v", k, err))
						broadcast(Msg{Type: "abort", Error: fmt.Sprintf("stage %d circuits: %v", k, err)})
						return
					}
				}
			}
			empty := bar.started(k, at)
			broadcast(Msg{Type: "stage", Stage: k, StageStart: at})
			if !empty {
				return
			}
		}
	}
	open := 0
	for {
		select {
		case cc, ok := <-accepted:
			if !ok {
				accepted = nil
				continue
			}
			c.mu.Lock()
			c.conns = append(c.conns, cc)
			c.mu.Unlock()
			open++
		case x := <-msgs:
			m := x.m
			switch m.Type {
			case "hello":
				x.cc.name = fmt.Sprintf("%s/%d", m.Job, m.Rank)
				if m.Rank == PSRank {
					x.cc.name = m.Job + "/ps"
				}
				hellos[x.cc.name] = true
				if len(hellos) == len(c.Ranks) && c.T0 == 0 {
					c.T0 = monoclock.Now() + int64(c.Lead)
					log.Debug("all ranks connected; time zero set", "lead", c.Lead)
					if c.OnStart != nil {
						if err := c.OnStart(c.T0); err != nil {
							msg := fmt.Sprintf("at time zero: %v", err)
							c.Failures = append(c.Failures, msg)
							broadcast(Msg{Type: "abort", Error: msg})
						}
					}
					broadcast(Msg{Type: "start", T0: c.T0})
					if bar != nil {
						startStages(0)
					}
				}
			case "done":
				if to := relay.needers(m); len(to) > 0 {
					c.relay(m, to)
				}
				if bar == nil {
					continue
				}
				if next, ok := bar.done(job.Key{Job: m.Job, Iteration: m.Iteration, Phase: m.Phase}, m.EndNs); ok {
					startStages(next)
				}
			case "fail":
				msg := fmt.Sprintf("%s: %s", x.cc.name, m.Error)
				c.Failures = append(c.Failures, msg)
				log.Error("rank failed", "rank", x.cc.name, "err", m.Error)
				broadcast(Msg{Type: "abort", Error: msg})
			}
		case cc := <-gone:
			open--
			if !cc.bye.Load() && cc.name != "" {
				msg := fmt.Sprintf("%s went away before finishing", cc.name)
				c.Failures = append(c.Failures, msg)
				broadcast(Msg{Type: "abort", Error: msg})
			}
			if open == 0 && len(hellos) == len(c.Ranks) {
				// Every reader has finished, so what they read is queued.
				for len(msgs) > 0 {
					x := <-msgs
					if x.m.Type == "fail" {
						c.Failures = append(c.Failures, fmt.Sprintf("%s: %s", x.cc.name, x.m.Error))
					}
				}
				return c.result()
			}
		case <-ctx.Done():
			return errors.Join(ctx.Err(), c.result())
		}
	}
}

// relay tells the ranks named in to ("job/rank") that a task has
// finished.
func (c *Coordinator) relay(m Msg, to []string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, cc := range c.conns {
		if slices.Contains(to, cc.name) {
			cc.send(Msg{Type: "task", Job: m.Job, Iteration: m.Iteration, Phase: m.Phase, EndNs: m.EndNs})
		}
	}
}

func (c *Coordinator) result() error {
	if len(c.Failures) == 0 {
		return nil
	}
	sort.Strings(c.Failures)
	return fmt.Errorf("%d failure(s):\n  %s", len(c.Failures), joinLines(c.Failures))
}

func joinLines(s []string) string {
	out := ""
	for i, x := range s {
		if i > 0 {
			out += "\n  "
		}
		out += x
	}
	return out
}

// closeConns closes every rank connection when Run returns, so their
// readers end.
func (c *Coordinator) closeConns() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, cc := range c.conns {
		cc.c.Close()
	}
}

// connMsg is one message read from a rank's connection.
type connMsg struct {
	cc *coordConn
	m  Msg
}

// acceptRanks accepts rank connections until the listener closes, hands
// each to accepted, and reads its messages into msgs; a connection whose
// reader ends is sent to gone.
func acceptRanks(ln net.Listener, accepted chan<- *coordConn, msgs chan<- connMsg, gone chan<- *coordConn, done <-chan struct{}) {
	for {
		conn, err := ln.Accept()
		if err != nil {
			close(accepted)
			return
		}
		cc := &coordConn{c: conn, enc: json.NewEncoder(conn)}
		select {
		case accepted <- cc:
		case <-done: // Run has returned: nobody will serve this rank
			conn.Close()
			return
		}
		go func() {
			sc := bufio.NewScanner(conn)
			for sc.Scan() {
				var m Msg
				if json.Unmarshal(sc.Bytes(), &m) == nil {
					if m.Type == "bye" {
						cc.bye.Store(true)
					}
					select {
					case msgs <- connMsg{cc, m}:
					case <-done:
						return
					}
				}
			}
			select {
			case gone <- cc:
			case <-done:
			}
		}()
	}
}
