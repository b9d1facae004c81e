package inc

import (
	"github.com/ocsemu/ocsemu/dataplane/sockapi"

	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"time"
)

// The control API of a running aggregator, HTTP on a unix socket:
// GET /stats, GET /jobs, POST /jobs (a JobConfig: admit; 409 when the ToR
// has no room), DELETE /jobs/{id} (release).

// Handler serves an engine's control API.
func Handler(e *Engine) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /stats", func(w http.ResponseWriter, _ *http.Request) { reply(w, e.Stats()) })
	mux.HandleFunc("GET /jobs", func(w http.ResponseWriter, _ *http.Request) { reply(w, e.Jobs()) })
	mux.HandleFunc("POST /jobs", func(w http.ResponseWriter, r *http.Request) {
		var cfg JobConfig
		dec := json.NewDecoder(io.LimitReader(r.Body, 4096))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&cfg); err != nil {
			http.Error(w, "job: "+err.Error(), http.StatusBadRequest)
			return
		}
		switch err := e.Admit(cfg); {
		case errors.Is(err, ErrNoRoom):
			http.Error(w, err.Error(), http.StatusConflict)
		case err != nil:
			http.Error(w, err.Error(), http.StatusBadRequest)
		default:
			reply(w, cfg)
		}
	})
	mux.HandleFunc("DELETE /jobs/{id}", func(w http.ResponseWriter, r *http.Request) {
		id, err := strconv.ParseUint(r.PathValue("id"), 10, 16)
		if err != nil {
			http.Error(w, "job id: "+err.Error(), http.StatusBadRequest)
			return
		}
		if !e.Release(uint16(id)) {
			http.Error(w, fmt.Sprintf("job %d is not admitted", id), http.StatusNotFound)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	})
	return mux
}

func reply(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}

// Client talks to an aggregator's control API on a unix socket.
type Client struct{ api *sockapi.Client }

// NewClient returns a client of the aggregator serving on socket.
func NewClient(socket string) *Client {
	return &Client{api: sockapi.New(socket, 10*time.Second)}
}

// Stats reads the aggregator's counters.
func (c *Client) Stats(ctx context.Context) (Stats, error) {
	var st Stats
	return st, c.do(ctx, http.MethodGet, "/stats", nil, &st)
}

// Jobs lists the admitted jobs.
func (c *Client) Jobs(ctx context.Context) ([]JobConfig, error) {
	var js []JobConfig
	return js, c.do(ctx, http.MethodGet, "/jobs", nil, &js)
}

// Admit asks the aggregator to admit a job; the error wraps ErrNoRoom
// when it has no room.
func (c *Client) Admit(ctx context.Context, cfg JobConfig) error {
	return c.do(ctx, http.MethodPost, "/jobs", cfg, nil)
}

// Release frees a job's slots.
func (c *Client) Release(ctx context.Context, id uint16) error {
	return c.do(ctx, http.MethodDelete, "/jobs/"+strconv.Itoa(int(id)), nil, nil)
}

func (c *Client) do(ctx context.Context, method, path string, in, out any) error {
	err := c.api.Do(ctx, method, path, in, out)
	var se *sockapi.StatusError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &se) && se.Code == http.StatusConflict:
		return fmt.Errorf("%w (%s)", ErrNoRoom, se.Body)
	case errors.As(err, &se):
		return fmt.Errorf("aggregator at %s: %s %s: %s", c.api.Socket, method, path, se.Body)
	}
	return fmt.Errorf("aggregator: %w", err) // the dial error names the socket
}
