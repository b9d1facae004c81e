package main

import (
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ocsemu/ocsemu/emu/orchestrate"
	"github.com/ocsemu/ocsemu/emu/scheduler"
	"github.com/ocsemu/ocsemu/workers/record"
)

// TestWriteResultsFailsLoudly: result files that cannot be written fail
// the run, and the error names each file and why (they were dropped
// silently before).
func TestWriteResultsFailsLoudly(t *testing.T) {
	res := &orchestrate.Result{Prediction: &record.Run{Source: "flow-model"}, Measurement: &record.Run{Source: "emulation"}}
	dir := t.TempDir()
	if err := writeResults(dir, res); err != nil {
		t.Fatalf("writable directory: %v", err)
	}
	for _, f := range []string{"prediction.json", "measurement.json", "comparison.json"} {
		if fi, err := os.Stat(filepath.Join(dir, f)); err != nil || fi.Size() == 0 {
			t.Errorf("%s not written: %v", f, err)
		}
	}

	dir = t.TempDir()
	// A symbolic link (to a full disk: refused, not written through) and
	// a path that is a directory.
	if err := os.Symlink("/dev/full", filepath.Join(dir, "measurement.json")); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(dir, "comparison.json"), 0o755); err != nil {
		t.Fatal(err)
	}
	err := writeResults(dir, res)
	if err == nil {
		t.Fatal("results written to a full disk and to a directory without an error")
	}
	for _, want := range []string{
		filepath.Join(dir, "measurement.json") + " is a symbolic link",
		filepath.Join(dir, "comparison.json") + " is not a regular file (a directory)",
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
	if strings.Contains(err.Error(), "prediction.json") {
		t.Errorf("prediction.json was writable: %v", err)
	}
}

func TestVerifyNote(t *testing.T) {
	cmp := func(pred, meas int64) []orchestrate.Comparison {
		return []orchestrate.Comparison{{Job: "rec", Phase: "compute", PredictedNs: pred, MeasuredNs: meas}, {Job: "rec", Phase: "push", PredictedNs: 40e6, MeasuredNs: 60e6}}
	}
	run := func(verify int64) *record.Run {
		return &record.Run{Phases: []record.Phase{{Job: "rec", Phase: "pull", Measured: record.Measured{VerifyNs: verify}}}}
	}
	for _, tt := range []struct {
		name string
		cmp  []orchestrate.Comparison
		m    *record.Run
		want string
	}{
		{"a check longer than the compute", cmp(5e6, 10.8e6), run(9.6e6), "compute phases ran up to 5.80 ms over the plan: each rank checks the results of the phase before while the next compute waits, and the checks took up to 9.60 ms"},
		{"compute on time", cmp(5e6, 5.3e6), run(9.6e6), ""},
		{"a late compute the checks do not explain", cmp(5e6, 30e6), run(2e6), ""},
		{"no checks", cmp(5e6, 10e6), run(0), ""},
		{"no measurement", cmp(5e6, 10e6), nil, ""},
		{"another job's check", cmp(5e6, 10.8e6), &record.Run{Phases: []record.Phase{{Job: "other", Phase: "pull", Measured: record.Measured{VerifyNs: 9.6e6}}}}, ""},
		{"the parameter server's own check", cmp(5e6, 10.8e6), &record.Run{Phases: []record.Phase{{Job: "rec", Phase: "push", Measured: record.Measured{VerifyNs: 9.6e6}}}}, ""},
	} {
		got := verifyNote(tt.cmp, tt.m)
		if tt.want == "" && got != "" || tt.want != "" && !strings.Contains(got, tt.want) {
			t.Errorf("%s: %q, want %q", tt.name, got, tt.want)
		}
	}
}

// TestPreparePlanUnderLabName: a plan made for a scenario runs under
// --lab-name, and is recorded for the lab's name; a plan for another
// scenario is still refused.
func TestPreparePlanUnderLabName(t *testing.T) {
	dir := t.TempDir()
	s, _, err := loadScenario("quickstart")
	if err != nil {
		t.Fatal(err)
	}
	p, err := scheduler.Plan(s)
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(dir, "qs.plan.json")
	if err := p.Write(file); err != nil {
		t.Fatal(err)
	}
	if err := renameLab(s, "alice-qs"); err != nil {
		t.Fatal(err)
	}
	a := &app{log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	prepared, err := a.preparePlan(s, file, dir)
	if err != nil {
		t.Fatalf("a quickstart plan under --lab-name alice-qs: %v", err)
	}
	if got := prepared.plan.Scenario; got != "alice-qs" {
		t.Errorf("plan recorded for scenario %q, want the lab's name alice-qs", got)
	}
	other, _, err := loadScenario("plan-demo")
	if err != nil {
		t.Fatal(err)
	}
	if err := renameLab(other, "alice-pd"); err != nil {
		t.Fatal(err)
	}
	if _, err := a.preparePlan(other, file, dir); err == nil || !strings.Contains(err.Error(), `plan is for scenario "quickstart", not "alice-pd"`) {
		t.Errorf("a quickstart plan on plan-demo under another name: want a refusal, got %v", err)
	}
}
