// Package fabrictest holds the helpers kernel tests share: skip unless
// root, unique lab names (packages run in parallel), deploy with
// guaranteed cleanup, and the check that a lab left nothing behind.
package fabrictest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"ocsemu/dataplane/fabric"
	"ocsemu/dataplane/netns"
	"ocsemu/dataplane/probe"
	"ocsemu/emu/scenario"
)

// SkipUnlessRoot skips a test that needs to create namespaces.
func SkipUnlessRoot(t testing.TB) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root to create network namespaces (CI runs as root)")
	}
}

// UniqueLab returns a lab name no other test uses.
func UniqueLab(prefix string) string {
	b := make([]byte, 3)
	_, _ = rand.Read(b)
	return prefix + hex.EncodeToString(b)
}

// Scenario parses a scenario body (everything but the name).
func Scenario(t testing.TB, lab, body string) *scenario.Scenario {
	t.Helper()
	s, err := scenario.Parse([]byte("name: "+lab+"\n"+body), "test")
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// Deploy brings a lab up and registers its destruction and the check
// that nothing of it is left.
func Deploy(t testing.TB, s *scenario.Scenario) *fabric.Lab {
	t.Helper()
	lab, err := fabric.Deploy(context.Background(), fabric.Build(s), fabric.Options{})
	if err != nil {
		t.Fatalf("deploy: %v", err)
	}
	t.Cleanup(func() {
		lab.Close()
		if err := fabric.Destroy(context.Background(), s.Name, nil); err != nil {
			t.Errorf("destroy: %v", err)
		}
		AssertGone(t, s.Name)
	})
	return lab
}

// AssertGone checks that no namespace, state file or process of a lab
// remains, and that the root namespace holds no link of ours.
func AssertGone(t testing.TB, lab string) {
	t.Helper()
	if left, _ := netns.List(fabric.LabPrefix(lab)); len(left) > 0 {
		t.Errorf("namespaces left behind: %v", left)
	}
	if m, _ := filepath.Glob(filepath.Join(fabric.StateDir, lab+".*")); len(m) > 0 {
		t.Errorf("state files left behind: %v", m)
	}
	out, _ := exec.Command("ip", "-o", "link").Output()
	for _, line := range strings.Split(string(out), "\n") {
		if strings.Contains(line, lab) {
			t.Errorf("link left in root namespace: %s", line)
		}
	}
}

// Hosts returns the lab's servers as probe hosts.
func Hosts(lab *fabric.Lab) []probe.Host {
	var hs []probe.Host
	for _, n := range lab.Topo.Servers() {
		hs = append(hs, probe.Host{Name: n.Name, NS: n.NS, Addr: n.Addr})
	}
	return hs
}
