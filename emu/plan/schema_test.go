package plan

import (
	"encoding/json"
	"os"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
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
	bad := []string{
		strings.Replace(string(good), `"mode":"barrier"`, `"mode":"async"`, 1),
		strings.Replace(string(good), `"plan_version":1`, `"plan_version":2`, 1),
		strings.Replace(string(good), `"pattern":"ps"`, `"pattern":"ps","extra":1`, 1),
		strings.Replace(string(good), `"a":"tor0:0"`, `"a":"t0"`, 1),
	}
	for i, text := range append([]string{string(good)}, bad...) {
		v, err := jsonschema.UnmarshalJSON(strings.NewReader(text))
		if err != nil {
			t.Fatal(err)
		}
		verr := sch.Validate(v)
		pp, cerr := Parse([]byte(text), "x")
		if cerr == nil {
			cerr = Check(pp, testScenario(t))
		}
		if i == 0 && (verr != nil || cerr != nil) {
			t.Fatalf("a valid plan: schema says %v, emu says %v", verr, cerr)
		}
		if i > 0 && verr == nil {
			t.Errorf("schema accepts bad plan %d", i)
		}
		if i > 0 && cerr == nil {
			t.Errorf("emu accepts bad plan %d", i)
		}
	}
}
