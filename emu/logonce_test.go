package main

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
)

// A warning repeated with the same message and attributes is shown once;
// another lab's, an error and info lines are not held back.
func TestOnceHandler(t *testing.T) {
	var buf bytes.Buffer
	log := slog.New(newOnceHandler(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelInfo})))
	for range 3 {
		log.Warn("cubic is not allowed", "lab", "a")
		log.Info("run done")
	}
	log.Warn("cubic is not allowed", "lab", "b")
	log.With("lab", "c").Warn("cubic is not allowed")
	log.With("lab", "c").Warn("cubic is not allowed")
	log.Error("cubic is not allowed", "lab", "a")
	out := buf.String()
	for _, tc := range []struct {
		want string
		n    int
	}{
		{`level=WARN msg="cubic is not allowed" lab=a`, 1},
		{`msg="run done"`, 3},
		{`level=WARN msg="cubic is not allowed" lab=b`, 1},
		{`level=WARN msg="cubic is not allowed" lab=c`, 1},
		{`level=ERROR msg="cubic is not allowed" lab=a`, 1},
	} {
		if got := strings.Count(out, tc.want); got != tc.n {
			t.Errorf("%q %d times, want %d:\n%s", tc.want, got, tc.n, out)
		}
	}
}
