package labs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/ocsemu/ocsemu/dataplane/probe"
	"github.com/ocsemu/ocsemu/dataplane/topo"
	"github.com/ocsemu/ocsemu/ocsfabric/circuit"
	"github.com/ocsemu/ocsemu/ocsfabric/ocs"
)

// Lab 02: ring.yaml patches the four racks into a ring; answers.yaml
// holds the dark period, the stall the student measured, and why.

// circuitsFile parses an `emu ocs apply` file of the student's.
func circuitsFile(e *Env, name string) (ocs.ConfigRequest, error) {
	return studentFile(e, name, ocs.ParseApplyFile)
}

// layout is the lab fabric's OCS layout.
func (e *Env) layout() circuit.Layout { return circuit.LayoutOf(e.Scenario.Spec()) }

// isRing says whether circuits join every rack into one cycle: each rack
// has circuits to exactly two others, and walking them visits all.
func isRing(cfg circuit.Config, racks int) error {
	g := cfg.RackGraph()
	for r := 0; r < racks; r++ {
		var peers []string
		for p := range g[r] {
			peers = append(peers, fmt.Sprint(p))
		}
		sort.Strings(peers)
		if len(peers) != 2 {
			return fmt.Errorf("rack %d has circuits to %d other rack(s) [%s]: in a ring every rack has two neighbours", r, len(peers), strings.Join(peers, " "))
		}
	}
	seen, prev, cur := map[int]bool{0: true}, -1, 0
	for range racks - 1 {
		next := -1
		for p := range g[cur] {
			if p != prev && !seen[p] {
				next = p
			}
		}
		if next < 0 {
			return fmt.Errorf("the circuits form more than one cycle: from rack 0 the walk closes after %d racks", len(seen))
		}
		seen[next], prev, cur = true, cur, next
	}
	return nil
}

// pingAll pings every server of the private copy from every other.
func pingAll(ctx context.Context, e *Env, lab string) (string, error) {
	s := *e.Scenario
	s.Name = lab
	var hs []probe.Host
	for _, n := range topo.Build(s.Spec()).Servers() {
		hs = append(hs, probe.Host{Name: n.Name, NS: n.NS, Addr: n.Addr})
	}
	pr, err := probe.PingAll(ctx, hs, 3, time.Second)
	if err != nil {
		return "", fmt.Errorf("pingall: %w", err)
	}
	if len(pr.Failed) > 0 {
		var ps []string
		for _, f := range pr.Failed {
			ps = append(ps, f.From+"->"+f.To)
		}
		return "", fmt.Errorf("%d of %d pairs do not reach: %s", len(pr.Failed), pr.Pairs, strings.Join(ps, " "))
	}
	return fmt.Sprintf("%d of %d pairs reach each other", pr.Pairs, pr.Pairs), nil
}

// applyLive applies an apply file of the student's on the private copy.
func applyLive(ctx context.Context, e *Env, file string) (string, error) {
	cfg, err := circuitsFile(e, file)
	if err != nil {
		return "", fmt.Errorf("%s did not parse (see above)", file)
	}
	lab, err := e.Live(ctx)
	if err != nil {
		return "", err
	}
	// Apply what was checked, from a file of the checker's own: the
	// student's path could be swapped for a link between check and use.
	data, err := json.Marshal(cfg)
	if err != nil {
		return "", err
	}
	dir, err := os.MkdirTemp("", "emu-lab-apply-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(dir)
	copyPath := filepath.Join(dir, file)
	if err := os.WriteFile(copyPath, data, 0o600); err != nil {
		return "", err
	}
	out, err := e.Emu(ctx, "", "ocs", "apply", "--lab", lab, copyPath)
	if err != nil {
		return "", fmt.Errorf("emu ocs apply %s: %v\n%s", file, err, out)
	}
	// Let the dark period pass before anything is measured.
	time.Sleep(time.Duration(e.Scenario.Spec().ReconfigDelay.D()) + 50*time.Millisecond)
	return lab, nil
}

func init() {
	registry["02-circuits"] = []Check{
		{Name: "ring.yaml parses as an `emu ocs apply` file", Run: func(ctx context.Context, e *Env) (string, error) {
			req, err := circuitsFile(e, "ring.yaml")
			if err != nil {
				return "", err
			}
			return fmt.Sprintf("%d circuits", len(req.Circuits)), nil
		}},
		{Name: "its circuits fit the fabric (ports exist, one switch each, no port twice)", Run: func(ctx context.Context, e *Env) (string, error) {
			req, err := circuitsFile(e, "ring.yaml")
			if err != nil {
				return "", errors.New("ring.yaml did not parse (see above)")
			}
			if err := e.layout().Validate(circuit.Config{Circuits: req.Circuits}); err != nil {
				return "", err
			}
			return "every circuit stays inside one OCS", nil
		}},
		{Name: "the circuits join all four racks into one ring", FailsOnStart: true, Run: func(ctx context.Context, e *Env) (string, error) {
			req, err := circuitsFile(e, "ring.yaml")
			if err != nil {
				return "", errors.New("ring.yaml did not parse (see above)")
			}
			if err := isRing(circuit.Config{Circuits: req.Circuits}, e.Scenario.Fabric.Racks); err != nil {
				return "", err
			}
			return "each rack has two neighbours and the walk visits all four", nil
		}},
		{Name: "live: with ring.yaml applied every server reaches every other", FailsOnStart: true, Root: true, Run: func(ctx context.Context, e *Env) (string, error) {
			lab, err := applyLive(ctx, e, "ring.yaml")
			if err != nil {
				return "", err
			}
			return pingAll(ctx, e, lab)
		}},
		{Name: "answer: the dark period", FailsOnStart: true, Run: func(ctx context.Context, e *Env) (string, error) {
			n, err := e.Number("dark_period_ms")
			if err != nil {
				return "", err
			}
			want := float64(e.Scenario.Spec().ReconfigDelay.D().Milliseconds())
			if n != want {
				return "", fmt.Errorf("you answered %v ms; `emu ocs show` says the default reconfiguration delay is %v ms", n, want)
			}
			return fmt.Sprintf("%v ms", want), nil
		}},
		{Name: "answer: the stall you measured is longer than the dark period", FailsOnStart: true, Run: func(ctx context.Context, e *Env) (string, error) {
			n, err := e.Number("stall_ms")
			if err != nil {
				return "", err
			}
			dark := float64(e.Scenario.Spec().ReconfigDelay.D().Milliseconds())
			switch {
			case n < 200:
				return "", fmt.Errorf("%v ms is shorter than Linux's minimum retransmission timeout (200 ms): measure again with `iperf3 -i 0.1` (its shortest interval) or `ss -ti`", n)
			case n >= 4000:
				return "", fmt.Errorf("%v ms is as long as the whole iperf3 run (-t 4): read the stall from its 0.1 s intervals, from the move to the first interval that moves bytes again", n)
			}
			return fmt.Sprintf("%v ms: %.1f times the %v ms dark period", n, n/dark, dark), nil
		}},
		{Name: "answer: what restarts the flow", FailsOnStart: true, Run: func(ctx context.Context, e *Env) (string, error) {
			c, err := e.Choice("recovery", "rto", "fast-retransmit")
			if err != nil {
				return "", err
			}
			if c != "rto" {
				return "", errors.New("fast retransmit needs duplicate ACKs, and while the circuit is dark no segment arrives to cause one")
			}
			return "the retransmission timeout", nil
		}},
	}
}
