package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"testing"

	"github.com/ocsemu/ocsemu/dataplane/fabric/fabrictest"
	"github.com/ocsemu/ocsemu/dataplane/names"
	"github.com/ocsemu/ocsemu/dataplane/netns"
	"github.com/ocsemu/ocsemu/emu/fidelity"
	"github.com/ocsemu/ocsemu/emu/report"
	"github.com/ocsemu/ocsemu/scenarios"
)

// runDefault runs the default scenario under a unique lab and checks what
// every run must leave: the data file (readable, with the verdict and
// every phase), fidelity.json, attribution.csv, the HTML report showing
// the verdict, and no namespace of the lab.
func runDefault(t *testing.T, bin, prefix string) (string, *report.RunData) {
	t.Helper()
	lab := fabrictest.UniqueLab(prefix)
	results := t.TempDir()
	out, err := run(t, bin, "run", scenarioAs(t, scenarios.Default, lab), "--results", results, "--duration", "300ms")
	if left, _ := netns.List(names.LabPrefix(lab)); len(left) > 0 {
		t.Errorf("namespaces left behind: %v", left)
	}
	if err != nil {
		t.Fatalf("emu run: %v\n%s", err, out)
	}
	dir := filepath.Join(results, lab, "latest")
	for _, f := range []string{report.DataFile, "fidelity.json", "attribution.csv", "report.html"} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			t.Errorf("run directory lacks %s: %v", f, err)
		}
	}
	d, err := report.ReadRunData(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(d.Verdict.Lines) == 0 || d.Meta == nil || len(d.Series.HostCPU) == 0 || len(d.Series.Shapers) == 0 || len(d.Series.TCP) == 0 {
		t.Errorf("data file incomplete: %d verdict lines, meta %v, %d host samples, %d shapers, %d TCP samples",
			len(d.Verdict.Lines), d.Meta != nil, len(d.Series.HostCPU), len(d.Series.Shapers), len(d.Series.TCP))
	}
	if len(d.Measurement.Phases) != len(d.Prediction.Phases) || len(d.Series.RankPhases) == 0 {
		t.Errorf("%d phases measured, %d predicted, %d rank records", len(d.Measurement.Phases), len(d.Prediction.Phases), len(d.Series.RankPhases))
	}
	html, err := os.ReadFile(filepath.Join(dir, "report.html"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(html), "Fidelity verdict") {
		t.Error("the report does not show the fidelity verdict")
	}
	if !strings.Contains(out, "== fidelity verdict: ") || !strings.Contains(out, "   fidelity    ") {
		t.Errorf("emu run printed no verdict:\n%s", out)
	}
	return out, d
}

// TestCLIRunDefaultWritesEverything: the default run (as `emu run` with no
// argument runs it) records every phase, writes the data file, the report
// and the verdict, and leaves nothing behind.
func TestCLIRunDefaultWritesEverything(t *testing.T) {
	fabrictest.SkipUnlessRoot(t)
	_, d := runDefault(t, buildEmu(t), "dflt")
	t.Logf("verdict %s", d.Verdict.Status)
	for _, l := range d.Verdict.Lines {
		t.Logf("  %-5s %-30s %s", l.Status, l.Check, l.Figure)
	}
}

// TestCLIRunVerdictFailsUnderCPUHog: a CPU hog in the root namespace (one
// busy loop per CPU, not started by emu) during `emu run` makes the
// verdict fail, and the foreign-load line says why.
func TestCLIRunVerdictFailsUnderCPUHog(t *testing.T) {
	fabrictest.SkipUnlessRoot(t)
	bin := buildEmu(t)
	var hogs []*exec.Cmd
	for range runtime.NumCPU() {
		c := exec.Command("sh", "-c", "while :; do :; done")
		if err := c.Start(); err != nil {
			t.Fatal(err)
		}
		hogs = append(hogs, c)
	}
	t.Cleanup(func() {
		for _, c := range hogs {
			_ = c.Process.Kill()
			_ = c.Wait()
		}
	})
	out, d := runDefault(t, bin, "hog")
	if d.Verdict.Status != fidelity.Fail {
		t.Errorf("verdict %s under a CPU hog, want fail", d.Verdict.Status)
	}
	var fl fidelity.Line
	for _, l := range d.Verdict.Lines {
		if l.Check == "foreign load" {
			fl = l
		}
	}
	if fl.Status != fidelity.Fail || fl.Value < fidelity.ForeignWarn || fl.Why == "" {
		b, _ := json.MarshalIndent(fl, "", " ")
		t.Errorf("foreign load line under a hog: %s", b)
	}
	if !strings.Contains(out, "fail  foreign load") || !regexp.MustCompile(`fidelity    FAIL: .*foreign load fail`).MatchString(out) {
		t.Errorf("emu run does not say the foreign load failed:\n%s", out)
	}
	t.Logf("%s: %s", fl.Check, fl.Figure)
}
