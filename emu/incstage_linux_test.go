package main

import (
	"bufio"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ocsemu/ocsemu/dataplane/fabric/fabrictest"
	"github.com/ocsemu/ocsemu/dataplane/names"
	"github.com/ocsemu/ocsemu/dataplane/netns"
	"github.com/ocsemu/ocsemu/scenarios"
	"github.com/ocsemu/ocsemu/workers"
)

// `emu run` of docs/example-inc.json, whose job aggregates in the ToRs in
// iteration 0 and at its CPU parameter server in iteration 1 (INC decided
// per stage, paper 000): the workers push through the ToR aggregators in
// iteration 0 only, the parameter server serves iteration 1 only, every
// sum checks, and nothing is left behind.
func TestCLIRunINCPerStage(t *testing.T) {
	fabrictest.SkipUnlessRoot(t)
	bin := buildEmu(t)
	data, err := scenarios.Files.ReadFile("plan-demo.yaml")
	if err != nil {
		t.Fatal(err)
	}
	planData, err := os.ReadFile("../docs/example-inc.json")
	if err != nil {
		t.Fatal(err)
	}
	lab := fabrictest.UniqueLab("incst")
	dir := t.TempDir()
	scen := filepath.Join(dir, lab+".yaml")
	body := strings.Replace(string(data), "\nname: plan-demo\n", "\nname: "+lab+"\n", 1)
	if body == string(data) {
		t.Fatal("scenario name not found to replace")
	}
	if err := os.WriteFile(scen, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	planFile := filepath.Join(dir, "inc.json")
	if err := os.WriteFile(planFile, []byte(strings.Replace(string(planData), `"scenario": "plan-demo"`, `"scenario": "`+lab+`"`, 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if left, _ := netns.List(names.LabPrefix(lab)); len(left) > 0 {
			run(t, bin, "destroy", lab)
			t.Errorf("namespaces left behind: %v", left)
		}
	})
	out, err := run(t, bin, "run", scen, "--plan", planFile, "--results", filepath.Join(dir, "results"))
	if err != nil {
		t.Fatalf("emu run: %v\n%s", err, out)
	}
	if !strings.Contains(out, "job vgg: in-network aggregation at [tor0 tor1 tor2]") {
		t.Errorf("the job was not admitted at the aggregators:\n%s", out)
	}
	res := filepath.Join(dir, "results", lab, "latest", "records")
	read := func(name string) []workers.PhaseRecord {
		f, err := os.Open(filepath.Join(res, name))
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		var recs []workers.PhaseRecord
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			var r workers.PhaseRecord
			if json.Unmarshal(sc.Bytes(), &r) == nil && r.Type == "phase" {
				recs = append(recs, r)
			}
		}
		return recs
	}
	for _, r := range read("vgg-ps.jsonl") {
		if r.Iteration != 1 {
			t.Errorf("the parameter server served iteration %d %s, which aggregates in the ToRs", r.Iteration, r.Phase)
		}
	}
	for rank := range 3 {
		for _, r := range read("vgg-rank" + string(rune('0'+rank)) + ".jsonl") {
			switch {
			case r.Phase == "pull" && !r.Verified:
				t.Errorf("rank %d iteration %d: the pulled sum is not verified", rank, r.Iteration)
			case r.Phase == "push" && r.Iteration == 0 && r.Bytes <= 16<<20:
				// INC packets carry headers: more than the gradient.
				t.Errorf("rank %d iteration 0 pushed %d B, not through the aggregators (> 16 MiB with headers)", rank, r.Bytes)
			case r.Phase == "push" && r.Iteration == 1 && r.Bytes != 16<<20:
				t.Errorf("rank %d iteration 1 pushed %d B over TCP to the parameter server, want 16 MiB", rank, r.Bytes)
			}
		}
	}
}
