package main

import (
	"runtime/debug"
	"strings"
)

// versionString says which emu this is: the module version (a tag when
// installed with `go install ...@v1.2.3`, "(devel)" when built from a
// checkout), the VCS revision and commit time when the build recorded
// them (and whether the tree had local changes), and the Go version.
func versionString(bi *debug.BuildInfo, ok bool) string {
	if !ok || bi == nil {
		return "emu (no build information)"
	}
	v := bi.Main.Version
	if v == "" {
		v = "(devel)"
	}
	parts := []string{"emu " + v}
	set := map[string]string{}
	for _, s := range bi.Settings {
		set[s.Key] = s.Value
	}
	if rev := set["vcs.revision"]; rev != "" {
		if len(rev) > 12 {
			rev = rev[:12]
		}
		vcs := set["vcs"]
		if vcs == "" {
			vcs = "vcs"
		}
		r := vcs + " " + rev
		if t := set["vcs.time"]; t != "" {
			r += " " + t
		}
		if set["vcs.modified"] == "true" {
			r += " (modified)"
		}
		parts = append(parts, r)
	}
	parts = append(parts, bi.GoVersion)
	return strings.Join(parts, ", ")
}

func buildVersion() string { return versionString(debug.ReadBuildInfo()) }
