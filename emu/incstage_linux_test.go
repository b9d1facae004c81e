package main

import (
	"bufio"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ocsemu/ocsemu/dataplane/fabric/fabrictest"
	"github.com/ocsemu/ocsemu/workers"
)

// `emu run` of docs/example-inc.json, whose job aggregates in the ToRs in
// iteration 0 and at its CPU parameter server in iteration 1 (INC decided
// per stage, paper 000): the workers push through the ToR aggregators in
// iteration 0 only (its pull moves nothing), the parameter server serves
// iteration 1's push and pull and nothing else, every sum checks, and
// nothing is left behind.
func TestCLIRunINCPerStage(t *testing.T) {
	fabrictest.SkipUnlessRoot(t)
	bin := buildEmu(t)
	planData, err := os.ReadFile("../docs/example-inc.json")
	if err != nil {
		t.Fatal(err)
	}
	lab := fabrictest.UniqueLab("incst")
	scen := scenarioAs(t, "plan-demo.yaml", lab)
	dir := t.TempDir()
	planFile := filepath.Join(dir, "inc.json")
	if err := os.WriteFile(planFile, []byte(strings.Replace(string(planData), `"scenario": "plan-demo"`, `"scenario": "`+lab+`"`, 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	leaveNothing(t, bin, lab)
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
	const S = 16 << 20 // bytes per worker per iteration
	type phase struct {
		it    int
		phase string
	}
	// byPhase indexes one records file, refusing a phase recorded twice.
	byPhase := func(name string, recs []workers.PhaseRecord) map[phase]workers.PhaseRecord {
		m := map[phase]workers.PhaseRecord{}
		for _, r := range recs {
			k := phase{r.Iteration, r.Phase}
			if _, dup := m[k]; dup {
				t.Errorf("%s: iteration %d %s recorded twice", name, r.Iteration, r.Phase)
			}
			m[k] = r
		}
		return m
	}
	// The parameter server serves iteration 1 (3 pushes summed and
	// checked, the sum sent back to 3 workers) and nothing else.
	ps := byPhase("vgg-ps.jsonl", read("vgg-ps.jsonl"))
	for k := range ps {
		if k.it != 1 {
			t.Errorf("the parameter server served iteration %d %s, which aggregates in the ToRs", k.it, k.phase)
		}
	}
	if r, ok := ps[phase{1, "push"}]; !ok || !r.Verified || r.LastRecvNs == 0 {
		t.Errorf("the parameter server's iteration 1 push: %+v (recorded %v), want the pushes received and the sum verified", r, ok)
	}
	if r, ok := ps[phase{1, "pull"}]; !ok || r.Bytes != 3*S {
		t.Errorf("the parameter server's iteration 1 pull: %+v (recorded %v), want %d B served", r, ok, 3*S)
	}
	for rank := range 3 {
		name := "vgg-rank" + string(rune('0'+rank)) + ".jsonl"
		recs := byPhase(name, read(name))
		for it := range 2 {
			inc := it == 0 // example-inc.json: iteration 0 in the ToRs, 1 at the PS
			push, ok := recs[phase{it, "push"}]
			switch {
			case !ok:
				t.Errorf("rank %d iteration %d: no push recorded", rank, it)
			case inc && (!strings.HasPrefix(push.Note, "inc:") || push.Bytes <= S):
				// INC packets carry headers: more than the gradient.
				t.Errorf("rank %d iteration 0 push (%d B, note %q) did not go through the aggregators (> 16 MiB with headers)", rank, push.Bytes, push.Note)
			case !inc && (push.Note != "" || push.Bytes != S):
				t.Errorf("rank %d iteration 1 push (%d B, note %q): want 16 MiB over TCP to the parameter server", rank, push.Bytes, push.Note)
			}
			pull, ok := recs[phase{it, "pull"}]
			switch {
			case !ok:
				t.Errorf("rank %d iteration %d: no pull recorded", rank, it)
			case !pull.Verified:
				t.Errorf("rank %d iteration %d: the pulled sum is not verified", rank, it)
			case inc && (pull.Bytes != 0 || pull.LastRecvNs != 0):
				// The INC push was the whole all-reduce: the pull moves nothing.
				t.Errorf("rank %d iteration 0 pull sent %d B, last received at %d: want nothing moved", rank, pull.Bytes, pull.LastRecvNs)
			case !inc && pull.LastRecvNs == 0:
				t.Errorf("rank %d iteration 1 pull received nothing from the parameter server", rank)
			}
		}
	}
}
