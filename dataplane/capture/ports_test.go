package capture

import (
	"errors"
	"strings"
	"testing"

	"github.com/ocsemu/ocsemu/dataplane/topo"
)

func TestParsePorts(t *testing.T) {
	tp := topo.Build(topo.Spec{Lab: "pc", Kind: topo.FabricHybrid, Racks: 2, ServersPerRack: 2,
		UplinksPerToR: 2, OCSSwitches: 1, Spread: topo.SpreadRoundRobin, MTU: 1500})
	cases := []struct {
		in    string
		want  []string // port names, then file names
		files []string
		err   string // substring of the error; empty: none
	}{
		{in: "r0s0:eth0", want: []string{"r0s0:eth0"}, files: []string{"r0s0-eth0.pcap"}},
		{in: " tor0:up0 , ocs0:tor1u0,tor1:s1,eps:tor0,tor1:core", want: []string{"tor0:up0", "ocs0:tor1u0", "tor1:s1", "eps:tor0", "tor1:core"},
			files: []string{"tor0-up0.pcap", "ocs0-tor1u0.pcap", "tor1-s1.pcap", "eps-tor0.pcap", "tor1-core.pcap"}},
		{in: "", err: "no port named"},
		{in: "r0s0:eth0,", err: "empty name"},
		{in: "r0s0", err: `"r0s0" is not node:iface (e.g. r0s0:eth0, tor0:s0, ocs0:tor0u0, eps:tor0)`},
		{in: ":eth0", err: "is not node:iface"},
		{in: "r9s0:eth0", err: `lab "pc" has no node "r9s0"`},
		{in: "r0s0:eth1", err: `node r0s0 has no interface "eth1" (it has eth0)`},
		{in: "tor0:up7", err: "(it has core, s0, s1, up0, up1)"},
		{in: "../../etc:passwd", err: `has no node "../../etc"`},
		{in: "r0s0:../x", err: `has no interface "../x"`},
		{in: "r0s0:eth0,r0s0:eth0", err: "named twice"},
		{in: "R0S0:eth0", err: "has no node"},
		{in: "r0s0:eth0:1", err: `has no interface "eth0:1"`},
	}
	for _, c := range cases {
		ps, err := ParsePorts(tp, c.in)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) || !errors.Is(err, ErrBadPort) {
				t.Errorf("ParsePorts(%q) = %v, %v; want error containing %q", c.in, ps, err, c.err)
			}
			continue
		}
		if err != nil {
			t.Errorf("ParsePorts(%q): %v", c.in, err)
			continue
		}
		if len(ps) != len(c.want) {
			t.Errorf("ParsePorts(%q) = %v, want %v", c.in, ps, c.want)
			continue
		}
		for i, p := range ps {
			f, err := p.FileName()
			if p.String() != c.want[i] || err != nil || f != c.files[i] || !strings.HasPrefix(p.NS, "emu-pc.") {
				t.Errorf("ParsePorts(%q)[%d] = %+v, file %q, %v; want %s, %s", c.in, i, p, f, err, c.want[i], c.files[i])
			}
		}
	}
}

func TestParsePortsReportsAll(t *testing.T) {
	tp := topo.Build(topo.Spec{Lab: "pc", Kind: topo.FabricEPS, Racks: 1, ServersPerRack: 1, MTU: 1500})
	_, err := ParsePorts(tp, "x:y,r0s0:eth9")
	if err == nil || !strings.Contains(err.Error(), `no node "x"`) || !strings.Contains(err.Error(), `no interface "eth9"`) {
		t.Fatalf("want both problems reported, got %v", err)
	}
}

func TestFileNameRefusesUnsafe(t *testing.T) {
	for _, p := range []Port{{Node: "..", Iface: "eth0"}, {Node: "r0s0", Iface: "a/b"}, {Node: "", Iface: "eth0"}} {
		if f, err := p.FileName(); err == nil {
			t.Errorf("FileName(%+v) = %q, want an error", p, f)
		}
	}
}
