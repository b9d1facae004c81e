package plan

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/ocsemu/ocsemu/dataplane/limits"
)

// TestSchemaMatchesCode validates plans the code writes against
// docs/plan.schema.json, and checks that the schema refuses what Parse
// refuses, so that the published contract cannot drift from the code.
func TestSchemaMatchesCode(t *testing.T) {
	f, err := os.Open("../../docs/plan.schema.json")
	if err != nil {
		t.Fatal(err)
	}
	doc, err := jsonschema.UnmarshalJSON(f)
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	c := jsonschema.NewCompiler()
	if err := c.AddResource("plan.schema.json", doc); err != nil {
		t.Fatal(err)
	}
	sch, err := c.Compile("plan.schema.json")
	if err != nil {
		t.Fatal(err)
	}
	p := valid()
	start := int64(5)
	p.Stages[1].Activities[0].StartNs = &start
	p.Stages[1].Activities[0].Flows = []FlowCap{{Src: "r1s0", Dst: "r0s0", RateCapBps: 1e9}}
	p.Predicted = &Predicted{MakespanNs: 10, JobsNs: map[string]int64{"a": 10}}
	good, _ := json.Marshal(p)
	// The schema's bounds are the limits the code checks: a plan at every
	// limit passes both, one past any limit fails both.
	atLimits := valid()
	delay := limits.MaxReconfigDelayNs
	atLimits.ReconfigDelayNs = &delay
	atLimits.Jobs[0].Bytes = limits.MaxBytes
	atLimits.Jobs[0].Name = strings.Repeat("a", limits.MaxLabName)
	for i := range atLimits.Stages {
		atLimits.Stages[i].Activities[0].Job = atLimits.Jobs[0].Name
	}
	atLimitsJSON, _ := json.Marshal(atLimits)
	past := func(old, new string) string {
		if !strings.Contains(string(atLimitsJSON), old) {
			t.Fatalf("%s not in %s", old, atLimitsJSON)
		}
		return strings.Replace(string(atLimitsJSON), old, new, 1)
	}
	bad := []string{
		past(fmt.Sprintf(`"reconfig_delay_ns":%d`, limits.MaxReconfigDelayNs), fmt.Sprintf(`"reconfig_delay_ns":%d`, limits.MaxReconfigDelayNs+1)),
		past(fmt.Sprintf(`"reconfig_delay_ns":%d`, limits.MaxReconfigDelayNs), `"reconfig_delay_ns":-1`),
		past(fmt.Sprintf(`"bytes":%d`, limits.MaxBytes), fmt.Sprintf(`"bytes":%d`, limits.MaxBytes+1)),
		past(`"name":"a`, `"name":"aa`),
		strings.Replace(string(good), `"compute_ns":0`, `"compute_ns":0,"arrival_ns":-1`, 1),
		strings.Replace(string(good), `"name":"a"`, `"name":"A_1"`, 1),
		strings.Replace(string(good), `"mode":"barrier"`, `"mode":"async"`, 1),
		strings.Replace(string(good), `"plan_version":1`, `"plan_version":3`, 1),
		strings.Replace(string(good), `"pattern":"ps"`, `"pattern":"ps","extra":1`, 1),
		strings.Replace(string(good), `"a":"tor0:0"`, `"a":"t0"`, 1),
	}
	// Version 2: per-step activities, a task graph, INC per stage.
	v2 := func(p *Plan) string { b, _ := json.Marshal(p); return string(b) }
	steps, dag := v2(hdSteps()), v2(dagPlan())
	yes := true
	incPlan := valid()
	incPlan.Version, incPlan.Jobs[0].Aggregator = 2, "tor0"
	incPlan.Stages[1].Activities[0].INC = &yes
	incPlan.Stages[2].Activities[0].INC = &yes // push and pull agree
	incJSON := v2(incPlan)
	bad = append(bad,
		strings.Replace(steps, `"plan_version":2`, `"plan_version":1`, 1),
		strings.Replace(dag, `"plan_version":2`, `"plan_version":1`, 1),
		strings.Replace(incJSON, `"plan_version":2`, `"plan_version":1`, 1),
		strings.Replace(dag, `"compute_ns":0,"iterations":2`, `"compute_ns":0,"bytes":5,"iterations":2`, 1),
		strings.Replace(dag, `"kind":"transfer","src":"r0s0"`, `"kind":"transfer","server":"r0s0","src":"r0s0"`, 1),
		strings.Replace(dag, `"kind":"compute"`, `"kind":"sleep"`, 1),
		strings.Replace(steps, `"step":3`, `"step":-1`, 1),
	)
	goods := []string{string(good), string(atLimitsJSON), steps, dag, incJSON}
	for i, text := range append(goods, bad...) {
		v, err := jsonschema.UnmarshalJSON(strings.NewReader(text))
		if err != nil {
			t.Fatal(err)
		}
		verr := sch.Validate(v)
		pp, cerr := Parse([]byte(text), "x")
		if cerr == nil {
			cerr = Check(pp, testScenario(t))
		}
		if i < len(goods) && (verr != nil || cerr != nil) {
			t.Fatalf("valid plan %d: schema says %v, emu says %v", i, verr, cerr)
		}
		if i >= len(goods) && verr == nil {
			t.Errorf("schema accepts bad plan %d: %s", i, text)
		}
		if i >= len(goods) && cerr == nil {
			t.Errorf("emu accepts bad plan %d: %s", i, text)
		}
	}
}
