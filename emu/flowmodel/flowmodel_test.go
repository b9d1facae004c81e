package flowmodel

import (
	"math"
	"testing"

	"github.com/ocsemu/ocsemu/emu/plan"
	"github.com/ocsemu/ocsemu/emu/scenario"
	"github.com/ocsemu/ocsemu/ocsfabric/circuit"
)

const ms = int64(1e6)

func scen(t *testing.T, body string) *scenario.Scenario {
	t.Helper()
	s, err := scenario.Parse([]byte("name: t\n"+body), "test")
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func c(a, b string) circuit.Circuit {
	ua, _ := circuit.ParseUplink(a)
	ub, _ := circuit.ParseUplink(b)
	return circuit.Circuit{A: ua, B: ub}
}

func simplex(a, b string) circuit.Circuit {
	x := c(a, b)
	x.Simplex = true
	return x
}

func act(job string, it int, phase string) plan.Activity {
	return plan.Activity{Job: job, Iteration: it, Phase: phase}
}

// phaseEnd finds when a phase ended.
func phaseEnd(t *testing.T, p *plan.Plan, s *scenario.Scenario, job string, it int, phase string) int64 {
	t.Helper()
	if err := plan.Check(p, s); err != nil {
		t.Fatalf("plan does not check: %v", err)
	}
	run, err := Simulate(p, s)
	if err != nil {
		t.Fatal(err)
	}
	for _, ph := range run.Phases {
		if ph.Job == job && ph.Iteration == it && ph.Phase == phase {
			return ph.EndNs
		}
	}
	t.Fatalf("no record of %s %d %s", job, it, phase)
	return 0
}

func near(got, want int64) bool { return math.Abs(float64(got-want)) <= 2 }

// 125 MB at 1 Gbit/s (125 MB/s) takes exactly one second.
const S = 125_000_000

func TestHandComputable(t *testing.T) {
	ocs2 := "fabric: {kind: ocs, racks: 2, servers_per_rack: 2, rates: {server: 10Gbit, uplink: 1Gbit}}\n"
	ocs4 := "fabric: {kind: ocs, racks: 4, servers_per_rack: 1, uplinks_per_tor: 2, rates: {server: 10Gbit, uplink: 1Gbit}}\n"
	tests := []struct {
		name  string
		scen  string
		plan  plan.Plan
		job   string
		phase string
		want  int64
	}{
		{
			name: "one flow on one circuit",
			scen: ocs2,
			plan: plan.Plan{Mode: plan.ModeBarrier,
				Jobs: []plan.Job{{Name: "a", Pattern: "ps", Workers: []string{"r0s0", "r1s0"}, PS: "r0s0", Bytes: S, Iterations: 1}},
				Stages: []plan.Stage{{Circuits: []circuit.Circuit{c("tor0:0", "tor1:0")}, Activities: []plan.Activity{act("a", 0, "compute")}},
					{Circuits: []circuit.Circuit{c("tor0:0", "tor1:0")}, Activities: []plan.Activity{act("a", 0, "push")}},
					{Circuits: []circuit.Circuit{c("tor0:0", "tor1:0")}, Activities: []plan.Activity{act("a", 0, "pull")}}},
			},
			job: "a", phase: "push", want: 1000 * ms,
		},
		{
			name: "two flows share a circuit",
			scen: ocs2,
			plan: plan.Plan{Mode: plan.ModeClock,
				Jobs: []plan.Job{{Name: "a", Pattern: "ps", Workers: []string{"r0s0", "r1s0", "r1s1"}, PS: "r0s0", Bytes: S, Iterations: 1}},
				Stages: []plan.Stage{{DurationNs: 10000 * ms, Circuits: []circuit.Circuit{c("tor0:0", "tor1:0")},
					Activities: []plan.Activity{act("a", 0, "compute"), act("a", 0, "push"), act("a", 0, "pull")}}},
			},
			job: "a", phase: "push", want: 2000 * ms,
		},
		{
			name: "ring across 4 racks",
			scen: ocs4,
			plan: plan.Plan{Mode: plan.ModeClock,
				Jobs: []plan.Job{{Name: "r", Pattern: "ring", Workers: []string{"r0s0", "r1s0", "r2s0", "r3s0"}, Bytes: S, Iterations: 1, ComputeNs: 100 * ms}},
				Stages: []plan.Stage{{DurationNs: 10000 * ms,
					Circuits:   []circuit.Circuit{c("tor0:0", "tor1:0"), c("tor1:1", "tor2:1"), c("tor2:0", "tor3:0"), c("tor3:1", "tor0:1")},
					Activities: []plan.Activity{act("r", 0, "compute"), act("r", 0, "allreduce")}}},
			},
			// compute 100 ms, then each neighbour flow carries 2(n-1)/n S = 1.5 S on its own circuit.
			job: "r", phase: "allreduce", want: 100*ms + 1500*ms,
		},
		{
			name: "dark period in the middle of a flow",
			scen: "fabric: {kind: ocs, racks: 2, servers_per_rack: 1, uplinks_per_tor: 2, ocs: {reconfig_delay: 100ms}, rates: {server: 10Gbit, uplink: 1Gbit}}\n",
			plan: plan.Plan{Mode: plan.ModeClock,
				Jobs: []plan.Job{{Name: "a", Pattern: "ps", Workers: []string{"r0s0", "r1s0"}, PS: "r0s0", Bytes: S, Iterations: 1}},
				Stages: []plan.Stage{
					{DurationNs: 500 * ms, Circuits: []circuit.Circuit{c("tor0:0", "tor1:0")},
						Activities: []plan.Activity{act("a", 0, "compute"), act("a", 0, "push"), act("a", 0, "pull")}},
					// Move the circuit to the other uplinks half-way: 100 ms dark.
					{StartNs: 500 * ms, DurationNs: 10000 * ms, Circuits: []circuit.Circuit{c("tor0:1", "tor1:1")}},
				},
			},
			job: "a", phase: "push", want: 1100 * ms,
		},
		{
			// r0s0 -> r1s0 hashes to uplink 1 of two (routing.AddrHash):
			// when a circuit on uplink 1 joins the lit one on uplink 0,
			// the flow stays on uplink 0 through the 100 ms dark period
			// (make-before-break) and moves over after it, never pausing.
			name: "make-before-break: a circuit added beside a lit one",
			scen: "fabric: {kind: ocs, racks: 2, servers_per_rack: 1, uplinks_per_tor: 2, ocs: {reconfig_delay: 100ms}, rates: {server: 10Gbit, uplink: 1Gbit}}\n",
			plan: plan.Plan{Mode: plan.ModeClock,
				Jobs: []plan.Job{{Name: "a", Pattern: "ps", Workers: []string{"r0s0", "r1s0"}, PS: "r1s0", Bytes: S, Iterations: 1}},
				Stages: []plan.Stage{
					{DurationNs: 500 * ms, Circuits: []circuit.Circuit{c("tor0:0", "tor1:0")},
						Activities: []plan.Activity{act("a", 0, "compute"), act("a", 0, "push"), act("a", 0, "pull")}},
					{StartNs: 500 * ms, DurationNs: 10000 * ms, Circuits: []circuit.Circuit{c("tor0:0", "tor1:0"), c("tor0:1", "tor1:1")}},
				},
			},
			job: "a", phase: "push", want: 1000 * ms,
		},
		{
			name: "half-duplex stages",
			scen: "fabric: {kind: ocs, racks: 2, servers_per_rack: 1, ocs: {duplex: half, reconfig_delay: 50ms}, rates: {server: 10Gbit, uplink: 1Gbit}}\n",
			plan: plan.Plan{Mode: plan.ModeBarrier,
				Jobs: []plan.Job{{Name: "a", Pattern: "ps", Workers: []string{"r0s0", "r1s0"}, PS: "r0s0", Bytes: S, Iterations: 1, ComputeNs: 200 * ms}},
				Stages: []plan.Stage{
					{Activities: []plan.Activity{act("a", 0, "compute")}},
					{Circuits: []circuit.Circuit{simplex("tor1:0", "tor0:0")}, Activities: []plan.Activity{act("a", 0, "push")}},
					{Circuits: []circuit.Circuit{simplex("tor0:0", "tor1:0")}, Activities: []plan.Activity{act("a", 0, "pull")}},
				},
			},
			// compute 200 ms; the first circuit appears in stage 1, dark 50 ms; push 1 s;
			// reversing it darkens it 50 ms more; pull 1 s.
			job: "a", phase: "pull", want: 200*ms + 50*ms + 1000*ms + 50*ms + 1000*ms,
		},
		{
			name: "oversubscribed packet core",
			scen: "fabric: {kind: eps, racks: 2, servers_per_rack: 2, eps: {oversubscription: 2}, rates: {server: 1Gbit}}\n",
			plan: plan.Plan{Mode: plan.ModeBarrier,
				Jobs: []plan.Job{
					{Name: "a", Pattern: "ps", Workers: []string{"r0s0", "r1s0"}, PS: "r0s0", Bytes: S, Iterations: 1},
					{Name: "b", Pattern: "ps", Workers: []string{"r0s1", "r1s1"}, PS: "r0s1", Bytes: S, Iterations: 1}},
				Stages: []plan.Stage{{Activities: []plan.Activity{act("a", 0, "compute"), act("b", 0, "compute")}},
					{Activities: []plan.Activity{act("a", 0, "push"), act("b", 0, "push")}},
					{Activities: []plan.Activity{act("a", 0, "pull"), act("b", 0, "pull")}}},
			},
			// The rack's core link is 2 x 1 Gbit/s / 2 = 1 Gbit/s, shared by two flows.
			job: "a", phase: "push", want: 2000 * ms,
		},
		{
			name: "rate cap on an activity",
			scen: ocs2,
			plan: plan.Plan{Mode: plan.ModeBarrier,
				Jobs: []plan.Job{{Name: "a", Pattern: "ps", Workers: []string{"r0s0", "r1s0"}, PS: "r0s0", Bytes: S, Iterations: 1}},
				Stages: []plan.Stage{{Circuits: []circuit.Circuit{c("tor0:0", "tor1:0")}, Activities: []plan.Activity{act("a", 0, "compute")}},
					{Circuits: []circuit.Circuit{c("tor0:0", "tor1:0")}, Activities: []plan.Activity{{Job: "a", Phase: "push", RateCapBps: 250e6}}},
					{Circuits: []circuit.Circuit{c("tor0:0", "tor1:0")}, Activities: []plan.Activity{act("a", 0, "pull")}}},
			},
			job: "a", phase: "push", want: 4000 * ms,
		},
		{
			name: "INC aggregates in the ToR",
			scen: ocs2,
			plan: plan.Plan{Mode: plan.ModeBarrier,
				Jobs: []plan.Job{{Name: "a", Pattern: "ps", Workers: []string{"r0s0", "r0s1", "r1s0", "r1s1"}, INC: true, Aggregator: "tor0", Bytes: S, Iterations: 1}},
				Stages: []plan.Stage{{Activities: []plan.Activity{act("a", 0, "compute")}},
					{Circuits: []circuit.Circuit{c("tor0:0", "tor1:0")}, Activities: []plan.Activity{act("a", 0, "push")}},
					{Circuits: []circuit.Circuit{c("tor0:0", "tor1:0")}, Activities: []plan.Activity{act("a", 0, "pull")}}},
			},
			// Only tor1's partial sum (S) crosses the circuit: 1 s; worker links are 10 Gbit/s.
			job: "a", phase: "push", want: 1000 * ms,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := scen(t, tt.scen)
			tt.plan.Version = plan.Version
			if got := phaseEnd(t, &tt.plan, s, tt.job, 0, tt.phase); !near(got, tt.want) {
				t.Errorf("%s ends at %.6fs, want %.6fs", tt.phase, float64(got)/1e9, float64(tt.want)/1e9)
			}
		})
	}
}
