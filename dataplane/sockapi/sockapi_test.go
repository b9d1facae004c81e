package sockapi

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func serve(t *testing.T) string {
	t.Helper()
	sock := filepath.Join(t.TempDir(), "api.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /echo", func(w http.ResponseWriter, r *http.Request) {
		var v map[string]int
		_ = json.NewDecoder(r.Body).Decode(&v)
		v["n"]++
		_ = json.NewEncoder(w).Encode(v)
	})
	mux.HandleFunc("GET /full", func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "no room  ", http.StatusConflict)
	})
	srv := &http.Server{Handler: mux}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	return sock
}

func TestDo(t *testing.T) {
	sock := serve(t)
	c := New(sock, 0)
	ctx := context.Background()

	var out map[string]int
	if err := c.Do(ctx, http.MethodPost, "/echo", map[string]int{"n": 41}, &out); err != nil || out["n"] != 42 {
		t.Fatalf("echo: %v, %v", out, err)
	}

	var se *StatusError
	err := c.Do(ctx, http.MethodGet, "/full", nil, nil)
	if !errors.As(err, &se) || se.Code != http.StatusConflict || string(se.Body) != "no room" {
		t.Fatalf("refusal: %v", err)
	}

	var ue *UnreachableError
	err = New(filepath.Join(t.TempDir(), "nobody.sock"), 0).Do(ctx, http.MethodGet, "/full", nil, nil)
	if !errors.As(err, &ue) || !strings.Contains(err.Error(), "nobody.sock") {
		t.Fatalf("no server: %v", err)
	}
	if _, err := c.Stream(ctx, "/full"); !errors.As(err, &se) {
		t.Fatalf("stream refusal: %v", err)
	}
}

// A request that reaches nobody names the socket it tried, not the
// placeholder URL.
func TestUnreachableNamesTheSocket(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "none.sock")
	err := New(sock, time.Second).Do(context.Background(), http.MethodGet, "/stats", nil, nil)
	var ue *UnreachableError
	if !errors.As(err, &ue) || !strings.Contains(err.Error(), "GET /stats: dial unix "+sock) || strings.Contains(err.Error(), "http://api") {
		t.Errorf("error %v", err)
	}
}
