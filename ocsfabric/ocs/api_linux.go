package ocs

import (
	"github.com/ocsemu/ocsemu/dataplane/sockapi"

	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"time"

	"github.com/ocsemu/ocsemu/dataplane/units"
	"github.com/ocsemu/ocsemu/ocsfabric/circuit"
	"github.com/ocsemu/ocsemu/ocsfabric/fastpath"
	"github.com/ocsemu/ocsemu/ocsfabric/routing"
)

// API routes (all JSON):
//
//	GET    /v1/config     current circuits, dark ports, unreachable rack pairs
//	PUT    /v1/config     replace the circuits: ConfigRequest -> Event
//	POST   /v1/connect    {"a":"tor0:1","b":"tor2:0"} -> Event
//	POST   /v1/disconnect {"port":"tor0:1"} -> Event
//	POST   /v1/schedule   Schedule -> 202
//	DELETE /v1/schedule   stop the running schedule
//	GET    /v1/counters   per-port forwarded / dark / unpatched counters
//	GET    /v1/paths/counters  per-ToR kernel path counters: redirected, dropped unreachable
//	GET    /v1/dark       per-port kernel timestamps of the last dark period frames met
//	GET    /v1/events     event stream as JSONL, until the client leaves
//	GET    /v1/clock      the server's CLOCK_MONOTONIC, to schedule against

// ConfigRequest replaces the circuit map.
type ConfigRequest struct {
	Circuits []circuit.Circuit `json:"circuits" yaml:"circuits"`
	// Delay overrides the scenario's reconfiguration delay ("50ms"),
	// within reconfig.MinDelay and reconfig.MaxDelay.
	Delay *units.Duration `json:"delay,omitempty" yaml:"delay,omitempty"`
	// AtNs is the CLOCK_MONOTONIC instant of the switch; 0 = as soon as
	// possible. Any other instant must lie ahead of the OCS clock (GET
	// /v1/clock), by at most reconfig.MaxAhead: the request waits for it.
	AtNs int64 `json:"at_ns,omitempty" yaml:"at_ns,omitempty"`
}

// ConnectRequest patches a circuit, moving whatever used its ports.
type ConnectRequest struct {
	A       circuit.Uplink  `json:"a"`
	B       circuit.Uplink  `json:"b"`
	Simplex bool            `json:"simplex,omitempty"`
	Delay   *units.Duration `json:"delay,omitempty"`
}

// DisconnectRequest removes the circuit on a port.
type DisconnectRequest struct {
	Port  circuit.Uplink  `json:"port"`
	Delay *units.Duration `json:"delay,omitempty"`
}

// ConfigView is GET /v1/config.
type ConfigView struct {
	Circuits     []circuit.Circuit `json:"circuits"`
	DelayNs      int64             `json:"default_delay_ns"`
	Unreachable  []routing.Pair    `json:"unreachable"`
	Schedule     bool              `json:"schedule_running"`
	HalfDuplex   bool              `json:"half_duplex"`
	Racks        int               `json:"racks"`
	UplinksPerTo int               `json:"uplinks_per_tor"`
}

// Handler serves the API for a controller.
func (c *Controller) Handler() http.Handler {
	mux := http.NewServeMux()
	delayOf := func(d *units.Duration) time.Duration {
		if d == nil {
			return -1
		}
		return d.D()
	}
	mux.HandleFunc("GET /v1/config", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, ConfigView{Circuits: c.Config().Circuits, DelayNs: int64(c.delay), Unreachable: c.Unreachable(),
			Schedule: c.ScheduleRunning(), HalfDuplex: c.layout.HalfDuplex, Racks: c.layout.Racks, UplinksPerTo: c.layout.Uplinks})
	})
	mux.HandleFunc("PUT /v1/config", func(w http.ResponseWriter, r *http.Request) {
		// at_ns is checked against the instant the request came in, not
		// the end of reading a large body.
		now := int64(fastpath.Monotonic())
		req, ok := decode(w, r, func(b []byte) (ConfigRequest, error) { return DecodeConfigRequest(b, c.layout, now) })
		if !ok {
			return
		}
		ev, err := c.apply(r.Context(), circuit.Config{Circuits: req.Circuits}, delayOf(req.Delay), req.AtNs, now)
		reply(w, ev, err)
	})
	mux.HandleFunc("POST /v1/connect", func(w http.ResponseWriter, r *http.Request) {
		req, ok := decode(w, r, func(b []byte) (ConnectRequest, error) { return DecodeConnectRequest(b, c.layout) })
		if !ok {
			return
		}
		ci := req.Circuit(c.layout)
		ev, err := c.Apply(r.Context(), c.Config().Connect(ci.A, ci.B, ci.Simplex), delayOf(req.Delay), 0)
		reply(w, ev, err)
	})
	mux.HandleFunc("POST /v1/disconnect", func(w http.ResponseWriter, r *http.Request) {
		req, ok := decode(w, r, func(b []byte) (DisconnectRequest, error) { return DecodeDisconnectRequest(b, c.layout) })
		if !ok {
			return
		}
		cfg, found := c.Config().Disconnect(req.Port)
		if !found {
			writeErr(w, http.StatusNotFound, fmt.Errorf("%s is not in any circuit", req.Port))
			return
		}
		ev, err := c.Apply(r.Context(), cfg, delayOf(req.Delay), 0)
		reply(w, ev, err)
	})
	mux.HandleFunc("POST /v1/schedule", func(w http.ResponseWriter, r *http.Request) {
		now := int64(fastpath.Monotonic())
		s, ok := decode(w, r, func(b []byte) (Schedule, error) { return DecodeSchedule(b, c.layout, now) })
		if !ok {
			return
		}
		if err := c.runSchedule(s); err != nil {
			code := http.StatusBadRequest
			if errors.Is(err, ErrScheduleRunning) {
				code = http.StatusConflict
			}
			writeErr(w, code, err)
			return
		}
		writeJSON(w, http.StatusAccepted, map[string]string{"status": "started"})
	})
	mux.HandleFunc("DELETE /v1/schedule", func(w http.ResponseWriter, r *http.Request) {
		status := "stopped"
		if !c.ScheduleRunning() {
			status = "none running"
		}
		c.StopSchedule()
		writeJSON(w, http.StatusOK, map[string]string{"status": status})
	})
	mux.HandleFunc("GET /v1/counters", func(w http.ResponseWriter, r *http.Request) {
		ctrs, err := c.Counters()
		if err != nil {
			writeErr(w, http.StatusInternalServerError, err)
			return
		}
		writeJSON(w, http.StatusOK, ctrs)
	})
	mux.HandleFunc("GET /v1/paths/counters", func(w http.ResponseWriter, r *http.Request) {
		ctrs, err := c.PathCounters()
		if err != nil {
			writeErr(w, http.StatusInternalServerError, err)
			return
		}
		writeJSON(w, http.StatusOK, ctrs)
	})
	mux.HandleFunc("GET /v1/dark", func(w http.ResponseWriter, r *http.Request) {
		ts, err := c.DarkTimes()
		if err != nil {
			writeErr(w, http.StatusInternalServerError, err)
			return
		}
		writeJSON(w, http.StatusOK, ts)
	})
	mux.HandleFunc("GET /v1/clock", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, map[string]int64{"monotonic_ns": int64(fastpath.Monotonic())})
	})
	mux.HandleFunc("GET /v1/events", func(w http.ResponseWriter, r *http.Request) {
		ch, cancel := c.Subscribe()
		defer cancel()
		w.Header().Set("Content-Type", "application/x-ndjson")
		w.WriteHeader(http.StatusOK)
		fl, _ := w.(http.Flusher)
		if fl != nil {
			fl.Flush()
		}
		enc := json.NewEncoder(w)
		stopping := serverStopping(r)
		for {
			select {
			case <-stopping:
				return // the OCS is shutting down: a follower must not hold it up
			case ev, ok := <-ch:
				if !ok {
					return
				}
				if enc.Encode(ev) != nil {
					return
				}
				if fl != nil {
					fl.Flush()
				}
			case <-r.Context().Done():
				return
			}
		}
	})
	return mux
}

func reply(w http.ResponseWriter, ev Event, err error) {
	switch {
	case errors.Is(err, ErrScheduleRunning):
		writeErr(w, http.StatusConflict, err)
	case err != nil && ev.Seq == 0:
		writeErr(w, http.StatusBadRequest, err)
	case err != nil:
		writeErr(w, http.StatusInternalServerError, err)
	default:
		writeJSON(w, http.StatusOK, ev)
	}
}

// MaxBodyBytes bounds a request body; a longer one is answered 413.
const MaxBodyBytes = 16 << 20

// readBody reads a request body of at most MaxBodyBytes. On failure it
// has answered: 413 if the body is too long, else 400.
func readBody(w http.ResponseWriter, r *http.Request) ([]byte, bool) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, MaxBodyBytes))
	var tooLong *http.MaxBytesError
	switch {
	case errors.As(err, &tooLong):
		writeErr(w, http.StatusRequestEntityTooLarge, fmt.Errorf("request body over the limit of %d MiB (%d bytes)", tooLong.Limit>>20, tooLong.Limit))
		return nil, false
	case err != nil:
		writeErr(w, http.StatusBadRequest, fmt.Errorf("read request body: %w", err))
		return nil, false
	}
	return body, true
}

// decode reads a body and decodes and checks it with fn; on failure it
// has answered 413 or 400.
func decode[T any](w http.ResponseWriter, r *http.Request, fn func([]byte) (T, error)) (T, bool) {
	var v T
	body, ok := readBody(w, r)
	if !ok {
		return v, false
	}
	v, err := fn(body)
	if err != nil {
		writeErr(w, http.StatusBadRequest, err)
		return v, false
	}
	return v, true
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}

func writeErr(w http.ResponseWriter, code int, err error) {
	writeJSON(w, code, map[string]string{"error": err.Error()})
}

type stoppingKey struct{}

// serverStopping is closed when the server that took the request shuts
// down (nil, never closed, outside Serve).
func serverStopping(r *http.Request) <-chan struct{} {
	ch, _ := r.Context().Value(stoppingKey{}).(<-chan struct{})
	return ch
}

// Serve answers the API on a unix socket (mode 0600: root only) until ctx
// is cancelled; it returns once the requests in flight have finished (or
// 2 s passed), so the controller can be closed after it.
func Serve(ctx context.Context, c *Controller, socket string) error {
	_ = os.Remove(socket)
	ln, err := net.Listen("unix", socket)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", socket, err)
	}
	if err := os.Chmod(socket, 0o600); err != nil {
		ln.Close()
		return err
	}
	// Shutdown waits for the handlers in flight; an event stream lasts
	// until its client leaves, so it ends as shutdown begins (an `emu ui`
	// or `ocs events -f` held every destroy up for the 2 s below).
	stopping, stop := context.WithCancel(context.Background())
	defer stop()
	srv := &http.Server{Handler: c.Handler(), ReadHeaderTimeout: 5 * time.Second,
		BaseContext: func(net.Listener) context.Context {
			return context.WithValue(context.Background(), stoppingKey{}, stopping.Done())
		}}
	srv.RegisterOnShutdown(stop)
	shut := make(chan struct{})
	go func() {
		defer close(shut)
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
	}()
	err = srv.Serve(ln)
	_ = os.Remove(socket)
	if errors.Is(err, http.ErrServerClosed) {
		// Serve returns as Shutdown begins; Shutdown returns once the
		// handlers are done.
		<-shut
		return nil
	}
	return err
}

// Client talks to an OCS process over its unix socket.
type Client struct {
	api  *sockapi.Client
	down func(error) error
}

// NewClient returns a client for the OCS socket of a lab.
func NewClient(socket string) *Client {
	return &Client{api: sockapi.New(socket, 0)}
}

// OnUnreachable sets how a failure to reach the OCS process is reported:
// f gets the connection error and returns the error callers see (the CLI
// says whether the process runs and how to restart it).
func (cl *Client) OnUnreachable(f func(error) error) *Client {
	cl.down = f
	return cl
}

// unreachable is the error for a request that did not reach the OCS.
func (cl *Client) unreachable(ctx context.Context, err error) error {
	if cl.down != nil && ctx.Err() == nil {
		return cl.down(err)
	}
	return fmt.Errorf("OCS: %w", err) // the dial error names the socket
}

func (cl *Client) do(ctx context.Context, method, path string, in, out any) error {
	err := cl.api.Do(ctx, method, path, in, out)
	var se *sockapi.StatusError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &se):
		var e struct{ Error string }
		_ = json.Unmarshal(se.Body, &e)
		return fmt.Errorf("OCS: %s", e.Error)
	}
	return cl.fail(ctx, err)
}

// fail reports a request that got no answer (unreachable) or a bad one.
func (cl *Client) fail(ctx context.Context, err error) error {
	if ue := (*sockapi.UnreachableError)(nil); errors.As(err, &ue) {
		return cl.unreachable(ctx, ue.Err)
	}
	return err
}

// Config reads the circuit map.
func (cl *Client) Config(ctx context.Context) (ConfigView, error) {
	var v ConfigView
	return v, cl.do(ctx, "GET", "/v1/config", nil, &v)
}

// Apply replaces the circuit map.
func (cl *Client) Apply(ctx context.Context, req ConfigRequest) (Event, error) {
	var ev Event
	return ev, cl.do(ctx, "PUT", "/v1/config", req, &ev)
}

// Connect patches one circuit.
func (cl *Client) Connect(ctx context.Context, req ConnectRequest) (Event, error) {
	var ev Event
	return ev, cl.do(ctx, "POST", "/v1/connect", req, &ev)
}

// Disconnect removes the circuit on a port.
func (cl *Client) Disconnect(ctx context.Context, req DisconnectRequest) (Event, error) {
	var ev Event
	return ev, cl.do(ctx, "POST", "/v1/disconnect", req, &ev)
}

// Schedule starts a schedule.
func (cl *Client) Schedule(ctx context.Context, s Schedule) error {
	return cl.do(ctx, "POST", "/v1/schedule", s, nil)
}

// StopSchedule stops the running schedule.
func (cl *Client) StopSchedule(ctx context.Context) error {
	_, err := cl.StopScheduleStatus(ctx)
	return err
}

// StopScheduleStatus stops the running schedule and says whether one was
// running.
func (cl *Client) StopScheduleStatus(ctx context.Context) (wasRunning bool, err error) {
	var out struct{ Status string }
	if err := cl.do(ctx, "DELETE", "/v1/schedule", nil, &out); err != nil {
		return false, err
	}
	return out.Status != "none running", nil
}

// Counters reads per-port counters.
func (cl *Client) Counters(ctx context.Context) ([]PortCounters, error) {
	var out []PortCounters
	return out, cl.do(ctx, "GET", "/v1/counters", nil, &out)
}

// PathCounters reads the ToRs' kernel path counters.
func (cl *Client) PathCounters(ctx context.Context) ([]PathCounters, error) {
	var out []PathCounters
	return out, cl.do(ctx, "GET", "/v1/paths/counters", nil, &out)
}

// DarkTimes reads every port's kernel timestamps of its dark periods.
func (cl *Client) DarkTimes(ctx context.Context) ([]PortDarkTimes, error) {
	var out []PortDarkTimes
	return out, cl.do(ctx, "GET", "/v1/dark", nil, &out)
}

// Events streams events to fn until ctx ends or fn returns false.
func (cl *Client) Events(ctx context.Context, fn func(Event) bool) error {
	body, err := cl.api.Stream(ctx, "/v1/events")
	if err != nil {
		return cl.fail(ctx, err)
	}
	defer body.Close()
	sc := bufio.NewScanner(body)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		var ev Event
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
			return err
		}
		if !fn(ev) {
			return nil
		}
	}
	if ctx.Err() != nil {
		return nil
	}
	return sc.Err()
}

// Ping checks that the OCS answers.
func (cl *Client) Ping(ctx context.Context) error {
	var v map[string]int64
	return cl.do(ctx, "GET", "/v1/clock", nil, &v)
}
