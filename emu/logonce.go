package main

import (
	"context"
	"log/slog"
	"strings"
	"sync"
)

// onceHandler passes each distinct warning (message and attributes) on
// once per command: `emu run --repeat` deploys the lab again for every
// run, and a host setting that deploy warns about has not changed in
// between. Records below slog.LevelWarn pass every time.
type onceHandler struct {
	slog.Handler
	mu    *sync.Mutex
	seen  map[string]bool
	attrs string // what WithAttrs added, part of a record's identity
}

func newOnceHandler(h slog.Handler) *onceHandler {
	return &onceHandler{Handler: h, mu: &sync.Mutex{}, seen: map[string]bool{}}
}

func (h *onceHandler) Handle(ctx context.Context, r slog.Record) error {
	if r.Level >= slog.LevelWarn {
		var b strings.Builder
		b.WriteString(h.attrs)
		b.WriteString(r.Level.String())
		b.WriteString("\x00")
		b.WriteString(r.Message)
		r.Attrs(func(a slog.Attr) bool {
			b.WriteString("\x00" + a.String())
			return true
		})
		key := b.String()
		h.mu.Lock()
		dup := h.seen[key]
		h.seen[key] = true
		h.mu.Unlock()
		if dup {
			return nil
		}
	}
	return h.Handler.Handle(ctx, r)
}

func (h *onceHandler) WithAttrs(as []slog.Attr) slog.Handler {
	var b strings.Builder
	b.WriteString(h.attrs)
	for _, a := range as {
		b.WriteString(a.String() + "\x00")
	}
	return &onceHandler{Handler: h.Handler.WithAttrs(as), mu: h.mu, seen: h.seen, attrs: b.String()}
}

func (h *onceHandler) WithGroup(name string) slog.Handler {
	return &onceHandler{Handler: h.Handler.WithGroup(name), mu: h.mu, seen: h.seen, attrs: h.attrs + "[" + name + "]"}
}
