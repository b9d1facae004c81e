package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ocsemu/ocsemu/emu/orchestrate"
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
