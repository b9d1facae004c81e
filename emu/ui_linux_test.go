package main

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ocsemu/ocsemu/dataplane/fabric/fabrictest"
	"github.com/ocsemu/ocsemu/emu/liveview/cdp"
)

// startUI starts `emu ui` on a free loopback port and returns its URL and
// a stop function that interrupts it and checks it shut down cleanly.
func startUI(t *testing.T, bin string, args ...string) (string, func()) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	cmd := exec.Command(bin, append([]string{"ui", "--port", fmt.Sprint(port)}, args...)...)
	stderr, _ := cmd.StderrPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	lines := make(chan string, 16)
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	var log []string
	page := fmt.Sprintf("http://127.0.0.1:%d/", port)
	deadline := time.After(20 * time.Second)
	for ready := false; !ready; {
		select {
		case l, ok := <-lines:
			if !ok {
				cmd.Wait()
				t.Fatalf("emu ui exited: %s", strings.Join(log, "\n"))
			}
			log = append(log, l)
			ready = strings.Contains(l, "live view of lab")
			if ready { // the URL it prints, with its token when it has one
				if _, rest, ok := strings.Cut(l, " on "); ok {
					page, _, _ = strings.Cut(rest, " ")
				}
			}
		case <-deadline:
			cmd.Process.Kill()
			cmd.Wait()
			t.Fatalf("emu ui did not start: %s", strings.Join(log, "\n"))
		}
	}
	stopped := false
	stop := func() {
		if stopped {
			return
		}
		stopped = true
		cmd.Process.Signal(syscall.SIGINT)
		var rest []string
		for l := range lines {
			rest = append(rest, l)
		}
		if err := cmd.Wait(); err != nil {
			t.Errorf("emu ui did not stop cleanly on SIGINT: %v\n%s", err, strings.Join(rest, "\n"))
		} else if !strings.Contains(strings.Join(rest, "\n"), "live view stopped") {
			t.Errorf("emu ui: no shutdown message: %s", strings.Join(rest, "\n"))
		}
	}
	t.Cleanup(stop)
	return page, stop
}

// waitFor polls a JavaScript condition until it is true and returns how
// long that took.
func waitFor(t *testing.T, b *cdp.Browser, expr string, limit time.Duration) time.Duration {
	t.Helper()
	start := time.Now()
	for {
		var ok bool
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		err := b.Eval(ctx, expr, &ok)
		cancel()
		if err == nil && ok {
			return time.Since(start)
		}
		if time.Since(start) > limit {
			t.Fatalf("after %v the page still fails %s (last error %v)", limit, expr, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestUIBrowserShowsCircuits opens `emu ui` of a deployed OCS lab in
// headless Chromium, sees the topology drawn, patches a circuit with `emu
// ocs connect` and sees the page draw it within 1 s; then, with
// --allow-changes, patches one from the page itself. EMU_UI_SCREENSHOT=path
// also runs traffic over the circuit and writes a screenshot there.
func TestUIBrowserShowsCircuits(t *testing.T) {
	fabrictest.SkipUnlessRoot(t)
	chromium, err := exec.LookPath("chromium")
	if err != nil {
		t.Skip("chromium is not installed (apt-get install chromium; scripts/browser-check installs it in CI)")
	}
	bin := buildEmu(t)
	lab := deployLab(t, bin, "ui", "{kind: ocs, racks: 4, servers_per_rack: 1, uplinks_per_tor: 2, ocs: {switches: 2, reconfig_delay: 50ms}, rates: {server: 1Gbit, uplink: 1Gbit}}")
	url, stop := startUI(t, bin, lab, "--results", t.TempDir())
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	b, err := cdp.Launch(ctx, chromium, t.TempDir(), 1300, 1100)
	if err != nil {
		t.Fatalf("launch chromium: %v", err)
	}
	defer b.Close()
	if err := b.Navigate(ctx, url); err != nil {
		t.Fatal(err)
	}
	// The topology: 2 OCS, 4 ToRs, 4 servers, 8 ports; read-only.
	waitFor(t, b, `document.querySelectorAll("g.ocsbox").length === 2 && document.querySelectorAll("rect.tor").length === 4 && document.querySelectorAll("circle.port").length === 8`, 10*time.Second)
	waitFor(t, b, `document.getElementById("status").className === "ok" && document.getElementById("changes").hidden && document.querySelectorAll("path.circuit").length === 0`, 5*time.Second)
	waitFor(t, b, `document.getElementById("tlmsg").textContent.includes("no run of this lab yet")`, 5*time.Second)

	if out, err := run(t, bin, "ocs", "connect", "--lab", lab, "tor0:0", "tor1:0"); err != nil {
		t.Fatalf("ocs connect: %v\n%s", err, out)
	}
	took := waitFor(t, b, `!!document.querySelector('path.circuit[data-circuit="tor0:0<->tor1:0"]') && document.querySelector('circle[data-port="tor0:0"]').classList.contains("lit")`, 5*time.Second)
	t.Logf("the page drew the new circuit %v after `emu ocs connect` returned", took.Round(time.Millisecond))
	waitFor(t, b, `document.getElementById("eventlog").textContent.includes("2 ports dark for 50ms (tor0:0 tor1:0)")`, 5*time.Second)
	// The OCS API's unreachable pairs (snake_case JSON) reach the page: with one circuit, 10 of 12.
	waitFor(t, b, `/^1 circuit: tor0:0<->tor1:0\. 10 rack pairs unreachable \(\d->\d/.test(document.getElementById("circuitList").textContent) && document.getElementById("summary").textContent.includes("4 racks x 1 server, 2 uplinks per ToR")`, 5*time.Second)
	if took > time.Second {
		t.Errorf("the page drew the circuit after %v, want within 1 s", took)
	}
	// A read-only view refuses changes.
	var code int
	if err := b.Eval(ctx, `fetch("api/connect", {method: "POST", headers: {"Content-Type": "application/json"}, body: '{"a":"tor2:0","b":"tor3:0"}'}).then(r => r.status)`, &code); err != nil || code != 403 {
		t.Errorf("read-only view: connect answered %d (%v), want 403", code, err)
	}

	if shot := os.Getenv("EMU_UI_SCREENSHOT"); shot != "" {
		screenshot(t, ctx, b, bin, lab, shot)
	}
	b.Close()
	stop()

	// With --allow-changes, the page's own form patches a circuit.
	url, _ = startUI(t, bin, lab, "--allow-changes", "--results", "")
	b2, err := cdp.Launch(ctx, chromium, t.TempDir(), 1300, 1100)
	if err != nil {
		t.Fatalf("launch chromium: %v", err)
	}
	defer b2.Close()
	if err := b2.Navigate(ctx, url); err != nil {
		t.Fatal(err)
	}
	waitFor(t, b2, `!document.getElementById("changes").hidden && document.querySelectorAll("circle.port").length === 8`, 10*time.Second)
	var ok bool
	if err := b2.Eval(ctx, `(() => { document.getElementById("porta").value = "tor2:1"; document.getElementById("portb").value = "tor3:1"; document.getElementById("connect").click(); return true })()`, &ok); err != nil {
		t.Fatal(err)
	}
	waitFor(t, b2, `!!document.querySelector('path.circuit[data-circuit="tor2:1<->tor3:1"]') && document.getElementById("changeResult").textContent.startsWith("event")`, 5*time.Second)
	out, err := run(t, bin, "ocs", "show", "--lab", lab)
	if err != nil || !strings.Contains(out, "tor2:1<->tor3:1") {
		t.Errorf("the page's connect did not reach the OCS: %v\n%s", err, out)
	}
	// A bad port is refused with the OCS API's own reason.
	if err := b2.Eval(ctx, `(() => { document.getElementById("porta").value = "tor9:0"; document.getElementById("connect").click(); return true })()`, &ok); err != nil {
		t.Fatal(err)
	}
	waitFor(t, b2, `document.getElementById("changeResult").className === "err" && document.getElementById("changeResult").textContent.includes("tor9")`, 5*time.Second)
	// Opened without the token the URL carries (someone else on the
	// machine who found the port), the page's changes are refused.
	bare, _, _ := strings.Cut(url, "#")
	if bare == url {
		t.Fatalf("emu ui --allow-changes printed no token: %s", url)
	}
	if err := b2.Navigate(ctx, bare); err != nil {
		t.Fatal(err)
	}
	waitFor(t, b2, `!document.getElementById("changes").hidden && document.querySelectorAll("circle.port").length === 8`, 10*time.Second)
	if err := b2.Eval(ctx, `(() => { document.getElementById("porta").value = "tor0:1"; document.getElementById("portb").value = "tor1:1"; document.getElementById("connect").click(); return true })()`, &ok); err != nil {
		t.Fatal(err)
	}
	waitFor(t, b2, `document.getElementById("changeResult").className === "err" && document.getElementById("changeResult").textContent.includes("token")`, 5*time.Second)
}

// screenshot runs a TCP transfer over the circuit, moves the circuit away
// and back (dark drops), and writes a PNG of the page.
func screenshot(t *testing.T, ctx context.Context, b *cdp.Browser, bin, lab, path string) {
	t.Helper()
	if _, err := exec.LookPath("iperf3"); err != nil {
		t.Fatalf("EMU_UI_SCREENSHOT needs iperf3: %v", err)
	}
	for _, c := range [][2]string{{"tor2:1", "tor3:1"}, {"tor1:1", "tor2:1"}} {
		run(t, bin, "ocs", "connect", "--lab", lab, c[0], c[1])
	}
	if out, err := run(t, bin, "exec", "--lab", lab, "r1s0", "--", "iperf3", "-s", "-D", "-1"); err != nil {
		t.Fatalf("iperf3 -s: %v %s", err, out)
	}
	time.Sleep(300 * time.Millisecond)
	client := exec.Command(bin, "exec", "--lab", lab, "r0s0", "--", "iperf3", "-c", "10.0.1.1", "-t", "8")
	if err := client.Start(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(3 * time.Second)
	run(t, bin, "ocs", "connect", "--lab", lab, "tor0:0", "tor2:0")
	time.Sleep(500 * time.Millisecond)
	run(t, bin, "ocs", "connect", "--lab", lab, "tor0:0", "tor1:0")
	time.Sleep(3 * time.Second)
	if err := b.Screenshot(ctx, path); err != nil {
		t.Errorf("screenshot: %v", err)
	}
	client.Wait()
	t.Logf("screenshot %s", path)
}
