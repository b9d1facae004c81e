package scenario

import (
	"fmt"
	"io/fs"
	"strings"
	"testing"

	"github.com/ocsemu/ocsemu/dataplane/topo"
	"github.com/ocsemu/ocsemu/scenarios"
)

const base = `
name: t
fabric:
  kind: eps
  racks: 4
  servers_per_rack: 2
  rates:
    server: 1Gbit
`

func TestParseErrors(t *testing.T) {
	tests := []struct {
		name string
		yaml string
		want []string // substrings the error must contain
	}{
		{"unknown key with line", "name: t\nfabric:\n  kind: eps\n  rakcs: 4\n", []string{"x.yaml:4:", "fabric.rakcs", `did you mean "racks"`}},
		{"unknown top key", "name: t\nfabrik: {}\n", []string{"x.yaml:2:", `unknown key "fabrik"`}},
		// A file that is no scenario (/etc/shadow): its lines are shown cut.
		{"unknown long key", "name: t\nroot:$6$abcdefghijklmnopqrstuvwxyz:19000:0:99999:7::: x\n", []string{`x.yaml:2: root:$6$...: unknown key "root:$6$..."`}},
		{"rate without unit", strings.Replace(base, "1Gbit", "1000", 1), []string{"x.yaml:8: fabric.rates.server: rate \"1000\" has no unit"}},
		{"rate bad unit", strings.Replace(base, "1Gbit", "1Gfoo", 1), []string{"unknown unit"}},
		{"zero racks", strings.Replace(base, "racks: 4", "racks: 0", 1), []string{"x.yaml:5:", "fabric.racks", "between 1 and"}},
		{"too many servers", strings.Replace(base, "servers_per_rack: 2", "servers_per_rack: 900", 1), []string{"x.yaml:6:", "fabric.servers_per_rack"}},
		{"bad kind", strings.Replace(base, "kind: eps", "kind: optical", 1), []string{"x.yaml:4:", `unknown kind "optical"`}},
		{"duplicate key", base + "  racks: 3\n", []string{`"racks" already defined`}},
		{"bad name", strings.Replace(base, "name: t", "name: Lab_1", 1), []string{"x.yaml:2:", "name:", "must start with a letter"}},
		{"eps with uplinks", base + "  uplinks_per_tor: 2\n", []string{"fabric.uplinks_per_tor", "hybrid"}},
		{"more ocs than uplinks", "name: t\nfabric:\n  kind: ocs\n  racks: 2\n  servers_per_rack: 1\n  uplinks_per_tor: 2\n  ocs:\n    switches: 3\n", []string{"x.yaml:8:", "fabric.ocs.switches"}},
		{"block spread uneven", "name: t\nfabric:\n  racks: 2\n  servers_per_rack: 1\n  uplinks_per_tor: 3\n  ocs:\n    switches: 2\n    spread: block\n", []string{"fabric.ocs.spread", "multiple"}},
		{"mtu", base + "  mtu: 100\n", []string{"x.yaml:9:", "fabric.mtu"}},
		{"wrong type", strings.Replace(base, "racks: 4", "racks: four", 1), []string{"x.yaml:5: fabric.racks:", "four"}},
		{"not a mapping", "- a\n- b\n", []string{"must be a YAML mapping"}},
		{"bad yaml", "name: [\n", []string{"invalid YAML"}},
		{"duration without unit", base + "  ocs:\n    reconfig_delay: 50\n", []string{"has no unit"}},
		{"several errors at once", strings.Replace(strings.Replace(base, "racks: 4", "racks: 0", 1), "name: t", "name: ''", 1), []string{"fabric.racks", "name: invalid lab name: it is empty"}},
		{"ocs with one rack", "name: t\nfabric:\n  racks: 1\n  servers_per_rack: 1\n", []string{"at least 2 racks"}},
		{"bad cc", base + "  tcp:\n    congestion_control: 'cubic; rm'\n", []string{"fabric.tcp.congestion_control"}},
		{"bad server queue", base + "  server_queue: sfq\n", []string{"x.yaml:9:", "fabric.server_queue", `"sfq"`, "fifo", "fair"}},
		{"fair queue on an unshaped port", strings.Replace(base, "1Gbit", "unlimited", 1) + "  server_queue: fair\n", []string{"fabric.server_queue", "unlimited"}},
		{"bad switch queue", base + "  switch_queue: red\n", []string{"x.yaml:9:", "fabric.switch_queue", `"red"`, "fifo", "fair"}},
		{"fair switch queue on unshaped ports", strings.Replace(base, "1Gbit", "unlimited", 1) + "  switch_queue: fair\n", []string{"fabric.switch_queue", "unlimited"}},
		{"fair switch queue on an eps fabric with only an uplink rate", strings.Replace(base, "1Gbit", "unlimited\n    uplink: 1Gbit", 1) + "  switch_queue: fair\n", []string{"fabric.switch_queue", "unlimited"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse([]byte(tt.yaml), "x.yaml")
			if err == nil {
				t.Fatalf("want error containing %q, got none", tt.want)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
		})
	}
}

func TestParseDefaults(t *testing.T) {
	s, err := Parse([]byte("name: lab\nfabric:\n  racks: 3\n  servers_per_rack: 2\n  rates: {server: 10Gbit, uplink: 40G}\n"), "")
	if err != nil {
		t.Fatal(err)
	}
	f := s.Fabric
	if f.Kind != KindOCS || f.UplinksPerToR != 1 || f.OCS.Switches != 1 || f.MTU != 1500 || f.TCP.CongestionControl != "cubic" || f.ServerQueue != "fifo" || s.Version != 1 {
		t.Errorf("defaults not applied: %+v", f)
	}
	if f.Rates.Server != 10e9 || f.Rates.Uplink != 40e9 {
		t.Errorf("rates = %v, %v", f.Rates.Server, f.Rates.Uplink)
	}
}

func TestUplinkSwitch(t *testing.T) {
	tests := []struct {
		uplinks, switches int
		spread            string
		r, u              int
		sw, port          int
	}{
		{4, 2, SpreadRoundRobin, 0, 0, 0, 0},
		{4, 2, SpreadRoundRobin, 0, 1, 1, 0},
		{4, 2, SpreadRoundRobin, 0, 2, 0, 1},
		{4, 2, SpreadRoundRobin, 3, 3, 1, 7},
		{4, 2, SpreadBlock, 0, 1, 0, 1},
		{4, 2, SpreadBlock, 1, 2, 1, 2},
		{3, 2, SpreadRoundRobin, 1, 2, 0, 3}, // switch 0 holds 2 ports per ToR
		{3, 2, SpreadRoundRobin, 1, 1, 1, 1}, // switch 1 holds 1 port per ToR
	}
	for _, tt := range tests {
		f := Fabric{UplinksPerToR: tt.uplinks, OCS: OCS{Switches: tt.switches, Spread: tt.spread}}
		sw, port := f.UplinkSwitch(tt.r, tt.u)
		if sw != tt.sw || port != tt.port {
			t.Errorf("%+v: got sw %d port %d", tt, sw, port)
		}
	}
}

func TestShippedScenariosParse(t *testing.T) {
	entries, err := fs.Glob(scenarios.Files, "*.yaml")
	if err != nil || len(entries) == 0 {
		t.Fatalf("no embedded scenarios: %v", err)
	}
	for _, e := range entries {
		data, _ := scenarios.Files.ReadFile(e)
		if _, err := Parse(data, e); err != nil {
			t.Errorf("%s: %v", e, err)
		}
	}
}

func FuzzParse(f *testing.F) {
	f.Add([]byte(base))
	f.Add([]byte("name: t\nfabric: {racks: 2, servers_per_rack: 1, ocs: {switches: 1}}\n"))
	f.Add([]byte("name: t\nfabric:\n  rates: {server: 1e3Gbit}\n"))
	f.Add([]byte(base + "jobs:\n  - {name: a, pattern: ring, workers: [r0s0, r1s0], bytes: 1MiB, compute: 1ms, iterations: 2, ring: [r1s0, r0s0]}\nscheduler: {name: fcfs, slot: 10ms}\n"))
	// The checks of integers, repeated keys, required keys, lists and
	// limits, and every problem reported at once.
	f.Add([]byte(""))
	f.Add([]byte("# nothing\n"))
	f.Add([]byte("name: t\n"))
	f.Add([]byte("name: t\nfabric: {racks: 4.5, servers_per_rack: 1e1, mtu: 010, uplinks_per_tor: 0x2}\n"))
	f.Add([]byte("name: t\nfabric:\n  racks: 2\n  racks: 3\n  servers_per_rack: ~\n"))
	f.Add([]byte("name: t\nfabric: {kind: eps, racks: 2, servers_per_rack: 1}\njobs:\n  - {name: a, pattern: ring, workers: r0s0, bytes: 1TiB, iterations: 2.7}\n  - {workers: [r0s0, {a: b}], bytes: 2TiB}\n  - 3\n"))
	f.Add([]byte("name: t\nfabric: {kind: ocs, racks: 4096, servers_per_rack: 1, uplinks_per_tor: 8, ocs: {switches: 1, spread: block, reconfig_delay: 11s}}\n"))
	f.Add([]byte("name: t\nfabric: &f {kind: eps, racks: 2, servers_per_rack: 1}\njobs: [{name: a, pattern: ps, workers: [r0s0, r1s0], bytes: 1MB, iterations: 1, tcp: *f}]\n"))
	f.Add([]byte("name: t\nfabric: {kind: eps, racks: 2, servers_per_rack: 1}\njobs: [&j {name: a, pattern: ring, bytes: 1MB, iterations: 1, workers: [" +
		strings.Repeat("r0s0,", 50) + "r1s0]}" + strings.Repeat(", *j", 50) + "]\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		s, err := Parse(data, "fuzz")
		if err != nil {
			if err.Error() == "" {
				t.Fatal("empty error message")
			}
			return
		}
		// A scenario that parses must also validate again and map every
		// uplink to a real port.
		if err := s.Validate(); err != nil {
			t.Fatalf("parsed scenario fails validation: %v", err)
		}
		f := s.Fabric
		if f.HasOCS() && f.Racks*f.UplinksPerToR <= 4096 {
			for u := 0; u < f.UplinksPerToR; u++ {
				sw, port := f.UplinkSwitch(f.Racks-1, u)
				if sw < 0 || sw >= f.OCS.Switches || port < 0 || port >= f.Racks*f.PortsPerToROn(sw) {
					t.Fatalf("uplink %d -> switch %d port %d out of range", u, sw, port)
				}
			}
		}
	})
}

func TestJobErrors(t *testing.T) {
	const fab = "name: t\nfabric: {kind: eps, racks: 2, servers_per_rack: 2, rates: {server: 1Gbit}}\njobs:\n"
	tests := []struct{ jobs, want string }{
		{"  - {name: a, pattern: ps, workers: [r0s0, r1s0], bytes: 1MB, compute: 1ms, iterations: 1}\n", ""},
		{"  - {name: a, pattern: ps, workers: [r0s0, r1s0], bytes: 1MB, iterations: 1}\n  - {name: a, pattern: ps, workers: [r0s0, r1s0], bytes: 1MB, iterations: 1}\n", `jobs[1].name: duplicate job name "a"`},
		{"  - {name: a, pattern: tree, workers: [r0s0, r1s0], bytes: 1MB, iterations: 1}\n", `jobs[0].pattern: unknown pattern "tree"`},
		{"  - {name: a, pattern: ps, workers: [r0s0, r5s0], bytes: 1MB, iterations: 1}\n", "jobs[0].workers[1]: no server r5s0"},
		{"  - {name: a, pattern: ps, workers: [r0s0, r0s0], bytes: 1MB, iterations: 1}\n", "listed twice"},
		{"  - {name: a, pattern: ps, workers: [r0s0, r1s0], bytes: 1000, iterations: 1}\n", `size "1000" has no unit`},
		{"  - {name: a, pattern: ps, workers: [r0s0, r1s0], bytes: 1MB, iterations: 0}\n", "jobs[0].iterations: must be between 1 and 100000"},
		{"  - {name: a, pattern: ring, workers: [r0s0, r1s0], bytes: 1MB, iterations: 1, inc: true}\n", "in-network aggregation is for the ps pattern"},
		{"  - {name: a, pattern: ring, workers: [r0s0, r1s0, r1s1], ring: [r0s0, r1s0], bytes: 1MB, iterations: 1}\n", "every worker exactly once"},
		{"  - {name: a, pattern: hd, workers: [r0s0, r1s0, r1s1], bytes: 1MB, iterations: 1}\n", "power-of-two"},
		{"  - {name: a, pattern: ps, workers: [r0s0, r1s0], bytes: 1MB, iterations: 1, compute: 1ms, model: {params: 1e9, tokens: 1, gpu_tflops: 1, efficiency: 0.5}}\n", "give compute or model, not both"},
		{"  - {name: a, pattern: ps, workers: [r0s0, r1s0], bytes: 1MB, iterations: 1, modle: {}}\n", `did you mean "model"`},
	}
	for _, tt := range tests {
		_, err := Parse([]byte(fab+tt.jobs), "x.yaml")
		switch {
		case tt.want == "" && err != nil:
			t.Errorf("%s: unexpected %v", tt.jobs, err)
		case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
			t.Errorf("%s: error %v, want %q", tt.jobs, err, tt.want)
		}
	}
}

func TestModelComputeTime(t *testing.T) {
	// 6 * 2048 tokens * 125e6 params / (312e12 * 0.4) = 12.3 ms; K = 8 with recomputation.
	m := Model{Params: 125e6, Tokens: 2048, GPUTFLOPS: 312, Efficiency: 0.4}
	if got := m.ComputeTime().Microseconds(); got != 12307 {
		t.Errorf("compute time %d us, want 12307", got)
	}
	m.Recompute = true
	if got := m.ComputeTime().Microseconds(); got != 16410 {
		t.Errorf("with recomputation %d us, want 16410", got)
	}
}

func TestLossSettings(t *testing.T) {
	good := base + "  loss:\n    - {port: tor0:core, direction: egress, percent: 1}\n    - {port: r1s0:eth0, percent: 5}\n"
	s, err := Parse([]byte(good), "x.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if d := s.Fabric.Loss[1].Direction; d != "both" {
		t.Errorf("default direction %q, want both", d)
	}
	rs, err := s.LossRules(topo.Build(s.Spec()))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range rs {
		got = append(got, r.String())
	}
	if want := "tor0:core egress 1%;r1s0:eth0 ingress 5%;r1s0:eth0 egress 5%"; strings.Join(got, ";") != want {
		t.Errorf("rules %v, want %s", got, want)
	}
	for _, tt := range []struct{ loss, want string }{
		{"[{port: tor0:up0, percent: 1}]", `x.yaml:9: fabric.loss[0].port: invalid loss port: "tor0:up0": node tor0 has no interface "up0" (it has core, s0, s1)`},
		{"[{port: tor9:s0, percent: 1}]", `fabric.loss[0].port: invalid loss port: "tor9:s0": lab "t" has no node "tor9"`},
		{"[{port: tor0, percent: 1}]", `"tor0" is not node:iface`},
		{"[{port: tor0:s0, direction: out, percent: 1}]", `fabric.loss[0].direction: direction "out": want ingress, egress or both`},
		{"[{port: tor0:s0, percent: 150}]", "fabric.loss[0].percent: loss 150%: want 0 to 100"},
		{"[{port: tor0:s0, percent: -1}]", "fabric.loss[0].percent: loss -1%: want 0 to 100"},
		{"[{port: tor0:s0, percent: 1}, {port: tor0:s0, direction: ingress, percent: 2}]", "fabric.loss[1]: tor0:s0 ingress is already set by fabric.loss[0]"},
		{"[{port: tor0:s0, percent: 1, prob: 2}]", `unknown key "prob"`},
	} {
		_, err := Parse([]byte(base+"  loss: "+tt.loss+"\n"), "x.yaml")
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("loss %s: got %v, want an error containing %q", tt.loss, err, tt.want)
		}
	}
}

func TestINCCapacityBounds(t *testing.T) {
	const head = "name: t\nfabric: {kind: ocs, racks: 2, servers_per_rack: 1, uplinks_per_tor: 1, rates: {server: 1Gbit, uplink: 1Gbit}, inc: {capacity: %d}}\n" +
		"jobs:\n  - {name: a, pattern: ps, workers: [r0s0, r1s0], bytes: 1MB, compute: 1ms, iterations: 1}\n"
	for _, tt := range []struct {
		capacity int
		want     string
	}{
		{1, ""}, {1024, ""},
		{1025, "fabric.inc.capacity: must be from 1 to 1024 jobs per ToR (a ToR aggregator partitions its 1024 slots between them, at least one each), got 1025"},
		{-1, "got -1"},
	} {
		s, err := Parse([]byte(fmt.Sprintf(head, tt.capacity)), "x.yaml")
		switch {
		case tt.want == "" && (err != nil || s.Fabric.INC.Capacity != tt.capacity):
			t.Errorf("capacity %d: %v", tt.capacity, err)
		case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
			t.Errorf("capacity %d: error %v, want %q", tt.capacity, err, tt.want)
		}
	}
}

func TestLJFSettingErrors(t *testing.T) {
	const head = "name: t\nfabric: {kind: ocs, racks: 4, servers_per_rack: 1, uplinks_per_tor: 4, rates: {server: 1Gbit, uplink: 1Gbit}}\n" +
		"jobs:\n  - {name: a, pattern: ps, workers: [r0s0, r1s0], bytes: 1MB, compute: 1ms, iterations: 1}\n"
	tests := []struct{ sched, want string }{
		{"{name: ljf, base_uplinks: 4, order: largest}", ""},
		{"{name: ljf, base_uplinks: 2, order: arrival}", ""},
		{"{name: ljf, base_uplinks: 1}", "scheduler.base_uplinks: must be 0 (default 2, a ring) or from 2 to the ToR's 4 uplinks, got 1"},
		{"{name: ljf, base_uplinks: 5}", "got 5"},
		{"{name: ljf, order: smallest}", `scheduler.order: must be arrival (default) or largest, got "smallest"`},
	}
	for _, tt := range tests {
		_, err := Parse([]byte(head+"scheduler: "+tt.sched+"\n"), "x.yaml")
		switch {
		case tt.want == "" && err != nil:
			t.Errorf("%s: unexpected %v", tt.sched, err)
		case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
			t.Errorf("%s: error %v, want %q", tt.sched, err, tt.want)
		}
	}
}
