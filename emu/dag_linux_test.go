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

// dagPlan is a task graph of two iterations on paper003's fabric (one
// optical port per rack, so the circuit moves between the two transfers):
// r0s0 computes and sends to r1s0 at once and to r2s0 once the circuit
// has moved and r2s0 has prepared (a dependency on another rank, which
// the coordinator relays); r1s0 computes on what it received.
const dagPlan = `{"plan_version": 2, "scenario": "LAB", "scheduler": "hand-written", "mode": "clock",
 "jobs": [{"name": "tiny", "pattern": "dag", "workers": ["r0s0", "r1s0", "r2s0"], "iterations": 2, "tasks": [
  {"name": "fwd", "kind": "compute", "server": "r0s0", "compute_ns": 1000000},
  {"name": "prep", "kind": "compute", "server": "r2s0", "compute_ns": 4000000},
  {"name": "send-a", "kind": "transfer", "src": "r0s0", "dst": "r1s0", "bytes": 1250003, "after": ["fwd"]},
  {"name": "send-b", "kind": "transfer", "src": "r0s0", "dst": "r2s0", "bytes": 625000, "after": ["fwd", "prep"]},
  {"name": "bwd", "kind": "compute", "server": "r1s0", "compute_ns": 2000000, "after": ["send-a"]}]}],
 "stages": [
  {"start_ns": 0, "duration_ns": 15000000, "circuits": [{"a": "tor0:0", "b": "tor1:0"}],
   "activities": [{"job": "tiny", "iteration": 0, "phase": "fwd"}, {"job": "tiny", "iteration": 0, "phase": "prep"},
    {"job": "tiny", "iteration": 0, "phase": "send-a", "start_ns": 1000000}, {"job": "tiny", "iteration": 0, "phase": "bwd"}]},
  {"start_ns": 15000000, "duration_ns": 25000000, "circuits": [{"a": "tor0:0", "b": "tor2:0"}],
   "activities": [{"job": "tiny", "iteration": 0, "phase": "send-b", "start_ns": 15000000}]},
  {"start_ns": 40000000, "duration_ns": 15000000, "circuits": [{"a": "tor0:0", "b": "tor1:0"}],
   "activities": [{"job": "tiny", "iteration": 1, "phase": "fwd"}, {"job": "tiny", "iteration": 1, "phase": "prep"},
    {"job": "tiny", "iteration": 1, "phase": "send-a", "start_ns": 41000000}, {"job": "tiny", "iteration": 1, "phase": "bwd"}]},
  {"start_ns": 55000000, "duration_ns": 25000000, "circuits": [{"a": "tor0:0", "b": "tor2:0"}],
   "activities": [{"job": "tiny", "iteration": 1, "phase": "send-b", "start_ns": 55000000}]}]}`

// `emu run --plan` of a task-graph plan on namespaces: every task runs in
// its iteration on the ranks it names, no task starts before the tasks it
// waits for have ended or before its start_ns, every transfer moves
// exactly its bytes (checked by the receiver), the comparison has a row
// per task, and nothing is left behind.
func TestCLIRunTaskGraph(t *testing.T) {
	fabrictest.SkipUnlessRoot(t)
	bin := buildEmu(t)
	lab := fabrictest.UniqueLab("dag")
	scen := scenarioAs(t, "paper003.yaml", lab)
	dir := t.TempDir()
	planFile := filepath.Join(dir, "dag.json")
	if err := os.WriteFile(planFile, []byte(strings.Replace(dagPlan, "LAB", lab, 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	leaveNothing(t, bin, lab)
	out, err := run(t, bin, "run", scen, "--plan", planFile, "--results", filepath.Join(dir, "results"))
	if err != nil {
		t.Fatalf("emu run: %v\n%s", err, out)
	}
	res := filepath.Join(dir, "results", lab, "latest")
	csv, err := os.ReadFile(filepath.Join(res, "comparison.csv"))
	if err != nil {
		t.Fatal(err)
	}
	for _, it := range []string{"0", "1"} {
		for _, task := range []string{"fwd", "prep", "send-a", "send-b", "bwd"} {
			if row := "tiny," + it + "," + task + ","; !strings.Contains(string(csv), row) {
				t.Errorf("comparison.csv lacks %s:\n%s", row, csv)
			}
		}
	}
	// The records of the three ranks.
	type key struct {
		it   int
		task string
	}
	start, end, gate := map[key]int64{}, map[key]int64{}, map[key]int64{}
	count := map[key]int{}
	var t0 int64
	for r := range 3 {
		f, err := os.Open(filepath.Join(res, "records", "tiny-rank"+string(rune('0'+r))+".jsonl"))
		if err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			var rec workers.PhaseRecord
			if err := json.Unmarshal(sc.Bytes(), &rec); err != nil || rec.Type != "phase" {
				continue
			}
			k := key{rec.Iteration, rec.Phase}
			count[k]++
			bytes := map[string]int64{"send-a": 1250003, "send-b": 625000}[rec.Phase]
			switch {
			case bytes == 0: // compute
				start[k], end[k], gate[k] = rec.StartNs, rec.EndNs, rec.GateNs
			case rec.RecvBytes > 0: // receiver
				end[k] = rec.EndNs
				if rec.RecvBytes != bytes || !rec.Verified {
					t.Errorf("%v: received %d B (verified %v), want %d", k, rec.RecvBytes, rec.Verified, bytes)
				}
			default: // sender
				start[k], gate[k] = rec.StartNs, rec.GateNs
				if rec.Bytes != bytes {
					t.Errorf("%v: sent %d B, want %d", k, rec.Bytes, bytes)
				}
			}
			if k == (key{0, "fwd"}) {
				// fwd of iteration 0 can start at time zero: its gate. Its
				// start is later when the rank wakes late, which must not
				// move the reference the start_ns checks use.
				t0 = rec.GateNs
			}
		}
		f.Close()
	}
	if t0 == 0 {
		t.Fatal("no gate recorded for iteration 0's fwd: the start_ns checks would have no time zero")
	}
	after := map[string][]string{"send-a": {"fwd"}, "send-b": {"fwd", "prep"}, "bwd": {"send-a"}}
	notBefore := map[key]int64{{0, "send-a"}: 1e6, {0, "send-b"}: 15e6, {1, "send-a"}: 41e6, {1, "send-b"}: 55e6}
	for it := range 2 {
		for _, task := range []string{"fwd", "prep", "send-a", "send-b", "bwd"} {
			k := key{it, task}
			want := 1
			if strings.HasPrefix(task, "send") {
				want = 2
			}
			if count[k] != want {
				t.Errorf("%v: %d records, want %d", k, count[k], want)
			}
			deps := after[task]
			depIt := it
			if len(deps) == 0 && it == 1 {
				deps, depIt = []string{"send-b", "bwd"}, 0 // the sinks of iteration 0
			}
			for _, d := range deps {
				if start[k] < end[key{depIt, d}] {
					t.Errorf("%v started %d ns before %s of iteration %d ended", k, end[key{depIt, d}]-start[k], d, depIt)
				}
			}
			if nb, ok := notBefore[k]; ok && start[k]-t0 < nb-100_000 {
				t.Errorf("%v started at %.3f ms, before its start_ns %.3f ms", k, float64(start[k]-t0)/1e6, float64(nb)/1e6)
			}
		}
	}
}

// `emu run` of the scaled paper 004 scenario (one iteration of the DLRM
// task graph, 656 tasks) completes with topox and with static, and the
// comparison has a row per task.
func TestCLIRunPaper004(t *testing.T) {
	fabrictest.SkipUnlessRoot(t)
	bin := buildEmu(t)
	for _, sched := range []string{"topox", "static"} {
		t.Run(sched, func(t *testing.T) {
			lab := fabrictest.UniqueLab("p004")
			scen := scenarioAs(t, "paper004.yaml", lab, "iterations: 2", "iterations: 1")
			dir := t.TempDir()
			leaveNothing(t, bin, lab)
			// The lab check's TCP transfer crosses the 1 Mbit/s control network: keep it short.
			out, err := run(t, bin, "run", scen, "--scheduler", sched, "--duration", "300ms", "--results", filepath.Join(dir, "results"))
			if err != nil {
				t.Fatalf("emu run: %v\n%s", err, out)
			}
			if !strings.Contains(out, "plan by "+sched) || !strings.Contains(out, "dlrm     0  iteration") {
				t.Errorf("output lacks the plan or the iteration row:\n%s", out)
			}
			csv, err := os.ReadFile(filepath.Join(dir, "results", lab, "latest", "comparison.csv"))
			if err != nil {
				t.Fatal(err)
			}
			if rows := strings.Count(string(csv), "\ndlrm,0,"); rows != 656 {
				t.Errorf("comparison.csv has %d rows of iteration 0, want one per task (656)", rows)
			}
		})
	}
}
