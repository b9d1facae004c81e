package loss

import (
	"errors"
	"strings"
	"testing"

	"github.com/ocsemu/ocsemu/dataplane/topo"
)

func TestRules(t *testing.T) {
	tp := topo.Build(topo.Spec{Lab: "lr", Kind: topo.FabricHybrid, Racks: 2, ServersPerRack: 1,
		UplinksPerToR: 2, OCSSwitches: 1, Spread: topo.SpreadRoundRobin, MTU: 1500})
	cases := []struct {
		port, dir string
		pct       float64
		want      []string // rule strings
		err       string
	}{
		{port: "tor0:up0", dir: "both", pct: 1, want: []string{"tor0:up0 ingress 1%", "tor0:up0 egress 1%"}},
		{port: "r1s0:eth0", dir: "egress", pct: 5, want: []string{"r1s0:eth0 egress 5%"}},
		{port: " ocs0:tor1u1 ", dir: "ingress", pct: 0.0001, want: []string{"ocs0:tor1u1 ingress 0.0001%"}},
		{port: "eps:tor1", dir: "ingress", pct: 100, want: []string{"eps:tor1 ingress 100%"}},
		{port: "tor0:up0", dir: "both", pct: 0, want: []string{"tor0:up0 ingress 0%", "tor0:up0 egress 0%"}},
		{port: "tor0", dir: "both", pct: 1, err: `"tor0" is not node:iface (e.g. r0s0:eth0, tor0:s0, ocs0:tor0u0, eps:tor0)`},
		{port: "tor9:up0", dir: "both", pct: 1, err: `lab "lr" has no node "tor9"`},
		{port: "tor0:up5", dir: "both", pct: 1, err: `node tor0 has no interface "up5" (it has core, s0, up0, up1)`},
		{port: "../x:eth0", dir: "both", pct: 1, err: `has no node "../x"`},
		{port: "tor0:up0", dir: "out", pct: 1, err: `direction "out": want ingress, egress or both`},
		{port: "tor0:up0", dir: "both", pct: 101, err: "loss 101%: want 0 to 100"},
		{port: "tor0:up0", dir: "both", pct: -1, err: "loss -1%: want 0 to 100"},
	}
	for _, c := range cases {
		rs, err := Rules(tp, c.port, c.dir, c.pct)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("Rules(%q, %q, %v) = %v, %v; want error containing %q", c.port, c.dir, c.pct, rs, err, c.err)
			}
			continue
		}
		if err != nil {
			t.Errorf("Rules(%q, %q, %v): %v", c.port, c.dir, c.pct, err)
			continue
		}
		var got []string
		for _, r := range rs {
			got = append(got, r.String())
			if !strings.HasPrefix(r.Port.NS, "emu-lr.") {
				t.Errorf("rule %v: namespace %q", r, r.Port.NS)
			}
		}
		if strings.Join(got, ";") != strings.Join(c.want, ";") {
			t.Errorf("Rules(%q, %q, %v) = %v, want %v", c.port, c.dir, c.pct, got, c.want)
		}
	}
	if _, err := ParsePort(tp, "x"); !errors.Is(err, ErrBadPort) {
		t.Errorf("ParsePort error %v does not wrap ErrBadPort", err)
	}
}

func TestPercentToPPM(t *testing.T) {
	for _, c := range []struct {
		pct  float64
		want uint32
	}{{0, 0}, {1, 10_000}, {5, 50_000}, {100, MaxPPM}, {0.00005, 1}, {12.34567, 123457}} {
		got, err := PercentToPPM(c.pct)
		if err != nil || got != c.want {
			t.Errorf("PercentToPPM(%v) = %d, %v; want %d", c.pct, got, err, c.want)
		}
		if c.want == MaxPPM && PPMToPercent(got) != 100 {
			t.Errorf("PPMToPercent(%d) = %v", got, PPMToPercent(got))
		}
	}
}
