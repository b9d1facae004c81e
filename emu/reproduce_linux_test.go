package main

import (
	"encoding/csv"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ocsemu/ocsemu/dataplane/fabric/fabrictest"
	"github.com/ocsemu/ocsemu/dataplane/names"
	"github.com/ocsemu/ocsemu/dataplane/netns"
)

// The scaled paper scenarios run on namespaces, each design in turn
// (--scheduler), and write their measured-vs-predicted comparison: every
// phase of every job measured and predicted, and no namespace left.
func TestCLIRunPaperScenarios(t *testing.T) {
	fabrictest.SkipUnlessRoot(t)
	bin := buildEmu(t)
	for _, tc := range []struct {
		file   string
		scheds []string
		phases int // rows of comparison.csv: every phase of every job
	}{
		{"paper000.yaml", []string{"ljf", "fcfs"}, 6 * 2 * 3},
		{"paper002.yaml", []string{"tdm", "notdm"}, 2 * 4 * 2},
		{"paper004.yaml", []string{"topox", "static"}, 656 * 2}, // its servers' ports queue fairly (dataplane/fairq)
	} {
		for _, sched := range tc.scheds {
			t.Run(tc.file+"/"+sched, func(t *testing.T) {
				lab := fabrictest.UniqueLab("schp")
				scen := scenarioAs(t, tc.file, lab)
				results := filepath.Join(t.TempDir(), "results")
				t.Cleanup(func() { run(t, bin, "destroy", lab) })
				out, err := run(t, bin, "run", scen, "--scheduler", sched, "--results", results)
				if err != nil {
					t.Fatalf("emu run: %v\n%s", err, out)
				}
				if !strings.Contains(out, "plan by "+sched) || !strings.Contains(out, "makespan: predicted") {
					t.Errorf("output lacks the plan or the makespan line:\n%s", out)
				}
				f, err := os.Open(filepath.Join(results, lab, "latest", "comparison.csv"))
				if err != nil {
					t.Fatal(err)
				}
				defer f.Close()
				rows, err := csv.NewReader(f).ReadAll()
				if err != nil {
					t.Fatal(err)
				}
				if len(rows)-1 != tc.phases {
					t.Errorf("comparison.csv has %d phases, want %d", len(rows)-1, tc.phases)
				}
				if left, _ := netns.List(names.LabPrefix(lab)); len(left) > 0 {
					t.Errorf("%d namespaces left behind", len(left))
				}
			})
		}
	}
}

// emu reproduce refuses unknown studies, --write of part of the studies
// and a --write target that is not markdown, before running anything; a
// quick study prints its table and timings.
func TestCLIReproduce(t *testing.T) {
	bin := buildEmu(t)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"reproduce", "nosuch"}, `unknown study "nosuch"`},
		{[]string{"reproduce", "paper000", "--write", filepath.Join(t.TempDir(), "none.md")}, "regenerating some studies keeps the others"},
		{[]string{"reproduce", "--write", filepath.Join(t.TempDir(), "x.txt")}, "want a .md file"},
		{[]string{"reproduce", "--seeds", "1000"}, "--seeds"},
	} {
		out, err := run(t, bin, tc.args...)
		if err == nil || !strings.Contains(out, tc.want) {
			t.Errorf("emu %v: err %v, want %q in:\n%s", tc.args, err, tc.want, out)
		}
	}
	out, err := run(t, bin, "reproduce", "paper001", "--quick")
	if err != nil {
		t.Fatalf("emu reproduce paper001 --quick: %v\n%s", err, out)
	}
	for _, want := range []string{"## Paper 001/002", "| comm/compute | duplex |", "study paper001: done in"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}
