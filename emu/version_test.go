package main

import (
	"runtime/debug"
	"testing"
)

func TestVersionString(t *testing.T) {
	setting := func(kv ...string) []debug.BuildSetting {
		var s []debug.BuildSetting
		for i := 0; i+1 < len(kv); i += 2 {
			s = append(s, debug.BuildSetting{Key: kv[i], Value: kv[i+1]})
		}
		return s
	}
	tests := []struct {
		name string
		bi   *debug.BuildInfo
		ok   bool
		want string
	}{
		{"no build info", nil, false, "emu (no build information)"},
		{"go install of a tag", &debug.BuildInfo{GoVersion: "go1.26.0", Main: debug.Module{Version: "v1.2.3"}}, true, "emu v1.2.3, go1.26.0"},
		{"checkout with git", &debug.BuildInfo{GoVersion: "go1.26.0", Main: debug.Module{Version: "(devel)"},
			Settings: setting("vcs", "git", "vcs.revision", "0123456789abcdef0123", "vcs.time", "2026-01-02T03:04:05Z", "vcs.modified", "false")}, true,
			"emu (devel), git 0123456789ab 2026-01-02T03:04:05Z, go1.26.0"},
		{"modified tree", &debug.BuildInfo{GoVersion: "go1.26.0", Main: debug.Module{Version: "(devel)"},
			Settings: setting("vcs", "git", "vcs.revision", "abc", "vcs.modified", "true")}, true, "emu (devel), git abc (modified), go1.26.0"},
		{"empty main version", &debug.BuildInfo{GoVersion: "go1.26.0"}, true, "emu (devel), go1.26.0"},
	}
	for _, tt := range tests {
		if got := versionString(tt.bi, tt.ok); got != tt.want {
			t.Errorf("%s: got %q, want %q", tt.name, got, tt.want)
		}
	}
}
