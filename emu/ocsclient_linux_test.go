package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ocsemu/ocsemu/dataplane/fabric"
	"github.com/ocsemu/ocsemu/dataplane/fabric/fabrictest"
	"github.com/ocsemu/ocsemu/dataplane/names"
	"github.com/ocsemu/ocsemu/dataplane/netns"
)

// Delays and files are refused by the CLI before any OCS is asked, with
// the flag or file:line, the value and what is allowed.
func TestCLIOCSRefusals(t *testing.T) {
	bin := buildEmu(t)
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		os.WriteFile(p, []byte(body), 0o644)
		return p
	}
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"ocs", "connect", "tor0:0", "tor2:0", "--delay", "-5ms"}, `invalid argument "-5ms" for "--delay" flag: must be between 0s and 10s, got -5ms`},
		{[]string{"ocs", "connect", "tor0:0", "tor2:0", "--delay", "100h"}, `invalid argument "100h" for "--delay" flag: must be between 0s and 10s, got 100h0m0s`},
		{[]string{"ocs", "disconnect", "tor0:0", "--delay", "50"}, `"--delay" flag: duration "50" has no unit: write e.g. "50ms"`},
		{[]string{"ocs", "apply", "--lab", "nolab", write("pairs.yaml", "circuits: [[tor0:0, tor1:0]]\n")},
			"pairs.yaml:1: circuits[0]: got a list, want a circuit, a mapping with a and b (and optional simplex: true for one direction), e.g. {a: tor0:0, b: tor1:0}"},
		{[]string{"ocs", "apply", "--lab", "nolab", write("at.yaml", "circuits: []\nat_ns: soon\n")}, `at.yaml:2: at_ns: got the text "soon"`},
		{[]string{"ocs", "schedule", "--lab", "nolab", write("rotor.yaml", "slots:\n  - {duration: 1ms, circuits: [[tor0:0, tor1:0]]}\ncycles: -1\n")},
			"rotor.yaml:2: slots[0].circuits[0]: got a list, want a circuit"},
		{[]string{"ocs", "schedule", "--lab", "nolab", write("rotor2.yaml", "slots: []\ndelay: 100h\n")}, "rotor2.yaml:2: delay: must be between 0s and 10s, got 100h0m0s"},
	} {
		out, err := run(t, bin, tt.args...)
		if err == nil || !strings.Contains(out, tt.want) {
			t.Errorf("emu %s: want a refusal containing %q, got %v: %s", strings.Join(tt.args, " "), tt.want, err, out)
		}
	}
}

// When the OCS process is gone, ocs commands and inspect say so, with its
// pid and how to bring it back, and `emu ocs serve` brings it back inside
// the lab, where destroy ends it.
func TestCLIOCSProcessDead(t *testing.T) {
	fabrictest.SkipUnlessRoot(t)
	bin := buildEmu(t)
	lab := deployOCSLab(t, bin, "dead")
	out, err := run(t, bin, "inspect", lab)
	if err != nil || !regexpMatch(`ocs\s+\d+\s+answering on `, out) {
		t.Errorf("inspect of a healthy lab: want the OCS process answering, got %v:\n%s", err, out)
	}
	pid, held := fabric.Held(lab, "ocs")
	if !held {
		t.Fatal("no OCS process holds the lab's lock after deploy")
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	for i := 0; ; i++ {
		if _, held := fabric.Held(lab, "ocs"); !held {
			break
		}
		if i > 200 {
			t.Fatalf("OCS process %d still holds its lock after SIGKILL", pid)
		}
		time.Sleep(10 * time.Millisecond)
	}
	want := "the OCS process of lab " + lab + " is not running (pid " + strconv.Itoa(pid) + " exited); redeploy or `emu ocs serve --lab " + lab + "`"
	for _, args := range [][]string{{"ocs", "show", "--lab", lab}, {"ocs", "connect", "--lab", lab, "tor0:0", "tor1:0"}, {"ocs", "events", "-f", "--lab", lab}} {
		out, err := run(t, bin, args...)
		if err == nil || !strings.Contains(out, want) || strings.Contains(out, "http://") {
			t.Errorf("emu %s with the OCS process dead: want %q, got %v: %s", strings.Join(args, " "), want, err, out)
		}
	}
	out, _ = run(t, bin, "inspect", lab)
	if !strings.Contains(out, "up, OCS process not running") || !regexpMatch(`ocs\s+`+strconv.Itoa(pid)+`\s+not running \(pid `+strconv.Itoa(pid)+` exited\)`, out) {
		t.Errorf("inspect %s: want the dead OCS process shown, got:\n%s", lab, out)
	}
	out, _ = run(t, bin, "inspect")
	if !strings.Contains(out, "up, OCS process not running") {
		t.Errorf("inspect: want the lab shown with its OCS process down, got:\n%s", out)
	}
	// The hint works: serve starts a new OCS process in ocs0.
	if out, err := run(t, bin, "ocs", "serve", "--lab", lab); err != nil || !strings.Contains(out, "serving on") {
		t.Fatalf("ocs serve to restart: %v\n%s", err, out)
	}
	if out, err := run(t, bin, "ocs", "connect", "--lab", lab, "tor0:0", "tor1:0"); err != nil {
		t.Errorf("connect after restart: %v\n%s", err, out)
	}
	ino, _ := netns.Inode(names.NSName(lab, "ocs0"))
	if pids := netns.PIDsIn(map[uint64]bool{ino: true}); len(pids) != 1 {
		t.Errorf("want the restarted OCS process in ocs0, found %v", pids)
	}
	if out, err := run(t, bin, "destroy", lab); err != nil {
		t.Fatalf("destroy: %v\n%s", err, out)
	}
	if _, held := fabric.Held(lab, "ocs"); held {
		t.Error("the restarted OCS process outlived destroy")
	}
}

func regexpMatch(re, s string) bool { return regexp.MustCompile(re).MatchString(s) }
