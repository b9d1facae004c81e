package scenario

import (
	"fmt"
	"strings"
	"testing"

	"github.com/ocsemu/ocsemu/dataplane/limits"
)

// The YAML decoder truncates 4.5 to 4, reads 1e1 as 10 and 010 as octal
// 8 when the field is an integer: Parse refuses them, with line and field.
func TestParseIntegerFields(t *testing.T) {
	const job = "jobs:\n  - {name: a, pattern: ring, workers: [r0s0, r1s0], bytes: 1MiB, compute: 1ms, iterations: ITER}\n"
	tests := []struct {
		name, racks, iter string
		want              string // "" = valid
	}{
		{"integers", "4", "2", ""},
		{"hex is an integer", "0x4", "2", ""},
		{"signed", "+4", "2", ""},
		{"decimal racks", "4.5", "2", "x.yaml:5: fabric.racks: must be a whole number, got 4.5"},
		{"decimal iterations", "4", "2.7", "x.yaml:10: jobs[0].iterations: must be a whole number, got 2.7"},
		{"exponent", "1e1", "2", "x.yaml:5: fabric.racks: must be a whole number written in digits: write 10, not 1e1"},
		{"whole decimal", "4.0", "2", "fabric.racks: must be a whole number written in digits: write 4, not 4.0"},
		{"negative decimal", "-4.5", "2", "fabric.racks: must be a whole number, got -4.5"},
		{"infinity", ".inf", "2", "fabric.racks: must be a whole number, got .inf"},
		{"octal by accident", "010", "2", "fabric.racks: 010 has a leading zero"},
		{"quoted", `"4"`, "2", "x.yaml:5: fabric.racks: must be a number, not text: write 4 without quotes"},
		{"a word", "four", "2", `x.yaml:5: fabric.racks: must be a whole number written in digits, got "four"`},
		{"a bool", "true", "2", `fabric.racks: must be a whole number written in digits, got "true"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			y := strings.Replace(base, "racks: 4", "racks: "+tt.racks, 1) + strings.Replace(job, "ITER", tt.iter, 1)
			s, err := Parse([]byte(y), "x.yaml")
			switch {
			case tt.want == "" && err != nil:
				t.Fatalf("unexpected error: %v", err)
			case tt.want == "" && s.Fabric.Racks != 4:
				t.Errorf("racks = %d, want 4", s.Fabric.Racks)
			case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
				t.Errorf("error %v, want it to contain %q", err, tt.want)
			}
		})
	}
}

// Every problem comes in one go, in the order of the lines, each once:
// bad values, unknown and repeated keys, missing keys and the checks of
// the fabric and the jobs.
func TestParseReportsEverythingAtOnce(t *testing.T) {
	tests := []struct {
		name, yaml string
		want       []string // each once, in this order
		not        []string
	}{
		{"units and job structure together",
			"name: t\nfabric:\n  kind: eps\n  racks: 2\n  servers_per_rack: 1\n  rates: {server: 10}\njobs:\n" +
				"  - {name: a, pattern: ring, workers: [r0s0, r1s0], bytes: 1MiB, iterations: 1}\n" +
				"  - {name: a, pattern: ring, workers: [r0s0, r1s0], bytes: 1MiB, iterations: 1}\n",
			[]string{"x.yaml:6: fabric.rates.server: rate \"10\" has no unit", `x.yaml:9: jobs[1].name: duplicate job name "a"`}, nil},
		{"bad value, unknown key, decimal, missing key, range",
			"name: t\nfabric:\n  kind: eps\n  racks: 4.5\n  servers_per_rack: 2\n  mtu: 100\n  rates: {server: 1Gbit}\njobs:\n" +
				"  - {name: a, pattern: ring, workers: [r0s0, r1s0], bytes: 1MiB, compute: 5, iterations: 1}\n" +
				"  - {name: b, pattern: tree, workerz: [r0s0], bytes: 1MiB, iterations: 1}\n",
			[]string{"x.yaml:4: fabric.racks: must be a whole number", "x.yaml:6: fabric.mtu: must be between 576 and 9000",
				`x.yaml:9: jobs[0].compute: duration "5" has no unit`, `x.yaml:10: jobs[1].workerz: unknown key "workerz", did you mean "workers"?`,
				"x.yaml:10: jobs[1].workers: required", `x.yaml:10: jobs[1].pattern: unknown pattern "tree"`},
			// racks was refused: no second word about it, and no "no server
			// r0s0 in a fabric of 0 racks" for the workers.
			[]string{"between 1 and 4096", "no server"}},
		{"repeated key keeps the rest",
			"name: t\nfabric:\n  kind: eps\n  racks: 2\n  servers_per_rack: 1\n  racks: 3\n  mtu: 1\n",
			[]string{`x.yaml:6: fabric.racks: mapping key "racks" already defined at line 4`, "x.yaml:7: fabric.mtu: must be between"}, nil},
		{"list expected",
			"name: t\nfabric: {kind: eps, racks: 2, servers_per_rack: 1}\njobs:\n  - {name: a, pattern: ring, workers: r0s0, bytes: 1MiB, iterations: 1}\n",
			[]string{"x.yaml:4: jobs[0].workers: must be a list"}, []string{"between 2 and"}},
		{"mapping expected",
			"name: t\nfabric: {kind: eps, racks: 2, servers_per_rack: 1, rates: 1Gbit}\n",
			[]string{"x.yaml:2: fabric.rates: must be a mapping of keys"}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse([]byte(tt.yaml), "x.yaml")
			if err == nil {
				t.Fatal("no error")
			}
			msg, pos := err.Error(), 0
			for _, w := range tt.want {
				if n := strings.Count(msg, w); n != 1 {
					t.Errorf("%q appears %d times in:\n%s", w, n, msg)
					continue
				}
				i := strings.Index(msg, w)
				if i < pos {
					t.Errorf("%q is out of line order in:\n%s", w, msg)
				}
				pos = i
			}
			for _, w := range tt.not {
				if strings.Contains(msg, w) {
					t.Errorf("%q should not appear in:\n%s", w, msg)
				}
			}
		})
	}
}

func TestParseMissingSections(t *testing.T) {
	tests := []struct {
		name, yaml string
		want       []string
		not        string
	}{
		{"empty file", "", []string{"x.yaml: empty file"}, "EOF"},
		{"only comments", "# nothing yet\n\n", []string{"x.yaml: empty file"}, "EOF"},
		{"no fabric", "name: t\n", []string{"x.yaml: fabric: required"}, "between 1 and"},
		{"no name", "fabric: {kind: eps, racks: 2, servers_per_rack: 1}\n", []string{"x.yaml: name: required"}, "it is empty"},
		{"no racks", "name: t\nfabric:\n  kind: eps\n  servers_per_rack: 1\n", []string{"x.yaml:2: fabric.racks: required (1..4096)"}, "between 1 and"},
		{"no servers", "name: t\nfabric:\n  kind: eps\n  racks: 2\n", []string{"x.yaml:2: fabric.servers_per_rack: required (1..250)"}, "between 1 and"},
		{"job without name, pattern, bytes, iterations",
			"name: t\nfabric: {kind: eps, racks: 2, servers_per_rack: 1}\njobs:\n  - workers: [r0s0, r1s0]\n",
			[]string{"x.yaml:4: jobs[0].name: required", "jobs[0].pattern: required", "jobs[0].bytes: required", "jobs[0].iterations: required"},
			"unknown pattern"},
		{"broken fabric is not also missing keys", "name: t\nfabric: 3\n", []string{"x.yaml:2: fabric: must be a mapping of keys"}, "fabric.racks"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse([]byte(tt.yaml), "x.yaml")
			if err == nil {
				t.Fatal("no error")
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
			if tt.not != "" && strings.Contains(err.Error(), tt.not) {
				t.Errorf("error %q should not contain %q", err, tt.not)
			}
		})
	}
}

// Each limit of dataplane/limits is checked by the scenario, at the limit
// and one past it.
func TestScenarioLimits(t *testing.T) {
	ocs := func(racks, uplinks, switches int, spread string) string {
		return fmt.Sprintf("name: t\nfabric: {kind: ocs, racks: %d, servers_per_rack: 1, uplinks_per_tor: %d, ocs: {switches: %d, spread: %s}}\n", racks, uplinks, switches, spread)
	}
	jobs := func(body string) string {
		return "name: t\nfabric: {kind: eps, racks: 4096, servers_per_rack: 2}\njobs:\n  - " + body + "\n"
	}
	workers := func(n int) string {
		w := make([]string, n)
		for i := range w {
			w[i] = fmt.Sprintf("r%ds%d", i/2, i%2)
		}
		return "[" + strings.Join(w, ", ") + "]"
	}
	tests := []struct {
		name, yaml, want string
	}{
		{"racks at the limit", "name: t\nfabric: {kind: eps, racks: 4096, servers_per_rack: 1}\n", ""},
		{"racks past it", "name: t\nfabric: {kind: eps, racks: 4097, servers_per_rack: 1}\n", "fabric.racks: must be between 1 and 4096"},
		{"servers past", "name: t\nfabric: {kind: eps, racks: 2, servers_per_rack: 251}\n", "fabric.servers_per_rack: must be between 1 and 250"},
		{"uplinks past", ocs(2, 65, 1, "round-robin"), "fabric.uplinks_per_tor: must be between 1 and 64"},
		{"switches past", ocs(2, 64, 65, "round-robin"), "fabric.ocs.switches: must be between 1 and 64"},
		// 4092 racks x 4 uplinks = 16368 ports on one switch: the limit.
		{"ports per OCS at the limit", ocs(limits.MaxPortsPerOCS/4, 4, 1, "round-robin"), ""},
		{"ports per OCS past it", ocs(limits.MaxPortsPerOCS/4+1, 4, 1, "round-robin"), "fabric.ocs.switches: OCS switch 0 would carry 16372 ports (4093 racks x 4 uplinks each), more than the 16368"},
		{"ports per OCS spread over two", ocs(4096, 6, 2, "round-robin"), ""},
		{"ports per OCS uneven round-robin", ocs(4096, 9, 2, "round-robin"), "OCS switch 0 would carry 20480 ports (4096 racks x 5 uplinks each)"},
		{"ports per OCS block", ocs(4096, 8, 1, "block"), "OCS switch 0 would carry 32768 ports"},
		{"workers at the limit", jobs("{name: a, pattern: ring, workers: " + workers(limits.MaxWorkers) + ", bytes: 1MiB, iterations: 1}"), ""},
		{"flows at the limit", jobs("{name: a, pattern: alltoall, workers: " + workers(1000) + ", bytes: 1MiB, iterations: 1}"), ""},
		{"flows past it", jobs("{name: a, pattern: alltoall, workers: " + workers(1001) + ", bytes: 1MiB, iterations: 1}"), "jobs: the jobs make 1001000 flows over their iterations (a: 1001000), more than the 1000000 the flow model holds"},
		{"workers past it", jobs("{name: a, pattern: ring, workers: " + workers(limits.MaxWorkers+1) + ", bytes: 1MiB, iterations: 1}"), "jobs[0].workers: a job needs between 2 and 4096 workers, got 4097"},
		{"bytes at the limit", jobs("{name: a, pattern: ring, workers: [r0s0, r1s0], bytes: 1TiB, iterations: 1}"), ""},
		{"bytes past it", jobs("{name: a, pattern: ring, workers: [r0s0, r1s0], bytes: 1.001TiB, iterations: 1}"), `jobs[0].bytes: size "1.001TiB" out of range (1B to 1TiB)`},
		{"iterations at the limit", jobs("{name: a, pattern: ring, workers: [r0s0, r1s0], bytes: 1MiB, iterations: 100000}"), ""},
		{"iterations past it", jobs("{name: a, pattern: ring, workers: [r0s0, r1s0], bytes: 1MiB, iterations: 100001}"), "jobs[0].iterations: must be between 1 and 100000"},
		{"reconfiguration delay at the limit", "name: t\nfabric: {racks: 2, servers_per_rack: 1, ocs: {reconfig_delay: 10s}}\n", ""},
		{"reconfiguration delay past it", "name: t\nfabric: {racks: 2, servers_per_rack: 1, ocs: {reconfig_delay: 10001ms}}\n", "fabric.ocs.reconfig_delay: must be between 0s and 10s, got 10.001s"},
		{"name at the limit", "name: " + strings.Repeat("a", limits.MaxLabName) + "\nfabric: {kind: eps, racks: 2, servers_per_rack: 1}\n", ""},
		{"name past it", "name: " + strings.Repeat("a", limits.MaxLabName+1) + "\nfabric: {kind: eps, racks: 2, servers_per_rack: 1}\n", "is longer than 24 characters"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse([]byte(tt.yaml), "x.yaml")
			switch {
			case tt.want == "" && err != nil:
				t.Errorf("unexpected error: %v", err)
			case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
				t.Errorf("error %v, want it to contain %q", err, tt.want)
			}
		})
	}
	// A scenario built in code is held to the same bound on bytes.
	s, err := Parse([]byte(jobs("{name: a, pattern: ring, workers: [r0s0, r1s0], bytes: 1MiB, iterations: 1}")), "x.yaml")
	if err != nil {
		t.Fatal(err)
	}
	s.Jobs[0].Bytes = ByteSize(limits.MaxBytes + 1)
	if err := s.Validate(); err == nil || !strings.Contains(err.Error(), "jobs[0].bytes: 1099511627777 bytes is more than the 1TiB") {
		t.Errorf("Validate with bytes past the limit: %v", err)
	}
}

// Aliases work, a refused alias does not blank its anchor, and aliases
// that expand to millions of values are refused instead of walked (found
// while looking into FuzzParse's stalls: 48 kB of aliases took minutes).
func TestParseAliases(t *testing.T) {
	const fab = "name: t\nfabric: {kind: eps, racks: 2, servers_per_rack: 2, rates: {server: 1Gbit}}\njobs:\n"
	s, err := Parse([]byte(fab+"  - {name: a, pattern: ring, workers: &w [r0s0, r1s0], ring: *w, bytes: 1MiB, iterations: 1}\n"+
		"  - {name: b, pattern: ring, workers: [r0s1, r1s1], bytes: 1MiB, iterations: 1, tcp: &cc {congestion_control: reno}}\n"+
		"  - {name: c, pattern: ring, workers: [r0s1, r1s1], bytes: 1MiB, iterations: 1, tcp: *cc}\n"), "x.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Jobs[0].Ring) != 2 || s.Jobs[2].TCP == nil || s.Jobs[2].TCP.CongestionControl != "reno" {
		t.Errorf("aliases not followed: %+v", s.Jobs)
	}
	_, err = Parse([]byte(fab+"  - {name: a, pattern: ring, workers: &w [r0s0, r1s0], bytes: 1MiB, iterations: 1}\n"+
		"  - {name: b, pattern: ring, workers: [r0s1, r1s1], bytes: 1MiB, iterations: *w}\n"), "x.yaml")
	if err == nil || !strings.Contains(err.Error(), "x.yaml:5: jobs[1].iterations: cannot unmarshal !!seq into int") || strings.Contains(err.Error(), "jobs[0]") {
		t.Errorf("a refused alias: %v", err)
	}
	bomb := fab + "  - &j {name: a, pattern: ring, bytes: 1MB, iterations: 1, workers: [" + strings.Repeat("r0s0,", 4000) + "r0s0]}\n" +
		strings.Repeat("  - *j\n", 4000)
	_, err = Parse([]byte(bomb), "x.yaml")
	if err == nil || !strings.Contains(err.Error(), "aliases (*name) expand to too many values") {
		t.Errorf("alias bomb of %d bytes: %.300v", len(bomb), err)
	}
}

// A 0 written out where leaving the key out gives a default is refused
// with its line, not quietly replaced by the default; an eps fabric may
// say it has no uplinks.
func TestParseExplicitZeros(t *testing.T) {
	const ocs = "name: t\nfabric:\n  kind: ocs\n  racks: 2\n  servers_per_rack: 1\n"
	for _, tc := range []struct {
		name, yaml, want string // want "": valid
	}{
		{"uplinks", ocs + "  uplinks_per_tor: 0\n", "x.yaml:6: fabric.uplinks_per_tor: 0 is not allowed: give a value, or leave the key out for the default (1)"},
		{"ocs switches", ocs + "  ocs: {switches: 0}\n", "x.yaml:6: fabric.ocs.switches: 0 is not allowed"},
		{"mtu", ocs + "  mtu: 0\n", "x.yaml:6: fabric.mtu: 0 is not allowed"},
		{"inc capacity", ocs + "  inc: {capacity: 0}\n", "x.yaml:6: fabric.inc.capacity: 0 is not allowed"},
		{"oversubscription", base + "  eps: {oversubscription: 0}\n", "fabric.eps.oversubscription: 0 is not allowed"},
		{"slot", ocs + "scheduler: {name: fcfs, slot: 0ms}\n", "x.yaml:6: scheduler.slot: 0 is not allowed: give a value, or leave the key out for the default (1s)"},
		{"eps without uplinks", base + "  uplinks_per_tor: 0\n", ""},
		{"left out", ocs, ""},
	} {
		_, err := Parse([]byte(tc.yaml), "x.yaml")
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s: %v", tc.name, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%s: got %v, want %q", tc.name, err, tc.want)
		}
	}
}
