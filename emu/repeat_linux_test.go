package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ocsemu/ocsemu/dataplane/fabric/fabrictest"
	"github.com/ocsemu/ocsemu/emu/report"
	"github.com/ocsemu/ocsemu/workers/record"
)

// TestCLIRunRepeatFlags: bad --repeat uses are refused before anything
// is deployed (no root needed).
func TestCLIRunRepeatFlags(t *testing.T) {
	bin := buildEmu(t)
	res := t.TempDir()
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--repeat", "0", "--results", res}, "want 1 to 50 runs"},
		{[]string{"--repeat", "51", "--results", res}, "want 1 to 50 runs"},
		{[]string{"--repeat", "2", "--results", ""}, "--repeat needs --results"},
		{[]string{"--repeat", "2", "--keep", "--results", res}, "do not go together"},
		{[]string{"../scenarios/example-ocs.yaml", "--repeat", "2", "--results", res}, "has no jobs"},
		{[]string{"--tcpinfo-every", "0", "--results", res}, "want 1ms to 1s"},
		{[]string{"--tcpinfo-every", "2s", "--results", res}, "want 1ms to 1s"},
		{[]string{"--duration", "0s", "--results", res}, "want 100ms to 1m0s"},
	} {
		out, err := run(t, bin, append([]string{"run"}, tc.args...)...)
		if err == nil || !strings.Contains(out, tc.want) {
			t.Errorf("emu run %v: want an error with %q, got %v:\n%s", tc.args, tc.want, err, out)
		}
	}
	if left, _ := os.ReadDir(res); len(left) > 0 {
		t.Errorf("refused runs left %d entries in the results root", len(left))
	}
}

// TestCLIRunRepeat runs the quickstart twice with --repeat and checks the
// set's summary against the two runs' own comparisons.
func TestCLIRunRepeat(t *testing.T) {
	fabrictest.SkipUnlessRoot(t)
	bin := buildEmu(t)
	lab := fabrictest.UniqueLab("rep")
	scen := scenarioAs(t, "quickstart.yaml", lab)
	leaveNothing(t, bin, lab)
	root := t.TempDir()
	out, err := run(t, bin, "run", scen, "--repeat", "2", "--results", root, "--tcpinfo-every", "20ms")
	if err != nil {
		t.Fatalf("emu run --repeat 2: %v\n%s", err, out)
	}
	for _, want := range []string{"run 1 of 2", "run 2 of 2", "2 runs of one plan", "against the medians", "run-to-run spread", "TCP-aware |error| median"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	// A line per run, not each run's tables: those are in its directory.
	if strings.Contains(out, "== jobs, measured") || strings.Count(out, "makespan ") < 2 {
		t.Errorf("want a line per run and no run's tables:\n%s", out)
	}
	sets, _ := filepath.Glob(filepath.Join(root, lab, "repeat-*"))
	if len(sets) != 1 {
		t.Fatalf("want one set directory, got %v", sets)
	}
	var tab report.RepeatTable
	data, err := os.ReadFile(filepath.Join(sets[0], report.RepeatFile))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, &tab); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"repeat.txt", report.RepeatCSV, report.RepeatPage} {
		if _, err := os.Stat(filepath.Join(sets[0], f)); err != nil {
			t.Error(err)
		}
	}
	if len(tab.Runs) != 2 || tab.Lab != lab {
		t.Fatalf("set %+v", tab.Runs)
	}
	latest, err := os.Readlink(filepath.Join(root, lab, "latest"))
	if err != nil || latest != tab.Runs[1].Name {
		t.Errorf("latest -> %q (%v), want the second run %s", latest, err, tab.Runs[1].Name)
	}
	// Each phase's median of two runs is their mean, its range theirs.
	meas := map[string][]int64{}
	for _, r := range tab.Runs {
		checkTCPInfoEvery20ms(t, filepath.Join(root, lab, r.Name))
		var cmp struct {
			Compare []record.Comparison `json:"comparison"`
		}
		data, err := os.ReadFile(filepath.Join(root, lab, r.Name, "comparison.json"))
		if err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(data, &cmp); err != nil {
			t.Fatal(err)
		}
		for _, c := range cmp.Compare {
			k := c.Job + "/" + c.Phase + "/" + string(rune('0'+c.Iteration))
			meas[k] = append(meas[k], c.MeasuredNs)
		}
	}
	if len(tab.Rows) != len(meas) || len(tab.Rows) == 0 {
		t.Fatalf("%d rows for %d phases", len(tab.Rows), len(meas))
	}
	for _, row := range tab.Rows {
		m := meas[row.Job+"/"+row.Phase+"/"+string(rune('0'+row.Iteration))]
		if len(m) != 2 || row.MedianNs != (m[0]+m[1])/2 || row.MinNs != min(m[0], m[1]) || row.MaxNs != max(m[0], m[1]) {
			t.Errorf("%s %d %s: median %d [%d, %d], runs measured %v", row.Job, row.Iteration, row.Phase, row.MedianNs, row.MinNs, row.MaxNs, m)
		}
	}
	if len(tab.Fits) != 3 || tab.Fits[2].Model != "tcp-aware" || tab.Fits[2].Phases == 0 {
		t.Errorf("fits %+v", tab.Fits)
	}
	// Predicted again from its data file with the same model, each run's
	// TCP-aware comparisons and attribution are the recorded ones, to the
	// nanosecond (TestRepredictPlanDemo covers per-flow marks and INC).
	var dirs []string
	for _, r := range tab.Runs {
		dir := filepath.Join(root, lab, r.Name)
		dirs = append(dirs, dir)
		rec, err := report.Load(dir)
		if err != nil {
			t.Fatal(err)
		}
		want, _ := json.Marshal([]any{rec.Data.ComparisonTCPAware, rec.Data.ComparisonReplay, rec.Data.Attribution})
		if err := repredict(rec); err != nil {
			t.Fatal(err)
		}
		if got, _ := json.Marshal([]any{rec.Data.ComparisonTCPAware, rec.Data.ComparisonReplay, rec.Data.Attribution}); string(got) != string(want) {
			t.Errorf("%s predicted again:\n%s\nrecorded:\n%s", r.Name, got, want)
		}
	}
	out, err = run(t, bin, append([]string{"compare", "--repeat", "--repredict", "-o", filepath.Join(t.TempDir(), "set.html")}, dirs...)...)
	if err != nil || !strings.Contains(out, "predicted again by emu") || !strings.Contains(out, "2 runs of one plan") {
		t.Errorf("emu compare --repeat --repredict: %v\n%s", err, out)
	}
}

// TestCLICompareRepeat summarises recorded runs: the same run twice is a
// set of one plan (its page written where -o says, linking the runs'
// reports from there); runs of two plans are refused.
func TestCLICompareRepeat(t *testing.T) {
	bin := buildEmu(t)
	qs, pd := filepath.Join("report", "testdata", "quickstart"), filepath.Join("report", "testdata", "plan-demo")
	page := filepath.Join(t.TempDir(), "set.html")
	out, err := run(t, bin, "compare", "--repeat", qs, qs, "-o", page)
	if err != nil || !strings.Contains(out, "2 runs of one plan") || !strings.Contains(out, "page: "+page) {
		t.Fatalf("emu compare --repeat: %v\n%s", err, out)
	}
	html, err := os.ReadFile(page)
	if err != nil {
		t.Fatal(err)
	}
	abs, _ := filepath.Abs(qs)
	rel, _ := filepath.Rel(filepath.Dir(page), abs)
	if want := `href="` + filepath.ToSlash(filepath.Join(rel, "report.html")) + `"`; !strings.Contains(string(html), want) {
		t.Errorf("the page lacks the link %s", want)
	}
	if out, err := run(t, bin, "compare", "--repeat", qs, pd, "-o", page); err == nil || !strings.Contains(out, "not runs of one plan") && !strings.Contains(out, "ran different plans") {
		t.Errorf("runs of two plans: %v\n%s", err, out)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--repredict", qs, qs}, "--repredict needs --repeat"},
		{[]string{"--repeat", "--repredict", qs, qs}, "no run-data.json.gz"},
	} {
		if out, err := run(t, bin, append(append([]string{"compare"}, tc.args...), "-o", page)...); err == nil || !strings.Contains(out, tc.want) {
			t.Errorf("emu compare %v: want an error with %q, got %v:\n%s", tc.args, tc.want, err, out)
		}
	}
}

// checkTCPInfoEvery20ms: every rank of the run sampled TCP_INFO every
// 20 ms, as --tcpinfo-every asked.
func checkTCPInfoEvery20ms(t *testing.T, dir string) {
	t.Helper()
	specs, _ := filepath.Glob(filepath.Join(dir, "records", "*.spec.json"))
	if len(specs) == 0 {
		t.Fatalf("%s: no rank specs", dir)
	}
	for _, f := range specs {
		var spec struct {
			Every int64 `json:"tcpinfo_every"`
		}
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(data, &spec); err != nil {
			t.Fatal(err)
		}
		if spec.Every != 20e6 {
			t.Errorf("%s: tcpinfo_every %d ns, want 20 ms", f, spec.Every)
		}
	}
}
