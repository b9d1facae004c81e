package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ocsemu/ocsemu/dataplane/fabric"
	"github.com/ocsemu/ocsemu/dataplane/fabric/fabrictest"
	"github.com/ocsemu/ocsemu/dataplane/names"
	"github.com/ocsemu/ocsemu/dataplane/netns"
	"github.com/ocsemu/ocsemu/scenarios"
)

// buildEmu compiles the emu binary once per test run.
func buildEmu(t testing.TB) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "emu")
	if out, err := exec.Command("go", "build", "-buildvcs=false", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("build emu: %v\n%s", err, out)
	}
	return bin
}

// scenarioAs writes the embedded scenario file under the lab name lab,
// with each pair of edits (old, new: the first occurrence replaced) made
// after, into a file of the test's own and returns its path.
func scenarioAs(t *testing.T, file, lab string, edits ...string) string {
	t.Helper()
	data, err := scenarios.Files.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	body := regexp.MustCompile(`(?m)^name: .*$`).ReplaceAllString(string(data), "name: "+lab)
	if body == string(data) {
		t.Fatalf("%s: no top-level name to replace", file)
	}
	for i := 0; i+1 < len(edits); i += 2 {
		next := strings.Replace(body, edits[i], edits[i+1], 1)
		if next == body {
			t.Fatalf("%s: %q not found to replace", file, edits[i])
		}
		body = next
	}
	path := filepath.Join(t.TempDir(), lab+".yaml")
	if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// leaveNothing fails the test if a namespace of lab is left when it
// ends, and destroys the lab then.
func leaveNothing(t *testing.T, bin, lab string) {
	t.Cleanup(func() {
		if left, _ := netns.List(names.LabPrefix(lab)); len(left) > 0 {
			run(t, bin, "destroy", lab)
			t.Errorf("namespaces left behind: %v", left)
		}
	})
}

func run(t testing.TB, bin string, args ...string) (string, error) {
	t.Helper()
	out, err := exec.Command(bin, args...).CombinedOutput()
	return string(out), err
}

func TestCLIBadScenario(t *testing.T) {
	bin := buildEmu(t)
	f := filepath.Join(t.TempDir(), "bad.yaml")
	os.WriteFile(f, []byte("name: x\nfabric:\n  racks: 2\n  servers_per_rack: 1\n  rates: {server: 10}\n"), 0o644)
	out, err := run(t, bin, "deploy", f)
	if err == nil || !strings.Contains(out, "bad.yaml:5: fabric.rates.server") {
		t.Errorf("want a file:line error, got %v: %s", err, out)
	}
}

func TestCLIVersion(t *testing.T) {
	bin := buildEmu(t)
	out, err := run(t, bin, "--version")
	if err != nil || !strings.HasPrefix(out, "emu ") || !strings.Contains(out, "go1.") {
		t.Errorf("emu --version: %v: %q", err, out)
	}
}

// deployOCSLab deploys a 2-rack OCS lab through the CLI and registers its
// destruction and the check that nothing of it is left.
func deployOCSLab(t *testing.T, bin, prefix string) string {
	t.Helper()
	return deployLab(t, bin, prefix, "{kind: ocs, racks: 2, servers_per_rack: 1, ocs: {reconfig_delay: 1ms}, rates: {server: 1Gbit, uplink: 1Gbit}}")
}

// deployLab deploys a lab of this fabric (YAML flow mapping) through the
// CLI, as deployOCSLab does.
func deployLab(t *testing.T, bin, prefix, fabric string) string {
	t.Helper()
	lab := fabrictest.UniqueLab(prefix)
	f := filepath.Join(t.TempDir(), "s.yaml")
	os.WriteFile(f, []byte("name: "+lab+"\nfabric: "+fabric+"\n"), 0o644)
	t.Cleanup(func() {
		run(t, bin, "destroy", lab)
		fabrictest.AssertGone(t, lab)
	})
	if out, err := run(t, bin, "deploy", f); err != nil {
		t.Fatalf("deploy: %v\n%s", err, out)
	}
	return lab
}

func TestCLIOCSLifecycle(t *testing.T) {
	fabrictest.SkipUnlessRoot(t)
	bin := buildEmu(t)
	lab := deployOCSLab(t, bin, "cli")
	out, err := run(t, bin, "ocs", "connect", "--lab", lab, "tor0:0", "tor1:0")
	if err != nil || !strings.Contains(out, "2 ports dark for 1ms") {
		t.Fatalf("ocs connect: %v\n%s", err, out)
	}
	out, err = run(t, bin, "ocs", "show", "--lab", lab, "--json")
	if err != nil {
		t.Fatalf("ocs show: %v\n%s", err, out)
	}
	checkEventsNew(t, bin, lab)
	var v struct{ Circuits []json.RawMessage }
	if err := json.Unmarshal([]byte(out), &v); err != nil || len(v.Circuits) != 1 {
		t.Fatalf("ocs show --json: %v: %s", err, out)
	}
	out, err = run(t, bin, "ocs", "connect", "--lab", lab, "tor0:0", "tor0:1")
	if err == nil || !strings.Contains(out, "no uplink 1") {
		t.Errorf("connect to a missing port: want a clear error, got %v: %s", err, out)
	}
	// One OCS process per lab: a second is refused and the first keeps answering.
	out, err = run(t, bin, "ocs", "serve", "--lab", lab)
	if err == nil || !strings.Contains(out, "already has an OCS process") {
		t.Errorf("second ocs serve: want a refusal, got %v: %s", err, out)
	}
	if out, err := run(t, bin, "ocs", "show", "--lab", lab); err != nil {
		t.Errorf("OCS unreachable after a refused second serve: %v\n%s", err, out)
	}
	// Serving a lab that does not exist is refused, and leaves no lock file.
	gone := fabrictest.UniqueLab("nolab")
	out, err = run(t, bin, "ocs", "serve", "--lab", gone)
	if err == nil || !strings.Contains(out, "no such lab") {
		t.Errorf("ocs serve a missing lab: want a refusal, got %v: %s", err, out)
	}
	if _, err := os.Stat(fabric.LabFile(gone, "ocs.lock")); err == nil {
		t.Errorf("ocs serve of a missing lab left %s", fabric.LabFile(gone, "ocs.lock"))
	}
	// A name with --all is refused, and the lab is still there.
	out, err = run(t, bin, "destroy", lab, "--all")
	if err == nil || !strings.Contains(out, "not both") {
		t.Errorf("destroy NAME --all: want a refusal, got %v: %s", err, out)
	}
	if _, err := fabric.ReadState(lab); err != nil {
		t.Fatalf("lab gone after a refused destroy --all: %v", err)
	}
	// The OCS process lives in the lab's ocs0 namespace.
	ino, _ := netns.Inode(names.NSName(lab, "ocs0"))
	if pids := netns.PIDsIn(map[uint64]bool{ino: true}); len(pids) != 1 {
		t.Fatalf("want one OCS process in ocs0, found %v", pids)
	}
	if out, err := run(t, bin, "destroy", lab); err != nil {
		t.Fatalf("destroy: %v\n%s", err, out)
	}
	if pids := netns.PIDsIn(map[uint64]bool{ino: true}); len(pids) != 0 {
		t.Errorf("processes left after destroy: %v", pids)
	}
}

// destroy refuses names that are not lab names before touching anything:
// a file outside the state directory and another lab's files survive.
func TestCLIDestroyHostileNames(t *testing.T) {
	fabrictest.SkipUnlessRoot(t)
	bin := buildEmu(t)
	dir := t.TempDir()
	victim := filepath.Join(dir, "d.txt")
	os.WriteFile(victim, []byte("x"), 0o644)
	other := fabrictest.UniqueLab("relg")
	os.MkdirAll(fabric.StateDir, 0o755)
	otherFile := fabric.LabFile(other, "json")
	os.WriteFile(otherFile, []byte(`{"lab":"`+other+`","status":"up"}`), 0o600)
	t.Cleanup(func() { os.Remove(otherFile) })
	rel, _ := filepath.Rel(fabric.StateDir, filepath.Join(dir, "d"))
	for _, name := range []string{rel, "relg*", "../../../tmp", "*"} {
		out, err := run(t, bin, "destroy", name)
		if err == nil || !strings.Contains(out, "invalid lab name") {
			t.Errorf("destroy %q: want a refusal of the name, got %v: %s", name, err, out)
		}
	}
	if _, err := os.Stat(victim); err != nil {
		t.Errorf("file outside the state dir removed: %v", err)
	}
	if _, err := os.Stat(otherFile); err != nil {
		t.Errorf("another lab's state removed: %v", err)
	}
	out, err := run(t, bin, "destroy", "nosuch-lab")
	if err != nil || !strings.Contains(out, `no lab named "nosuch-lab"`) {
		t.Errorf("destroy of a missing lab: want exit 0 and a clear word, got %v: %s", err, out)
	}
}

// A user who is not root is told that lab state needs root, not that no
// lab is deployed.
func TestCLIInspectNotRoot(t *testing.T) {
	fabrictest.SkipUnlessRoot(t)
	bin := buildEmu(t)
	// A directory and binary the unprivileged user can reach.
	dir, err := os.MkdirTemp("", "emu-nobody-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	os.Chmod(dir, 0o755)
	data, _ := os.ReadFile(bin)
	nbin := filepath.Join(dir, "emu")
	if err := os.WriteFile(nbin, data, 0o755); err != nil {
		t.Fatal(err)
	}
	lab := fabrictest.UniqueLab("nr")
	os.MkdirAll(fabric.StateDir, 0o755)
	st := fabric.LabFile(lab, "json")
	if err := os.WriteFile(st, []byte(`{"lab":"`+lab+`","status":"up","spec":{"lab":"`+lab+`"}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Remove(st) })
	cmd := exec.Command(nbin, "inspect")
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	out, err := cmd.CombinedOutput()
	if err == nil || !strings.Contains(string(out), "readable by root only") || !strings.Contains(string(out), lab) {
		t.Errorf("inspect as nobody: want a refusal that names the lab and says root is needed, got %v: %s", err, out)
	}
}

// On an OCS lab, emu collective runs over the circuits patched by hand:
// refused with a hint while racks have no path, run once they do.
func TestCLICollectiveUsesCurrentCircuits(t *testing.T) {
	fabrictest.SkipUnlessRoot(t)
	bin := buildEmu(t)
	lab := deployOCSLab(t, bin, "col")
	args := []string{"collective", "ring", "--lab", lab, "--ranks", "r0s0,r1s0", "--bytes", "1MiB", "--iterations", "1"}
	out, err := run(t, bin, args...)
	if err == nil || !strings.Contains(out, "no path") || !strings.Contains(out, "emu ocs connect") {
		t.Fatalf("collective without circuits: want a refusal with a hint, got %v: %s", err, out)
	}
	if out, err := run(t, bin, "ocs", "connect", "--lab", lab, "tor0:0", "tor1:0"); err != nil {
		t.Fatalf("ocs connect: %v\n%s", err, out)
	}
	dir := t.TempDir()
	cmd := exec.Command(bin, args...)
	cmd.Dir = dir // results/ goes here
	b, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(b), "allreduce") {
		t.Fatalf("collective over a hand-patched circuit: %v\n%s", err, b)
	}
	// --json: the same figures, for scripts, on stdout alone.
	cmd = exec.Command(bin, append(args, "--json")...)
	cmd.Dir = dir
	b, err = cmd.Output()
	var res collectiveResult
	if err != nil || json.Unmarshal(b, &res) != nil {
		t.Fatalf("collective --json: %v\n%s", err, b)
	}
	var ok bool
	for _, p := range res.Phases {
		ok = ok || (p.Phase == "allreduce" && p.Verified && p.BusBwBps > 0 && p.DurationNs > 0)
	}
	if !ok || res.Records == "" {
		t.Errorf("collective --json: no verified all-reduce with a busbw, or no records directory: %+v", res)
	}
}

// A bad --pcap port is refused before anything is made: no run
// directory, no namespace.
func TestCLIRunBadPcapPort(t *testing.T) {
	bin := buildEmu(t)
	res := t.TempDir()
	out, err := run(t, bin, "run", "quickstart", "--results", res, "--pcap", "r0s0:eth0,nosuch:eth0")
	if err == nil || !strings.Contains(out, "nosuch") {
		t.Fatalf("want a refusal naming the bad port, got %v: %s", err, out)
	}
	if entries, _ := os.ReadDir(res); len(entries) != 0 {
		t.Errorf("results written for a refused run: %v", entries)
	}
	if strings.Contains(out, "creating") || strings.Contains(out, "fabric up") {
		t.Errorf("the refused run touched the kernel: %s", out)
	}
}

// A command's own flags given without -- are refused with the way to
// pass them, before any lab is looked up (no root needed).
func TestCLIExecFlagsNeedDash(t *testing.T) {
	bin := buildEmu(t)
	out, err := run(t, bin, "exec", "r0s0", "ip", "-br", "addr")
	if err == nil || !strings.Contains(out, "unknown shorthand flag: 'b' in -br: put -- before the command") {
		t.Errorf("emu exec r0s0 ip -br addr: %v\n%s", err, out)
	}
}

// checkEventsNew: `ocs events` prints the logged connect (seq 1), and
// `ocs events -f --new` skips it and prints only a later event.
func checkEventsNew(t *testing.T, bin, lab string) {
	t.Helper()
	out, err := run(t, bin, "ocs", "events", "--lab", lab)
	if err != nil || !strings.Contains(out, `"seq":1,`) {
		t.Fatalf("ocs events: want the logged connect, got %v: %s", err, out)
	}
	if out, err := run(t, bin, "ocs", "events", "--new", "--lab", lab); err == nil || !strings.Contains(out, "use it with -f") {
		t.Errorf("ocs events --new without -f: want a refusal, got %v: %s", err, out)
	}
	var buf strings.Builder
	follow := exec.Command(bin, "ocs", "events", "-f", "--new", "--lab", lab)
	follow.Stdout, follow.Stderr = &buf, &buf
	if err := follow.Start(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(500 * time.Millisecond) // subscribed before the change
	if out, err := run(t, bin, "ocs", "disconnect", "--lab", lab, "tor0:0"); err != nil {
		t.Fatalf("ocs disconnect: %v\n%s", err, out)
	}
	time.Sleep(300 * time.Millisecond)
	_ = follow.Process.Signal(syscall.SIGINT)
	_ = follow.Wait()
	got := buf.String()
	if strings.Contains(got, `"seq":1,`) || !strings.Contains(got, `"seq":2,`) {
		t.Errorf("ocs events -f --new: want only the disconnect (seq 2), got:\n%s", got)
	}
	if out, err := run(t, bin, "ocs", "connect", "--lab", lab, "tor0:0", "tor1:0"); err != nil {
		t.Fatalf("ocs connect again: %v\n%s", err, out)
	}
}
