package plan

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/ocsemu/ocsemu/dataplane/limits"
	"github.com/ocsemu/ocsemu/emu/scenario"
	"github.com/ocsemu/ocsemu/ocsfabric/circuit"
)

func testScenario(t testing.TB) *scenario.Scenario {
	s, err := scenario.Parse([]byte(`name: t
fabric: {kind: ocs, racks: 4, servers_per_rack: 2, uplinks_per_tor: 2, ocs: {switches: 2}, inc: {capacity: 1}, rates: {server: 1Gbit, uplink: 1Gbit}}
`), "t")
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func cc(a, b string) circuit.Circuit {
	ua, _ := circuit.ParseUplink(a)
	ub, _ := circuit.ParseUplink(b)
	return circuit.Circuit{A: ua, B: ub}
}

// valid returns a plan that checks; each test case breaks one thing.
func valid() *Plan {
	return &Plan{Version: 1, Scenario: "t", Mode: ModeBarrier,
		Jobs: []Job{{Name: "a", Pattern: "ps", Workers: []string{"r0s0", "r1s0"}, PS: "r0s0", Bytes: 1e6, Iterations: 1}},
		Stages: []Stage{
			{Activities: []Activity{{Job: "a", Phase: "compute"}}},
			{Circuits: []circuit.Circuit{cc("tor0:0", "tor1:0")}, Activities: []Activity{{Job: "a", Phase: "push"}}},
			{Circuits: []circuit.Circuit{cc("tor0:0", "tor1:0")}, Activities: []Activity{{Job: "a", Phase: "pull"}}},
		}}
}

func TestCheck(t *testing.T) {
	yes, no := true, false
	tests := []struct {
		name   string
		break_ func(p *Plan)
		want   string
	}{
		{"valid", func(p *Plan) {}, ""},
		{"wrong scenario", func(p *Plan) { p.Scenario = "other" }, `plan is for scenario "other"`},
		{"bad mode", func(p *Plan) { p.Mode = "async" }, `mode: "async" is not a mode`},
		{"unknown job in activity", func(p *Plan) { p.Stages[0].Activities[0].Job = "zz" }, `stage 0, activities[0] (job zz): job: no job "zz"`},
		{"phase of wrong pattern", func(p *Plan) { p.Stages[1].Activities[0].Phase = "allreduce" }, `stage 1, activities[0] (job a): phase: "allreduce" is not a phase of a ps job`},
		{"iteration out of range", func(p *Plan) { p.Stages[2].Activities[0].Iteration = 3 }, "iteration: 3 is out of range"},
		{"scheduled twice", func(p *Plan) {
			p.Stages[2].Activities = append(p.Stages[2].Activities, Activity{Job: "a", Phase: "push"})
		}, "a iteration 0 phase push is scheduled twice (also in stage 1)"},
		{"never scheduled", func(p *Plan) { p.Stages[2].Activities = nil }, "job a: a iteration 0 phase pull is never scheduled"},
		{"out of order", func(p *Plan) {
			p.Stages[1].Activities[0].Phase, p.Stages[2].Activities[0].Phase = "pull", "push"
		}, "phase pull is in stage 1 but must come after a iteration 0 phase push (stage 2)"},
		{"same stage in barrier mode", func(p *Plan) {
			p.Stages[0].Activities = append(p.Stages[0].Activities, Activity{Job: "a", Phase: "push"})
			p.Stages[1].Activities = nil
		}, "phase push is in stage 0 but must come after a iteration 0 phase compute (stage 0)"},
		{"port used twice", func(p *Plan) {
			p.Stages[1].Circuits = append(p.Stages[1].Circuits, cc("tor0:0", "tor2:0"))
		}, "stage 1: circuits: circuit 1 (tor0:0<->tor2:0): tor0:0 is already in circuit tor0:0<->tor1:0"},
		{"port does not exist", func(p *Plan) { p.Stages[1].Circuits[0] = cc("tor0:0", "tor9:0") }, "stage 1: circuits: circuit 0 (tor0:0<->tor9:0): tor9:0: no rack 9"},
		{"circuit across switches", func(p *Plan) { p.Stages[1].Circuits[0] = cc("tor0:0", "tor1:1") }, "cabled to ocs0 but tor1:1 to ocs1"},
		{"no path", func(p *Plan) { p.Stages[1].Circuits = nil }, "stage 1, activities[0] (job a): push needs rack 1 -> rack 0, but the stage's circuits give no path"},
		{"multi-hop path is fine", func(p *Plan) {
			p.Stages[1].Circuits = []circuit.Circuit{cc("tor0:0", "tor2:0"), cc("tor2:1", "tor1:1")}
			p.Stages[2].Circuits = p.Stages[1].Circuits
		}, ""},
		{"missing server", func(p *Plan) { p.Jobs[0].Workers[1] = "r7s0" }, "jobs[0] (a): workers[1]: no server r7s0"},
		{"ps without server", func(p *Plan) { p.Jobs[0].PS = "" }, "ps: a ps job without INC needs a parameter server"},
		{"INC over capacity", func(p *Plan) {
			p.Jobs[0].INC, p.Jobs[0].PS, p.Jobs[0].Aggregator = true, "", "tor0"
			b := p.Jobs[0]
			b.Name = "b"
			b.Workers = []string{"r0s1", "r1s1"}
			p.Jobs = append(p.Jobs, b)
			for i := range p.Stages {
				a := p.Stages[i].Activities[0]
				a.Job = "b"
				p.Stages[i].Activities = append(p.Stages[i].Activities, a)
			}
		}, "tor0 aggregates 2 INC jobs [a b], over its capacity of 1"},
		{"INC per stage, push and pull agree", func(p *Plan) {
			p.Version, p.Jobs[0].Aggregator = 2, "tor0"
			p.Stages[1].Activities[0].INC, p.Stages[2].Activities[0].INC = &yes, &yes
		}, ""},
		{"INC per stage, push and pull disagree", func(p *Plan) {
			p.Version, p.Jobs[0].Aggregator = 2, "tor0"
			p.Stages[1].Activities[0].INC, p.Stages[2].Activities[0].INC = &yes, &no
		}, "stage 2: job a iteration 0 pull decides inc false, but the iteration's push decided true"},
		// An unset inc is the job's: the flow model would aggregate this
		// pull in the ToRs after a push to the parameter server.
		{"INC per stage, pull unset in an INC job", func(p *Plan) {
			p.Version, p.Jobs[0].INC, p.Jobs[0].Aggregator = 2, true, "tor0"
			p.Stages[1].Activities[0].INC = &no
		}, "stage 2: job a iteration 0 pull decides inc true, but the iteration's push decided false"},
		{"clock stages overlap", func(p *Plan) {
			p.Mode = ModeClock
			for i := range p.Stages {
				p.Stages[i].StartNs, p.Stages[i].DurationNs = int64(i)*10, 20
			}
		}, "stage 1: start_ns 10 overlaps stage 0, which runs until 20"},
		{"clock stage longer than an OCS slot", func(p *Plan) {
			p.Mode = ModeClock
			starts := []int64{0, 10, 10 + int64(2*time.Hour)}
			for i := range p.Stages {
				p.Stages[i].StartNs, p.Stages[i].DurationNs = starts[i], 10
			}
		}, "stage 1: its circuits hold for 2h0m0s until the next stage, but the OCS holds a slot at most 1h0m0s"},
		{"clock schedule starting too far ahead", func(p *Plan) {
			p.Mode = ModeClock
			starts := []int64{0, int64(2 * time.Hour), int64(2*time.Hour) + 10}
			for i := range p.Stages {
				p.Stages[i].StartNs, p.Stages[i].DurationNs = starts[i], 10
			}
		}, "stage 1: start_ns 2h0m0s is more than the 1h0m0s ahead an OCS schedule may start"},
		{"negative arrival", func(p *Plan) { p.Jobs[0].ArrivalNs = -1 }, "jobs[0] (a): arrival_ns: must not be negative"},
		{"arrival past a week", func(p *Plan) { p.Jobs[0].ArrivalNs = 1 << 62 }, "jobs[0] (a): arrival_ns: must be at most 604800000000000 (168h0m0s)"},
		{"bytes at the limit", func(p *Plan) { p.Jobs[0].Bytes = limits.MaxBytes }, ""},
		{"bytes past the limit", func(p *Plan) { p.Jobs[0].Bytes = 1 << 62 },
			"jobs[0] (a): bytes: must be between 1 and 1099511627776 (1 TiB, the most per worker per iteration the flow model's arithmetic allows), got 4611686018427387904"},
		{"zero bytes", func(p *Plan) { p.Jobs[0].Bytes = 0 }, "jobs[0] (a): bytes: must be between 1 and"},
		{"reconfiguration delay at the limits", func(p *Plan) { d := limits.MaxReconfigDelayNs; p.ReconfigDelayNs = &d }, ""},
		{"reconfiguration delay of zero", func(p *Plan) { d := limits.MinReconfigDelayNs; p.ReconfigDelayNs = &d }, ""},
		{"reconfiguration delay too long", func(p *Plan) { d := limits.MaxReconfigDelayNs + 1; p.ReconfigDelayNs = &d },
			"reconfig_delay_ns: must be between 0 and 10000000000 (10s), got 10000000001"},
		{"negative reconfiguration delay", func(p *Plan) { d := int64(-1); p.ReconfigDelayNs = &d }, "reconfig_delay_ns: must be between 0 and"},
		{"job name that is no file name", func(p *Plan) {
			p.Jobs[0].Name = "../a"
			for i := range p.Stages {
				p.Stages[i].Activities[0].Job = "../a"
			}
		}, `jobs[0] (../a): name: invalid job name: "../a" must start with a letter`},
		// A job that fails its own check is not turned into flows: a ring
		// shorter than the workers once indexed past its end.
		{"ring shorter than the workers", func(p *Plan) {
			p.Jobs[0] = Job{Name: "a", Pattern: "ring", Workers: []string{"r0s0", "r1s0", "r2s0"}, Ring: []string{"r0s0", "r1s0"}, Bytes: 1e6, Iterations: 1}
			p.Stages = p.Stages[:2]
			p.Stages[1].Activities[0].Phase = "allreduce"
		}, "jobs[0] (a): ring: must list every worker exactly once"},
		{"more flows than the model holds", func(p *Plan) {
			p.Jobs[0] = Job{Name: "a", Pattern: "alltoall", Workers: []string{"r0s0", "r0s1", "r1s0", "r1s1", "r2s0", "r2s1", "r3s0", "r3s1"}, Bytes: 1e6, Iterations: 20_000}
		}, "jobs: the jobs make 1120000 flows over their iterations (a: 1120000), more than the 1000000"},
		{"flow cap on a flow that does not exist", func(p *Plan) {
			p.Stages[1].Activities[0].Flows = []FlowCap{{Src: "r0s0", Dst: "r1s0", RateCapBps: 1e9}}
		}, "flows[0]: r0s0 -> r1s0 is not a flow of push"},
	}
	s := testScenario(t)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := valid()
			tt.break_(p)
			err := Check(p, s)
			switch {
			case tt.want == "" && err != nil:
				t.Errorf("unexpected error: %v", err)
			case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
				t.Errorf("error:\n  %v\nwant it to contain:\n  %s", err, tt.want)
			}
		})
	}
}

func TestParseErrors(t *testing.T) {
	tests := []struct{ in, want string }{
		{`{"plan_version": 1, "mode": "clock", "stagez": []}`, `line 1 col 38: unknown key "stagez", did you mean "stages"?`},
		{"{\"plan_version\": 1,\n \"mdoe\": \"clock\",\n \"jobs\": []}", `line 2 col 2: unknown key "mdoe", did you mean "mode"?`},
		{"{\"plan_version\": 1,\n \"jobs\": [{\"name\": \"a\",\n  \"iteraton\": 2}],\n \"stages\": []}", `line 3 col 3: unknown key "iteraton" (jobs[0].iteraton), did you mean "iterations"?`},
		{`{"plan_version": 1, "stages": [{"circuits": [{"A": "tor0:0", "b": "tor1:0"}]}]}`, `unknown key "A" (stages[0].circuits[0].A): keys are lower case, did you mean "a"?`},
		{`{"plan_version": 1, "Mode": "clock"}`, `line 1 col 21: unknown key "Mode": keys are lower case, did you mean "mode"?`},
		{`{"plan_version": 1, "zzzzzz": 1}`, `unknown key "zzzzzz" (known keys: `},
		// An uplink is written as text: an object there is the wrong type,
		// not a key in the wrong case.
		{`{"plan_version": 1, "stages": [{"circuits": [{"a": {"Rack": 0}, "b": "tor1:0"}]}]}`, `field "stages.circuits.a": object is not a valid circuit.Uplink`},
		{"{\"plan_version\": 1,\n \"jobs\": [{\"name\": 5}]}", `line 2 col 21: field "jobs.name": number is not a valid string`},
		{`{"plan_version": 3}`, "plan_version 3 is not supported (this emu reads versions 1 to 2)"},
		{`{"plan_version": 0}`, "plan_version 0 is not supported"},
		{`{"plan_version": 1} {}`, "trailing data"},
		{`{"plan_version": 1,`, "line 1 col 20: the file ends inside a value (an object, list or string not closed)"},
		{"{\"plan_version\": 1,\n  \"jobs\": [\n", "line 2 col 12: the file ends inside a value"},
		{"{\"plan_version\": 1,\n \"mode\": \"clock\",\n \"mode\": \"barrier\"}", `p.json: line 3 col 2: duplicate key "mode" (mode, first given at line 2 col 2)`},
		{`{"plan_version": 1, "jobs": [{"name": "a"}, {"name": "b", "bytes": 1, "bytes": 2}]}`, `line 1 col 71: duplicate key "bytes" (jobs[1].bytes, first given at line 1 col 59)`},
		{`{"plan_version": 1, "stages": [{"circuits": [], "activities": [{"job": "a", "phase": "push", "job": "b"}]}]}`, `duplicate key "job" (stages[0].activities[0].job`},
		{`{"plan_version": 1, "predicted": {"jobs_ns": {"a": 1, "a": 2}}}`, `duplicate key "a" (predicted.jobs_ns.a`},
	}
	for _, tt := range tests {
		_, err := Parse([]byte(tt.in), "p.json")
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("Parse(%s) = %v, want %q", tt.in, err, tt.want)
		}
	}
}

// The same key in different objects, or a key equal to a value, is fine.
func TestParseNoFalseDuplicates(t *testing.T) {
	for _, in := range []string{
		`{"plan_version": 1, "jobs": [{"name": "a", "bytes": 1}, {"name": "b", "bytes": 2}], "stages": []}`,
		`{"plan_version": 1, "mode": "mode", "scheduler": "scheduler", "jobs": [], "stages": [{"circuits": [], "activities": []}, {"circuits": null, "activities": [{"job": "job"}]}]}`,
		`{"plan_version": 1, "predicted": {"jobs_ns": {"a": 1, "b": 2}}, "jobs": [{"workers": ["a", "a"]}]}`,
	} {
		if _, err := Parse([]byte(in), "p.json"); err != nil {
			t.Errorf("Parse(%s): %v", in, err)
		}
	}
}

func FuzzParse(f *testing.F) {
	b, _ := json.Marshal(valid())
	f.Add(b)
	f.Add([]byte(`{"plan_version":1,"mode":"clock","stages":[{"start_ns":0,"duration_ns":5,"circuits":[{"a":"tor0:0","b":"tor1:0"}]}]}`))
	// Duplicate keys, and the bounds on bytes, arrival and the
	// reconfiguration delay.
	f.Add([]byte(`{"plan_version":1,"mode":"clock","mode":"barrier"}`))
	f.Add([]byte(`{"plan_version":1,"predicted":{"jobs_ns":{"a":1,"a":2}},"jobs":[{"name":"a","workers":["r0s0","r0s0"]},{"name":"b","bytes":1,"bytes":2}]}`))
	f.Add([]byte(`{"plan_version":1,"mode":"barrier","reconfig_delay_ns":10000000001,"jobs":[{"name":"a","pattern":"ps","workers":["r0s0","r1s0"],"ps":"r0s0","bytes":4611686018427387904,"compute_ns":0,"iterations":1,"arrival_ns":-1}],"stages":[]}`))
	f.Add([]byte(`{"plan_version":1,"mode":"barrier","jobs":[{"name":"../x","pattern":"ring","workers":["r0s0","r1s0"],"bytes":1,"compute_ns":0,"iterations":1}],"stages":[{"start_ns":0,"circuits":null,"activities":[{"job":"../x","iteration":0,"phase":"compute","start_ns":-5}]}]}`))
	// Version 2: steps, a task graph, INC per stage.
	for _, p := range []*Plan{hdSteps(), dagPlan()} {
		b, _ := json.Marshal(p)
		f.Add(b)
	}
	f.Add([]byte(`{"plan_version":2,"mode":"barrier","jobs":[{"name":"g","pattern":"dag","workers":["r0s0","r1s0"],"iterations":2,"tasks":[{"name":"a","kind":"transfer","src":"r0s0","dst":"r1s0","bytes":1,"after":["a","zz"]}]}],"stages":[{"start_ns":0,"circuits":null,"activities":[{"job":"g","iteration":0,"phase":"a","step":1,"inc":true}]}]}`))
	s := testScenario(f)
	f.Fuzz(func(t *testing.T, data []byte) {
		p, err := Parse(data, "fuzz")
		if err != nil {
			return
		}
		// Check must never panic, whatever the plan says.
		_ = Check(p, s)
	})
}

// A missing path is told apart from other problems (emu collective then
// says to patch circuits).
func TestCheckNoPathIs(t *testing.T) {
	s := testScenario(t)
	p := valid()
	p.Stages[1].Circuits = nil
	if err := Check(p, s); !errors.Is(err, ErrNoPath) {
		t.Errorf("no circuits: %v, want ErrNoPath", err)
	}
	p = valid()
	p.Jobs[0].Workers[1] = "r7s0"
	if err := Check(p, s); err == nil || errors.Is(err, ErrNoPath) {
		t.Errorf("a missing server: %v, want an error that is not ErrNoPath", err)
	}
}
