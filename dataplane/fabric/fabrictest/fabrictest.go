// Package fabrictest holds the helpers kernel tests share: skip unless
// root, unique lab names (packages run in parallel), deploy with
// guaranteed cleanup, and the check that a lab left nothing behind.
package fabrictest

import (
	"fmt"
	"net/netip"

	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ocsemu/ocsemu/dataplane/fabric"
	"github.com/ocsemu/ocsemu/dataplane/names"
	"github.com/ocsemu/ocsemu/dataplane/netns"
	"github.com/ocsemu/ocsemu/dataplane/probe"
	"github.com/ocsemu/ocsemu/emu/scenario"
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
	if left, _ := netns.List(names.LabPrefix(lab)); len(left) > 0 {
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

// BareVethPair makes two namespaces of a throwaway lab joined by one
// unshaped veth pair (10.99.0.1 <-> 10.99.0.2): the baseline that fabric
// paths are compared against. Destroying the lab removes it.
func BareVethPair(t testing.TB) (probe.Host, probe.Host) {
	t.Helper()
	lab := UniqueLab("bare")
	a, b := names.NSName(lab, "a"), names.NSName(lab, "b")
	t.Cleanup(func() {
		if err := fabric.Destroy(context.Background(), lab, nil); err != nil {
			t.Errorf("destroy: %v", err)
		}
		AssertGone(t, lab)
	})
	for _, n := range []string{a, b} {
		if err := netns.Create(n, netns.LoopbackUp); err != nil {
			t.Fatal(err)
		}
	}
	script := fmt.Sprintf(`ip -n %[1]s link add va type veth peer name vb netns %[2]s &&
ip -n %[1]s addr add 10.99.0.1/24 dev va && ip -n %[2]s addr add 10.99.0.2/24 dev vb &&
ip -n %[1]s link set va up && ip -n %[2]s link set vb up`, a, b)
	if out, err := exec.Command("sh", "-c", script).CombinedOutput(); err != nil {
		t.Fatalf("bare veth pair: %v: %s", err, out)
	}
	return probe.Host{Name: "bare-a", NS: a, Addr: netip.MustParseAddr("10.99.0.1")},
		probe.Host{Name: "bare-b", NS: b, Addr: netip.MustParseAddr("10.99.0.2")}
}
