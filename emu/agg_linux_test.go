package main

import (
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ocsemu/ocsemu/dataplane/fabric"
	"github.com/ocsemu/ocsemu/dataplane/fabric/fabrictest"
)

// TestCLIRunINC runs a plan whose ps job uses in-network aggregation over
// three racks of an OCS fabric: the aggregators start in the ToR
// namespaces, admit the job, the pulls verify the exact sums, the
// admission is in comparison.json, and no aggregator outlives the run;
// with the INC band at every shaper and the workers' congestion control.
func TestCLIRunINC(t *testing.T) {
	fabrictest.SkipUnlessRoot(t)
	bin := buildEmu(t)
	dir := t.TempDir()
	lab := fabrictest.UniqueLab("hicli")
	scen := filepath.Join(dir, "s.yaml")
	os.WriteFile(scen, []byte("name: "+lab+`
fabric: {kind: ocs, racks: 3, servers_per_rack: 2, uplinks_per_tor: 2, ocs: {switches: 1, reconfig_delay: 1ms}, inc: {capacity: 2}, rates: {server: 1Gbit, uplink: 1Gbit}}
jobs:
  - {name: agg, pattern: ps, workers: [r0s0, r0s1, r1s0, r2s0, r2s1], bytes: 2MiB, compute: 5ms, iterations: 2, inc: true}
  - {name: ring, pattern: ring, workers: [r0s1, r1s1], bytes: 1MiB, compute: 5ms, iterations: 2}
`), 0o644)
	res := filepath.Join(dir, "results")
	// With the INC band and congestion control on: the sums stay exact.
	out, err := run(t, bin, "run", scen, "--results", res, "--inc-band", "--inc-cc")
	if err != nil {
		t.Fatalf("emu run: %v\n%s", err, out)
	}
	for _, want := range []string{"3 aggregators serving", "job agg: in-network aggregation at [tor0 tor1 tor2], rooted at tor0", "shaped ports serve INC packets first"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "does not run in-network aggregation") {
		t.Errorf("the old INC warning is still printed")
	}
	var cmp struct {
		Phases []struct {
			Job, Phase string
			Verified   bool
		} `json:"phases"`
		INC []struct {
			Job      string `json:"job"`
			Admitted bool   `json:"admitted"`
		} `json:"inc"`
	}
	data, err := os.ReadFile(filepath.Join(res, lab, "latest", "comparison.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, &cmp); err != nil {
		t.Fatal(err)
	}
	if len(cmp.INC) != 1 || cmp.INC[0].Job != "agg" || !cmp.INC[0].Admitted {
		t.Errorf("INC admissions in comparison.json: %+v", cmp.INC)
	}
	pulls := 0
	for _, p := range cmp.Phases {
		if p.Job == "agg" && p.Phase == "pull" {
			pulls++
			if !p.Verified {
				t.Errorf("an INC pull was not verified: %+v", p)
			}
		}
	}
	if pulls != 2 {
		t.Errorf("%d verified INC pulls, want 2", pulls)
	}
	// pgrep exits 1 when nothing matches; any other failure means the
	// check did not run.
	ps, err := exec.Command("pgrep", "-f", "agg serve --lab "+lab).Output()
	var ee *exec.ExitError
	if err != nil && !(errors.As(err, &ee) && ee.ExitCode() == 1) {
		t.Fatalf("pgrep: %v", err)
	}
	if len(ps) != 0 {
		t.Errorf("aggregator processes left behind: %s", ps)
	}
	fabrictest.AssertGone(t, lab)
	if m, _ := filepath.Glob("/run/emu/labs/" + lab + ".agg-*.sock"); len(m) != 0 {
		t.Errorf("aggregator sockets left behind: %v", m)
	}
}

// TestCLIAggServeRefusals: `emu agg serve` by hand refuses a lab that does
// not exist (and leaves no file for it), a ToR the lab lacks, the host's
// namespace, and a second aggregator on a ToR; the first keeps answering.
func TestCLIAggServeRefusals(t *testing.T) {
	fabrictest.SkipUnlessRoot(t)
	bin := buildEmu(t)
	lab := deployOCSLab(t, bin, "aggs")
	missing := fabrictest.UniqueLab("noagg")
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"agg", "serve", "--lab", missing, "--tor", "tor0"}, "no such lab"},
		{[]string{"agg", "serve", "--lab", lab, "--tor", "tor5"}, "has no tor5"},
		{[]string{"agg", "serve", "--lab", lab, "--tor", "tor0"}, "runs in its ToR's namespace"},
	} {
		if out, err := run(t, bin, tc.args...); err == nil || !strings.Contains(out, tc.want) {
			t.Errorf("emu %s: want %q, got %v: %s", strings.Join(tc.args, " "), tc.want, err, out)
		}
	}
	if left, _ := filepath.Glob(fabric.LabFile(missing, "*")); len(left) > 0 {
		t.Errorf("agg serve of a missing lab left %v", left)
	}
	first := exec.Command(bin, "exec", "--lab", lab, "tor0", "--", bin, "agg", "serve", "--lab", lab, "--tor", "tor0")
	if err := first.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = first.Process.Signal(syscall.SIGTERM); _ = first.Wait() }()
	for i := 0; ; i++ {
		if out, err := run(t, bin, "agg", "stats", lab, "tor0"); err == nil {
			break
		} else if i > 200 {
			t.Fatalf("the first aggregator never answered: %s", out)
		}
		time.Sleep(25 * time.Millisecond)
	}
	out, err := run(t, bin, "exec", "--lab", lab, "tor0", "--", bin, "agg", "serve", "--lab", lab, "--tor", "tor0")
	if err == nil || !strings.Contains(out, "already has an aggregator") {
		t.Errorf("a second aggregator on tor0: want a refusal, got %v: %s", err, out)
	}
	if out, err := run(t, bin, "agg", "stats", lab, "tor0"); err != nil {
		t.Errorf("the first aggregator stopped answering after a refused second: %v\n%s", err, out)
	}
}
