// Package archtest holds the test that keeps the project's layers apart:
// imports run one way, emu/ -> ocsfabric/, workers/ -> dataplane/, and
// the model side links no kernel code (docs/architecture.md).
package archtest

import (
	"encoding/json"
	"os/exec"
	"strings"
	"testing"
)

const module = "github.com/ocsemu/ocsemu"

type pkg struct {
	ImportPath string
	Imports    []string
	Deps       []string
}

// list runs `go list -json` over patterns (non-test imports and deps).
func list(t *testing.T, patterns ...string) []pkg {
	t.Helper()
	cmd := exec.Command("go", append([]string{"list", "-json=ImportPath,Imports,Deps"}, patterns...)...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, stderr.String())
	}
	var pkgs []pkg
	dec := json.NewDecoder(strings.NewReader(string(out)))
	for dec.More() {
		var p pkg
		if err := dec.Decode(&p); err != nil {
			t.Fatal(err)
		}
		pkgs = append(pkgs, p)
	}
	if len(pkgs) == 0 {
		t.Fatalf("go list %v found no packages", patterns)
	}
	return pkgs
}

// layer is the top folder of a package of this module ("emu", "dataplane", ...).
func layer(path string) string {
	rest, ok := strings.CutPrefix(path, module+"/")
	if !ok {
		return ""
	}
	l, _, _ := strings.Cut(rest, "/")
	return l
}

// upward lists the imports that go against the layering: a layer may
// import only itself and the layers below it; emu/ may import anything.
func upward(pkgs []pkg) []string {
	below := map[string]map[string]bool{
		"dataplane": {"dataplane": true},
		"ocsfabric": {"ocsfabric": true, "dataplane": true},
		"workers":   {"workers": true, "dataplane": true},
		"scenarios": {},
	}
	var bad []string
	for _, p := range pkgs {
		allowed, ok := below[layer(p.ImportPath)]
		if !ok {
			continue
		}
		for _, imp := range p.Imports {
			if l := layer(imp); l != "" && !allowed[l] {
				bad = append(bad, p.ImportPath+" imports "+imp)
			}
		}
	}
	return bad
}

// Lower layers never import the composition root, and each layer imports
// only the layers below it.
func TestImportsRunOneWay(t *testing.T) {
	for _, b := range upward(list(t, module+"/...")) {
		t.Errorf("%s: dataplane/, ocsfabric/ and workers/ must not import emu/, and only ocsfabric/ and workers/ may import dataplane/", b)
	}
}

// The rule catches what it must catch.
func TestUpwardCatches(t *testing.T) {
	pkgs := []pkg{
		{ImportPath: module + "/dataplane/fabric", Imports: []string{module + "/emu/scenario"}},
		{ImportPath: module + "/workers", Imports: []string{module + "/ocsfabric/circuit", module + "/dataplane/names"}},
		{ImportPath: module + "/ocsfabric/ocs", Imports: []string{module + "/dataplane/fabric", "github.com/vishvananda/netlink"}},
		{ImportPath: module + "/emu/plan", Imports: []string{module + "/ocsfabric/circuit"}},
	}
	got := upward(pkgs)
	want := []string{module + "/dataplane/fabric imports " + module + "/emu/scenario", module + "/workers imports " + module + "/ocsfabric/circuit"}
	if strings.Join(got, ";") != strings.Join(want, ";") {
		t.Errorf("upward = %v, want %v", got, want)
	}
}

// The model side, and the pure models below it, link no netlink and no
// BPF: they run anywhere, without root.
func TestPurePackagesLinkNoKernel(t *testing.T) {
	pure := []string{
		module + "/emu/scenario", module + "/emu/plan", module + "/emu/flowmodel", module + "/emu/scheduler",
		module + "/ocsfabric/circuit", module + "/ocsfabric/routing",
		module + "/dataplane/topo", module + "/dataplane/shaper", module + "/dataplane/names", module + "/dataplane/limits", module + "/dataplane/units", module + "/dataplane/loss",
		module + "/workers/job", module + "/workers/record", module + "/emu/report", module + "/emu/fidelity", module + "/emu/hoststat",
	}
	kernel := []string{"github.com/vishvananda/netlink", "github.com/vishvananda/netns", "github.com/cilium/ebpf"}
	for _, p := range list(t, pure...) {
		for _, d := range p.Deps {
			for _, k := range kernel {
				if d == k || strings.HasPrefix(d, k+"/") {
					t.Errorf("%s depends on %s: pure packages must not link kernel code", p.ImportPath, d)
				}
			}
		}
	}
}

func TestLayerOf(t *testing.T) {
	for path, want := range map[string]string{
		module + "/emu/plan":          "emu",
		module + "/dataplane/fabric":  "dataplane",
		module + "/workers":           "workers",
		"github.com/other/emu/plan":   "",
		module + "/ocsfabric/circuit": "ocsfabric",
	} {
		if got := layer(path); got != want {
			t.Errorf("layer(%q) = %q, want %q", path, got, want)
		}
	}
}
