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
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/ocsemu/ocsemu/dataplane/fabric"
	"github.com/ocsemu/ocsemu/dataplane/names"
	"github.com/ocsemu/ocsemu/dataplane/netns"
	"github.com/ocsemu/ocsemu/dataplane/probe"
	"github.com/ocsemu/ocsemu/dataplane/topo"
	"github.com/ocsemu/ocsemu/dataplane/units"
)

// SkipUnlessRoot skips a test that needs to create namespaces.
func SkipUnlessRoot(t testing.TB) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root to create network namespaces (CI runs as root)")
	}
}

// UniqueLab returns a lab name no other test uses. EMU_TEST_LAB_PREFIX,
// when set, goes in front, so that one person's test labs are told apart
// from others' on a shared machine.
func UniqueLab(prefix string) string {
	b := make([]byte, 3)
	_, _ = rand.Read(b)
	return os.Getenv("EMU_TEST_LAB_PREFIX") + prefix + hex.EncodeToString(b)
}

// Fabric reads a test fabric written in the scenario's fabric keys, in
// YAML flow style ("{kind: eps, racks: 4, servers_per_rack: 2, rates:
// {server: 1Gbit}}"), into a Spec with the scenario's defaults. Kernel
// tests below emu/ build their labs with it, without the scenario package.
func Fabric(t testing.TB, lab, fabricYAML string) topo.Spec {
	t.Helper()
	var f struct {
		Kind           string `yaml:"kind"`
		Racks          int    `yaml:"racks"`
		ServersPerRack int    `yaml:"servers_per_rack"`
		UplinksPerToR  int    `yaml:"uplinks_per_tor"`
		OCS            struct {
			Switches      int            `yaml:"switches"`
			ReconfigDelay units.Duration `yaml:"reconfig_delay"`
		} `yaml:"ocs"`
		Rates struct {
			Server units.Rate `yaml:"server"`
			Uplink units.Rate `yaml:"uplink"`
		} `yaml:"rates"`
	}
	dec := yaml.NewDecoder(strings.NewReader(fabricYAML))
	dec.KnownFields(true)
	if err := dec.Decode(&f); err != nil {
		t.Fatalf("test fabric %q: %v", fabricYAML, err)
	}
	sp := topo.Spec{Lab: lab, Kind: f.Kind, Racks: f.Racks, ServersPerRack: f.ServersPerRack,
		UplinksPerToR: f.UplinksPerToR, OCSSwitches: f.OCS.Switches, Spread: topo.SpreadRoundRobin,
		ReconfigDelay: f.OCS.ReconfigDelay, ServerRate: f.Rates.Server, UplinkRate: f.Rates.Uplink,
		MTU: 1500, CongestionControl: "cubic"}
	if sp.Kind != topo.FabricEPS {
		sp.UplinksPerToR = max(sp.UplinksPerToR, 1)
		sp.OCSSwitches = max(sp.OCSSwitches, 1)
	}
	if sp.HasEPS() {
		sp.CoreRate = sp.ServerRate * units.Rate(sp.ServersPerRack)
	}
	return sp
}

// Deploy brings a lab up and registers its destruction and the check
// that nothing of it is left.
func Deploy(t testing.TB, sp topo.Spec) *fabric.Lab {
	t.Helper()
	lab, err := fabric.Deploy(context.Background(), topo.Build(sp), fabric.Options{})
	if err != nil {
		t.Fatalf("deploy: %v", err)
	}
	t.Cleanup(func() {
		lab.Close()
		if err := fabric.Destroy(context.Background(), sp.Lab, nil); err != nil {
			t.Errorf("destroy: %v", err)
		}
		AssertGone(t, sp.Lab)
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
	entries, _ := os.ReadDir(fabric.StateDir)
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), lab+".") {
			t.Errorf("state file left behind: %s", e.Name())
		}
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
