package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A scenario without rates predicts transfers as taking no time: emu plan
// and emu simulate say so, and what to set, instead of a bare 0.000 s.
func TestCLIPlanUnlimitedLinks(t *testing.T) {
	bin := buildEmu(t)
	dir := t.TempDir()
	const fab = "fabric: {kind: eps, racks: 2, servers_per_rack: 1RATES}\njobs:\n  - {name: a, pattern: ring, workers: [r0s0, r1s0], bytes: 1MiB, compute: 1ms, iterations: 1}\n"
	for _, tt := range []struct {
		rates string
		warn  bool
	}{{"", true}, {", rates: {server: 1Gbit}", false}} {
		f := filepath.Join(dir, "s.yaml")
		os.WriteFile(f, []byte("name: t\n"+strings.Replace(fab, "RATES", tt.rates, 1)), 0o644)
		p := filepath.Join(dir, "p.json")
		out, err := run(t, bin, "plan", f, "-o", p)
		if err != nil {
			t.Fatalf("plan: %v\n%s", err, out)
		}
		sim, err := run(t, bin, "simulate", p, "-s", f, "-o", filepath.Join(dir, "pred.json"))
		if err != nil {
			t.Fatalf("simulate: %v\n%s", err, sim)
		}
		for _, o := range []string{out, sim} {
			const w = "links are unlimited (fabric.rates.server not set), so the flow model cannot predict transfer times"
			if got := strings.Contains(o, w) && strings.Contains(o, "Set fabric.rates.server"); got != tt.warn {
				t.Errorf("rates %q: warning shown %v, want %v:\n%s", tt.rates, got, tt.warn, o)
			}
		}
	}
}
