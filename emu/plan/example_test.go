package plan_test

import (
	"encoding/json"
	"fmt"
	"os"

	"github.com/ocsemu/ocsemu/emu/plan"
	"github.com/ocsemu/ocsemu/emu/scenario"
	"github.com/ocsemu/ocsemu/ocsfabric/circuit"
)

// A scheduler written in Go imports the plan package (module
// github.com/ocsemu/ocsemu), writes a plan for a scenario and checks it
// before handing it to `emu run --plan`. This one runs a 2-rack ring job
// over one circuit, computing first and then all-reducing.
func Example() {
	s, err := scenario.Parse([]byte(`name: mini
fabric: {kind: ocs, racks: 2, servers_per_rack: 1, uplinks_per_tor: 1, ocs: {reconfig_delay: 1ms}, rates: {server: 1Gbit, uplink: 1Gbit}}
jobs:
  - {name: ring, pattern: ring, workers: [r0s0, r1s0], bytes: 8MiB, compute: 10ms, iterations: 1}
`), "mini.yaml")
	if err != nil {
		fmt.Println(err)
		return
	}
	link, _ := circuit.ParseUplink("tor0:0")
	peer, _ := circuit.ParseUplink("tor1:0")
	p := &plan.Plan{
		Version: plan.Version, Scenario: s.Name, Scheduler: "my-scheduler", Mode: plan.ModeBarrier,
		Jobs: plan.JobsFromScenario(s),
		Stages: []plan.Stage{
			{Circuits: []circuit.Circuit{{A: link, B: peer}}, Activities: []plan.Activity{{Job: "ring", Phase: "compute"}}},
			{Circuits: []circuit.Circuit{{A: link, B: peer}}, Activities: []plan.Activity{{Job: "ring", Phase: "allreduce"}}},
		},
	}
	if err := plan.Check(p, s); err != nil {
		fmt.Println("refused:", err)
		return
	}
	enc := json.NewEncoder(os.Stdout)
	enc.SetIndent("", " ")
	_ = enc.Encode(p.Stages[1])
	// Output:
	// {
	//  "start_ns": 0,
	//  "circuits": [
	//   {
	//    "a": "tor0:0",
	//    "b": "tor1:0"
	//   }
	//  ],
	//  "activities": [
	//   {
	//    "job": "ring",
	//    "iteration": 0,
	//    "phase": "allreduce"
	//   }
	//  ]
	// }
}
