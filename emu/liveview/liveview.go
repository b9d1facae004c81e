// Package liveview serves `emu ui`: a page that draws a deployed lab's
// racks, ToRs and OCS switches with their current circuits, charts every
// OCS port's throughput, dark and dropped counters, and shows the phase
// timeline of a run, all kept current by server push (SSE). A poller reads
// the OCS API every Interval and pushes only what changed. The page's
// HTML, CSS and JavaScript are embedded in the binary: no CDN, no build
// step.
package liveview

import (
	"context"
	"crypto/subtle"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/ocsemu/ocsemu/dataplane/names"
	"github.com/ocsemu/ocsemu/dataplane/topo"
	"github.com/ocsemu/ocsemu/ocsfabric/ocs"
)

//go:embed assets
var assets embed.FS

// OCS is the part of the OCS API the view uses; *ocs.Client has it.
type OCS interface {
	Config(ctx context.Context) (ocs.ConfigView, error)
	Counters(ctx context.Context) ([]ocs.PortCounters, error)
	Connect(ctx context.Context, req ocs.ConnectRequest) (ocs.Event, error)
	Disconnect(ctx context.Context, req ocs.DisconnectRequest) (ocs.Event, error)
	// Events streams the OCS's events to fn until ctx ends or fn
	// returns false.
	Events(ctx context.Context, fn func(ocs.Event) bool) error
}

// Options configure a Server.
type Options struct {
	Lab string
	// Spec reads the lab's fabric; an error means the lab is not
	// deployed (the page says so and the poller keeps trying).
	Spec func() (topo.Spec, error)
	// OCS is the client of the lab's OCS process.
	OCS OCS
	// Explain turns an error reaching the OCS into what the page shows
	// (whether the process runs, how to restart it). Optional.
	Explain func(error) error
	// RunDir is the directory of the lab's newest run
	// (results/<lab>/latest); "" for none.
	RunDir string
	// RunDirOf, if set, names the newest run's directory instead when it
	// returns one (the run in progress says where its results go), read
	// at every poll.
	RunDirOf func() string
	// History returns the OCS events logged before the view started,
	// oldest first, for the page's list (optional).
	History func() []ocs.Event
	// AllowChanges lets the page connect and disconnect circuits.
	AllowChanges bool
	// Token, if set, must come with every change (header X-Emu-Token):
	// on a shared machine anyone can open a loopback port, and only the
	// one who started the view has its URL (emu ui prints it, the token
	// in its fragment, which no request carries).
	Token string
	// Interval between two polls of the OCS (default 200 ms).
	Interval time.Duration
	Log      *slog.Logger
}

// Server is the live view of one lab.
type Server struct {
	o      Options
	hub    *hub
	events *eventFollower
	mu     sync.Mutex
	spec   *topo.Spec // last spec read, nil while the lab is not deployed
}

// New returns a server; Serve starts its poller.
func New(o Options) (*Server, error) {
	if err := names.ValidLab(o.Lab); err != nil {
		return nil, err
	}
	if o.Spec == nil || o.OCS == nil {
		return nil, errors.New("liveview: Spec and OCS are required")
	}
	if o.Interval <= 0 {
		o.Interval = 200 * time.Millisecond
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	if o.Explain == nil {
		o.Explain = func(err error) error { return err }
	}
	return &Server{o: o, hub: newHub(), events: &eventFollower{}}, nil
}

// Handler serves the page, its assets, the SSE stream (/events) and, with
// AllowChanges, POST /api/connect and /api/disconnect. Every request must
// name this server's own address as Host (no DNS rebinding).
func (s *Server) Handler(addr string) http.Handler {
	mux := http.NewServeMux()
	static, _ := fs.Sub(assets, "assets")
	mux.Handle("GET /", http.FileServer(http.FS(static)))
	mux.HandleFunc("GET /events", s.stream)
	mux.HandleFunc("POST /api/connect", s.connect)
	mux.HandleFunc("POST /api/disconnect", s.disconnect)
	return hostOnly(addr, securityHeaders(mux))
}

// Serve answers on ln until ctx ends, while the poller runs; then it
// shuts down gracefully (open event streams are closed).
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	srv := &http.Server{Handler: s.Handler(ln.Addr().String()), ReadHeaderTimeout: 5 * time.Second,
		BaseContext: func(net.Listener) context.Context { return ctx }}
	done := make(chan struct{})
	go func() {
		defer close(done)
		s.poll(ctx)
	}()
	if s.o.History != nil {
		s.events.seed(s.o.History())
	}
	go s.events.follow(ctx, s.o.OCS)
	if s.o.History != nil {
		// Once more after the stream is open: what the OCS logged between
		// the first read and the subscription.
		go func() {
			select {
			case <-ctx.Done():
			case <-time.After(time.Second):
				s.events.seed(s.o.History())
			}
		}()
	}
	go func() {
		<-ctx.Done()
		sctx, scancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer scancel()
		_ = srv.Shutdown(sctx)
	}()
	err := srv.Serve(ln)
	cancel()
	<-done
	if errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	return err
}

// hostOnly refuses requests whose Host header is not the address served
// (a page of another site resolving its name to 127.0.0.1 must not reach
// the API). "localhost:<port>" is accepted for a loopback address. On
// every address (--listen 0.0.0.0:PORT, which listens on [::]) the Host
// may be any IP address with the port, localhost or this machine's name:
// a rebinding page names its own host, never an address.
func hostOnly(addr string, next http.Handler) http.Handler {
	host, port, _ := net.SplitHostPort(addr)
	ok := map[string]bool{addr: true}
	ip := net.ParseIP(host)
	if ip != nil && ip.IsLoopback() {
		ok["localhost:"+port] = true
	}
	anyAddr := ip != nil && ip.IsUnspecified()
	if anyAddr {
		ok["localhost:"+port] = true
		if name, err := os.Hostname(); err == nil {
			ok[name+":"+port] = true
		}
	}
	allowed := func(h string) bool {
		if ok[h] {
			return true
		}
		hh, hp, err := net.SplitHostPort(h)
		return anyAddr && err == nil && hp == port && net.ParseIP(hh) != nil
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !allowed(r.Host) {
			http.Error(w, fmt.Sprintf("host %q is not the address emu ui serves (%s)", r.Host, addr), http.StatusMisdirectedRequest)
			return
		}
		next.ServeHTTP(w, r)
	})
}

func securityHeaders(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Security-Policy", "default-src 'self'; style-src 'self'; script-src 'self'; connect-src 'self'; img-src 'self' data:")
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "no-referrer")
		h.Set("Cache-Control", "no-store")
		next.ServeHTTP(w, r)
	})
}

// stream sends server-sent events: first the current topology, status,
// circuits and timeline, then every change.
func (s *Server) stream(w http.ResponseWriter, r *http.Request) {
	fl, ok := w.(http.Flusher)
	if !ok {
		http.Error(w, "streaming unsupported", http.StatusInternalServerError)
		return
	}
	ch, initial, cancel := s.hub.subscribe()
	defer cancel()
	w.Header().Set("Content-Type", "text/event-stream")
	w.WriteHeader(http.StatusOK)
	for _, m := range initial {
		_, _ = w.Write(m)
	}
	fl.Flush()
	keep := time.NewTicker(15 * time.Second)
	defer keep.Stop()
	for {
		select {
		case m, ok := <-ch:
			if !ok {
				return // too slow a reader: the page reconnects
			}
			if _, err := w.Write(m); err != nil {
				return
			}
			fl.Flush()
		case <-keep.C:
			if _, err := w.Write([]byte(": keep-alive\n\n")); err != nil {
				return
			}
			fl.Flush()
		case <-r.Context().Done():
			return
		}
	}
}

// maxChangeBody bounds a change request from the page.
const maxChangeBody = 4 << 10

// change checks that a change request may be made and reads its body.
func (s *Server) change(w http.ResponseWriter, r *http.Request) ([]byte, *topo.Spec, bool) {
	if !s.o.AllowChanges {
		writeErr(w, http.StatusForbidden, errors.New("this view is read-only: start it with `emu ui --allow-changes` to change circuits from the page"))
		return nil, nil, false
	}
	// A cross-site form cannot send application/json without a CORS
	// preflight, which this server never grants.
	if ct := r.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
		writeErr(w, http.StatusUnsupportedMediaType, fmt.Errorf("content type %q: want application/json", ct))
		return nil, nil, false
	}
	if s.o.Token != "" && subtle.ConstantTimeCompare([]byte(r.Header.Get("X-Emu-Token")), []byte(s.o.Token)) != 1 {
		writeErr(w, http.StatusForbidden, errors.New("a change needs this view's token: open the URL `emu ui` printed (it ends in #token=...)"))
		return nil, nil, false
	}
	if site := r.Header.Get("Sec-Fetch-Site"); site != "" && site != "same-origin" {
		writeErr(w, http.StatusForbidden, fmt.Errorf("request from %s: only the page itself may change circuits", site))
		return nil, nil, false
	}
	s.mu.Lock()
	sp := s.spec
	s.mu.Unlock()
	if sp == nil || !sp.HasOCS() {
		writeErr(w, http.StatusConflict, fmt.Errorf("lab %s is not deployed or has no OCS", s.o.Lab))
		return nil, nil, false
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxChangeBody))
	var tooLong *http.MaxBytesError
	switch {
	case errors.As(err, &tooLong):
		writeErr(w, http.StatusRequestEntityTooLarge, fmt.Errorf("request body over %d bytes", maxChangeBody))
		return nil, nil, false
	case err != nil:
		writeErr(w, http.StatusBadRequest, fmt.Errorf("read request body: %w", err))
		return nil, nil, false
	}
	return body, sp, true
}

func (s *Server) connect(w http.ResponseWriter, r *http.Request) {
	body, sp, ok := s.change(w, r)
	if !ok {
		return
	}
	req, err := ocs.DecodeConnectRequest(body, layoutOf(*sp))
	if err != nil {
		writeErr(w, http.StatusBadRequest, err)
		return
	}
	ev, err := s.o.OCS.Connect(r.Context(), req)
	s.afterChange(w, "connect "+req.A.String()+" "+req.B.String(), ev, err)
}

func (s *Server) disconnect(w http.ResponseWriter, r *http.Request) {
	body, sp, ok := s.change(w, r)
	if !ok {
		return
	}
	req, err := ocs.DecodeDisconnectRequest(body, layoutOf(*sp))
	if err != nil {
		writeErr(w, http.StatusBadRequest, err)
		return
	}
	ev, err := s.o.OCS.Disconnect(r.Context(), req)
	s.afterChange(w, "disconnect "+req.Port.String(), ev, err)
}

func (s *Server) afterChange(w http.ResponseWriter, what string, ev ocs.Event, err error) {
	if err != nil {
		s.o.Log.Info("circuit change refused", "change", what, "err", err)
		writeErr(w, http.StatusBadGateway, err)
		return
	}
	s.o.Log.Info("circuit changed from the page", "change", what, "event", ev.Seq)
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(ev)
}

func writeErr(w http.ResponseWriter, code int, err error) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(map[string]string{"error": err.Error()})
}
