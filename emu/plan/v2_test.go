package plan

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/ocsemu/ocsemu/emu/scenario"
	"github.com/ocsemu/ocsemu/ocsfabric/circuit"
)

// fourRacks is paper 003's prototype in miniature: 4 racks of one server,
// one uplink per ToR, one OCS.
func fourRacks(t testing.TB, duplex string) *scenario.Scenario {
	s, err := scenario.Parse([]byte(`name: t
fabric: {kind: ocs, racks: 4, servers_per_rack: 1, uplinks_per_tor: 1, ocs: {switches: 1, duplex: `+duplex+`}, inc: {capacity: 1}, rates: {server: 1Gbit, uplink: 1Gbit}}
`), "t")
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func ip(v int) *int { return &v }

// hdSteps is a v2 plan: one hd job of 4 workers whose all-reduce runs step
// by step, circuits {0-1, 2-3} for distance-1 steps and {0-2, 1-3} for
// distance-2 steps.
func hdSteps() *Plan {
	m1 := []circuit.Circuit{cc("tor0:0", "tor1:0"), cc("tor2:0", "tor3:0")}
	m2 := []circuit.Circuit{cc("tor0:0", "tor2:0"), cc("tor1:0", "tor3:0")}
	p := &Plan{Version: 2, Scenario: "t", Mode: ModeBarrier,
		Jobs:   []Job{{Name: "hd", Pattern: "hd", Workers: []string{"r0s0", "r1s0", "r2s0", "r3s0"}, Bytes: 4e6, ComputeNs: 1e6, Iterations: 1, Steps: true}},
		Stages: []Stage{{Circuits: m1, Activities: []Activity{{Job: "hd", Phase: "compute"}}}}}
	for k, m := range [][]circuit.Circuit{m1, m2, m2, m1} {
		p.Stages = append(p.Stages, Stage{Circuits: m, Activities: []Activity{{Job: "hd", Phase: "allreduce", Step: ip(k)}}})
	}
	return p
}

// dagPlan is a v2 plan with a task graph: r0s0 computes, then sends to
// r1s0 and r2s0 at once (two transfers, own start times), r1s0 computes
// on what it got.
func dagPlan() *Plan {
	t0, t1 := int64(2e6), int64(3e6)
	return &Plan{Version: 2, Scenario: "t", Mode: ModeClock,
		Jobs: []Job{{Name: "g", Pattern: PatternDAG, Workers: []string{"r0s0", "r1s0", "r2s0"}, Iterations: 2, Tasks: []Task{
			{Name: "fwd", Kind: TaskCompute, Server: "r0s0", ComputeNs: 1e6},
			{Name: "send-a", Kind: TaskTransfer, Src: "r0s0", Dst: "r1s0", Bytes: 1e6, After: []string{"fwd"}},
			{Name: "send-b", Kind: TaskTransfer, Src: "r0s0", Dst: "r2s0", Bytes: 1e6, After: []string{"fwd"}},
			{Name: "bwd", Kind: TaskCompute, Server: "r1s0", ComputeNs: 2e6, After: []string{"send-a"}},
		}}},
		Stages: []Stage{
			{StartNs: 0, DurationNs: 2e6, Circuits: []circuit.Circuit{cc("tor0:0", "tor1:0")}, Activities: []Activity{
				{Job: "g", Phase: "fwd"}}},
			{StartNs: 2e6, DurationNs: 1e6, Circuits: []circuit.Circuit{cc("tor0:0", "tor1:0")}, Activities: []Activity{
				{Job: "g", Phase: "send-a", StartNs: &t0}, {Job: "g", Phase: "bwd"}}},
			{StartNs: 3e6, DurationNs: 3e6, Circuits: []circuit.Circuit{cc("tor0:0", "tor2:0")}, Activities: []Activity{
				{Job: "g", Phase: "send-b", StartNs: &t1}}},
			{StartNs: 6e6, DurationNs: 5e6, Circuits: []circuit.Circuit{cc("tor0:0", "tor1:0")}, Activities: []Activity{
				{Job: "g", Iteration: 1, Phase: "fwd"}, {Job: "g", Iteration: 1, Phase: "send-a"}, {Job: "g", Iteration: 1, Phase: "bwd"}}},
			{StartNs: 11e6, DurationNs: 5e6, Circuits: []circuit.Circuit{cc("tor0:0", "tor2:0")}, Activities: []Activity{
				{Job: "g", Iteration: 1, Phase: "send-b"}}},
		}}
}

func TestCheckV2(t *testing.T) {
	tests := []struct {
		name   string
		plan   func() *Plan
		duplex string
		break_ func(p *Plan)
		want   string
	}{
		{"hd steps with a matching per step", hdSteps, "full", func(p *Plan) {}, ""},
		{"hd steps in one stage of circuits fail", hdSteps, "full", func(p *Plan) { p.Stages[2].Circuits = p.Stages[1].Circuits },
			"stage 2, activities[0] (job hd): allreduce.1 needs rack 0 -> rack 2, but the stage's circuits give no path"},
		{"steps need version 2", hdSteps, "full", func(p *Plan) { p.Version = 1 }, "jobs[0] (hd): steps: per-step activities need plan_version 2"},
		{"whole all-reduce of a per-step job", hdSteps, "full", func(p *Plan) {
			p.Stages[1].Activities[0].Step = nil
		}, "job hd runs its all-reduce step by step: give each step (0 to 3) its own activity with step"},
		{"step out of range", hdSteps, "full", func(p *Plan) { p.Stages[4].Activities[0].Step = ip(4) },
			"step: 4 is not a step of hd's all-reduce (the job has steps: true, 4 steps)"},
		{"step never scheduled", hdSteps, "full", func(p *Plan) { p.Stages = p.Stages[:4] }, "job hd: hd iteration 0 phase allreduce.3 is never scheduled"},
		{"steps out of order", hdSteps, "full", func(p *Plan) {
			p.Stages[1].Activities[0].Step, p.Stages[4].Activities[0].Step = ip(3), ip(0)
			p.Stages[1].Circuits, p.Stages[4].Circuits = p.Stages[4].Circuits, p.Stages[1].Circuits
		}, "hd iteration 0 phase allreduce.1 is in stage 2 but must come after hd iteration 0 phase allreduce.0 (stage 4)"},
		{"step on a job without steps", hdSteps, "full", func(p *Plan) { p.Jobs[0].Steps = false },
			"step: 0 is not a step of hd's all-reduce (the job has steps: false, 0 steps)"},
		{"strict half duplex: matching of simplex circuits", hdSteps, "half-strict", func(p *Plan) {
			p.Stages = p.Stages[:1]
			p.Stages[0].Circuits = []circuit.Circuit{{A: cc("tor0:0", "tor1:0").A, B: cc("tor0:0", "tor1:0").B, Simplex: true}}
			p.Jobs[0].Steps = false
			p.Stages[0].Activities = nil
			p.Jobs = nil
		}, ""},
		{"strict half duplex: a triangle of simplex circuits is refused", hdSteps, "half-strict", func(p *Plan) {
			tri := []circuit.Circuit{cc("tor0:0", "tor1:0"), cc("tor1:0", "tor2:0"), cc("tor2:0", "tor0:0")}
			for i := range tri {
				tri[i].Simplex = true
			}
			p.Stages[0].Circuits = tri
		}, "stage 0: circuits: circuit 1 (tor1:0->tor2:0): tor1:0 already is in circuit tor0:0->tor1:0; the fabric is strictly half duplex"},
		{"dag", dagPlan, "full", func(p *Plan) {}, ""},
		{"dag needs version 2", dagPlan, "full", func(p *Plan) { p.Version = 1 }, "task graphs (pattern dag, tasks) need plan_version 2"},
		{"dag task before its dependency", dagPlan, "full", func(p *Plan) {
			p.Stages[0].Activities = append(p.Stages[0].Activities, p.Stages[1].Activities[1])
			p.Stages[1].Activities = p.Stages[1].Activities[:1]
		}, "g iteration 0 phase bwd is in stage 0 but must come after g iteration 0 phase send-a (stage 1)"},
		{"dag unknown dependency", dagPlan, "full", func(p *Plan) { p.Jobs[0].Tasks[3].After = []string{"nope"} }, `tasks[3] (bwd): after: no task "nope"`},
		{"dag dependency listed later (a cycle)", dagPlan, "full", func(p *Plan) { p.Jobs[0].Tasks[0].After = []string{"bwd"} },
			`tasks[0] (fwd): after: "bwd" must be listed before the task that waits for it`},
		{"dag transfer outside the job", dagPlan, "full", func(p *Plan) { p.Jobs[0].Tasks[1].Dst = "r3s0" }, `src and dst: "r0s0" -> "r3s0" must be two different workers`},
		{"dag transfer without a circuit", dagPlan, "full", func(p *Plan) { p.Stages[2].Circuits = nil },
			"stage 2, activities[0] (job g): send-b needs rack 0 -> rack 2, but the stage's circuits give no path"},
		{"dag phase that is no task", dagPlan, "full", func(p *Plan) { p.Stages[0].Activities[0].Phase = "compute" }, `phase: "compute" is not a task of dag job g`},
		{"dag with bytes", dagPlan, "full", func(p *Plan) { p.Jobs[0].Bytes = 5 }, "bytes and compute_ns belong to the tasks of a dag job"},
		{"dag iteration 1 before iteration 0 ends", dagPlan, "full", func(p *Plan) {
			a := p.Stages[3].Activities[0]
			p.Stages[3].Activities = p.Stages[3].Activities[1:]
			p.Stages[1].Activities = append(p.Stages[1].Activities, a)
		}, "g iteration 1 phase fwd is in stage 1 but must come after g iteration 0 phase send-b (stage 2)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := tt.plan()
			tt.break_(p)
			err := Check(p, fourRacks(t, tt.duplex))
			switch {
			case tt.want == "" && err != nil:
				t.Errorf("unexpected error: %v", err)
			case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
				t.Errorf("error:\n  %v\nwant it to contain:\n  %s", err, tt.want)
			}
		})
	}
}

// INC decided per stage: the same job pushes with INC in one iteration
// and to its CPU parameter server in the next.
func TestCheckINCPerStage(t *testing.T) {
	yes, no := true, false
	mk := func() *Plan {
		p := valid()
		p.Version = 2
		p.Jobs[0].Aggregator = "tor0"
		p.Jobs[0].Iterations = 2
		st := p.Stages
		p.Stages = nil
		for it := 0; it < 2; it++ {
			inc := &yes
			if it == 1 {
				inc = &no
			}
			for i, s := range st {
				s.Activities = []Activity{{Job: "a", Iteration: it, Phase: s.Activities[0].Phase}}
				if i > 0 {
					s.Activities[0].INC = inc
				}
				p.Stages = append(p.Stages, s)
			}
		}
		return p
	}
	s := testScenario(t)
	if err := Check(mk(), s); err != nil {
		t.Fatalf("INC per stage: %v", err)
	}
	p := mk()
	if got := len(p.Jobs[0].FlowsINC("push", true)); got != 3 {
		t.Errorf("push with INC: %d flows, want 3 (2 workers to their ToRs, tor1 to tor0)", got)
	}
	p.Version = 1
	if err := Check(p, s); err == nil || !strings.Contains(err.Error(), "step and inc need plan_version 2") {
		t.Errorf("v1 with inc: %v", err)
	}
	p = mk()
	p.Stages[0].Activities[0].INC = &yes
	if err := Check(p, s); err == nil || !strings.Contains(err.Error(), "inc: only the push and pull of a ps job") {
		t.Errorf("inc on compute: %v", err)
	}
	p = mk()
	p.Jobs[0].Aggregator = ""
	if err := Check(p, s); err == nil || !strings.Contains(err.Error(), "inc: true needs the job's aggregator") {
		t.Errorf("inc without aggregator: %v", err)
	}
	// A job whose own inc is false but which aggregates in some stage
	// counts against the ToRs' capacity (1) in those stages: a second job
	// with INC for its life, on the same ToRs, is one too many.
	p = mk()
	b := p.Jobs[0]
	b.Name, b.INC, b.PS, b.Iterations = "b", true, "", 1
	p.Jobs = append(p.Jobs, b)
	for i, ph := range []string{"compute", "push", "pull"} {
		p.Stages[i].Activities = append(p.Stages[i].Activities, Activity{Job: "b", Phase: ph})
	}
	if err := Check(p, s); err == nil || !strings.Contains(err.Error(), "over its capacity of 1") {
		t.Errorf("two INC jobs on one ToR of capacity 1: %v", err)
	}
}

// The flows of each hd step, by hand: S = 4 MB, 4 workers. Halving steps
// 0 (distance 1) and 1 (distance 2) send S/2 and S/4 each way; doubling
// steps 2 and 3 mirror them. Ring steps send S/n to the next rank.
func TestStepFlows(t *testing.T) {
	j := hdSteps().Jobs[0]
	want := []struct {
		pairs [][2]string
		bytes float64
	}{
		{[][2]string{{"r0s0", "r1s0"}, {"r1s0", "r0s0"}, {"r2s0", "r3s0"}, {"r3s0", "r2s0"}}, 2e6},
		{[][2]string{{"r0s0", "r2s0"}, {"r1s0", "r3s0"}, {"r2s0", "r0s0"}, {"r3s0", "r1s0"}}, 1e6},
		{[][2]string{{"r0s0", "r2s0"}, {"r1s0", "r3s0"}, {"r2s0", "r0s0"}, {"r3s0", "r1s0"}}, 1e6},
		{[][2]string{{"r0s0", "r1s0"}, {"r1s0", "r0s0"}, {"r2s0", "r3s0"}, {"r3s0", "r2s0"}}, 2e6},
	}
	var total float64
	for k, w := range want {
		fl := j.Flows("allreduce." + string(rune('0'+k)))
		if len(fl) != len(w.pairs) {
			t.Fatalf("step %d: %d flows, want %d", k, len(fl), len(w.pairs))
		}
		for i, f := range fl {
			if f.Src != w.pairs[i][0] || f.Dst != w.pairs[i][1] || f.Bytes != w.bytes {
				t.Errorf("step %d flow %d: %+v, want %v %g B", k, i, f, w.pairs[i], w.bytes)
			}
			total += f.Bytes
		}
	}
	// The steps together move what the whole all-reduce moves.
	j.Steps = false
	var whole float64
	for _, f := range j.Flows("allreduce") {
		whole += f.Bytes
	}
	if total != whole {
		t.Errorf("steps move %g B, the whole all-reduce %g B", total, whole)
	}
	r := Job{Name: "r", Pattern: "ring", Workers: []string{"r0s0", "r1s0", "r2s0"}, Bytes: 3e6, Iterations: 1, Steps: true}
	if ph := r.IterPhases(); len(ph) != 5 || ph[4] != "allreduce.3" {
		t.Errorf("ring of 3 phases: %v, want compute and 4 steps", ph)
	}
	if fl := r.Flows("allreduce.2"); len(fl) != 3 || fl[0].Bytes != 1e6 || fl[2].Src != "r2s0" || fl[2].Dst != "r0s0" {
		t.Errorf("ring step flows: %+v", fl)
	}
}

func TestDAGPreds(t *testing.T) {
	j := dagPlan().Jobs[0]
	got := j.Preds()
	// Iteration 0: fwd none; send-a, send-b after fwd; bwd after send-a.
	// Iteration 1's fwd waits for iteration 0's sinks: send-b and bwd.
	want := [][]int{nil, {0}, {0}, {1}, {2, 3}, {4}, {4}, {5}}
	b1, _ := json.Marshal(got)
	b2, _ := json.Marshal(want)
	if string(b1) != string(b2) {
		t.Errorf("preds %s, want %s", b1, b2)
	}
}
