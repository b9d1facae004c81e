package scheduler

import (
	"testing"

	"github.com/ocsemu/ocsemu/emu/flowmodel"
	"github.com/ocsemu/ocsemu/emu/scenario"
	"github.com/ocsemu/ocsemu/scenarios"
)

// TestNoReconfigurationUnderActiveFlows plans the shipped OCS scenarios
// with every scheduler and replays each plan in the flow model: no
// reconfiguration may change a circuit that carries a flow in progress
// (issue 12, item 8). fcfs refitted every slot to the demand and moved
// circuits under running transfers before it kept busy circuits.
func TestNoReconfigurationUnderActiveFlows(t *testing.T) {
	for _, name := range []string{"quickstart.yaml", "plan-demo.yaml"} {
		data, err := scenarios.Files.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		for _, sched := range []string{"fcfs", "static", "ljf", "interleave", "tdm", "notdm"} {
			t.Run(name+"/"+sched, func(t *testing.T) {
				s, err := scenario.Parse(data, name)
				if err != nil {
					t.Fatal(err)
				}
				s.Scheduler.Name = sched
				p, err := Plan(s)
				if err != nil {
					t.Fatal(err)
				}
				ds, err := flowmodel.Disruptions(p, s)
				if err != nil {
					t.Fatal(err)
				}
				for _, d := range ds {
					t.Errorf("at %.1f ms the circuit on %v changes under %s's flow %s -> %s", float64(d.AtNs)/1e6, d.Uplink, d.Key, d.Src, d.Dst)
				}
			})
		}
	}
}
