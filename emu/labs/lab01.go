package labs

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/ocsemu/ocsemu/dataplane/fabric"
	"github.com/ocsemu/ocsemu/dataplane/names"
	"github.com/ocsemu/ocsemu/dataplane/netns"
)

// Lab 01: the student's fabric.sh builds h0 -- tor0 == tor1 -- h1 in
// namespaces named $P<node>; the checks run it with P set to the private
// prefix, look at what it built, and remove it again.

var lab01Nodes = []string{"h0", "h1", "tor0", "tor1"}

func lab01NS(e *Env, node string) string { return e.LabName + "-" + node }

// lab01Mine refuses to look at, or run the script over, namespaces that
// lab01Prepare did not mark as the checker's: someone else's would make
// the checks pass on work the student never did, and the script's
// "down" would delete them.
func lab01Mine(e *Env) error {
	if _, err := os.Stat(lab01Marker(e)); err != nil {
		return fmt.Errorf("not run: the namespaces named %s* are not the checker's", e.LabName+"-")
	}
	return nil
}

// lab01Own runs a check only over the namespaces the checker marked as
// its own (lab01Mine).
func lab01Own(run func(context.Context, *Env) (string, error)) func(context.Context, *Env) (string, error) {
	return func(ctx context.Context, e *Env) (string, error) {
		if err := lab01Mine(e); err != nil {
			return "", err
		}
		return run(ctx, e)
	}
}

func lab01Script(ctx context.Context, e *Env, verb string) (string, error) {
	if err := lab01Mine(e); err != nil {
		return "", err
	}
	env := append(os.Environ(), "P="+e.LabName+"-")
	return command(ctx, 30*time.Second, env, "bash", e.File("fabric.sh"), verb)
}

// lab01Marker records that a check is about to run the student's
// script under the lab name: only namespaces made under that mark are
// the checker's to delete.
func lab01Marker(e *Env) string { return filepath.Join(fabric.StateDir, e.LabName+".lab01-check") }

// lab01Remove deletes what the student's script may have left, and the
// mark.
func lab01Remove(e *Env) {
	for _, n := range lab01Nodes {
		if ns := lab01NS(e, n); netns.Exists(ns) {
			_ = netns.Delete(ns)
		}
	}
	_ = os.Remove(lab01Marker(e))
}

// lab01Prepare clears what an earlier, interrupted check left and marks
// the namespaces about to be made as the checker's. Namespaces of those
// names without the mark belong to someone else: refused, not deleted.
func lab01Prepare(e *Env) error {
	if _, err := os.Stat(lab01Marker(e)); err == nil {
		lab01Remove(e)
	}
	var theirs []string
	for _, n := range lab01Nodes {
		if ns := lab01NS(e, n); netns.Exists(ns) {
			theirs = append(theirs, ns)
		}
	}
	if len(theirs) > 0 {
		what, it := "namespaces "+strings.Join(theirs, ", ")+" exist", "them"
		if len(theirs) == 1 {
			what, it = "namespace "+theirs[0]+" exists", "it"
		}
		return fmt.Errorf("%s, not made by a check: choose another --lab-name, or remove %s yourself (ip netns delete %s)", what, it, strings.Join(theirs, "; ip netns delete "))
	}
	if err := os.MkdirAll(fabric.StateDir, 0o755); err != nil {
		return err
	}
	return os.WriteFile(lab01Marker(e), nil, 0o644)
}

func lab01Ping(ctx context.Context, e *Env, from, to string) (string, error) {
	out, err := inNS(ctx, lab01NS(e, from), "ping", "-c", "2", "-i", "0.2", "-W", "1", to)
	if err != nil {
		return "", fmt.Errorf("%s cannot reach %s: %v\n%s", from, to, err, tail(out, 2))
	}
	return tail(out, 1), nil
}

func init() {
	registry["01-fabric-by-hand"] = []Check{
		{Name: "fabric.sh is a bash script without syntax errors", Run: func(ctx context.Context, e *Env) (string, error) {
			if _, err := e.ReadFile("fabric.sh"); err != nil {
				return "", err
			}
			if out, err := command(ctx, 10*time.Second, nil, "bash", "-n", e.File("fabric.sh")); err != nil {
				return "", fmt.Errorf("%v\n%s", err, tail(out, 3))
			}
			return "bash -n finds no error", nil
		}},
		{Name: "`fabric.sh up` runs to the end", Root: true, Run: func(ctx context.Context, e *Env) (string, error) {
			if err := lab01Prepare(e); err != nil {
				return "", err
			}
			e.Cleanup(func() { lab01Remove(e) })
			out, err := lab01Script(ctx, e, "up")
			if err != nil {
				return "", fmt.Errorf("%v\n%s", err, tail(out, 4))
			}
			return "P=" + e.LabName + "- fabric.sh up: exit 0", nil
		}},
		{Name: "one namespace per node (h0 h1 tor0 tor1)", Root: true, Run: lab01Own(func(ctx context.Context, e *Env) (string, error) {
			var missing []string
			for _, n := range lab01Nodes {
				if !netns.Exists(lab01NS(e, n)) {
					missing = append(missing, lab01NS(e, n))
				}
			}
			if len(missing) > 0 {
				return "", fmt.Errorf("no namespace %s (`ip netns list`)", strings.Join(missing, ", "))
			}
			return "ip netns list shows all four", nil
		})},
		{Name: "h0 has 10.1.0.2/24 on eth0", Root: true, Run: lab01Own(func(ctx context.Context, e *Env) (string, error) {
			out, err := command(ctx, 10*time.Second, nil, "ip", "-n", lab01NS(e, "h0"), "-br", "addr", "show", "dev", "eth0")
			if err != nil {
				return "", fmt.Errorf("%v\n%s", err, tail(out, 2))
			}
			if !strings.Contains(out, "10.1.0.2/24") {
				return "", fmt.Errorf("h0's eth0 has %q, want 10.1.0.2/24", strings.TrimSpace(out))
			}
			return strings.Join(strings.Fields(out), " "), nil
		})},
		{Name: "h0 reaches its ToR (10.1.0.1)", FailsOnStart: true, Root: true, Run: lab01Own(func(ctx context.Context, e *Env) (string, error) {
			return lab01Ping(ctx, e, "h0", "10.1.0.1")
		})},
		{Name: "tor0 routes rack 1 (10.1.1.0/24) over its uplink up0", FailsOnStart: true, Root: true, Run: lab01Own(func(ctx context.Context, e *Env) (string, error) {
			out, err := command(ctx, 10*time.Second, nil, "ip", "-n", lab01NS(e, "tor0"), "route", "get", "10.1.1.2")
			if err != nil {
				return "", fmt.Errorf("tor0 has no route to 10.1.1.2: %v %s", err, strings.TrimSpace(out))
			}
			if !strings.Contains(out, "dev up0") {
				return "", fmt.Errorf("tor0 sends 10.1.1.2 %q, want over up0", strings.TrimSpace(tail(out, 2)))
			}
			return strings.Join(strings.Fields(strings.Split(out, "\n")[0]), " "), nil
		})},
		{Name: "both ToRs forward (net.ipv4.ip_forward = 1)", FailsOnStart: true, Root: true, Run: lab01Own(func(ctx context.Context, e *Env) (string, error) {
			for _, n := range []string{"tor0", "tor1"} {
				out, err := inNS(ctx, lab01NS(e, n), "sysctl", "-n", "net.ipv4.ip_forward")
				if err != nil {
					return "", fmt.Errorf("%s: %v", n, err)
				}
				if strings.TrimSpace(out) != "1" {
					return "", fmt.Errorf("%s: net.ipv4.ip_forward is %s: a ToR that does not forward drops what it should route", n, strings.TrimSpace(out))
				}
			}
			return "tor0 and tor1: 1", nil
		})},
		{Name: "h0 reaches h1 across both ToRs", FailsOnStart: true, Root: true, Run: lab01Own(func(ctx context.Context, e *Env) (string, error) {
			return lab01Ping(ctx, e, "h0", "10.1.1.2")
		})},
		{Name: "`fabric.sh down` removes every namespace", FailsOnStart: true, Root: true, Run: func(ctx context.Context, e *Env) (string, error) {
			out, err := lab01Script(ctx, e, "down")
			if err != nil {
				return "", fmt.Errorf("%v\n%s", err, tail(out, 4))
			}
			var left []string
			for _, n := range lab01Nodes {
				if netns.Exists(lab01NS(e, n)) {
					left = append(left, lab01NS(e, n))
				}
			}
			if len(left) > 0 {
				return "", fmt.Errorf("left behind: %s (the checker removes them now)", strings.Join(left, " "))
			}
			return "nothing left", nil
		}},
		{Name: "answer: the gateway of tor0's default route in emu's lab01", FailsOnStart: true, Root: true, Run: func(ctx context.Context, e *Env) (string, error) {
			m, err := e.Answers()
			if err != nil {
				return "", err
			}
			got := fmt.Sprint(m["emu_tor0_default_via"])
			if m["emu_tor0_default_via"] == nil {
				return "", errors.New("answers.yaml: emu_tor0_default_via is not answered yet")
			}
			lab, err := e.Live(ctx)
			if err != nil {
				return "", err
			}
			out, err := command(ctx, 10*time.Second, nil, "ip", "-n", names.NSName(lab, "tor0"), "route", "show", "default")
			if err != nil {
				return "", err
			}
			f := strings.Fields(out)
			want := ""
			for i := 0; i+1 < len(f); i++ {
				if f[i] == "via" {
					want = f[i+1]
				}
			}
			if got != want {
				return "", fmt.Errorf("you answered %s; emu's tor0 says %q", got, strings.TrimSpace(out))
			}
			return "default via " + want + " (the packet core), as a deployed copy shows", nil
		}},
		{Name: "answer: routers between h0 and h1", FailsOnStart: true, Run: func(ctx context.Context, e *Env) (string, error) {
			n, err := e.Number("h0_hops_to_h1")
			if err != nil {
				return "", err
			}
			if n != 2 {
				return "", fmt.Errorf("you answered %v; count the ToRs a packet crosses (ping shows TTL 64 minus the routers)", n)
			}
			return "2: tor0 and tor1", nil
		}},
	}
}
