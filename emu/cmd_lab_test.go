package main

import (
	"bytes"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ocsemu/ocsemu/dataplane/kcheck"
	"github.com/ocsemu/ocsemu/emu/scenario"
)

// Without a capacity measurement, deploy does not log an INFO line
// telling the user to run `emu doctor`: that is a Debug line only.
func TestWarnCapacityWithoutMeasurement(t *testing.T) {
	old := kcheck.ReportPath
	kcheck.ReportPath = filepath.Join(t.TempDir(), "none.json")
	t.Cleanup(func() { kcheck.ReportPath = old })
	s, err := scenario.Parse([]byte("name: t\nfabric: {kind: eps, racks: 2, servers_per_rack: 1, rates: {server: 1Gbit}}\n"), "t")
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		level slog.Level
		want  bool
	}{{slog.LevelInfo, false}, {slog.LevelDebug, true}} {
		var buf bytes.Buffer
		a := &app{log: slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: tt.level}))}
		a.warnCapacity(s)
		if got := strings.Contains(buf.String(), "emu doctor"); got != tt.want {
			t.Errorf("at level %v: logged %q, want the doctor hint: %v", tt.level, buf.String(), tt.want)
		}
	}
}
