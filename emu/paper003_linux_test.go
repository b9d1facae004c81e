package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ocsemu/ocsemu/dataplane/fabric/fabrictest"
)

// `emu run` of the scaled paper 003 scenario completes on namespaces:
// oddl's per-step plan runs halving-doubling one step per barrier stage
// while the OCS switches between the {0-1, 2-3} and {0-2, 1-3} matchings,
// and the run writes its measured-against-predicted comparison with a row
// per step.
func TestCLIRunPaper003(t *testing.T) {
	fabrictest.SkipUnlessRoot(t)
	bin := buildEmu(t)
	lab := fabrictest.UniqueLab("p003")
	scen := scenarioAs(t, "paper003.yaml", lab, "iterations: 5", "iterations: 2")
	dir := t.TempDir()
	leaveNothing(t, bin, lab)
	out, err := run(t, bin, "run", scen, "--results", filepath.Join(dir, "results"))
	if err != nil {
		t.Fatalf("emu run paper003: %v\n%s", err, out)
	}
	for _, want := range []string{"plan by oddl", "4 reconfigurations", "allreduce.3", "makespan: predicted"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	csv, err := os.ReadFile(filepath.Join(dir, "results", lab, "latest", "comparison.csv"))
	if err != nil {
		t.Fatal(err)
	}
	for it := range 2 {
		for _, ph := range []string{"compute", "allreduce.0", "allreduce.1", "allreduce.2", "allreduce.3"} {
			if row := "resnet50," + string(rune('0'+it)) + "," + ph + ","; !strings.Contains(string(csv), row) {
				t.Errorf("comparison.csv lacks %s:\n%s", row, csv)
			}
		}
	}
}
