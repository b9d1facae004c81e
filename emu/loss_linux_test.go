package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ocsemu/ocsemu/dataplane/fabric/fabrictest"
	"github.com/ocsemu/ocsemu/dataplane/loss/inject"
)

// A scenario's fabric.loss is applied at deploy; `emu loss` shows, sets
// and clears rules, refuses bad ones, and destroy leaves nothing.
func TestCLILoss(t *testing.T) {
	fabrictest.SkipUnlessRoot(t)
	bin := buildEmu(t)
	lab := fabrictest.UniqueLab("bpfcli")
	f := filepath.Join(t.TempDir(), "s.yaml")
	os.WriteFile(f, []byte("name: "+lab+"\nfabric:\n  kind: eps\n  racks: 1\n  servers_per_rack: 2\n  loss:\n    - {port: tor0:s1, direction: egress, percent: 100}\n"), 0o644)
	t.Cleanup(func() {
		run(t, bin, "destroy", lab)
		fabrictest.AssertGone(t, lab)
	})
	out, err := run(t, bin, "deploy", f)
	if err != nil || !strings.Contains(out, "loss: tor0:s1 egress 100%") {
		t.Fatalf("deploy: %v\n%s", err, out)
	}
	// 100% egress on r0s1's ToR port: a ping from r0s0 gets nothing back.
	if out, err := run(t, bin, "exec", lab+".r0s0", "--", "ping", "-c", "3", "-i", "0.05", "-W", "1", "10.0.0.2"); err == nil {
		t.Errorf("ping through a 100%% loss port succeeded:\n%s", out)
	}
	out, err = run(t, bin, "loss", lab, "--json")
	var st []inject.Status
	if err != nil || json.Unmarshal([]byte(out), &st) != nil || len(st) != 1 || st[0].DroppedPackets < 3 {
		t.Fatalf("loss --json: %v: %s", err, out)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"loss", lab, "tor0:s1", "both", "0"}, "tor0:s1 ingress 0%"},
		{[]string{"loss", lab}, "tor0:s1     egress    0%"},
		{[]string{"loss", lab, "--clear", "tor0:s1"}, "removed 2 loss rules from tor0:s1"}, // ingress and egress
		{[]string{"loss", lab}, "no loss rules"},
	} {
		if out, err := run(t, bin, c.args...); err != nil || !strings.Contains(out, c.want) {
			t.Errorf("emu %s: %v, want %q in:\n%s", strings.Join(c.args, " "), err, c.want, out)
		}
	}
	if out, err := run(t, bin, "exec", lab+".r0s0", "--", "ping", "-c", "3", "-i", "0.05", "-W", "1", "10.0.0.2"); err != nil {
		t.Errorf("ping after clear: %v\n%s", err, out)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"loss", lab, "tor0:up0", "both", "1"}, `node tor0 has no interface "up0" (it has core, s0, s1)`},
		{[]string{"loss", lab, "tor0:s0", "out", "1"}, `direction "out": want ingress, egress or both`},
		{[]string{"loss", lab, "tor0:s0", "both", "101"}, "loss 101%: want 0 to 100"},
		{[]string{"loss", lab, "tor0:s0", "both"}, "want LAB PORT DIRECTION PERCENT"},
		{[]string{"loss", "../etc", "tor0:s0", "both", "1"}, "invalid lab name"},
		{[]string{"loss", "tor0:s0", "both", "1"}, `"tor0:s0" is a port, not a lab: loss takes the lab first`},
		{[]string{"loss", lab, "--clear", "tor0:s0", "both"}, "--clear takes the lab and at most one port"},
	} {
		if out, err := run(t, bin, c.args...); err == nil || !strings.Contains(out, c.want) {
			t.Errorf("emu %s: want a refusal containing %q, got %v:\n%s", strings.Join(c.args, " "), c.want, err, out)
		}
	}
}
