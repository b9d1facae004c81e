package fabric_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ocsemu/ocsemu/dataplane/fabric"
	"github.com/ocsemu/ocsemu/dataplane/fabric/fabrictest"
	"github.com/ocsemu/ocsemu/dataplane/names"
	"github.com/ocsemu/ocsemu/dataplane/netns"
	"github.com/ocsemu/ocsemu/dataplane/nlsafe"
	"github.com/ocsemu/ocsemu/dataplane/probe"
	"github.com/ocsemu/ocsemu/dataplane/topo"
)

var (
	skipUnlessRoot = fabrictest.SkipUnlessRoot
	uniqueLab      = fabrictest.UniqueLab
	spec           = fabrictest.Fabric
	deploy         = fabrictest.Deploy
	assertGone     = fabrictest.AssertGone
	hosts          = fabrictest.Hosts
)

func TestEPSAllPairsReach(t *testing.T) {
	skipUnlessRoot(t)
	name := uniqueLab("eps")
	lab := deploy(t, spec(t, name, "{kind: eps, racks: 4, servers_per_rack: 2, rates: {server: 1Gbit}}"))
	hs := hosts(lab)
	if len(hs) != 8 {
		t.Fatalf("want 8 servers, got %d", len(hs))
	}
	res, err := probe.PingAll(context.Background(), hs, 3, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if res.Pairs != 56 || len(res.Failed) != 0 {
		t.Fatalf("pingall: %d pairs, failed %v", res.Pairs, res.Failed)
	}
	t.Logf("pingall: %d/%d pairs in %v, max RTT %v", res.Pairs-len(res.Failed), res.Pairs, res.Took, res.RTTMax)
	// The sampled form: chosen pairs, one socket per source.
	pairs := [][2]probe.Host{{hs[0], hs[7]}, {hs[0], hs[3]}, {hs[5], hs[1]}, {hs[0], hs[7]}}
	sres, err := probe.PingPairs(context.Background(), pairs, 2, 3, time.Second)
	if err != nil || sres.Pairs != 3 || len(sres.Failed) != 0 {
		t.Fatalf("ping pairs: %v: %d pairs (want 3, one repeated), failed %v", err, sres.Pairs, sres.Failed)
	}
	if _, err := probe.PingPairs(context.Background(), [][2]probe.Host{{hs[0], hs[0]}}, 1, 1, time.Second); err == nil {
		t.Error("a host pinging itself was not refused")
	}
}

// TestSmallMTUDeploys: a fabric below IPv6's minimum MTU (the scenario
// allows 576) deploys, with the MTU on its links, and every pair reaches:
// the kernel runs no IPv6 there, so there is no link-local address to turn
// off.
func TestSmallMTUDeploys(t *testing.T) {
	skipUnlessRoot(t)
	sp := spec(t, uniqueLab("mtu"), "{kind: eps, racks: 2, servers_per_rack: 1, rates: {server: 100Mbit}}")
	sp.MTU = 576
	lab := deploy(t, sp)
	h, err := lab.Handle("r0s0")
	if err != nil {
		t.Fatal(err)
	}
	l, err := h.LinkByName("eth0")
	if err != nil {
		t.Fatal(err)
	}
	if l.Attrs().MTU != 576 {
		t.Errorf("r0s0:eth0 MTU %d, want 576", l.Attrs().MTU)
	}
	res, err := probe.PingAll(context.Background(), hosts(lab), 3, time.Second)
	if err != nil || len(res.Failed) != 0 {
		t.Fatalf("pingall: %v, failed %v", err, res.Failed)
	}
}

// TestShapedGoodput: a cross-rack TCP transfer arrives, with the
// congestion control asked for, and never beats the configured rate (the
// shaping holds). How close it comes to the rate depends on the machine's
// load: BenchmarkShapedGoodput reports that figure.
func TestShapedGoodput(t *testing.T) {
	skipUnlessRoot(t)
	name := uniqueLab("rate")
	lab := deploy(t, spec(t, name, "{kind: eps, racks: 2, servers_per_rack: 1, rates: {server: 1Gbit}}"))
	hs := hosts(lab)
	res, err := probe.Transfer(context.Background(), hs[0], hs[1], probe.TransferOptions{Duration: 3 * time.Second, Warmup: 300 * time.Millisecond, CongestionControl: "cubic"})
	if err != nil {
		t.Fatal(err)
	}
	frac := res.GoodputBps / 1e9
	if res.CC != "cubic" {
		t.Errorf("sender used congestion control %q, want cubic", res.CC)
	}
	t.Logf("cross-rack TCP goodput %.1f Mbit/s = %.1f%% of 1 Gbit/s (%d bytes in %v)", res.GoodputBps/1e6, 100*frac, res.Bytes, res.Window)
	if res.Bytes == 0 {
		t.Error("no data arrived")
	}
	if frac > 1.00 {
		t.Errorf("goodput %.3f of the configured rate: the shaping does not hold", frac)
	}
}

func TestOCSPortsExistUnpatched(t *testing.T) {
	skipUnlessRoot(t)
	name := uniqueLab("ocs")
	lab := deploy(t, spec(t, name, "{kind: ocs, racks: 3, servers_per_rack: 1, uplinks_per_tor: 2, ocs: {switches: 2}, rates: {server: 1Gbit, uplink: 1Gbit}}"))
	h, err := lab.Handle("ocs1")
	if err != nil {
		t.Fatal(err)
	}
	links, err := nlsafe.Retry(h.LinkList)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, l := range links {
		names = append(names, l.Attrs().Name)
	}
	slices.Sort(names)
	want := "lo tor0u1 tor1u1 tor2u1"
	if got := strings.Join(names, " "); got != want {
		t.Errorf("ocs1 ports = %q, want %q", got, want)
	}
	// Unpatched: a server in rack 0 cannot reach rack 1.
	hs := hosts(lab)
	res, err := probe.PingAll(context.Background(), hs[:2], 1, 300*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Failed) != 2 {
		t.Errorf("unpatched OCS fabric: want both directions unreachable, failed = %v", res.Failed)
	}
}

func TestDestroyIdempotentAndEndsProcesses(t *testing.T) {
	skipUnlessRoot(t)
	name := uniqueLab("dst")
	s := spec(t, name, "{kind: eps, racks: 2, servers_per_rack: 1, rates: {server: 1Gbit}}")
	lab, err := fabric.Deploy(context.Background(), topo.Build(s), fabric.Options{})
	if err != nil {
		t.Fatal(err)
	}
	lab.Close()
	// A process started inside the lab, as a student would with emu exec.
	cmd := exec.Command("ip", "netns", "exec", names.NSName(name, "r0s0"), "sleep", "300")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	// Wait until the process is inside the lab's namespace.
	ino, err := netns.Inode(names.NSName(name, "r0s0"))
	if err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(time.Minute); len(netns.PIDsIn(map[uint64]bool{ino: true})) == 0; {
		if time.Now().After(deadline) {
			_ = cmd.Process.Kill()
			t.Fatal("the process never entered the lab's namespace")
		}
		time.Sleep(5 * time.Millisecond)
	}

	if err := fabric.Destroy(context.Background(), name, nil); err != nil {
		t.Fatalf("destroy: %v", err)
	}
	select {
	case <-done:
	case <-time.After(time.Minute): // destroy has already signalled it
		_ = cmd.Process.Kill()
		t.Errorf("destroy did not end the process running in the lab")
	}
	assertGone(t, name)
	if err := fabric.Destroy(context.Background(), name, nil); err != nil {
		t.Errorf("second destroy should succeed, got %v", err)
	}
}

// TestKilledDeployThenDestroyAll kills a deploy half-way with SIGKILL and
// checks that `destroy --all` removes every leftover.
func TestKilledDeployThenDestroyAll(t *testing.T) {
	skipUnlessRoot(t)
	if os.Getenv("EMU_HELPER_DEPLOY") != "" {
		s := spec(t, os.Getenv("EMU_HELPER_DEPLOY"), "{kind: eps, racks: 64, servers_per_rack: 4, rates: {server: 1Gbit}}")
		_, err := fabric.Deploy(context.Background(), topo.Build(s), fabric.Options{Parallel: 1})
		fmt.Println("helper deploy finished:", err)
		return
	}
	name := uniqueLab("kill")
	cmd := exec.Command(os.Args[0], "-test.run=^TestKilledDeployThenDestroyAll$")
	cmd.Env = append(os.Environ(), "EMU_HELPER_DEPLOY="+name)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// Wait until the deploy is half-way: some namespaces exist.
	deadline := time.Now().Add(2 * time.Minute)
	for {
		left, _ := netns.List(names.LabPrefix(name))
		if len(left) >= 40 {
			break
		}
		if time.Now().After(deadline) {
			_ = cmd.Process.Kill()
			t.Fatalf("helper deploy made only %d namespaces", len(left))
		}
		time.Sleep(5 * time.Millisecond)
	}
	_ = cmd.Process.Signal(syscall.SIGKILL)
	_ = cmd.Wait()
	left, _ := netns.List(names.LabPrefix(name))
	if len(left) == 0 {
		t.Fatal("expected leftovers after SIGKILL")
	}
	t.Logf("SIGKILL left %d namespaces", len(left))
	// destroy --all would also remove the labs of whoever runs the tests,
	// so check that its discovery finds this crashed lab, then remove it.
	labs, err := fabric.FindLabs()
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(labs, name) {
		t.Errorf("destroy --all does not find the crashed lab %q among %v", name, labs)
	}
	if err := fabric.Destroy(context.Background(), name, nil); err != nil {
		t.Fatalf("destroy: %v", err)
	}
	assertGone(t, name)
}

// Two deploys of the same lab at once: one builds it, the other is
// refused (being deployed, or already deployed), and the lab that stands
// is whole.
func TestConcurrentDeploySameLab(t *testing.T) {
	skipUnlessRoot(t)
	name := uniqueLab("race")
	sp := spec(t, name, "{kind: eps, racks: 4, servers_per_rack: 2, rates: {server: 1Gbit}}")
	t.Cleanup(func() {
		if err := fabric.Destroy(context.Background(), name, nil); err != nil {
			t.Errorf("destroy: %v", err)
		}
		assertGone(t, name)
	})
	errs := make(chan error, 2)
	labs := make(chan *fabric.Lab, 2)
	for range 2 {
		go func() {
			lab, err := fabric.Deploy(context.Background(), topo.Build(sp), fabric.Options{})
			if lab != nil {
				labs <- lab
			}
			errs <- err
		}()
	}
	var refused []error
	for range 2 {
		if err := <-errs; err != nil {
			refused = append(refused, err)
		}
	}
	if len(refused) != 1 {
		t.Fatalf("want exactly one deploy refused, got %d: %v", len(refused), refused)
	}
	if msg := refused[0].Error(); !strings.Contains(msg, "being deployed") && !strings.Contains(msg, "already deployed") {
		t.Errorf("refusal %q does not say the lab is being or already deployed", msg)
	}
	t.Logf("second deploy refused: %v", refused[0])
	lab := <-labs
	defer lab.Close()
	res, err := probe.PingAll(context.Background(), hosts(lab), 1, time.Second)
	if err != nil || len(res.Failed) > 0 {
		t.Errorf("the lab that stands is not whole: %v, %d pairs failed", err, len(res.Failed))
	}
}

// TestPortsAsPlanned: every port has the ifindex Deploy planned (what a
// lab opened from its state reads back from the kernel), server ports
// carry no IPv6 address (addrgenmode none instead of a sysctl), ToRs
// forward, and no anchor file of the namespace step is left.
func TestPortsAsPlanned(t *testing.T) {
	skipUnlessRoot(t)
	name := uniqueLab("plan")
	lab := deploy(t, spec(t, name, "{kind: ocs, racks: 2, servers_per_rack: 2, uplinks_per_tor: 2, rates: {server: 1Gbit, uplink: 1Gbit}}"))
	opened, err := fabric.Open(name, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer opened.Close()
	for _, n := range lab.Topo.Nodes {
		for _, iface := range lab.Topo.Ifaces(n.Name) {
			planned, err1 := lab.Ifindex(n.Name, iface)
			actual, err2 := opened.Ifindex(n.Name, iface)
			if err1 != nil || err2 != nil || planned != actual {
				t.Errorf("%s:%s: planned ifindex %d (%v), the kernel has %d (%v)", n.Name, iface, planned, err1, actual, err2)
			}
		}
	}
	if _, err := opened.Ifindex("tor0", "nosuch"); err == nil {
		t.Error("a port that does not exist has an ifindex")
	}
	out, err := exec.Command("ip", "-n", names.NSName(name, "r0s0"), "-6", "-o", "addr", "show", "dev", "eth0").CombinedOutput()
	if err != nil || strings.TrimSpace(string(out)) != "" {
		t.Errorf("server port has IPv6 addresses (%v): %s", err, out)
	}
	fwd, err := exec.Command("ip", "netns", "exec", names.NSName(name, "tor0"), "cat", "/proc/sys/net/ipv4/ip_forward").Output()
	if err != nil || strings.TrimSpace(string(fwd)) != "1" {
		t.Errorf("tor0 ip_forward = %q (%v), want 1", fwd, err)
	}
	if left, _ := netns.List(names.LabPrefix(name) + "."); len(left) > 0 {
		t.Errorf("anchor left in %s: %v", netns.RunDir, left)
	}
}

// TestDestroyWaitsForAWorkload: while another process holds a lab's use
// lock (emu run, emu collective), destroy refuses and names it; once the
// holder is gone, destroy goes ahead. A lab for a missing name takes no
// lock file.
func TestDestroyWaitsForAWorkload(t *testing.T) {
	skipUnlessRoot(t)
	name := uniqueLab("use")
	s := spec(t, name, "{kind: eps, racks: 2, servers_per_rack: 1, rates: {server: 1Gbit}}")
	lab, err := fabric.Deploy(context.Background(), topo.Build(s), fabric.Options{})
	if err != nil {
		t.Fatal(err)
	}
	lab.Close()
	t.Cleanup(func() {
		// The killed holder's sleep may hold the lock a moment longer.
		for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
			if _, held := fabric.Held(name, fabric.UseLock); !held {
				break
			}
		}
		if err := fabric.Destroy(context.Background(), name, nil); err != nil {
			t.Errorf("cleanup: %v", err)
		}
	})
	// Another process holds the lock, its pid in the file as Lock writes it.
	file := fabric.LabFile(name, fabric.UseLock+".lock")
	holder := exec.Command("sh", "-c", `echo $$ > "$1"; exec flock "$1" sleep 300`, "sh", file)
	holder.SysProcAttr = &syscall.SysProcAttr{Setpgid: true} // flock and its sleep go together
	if err := holder.Start(); err != nil {
		t.Fatal(err)
	}
	stop := func() { _ = syscall.Kill(-holder.Process.Pid, syscall.SIGKILL); _ = holder.Wait() }
	defer stop()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		if _, held := fabric.Held(name, fabric.UseLock); held {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the holder never took the lock")
		}
	}
	err = fabric.Destroy(context.Background(), name, nil)
	if want := fmt.Sprintf("is in use by pid %d", holder.Process.Pid); err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("destroy of a lab in use: %v, want %q", err, want)
	}
	if _, err := fabric.ReadState(name); err != nil {
		t.Fatalf("a refused destroy removed the lab: %v", err)
	}
	stop()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		if _, held := fabric.Held(name, fabric.UseLock); !held {
			break // its sleep, which shares the lock, may die a moment after flock
		}
		if time.Now().After(deadline) {
			t.Fatal("the lock is still held after its holder was killed")
		}
	}
	if err := fabric.Destroy(context.Background(), name, nil); err != nil {
		t.Fatalf("destroy once the holder is gone: %v", err)
	}
	assertGone(t, name)
	missing := uniqueLab("nouse")
	if _, err := fabric.LockUse(missing); err == nil {
		t.Errorf("LockUse of a lab that does not exist succeeded")
	}
	if _, err := os.Stat(fabric.LabFile(missing, fabric.UseLock+".lock")); err == nil {
		t.Errorf("LockUse of a missing lab left its lock file")
	}
}
