package main

import (
	"encoding/csv"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"testing"

	"github.com/ocsemu/ocsemu/workers"
	"github.com/ocsemu/ocsemu/workers/record"
)

func readCSV(t *testing.T, path string) [][]string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	rows, err := csv.NewReader(f).ReadAll()
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return rows
}

func parseF(t *testing.T, s string) float64 {
	t.Helper()
	x, err := strconv.ParseFloat(s, 64)
	if err != nil {
		t.Fatalf("%q does not parse: %v", s, err)
	}
	return x
}

func TestWriteCSVs(t *testing.T) {
	cmp := []record.Comparison{
		{Job: "ring", Iteration: 0, Phase: "allreduce", PredictedNs: 201326592, MeasuredNs: 230000000, PredEndNs: 231326592, MeasEndNs: 262500000, RelErr: 0.14242},
		{Job: `odd,"name"`, Iteration: 3, Phase: "pull", PredictedNs: 1000000, MeasuredNs: 900000, PredEndNs: 5000000, MeasEndNs: 4900000, RelErr: -0.1},
	}
	stats := []workers.PhaseStat{
		{Job: "ring", Iteration: 0, Phase: "allreduce", Ranks: 4, DurationNs: 230000000, Bytes: 100663296, AlgBwBps: 3.5e9, BusBwBps: 5.25e9, Verified: true},
		{Job: "ps", Iteration: 1, Phase: "push", Ranks: 3, DurationNs: 12345678, Bytes: 4096},
		{Job: "ps", Iteration: 1, Phase: "pull", Ranks: 3, DurationNs: 1, Bytes: 8},
	}
	dir := t.TempDir()
	if err := writeCSVs(dir, cmp, stats); err != nil {
		t.Fatal(err)
	}
	c := readCSV(t, filepath.Join(dir, "comparison.csv"))
	if !slices.Equal(c[0], comparisonHeader) || len(c) != 1+len(cmp) {
		t.Fatalf("comparison.csv: header %v, %d rows, want %d", c[0], len(c), 1+len(cmp))
	}
	for i, want := range cmp {
		r := c[i+1]
		if r[0] != want.Job || r[1] != strconv.Itoa(want.Iteration) || r[2] != want.Phase {
			t.Errorf("row %d = %v", i, r)
		}
		for j, ns := range map[int]int64{3: want.PredictedNs, 4: want.MeasuredNs, 6: want.PredEndNs, 7: want.MeasEndNs} {
			if got := parseF(t, r[j]); got != float64(ns)/1e6 {
				t.Errorf("row %d %s = %v, want %v", i, comparisonHeader[j], got, float64(ns)/1e6)
			}
		}
		if got := parseF(t, r[5]); got != want.RelErr {
			t.Errorf("row %d rel_err = %v, want %v", i, got, want.RelErr)
		}
	}
	p := readCSV(t, filepath.Join(dir, "phases.csv"))
	if !slices.Equal(p[0], phasesHeader) || len(p) != 1+len(stats) {
		t.Fatalf("phases.csv: header %v, %d rows", p[0], len(p))
	}
	r := p[1]
	if r[0] != "ring" || r[3] != "4" || r[4] != "100663296" || parseF(t, r[5]) != 230 || parseF(t, r[6]) != 3.5 || parseF(t, r[7]) != 5.25 || r[8] != "true" {
		t.Errorf("phases row = %v", r)
	}
	if r := p[2]; r[2] != "push" || parseF(t, r[5]) != 12.345678 || parseF(t, r[6]) != 0 || r[8] != "false" {
		t.Errorf("phases row = %v", r)
	}
	if got := parseF(t, p[3][5]); got != 1e-6 {
		t.Errorf("1 ns = %v ms", got)
	}
}
