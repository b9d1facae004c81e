package main

import (
	"bytes"
	"log/slog"
	"path/filepath"
	"slices"
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

func TestLabArg(t *testing.T) {
	for _, tc := range []struct {
		args []string
		flag string
		want []string
		err  string
	}{
		{nil, "", nil, ""},
		{[]string{"a"}, "", []string{"a"}, ""},
		{nil, "a", []string{"a"}, ""},
		{[]string{"a"}, "a", []string{"a"}, ""},
		{[]string{"a"}, "b", nil, "name it once"},
	} {
		got, err := labArg(tc.args, tc.flag)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("labArg(%v, %q): %v, want %q", tc.args, tc.flag, err, tc.err)
			}
			continue
		}
		if err != nil || !slices.Equal(got, tc.want) {
			t.Errorf("labArg(%v, %q) = %v, %v; want %v", tc.args, tc.flag, got, err, tc.want)
		}
	}
}
