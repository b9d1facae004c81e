package main

import (
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ocsemu/ocsemu/dataplane/fabric/fabrictest"
)

// A tcpdump run with `emu exec` in a ToR sees what the ToR's fast uplink
// sends: emu exec turns the node's ports slow first. Without that, the
// echo requests leave up0 by bpf_redirect_peer, past the packet socket.
func TestExecCaptureSeesFastPortEgress(t *testing.T) {
	fabrictest.SkipUnlessRoot(t)
	if _, err := exec.LookPath("tcpdump"); err != nil {
		t.Skip("tcpdump is not installed (scripts/install installs it)")
	}
	bin := buildEmu(t)
	// Unshaped: no tbf, so the ports are fast.
	lab := deployLab(t, bin, "fpx", "{kind: ocs, racks: 2, servers_per_rack: 1, uplinks_per_tor: 1, rates: {server: unlimited, uplink: unlimited}}")
	if out, err := run(t, bin, "ocs", "connect", "--lab", lab, "tor0:0", "tor1:0"); err != nil {
		t.Fatalf("connect: %v\n%s", err, out)
	}
	td := exec.Command(bin, "exec", lab+".tor0", "--", "timeout", "5", "tcpdump", "-l", "-n", "-c", "6", "-i", "up0", "icmp")
	var out lockedBuffer
	td.Stdout, td.Stderr = &out, &out
	if err := td.Start(); err != nil {
		t.Fatal(err)
	}
	// Ping once tcpdump's socket is open (it says so), however long emu
	// exec and tcpdump take to start on a busy machine.
	for deadline := time.Now().Add(10 * time.Second); !strings.Contains(out.String(), "listening on"); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("tcpdump did not start listening within 10 s:\n%s", out.String())
		}
	}
	if o, err := run(t, bin, "exec", lab+".r0s0", "--", "ping", "-c", "3", "-i", "0.2", "10.0.1.1"); err != nil {
		t.Fatalf("ping: %v\n%s", err, o)
	}
	td.Wait()
	got := out.String()
	if !strings.Contains(got, "ports of tor0 made slow") {
		t.Errorf("emu exec did not say it made tor0's ports slow:\n%s", got)
	}
	if n := strings.Count(got, "ICMP echo request"); n != 3 {
		t.Errorf("tcpdump on tor0's up0 saw %d of 3 echo requests it sent:\n%s", n, got)
	}
	if n := strings.Count(got, "ICMP echo reply"); n != 3 {
		t.Errorf("tcpdump on tor0's up0 saw %d of 3 echo replies it received:\n%s", n, got)
	}
}

// lockedBuffer collects a process's output while the test reads it.
type lockedBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
