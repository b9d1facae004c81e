package inc

import (
	"context"
	"errors"
	"net"
	"net/http"
	"path/filepath"
	"testing"
)

func TestControlAPI(t *testing.T) {
	e, err := NewEngine(Config{Slots: 8, Capacity: 1})
	if err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(t.TempDir(), "agg.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: Handler(e)}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { srv.Close() })
	ctx := context.Background()
	cl := NewClient(sock)
	if err := cl.Admit(ctx, JobConfig{ID: 4, ToRs: 1}); err != nil {
		t.Fatal(err)
	}
	if err := cl.Admit(ctx, JobConfig{ID: 5, ToRs: 1}); !errors.Is(err, ErrNoRoom) {
		t.Fatalf("second job on a capacity-1 ToR: %v, want ErrNoRoom", err)
	}
	if err := cl.Admit(ctx, JobConfig{ID: 6, ToRs: 0}); err == nil || errors.Is(err, ErrNoRoom) {
		t.Fatalf("bad job config: %v", err)
	}
	jobs, err := cl.Jobs(ctx)
	if err != nil || len(jobs) != 1 || jobs[0].ID != 4 {
		t.Fatalf("jobs %v, %v", jobs, err)
	}
	st, err := cl.Stats(ctx)
	if err != nil || st.Refusals != 1 || st.Jobs != 1 {
		t.Fatalf("stats %+v, %v", st, err)
	}
	if err := cl.Release(ctx, 4); err != nil {
		t.Fatal(err)
	}
	if err := cl.Release(ctx, 4); err == nil {
		t.Fatal("released a job twice")
	}
}
