package circuit

import (
	"strings"
	"testing"

	"github.com/ocsemu/ocsemu/dataplane/topo"
)

func layout(racks, uplinks, switches int, duplex string) Layout {
	return LayoutOf(topo.Spec{Racks: racks, UplinksPerToR: uplinks,
		OCSSwitches: switches, Spread: topo.SpreadRoundRobin, HalfDuplex: duplex == "half", StrictHalfDuplex: duplex == "half-strict"})
}

func u(s string) Uplink {
	v, err := ParseUplink(s)
	if err != nil {
		panic(err)
	}
	return v
}

func full(a, b string) Circuit    { return Circuit{A: u(a), B: u(b)} }
func simplex(a, b string) Circuit { return Circuit{A: u(a), B: u(b), Simplex: true} }

func TestValidate(t *testing.T) {
	tests := []struct {
		name   string
		l      Layout
		cfg    []Circuit
		errHas string // "" = valid
	}{
		{"one circuit", layout(4, 1, 1, "full"), []Circuit{full("tor0:0", "tor1:0")}, ""},
		{"matching", layout(4, 1, 1, "full"), []Circuit{full("tor0:0", "tor1:0"), full("tor2:0", "tor3:0")}, ""},
		{"port reused", layout(4, 1, 1, "full"), []Circuit{full("tor0:0", "tor1:0"), full("tor0:0", "tor2:0")}, "tor0:0 is already in circuit tor0:0<->tor1:0"},
		{"no such rack", layout(4, 1, 1, "full"), []Circuit{full("tor0:0", "tor9:0")}, "no rack 9"},
		{"no such uplink", layout(4, 1, 1, "full"), []Circuit{full("tor0:0", "tor1:3")}, "no uplink 3"},
		{"same rack", layout(4, 2, 1, "full"), []Circuit{full("tor0:0", "tor0:1")}, "both ends are on rack 0"},
		{"across switches", layout(4, 2, 2, "full"), []Circuit{full("tor0:0", "tor1:1")}, "cabled to ocs0 but tor1:1 to ocs1"},
		{"simplex triangle on half duplex", layout(3, 1, 1, "half"),
			[]Circuit{simplex("tor0:0", "tor1:0"), simplex("tor1:0", "tor2:0"), simplex("tor2:0", "tor0:0")}, ""},
		{"simplex triangle on strict half duplex", layout(3, 1, 1, "half-strict"),
			[]Circuit{simplex("tor0:0", "tor1:0"), simplex("tor1:0", "tor2:0"), simplex("tor2:0", "tor0:0")},
			"circuit 1 (tor1:0->tor2:0): tor1:0 already is in circuit tor0:0->tor1:0; the fabric is strictly half duplex"},
		{"simplex matching on strict half duplex", layout(4, 1, 1, "half-strict"),
			[]Circuit{simplex("tor0:0", "tor1:0"), simplex("tor3:0", "tor2:0")}, ""},
		{"full circuit on strict half duplex", layout(4, 1, 1, "half-strict"), []Circuit{full("tor0:0", "tor1:0")}, "circuits must be simplex"},
		{"simplex on full fabric", layout(4, 1, 1, "full"), []Circuit{simplex("tor0:0", "tor1:0")}, "need ocs.duplex: half"},
		{"full on half fabric", layout(4, 1, 1, "half"), []Circuit{full("tor0:0", "tor1:0")}, "must be simplex"},
		{"half: tx and rx to different peers", layout(4, 1, 1, "half"), []Circuit{simplex("tor0:0", "tor1:0"), simplex("tor1:0", "tor2:0")}, ""},
		{"half: two into one port", layout(4, 1, 1, "half"), []Circuit{simplex("tor0:0", "tor1:0"), simplex("tor2:0", "tor1:0")}, "tor1:0 already receives from"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.l.Validate(Config{Circuits: tt.cfg})
			switch {
			case tt.errHas == "" && err != nil:
				t.Errorf("unexpected error: %v", err)
			case tt.errHas != "" && (err == nil || !strings.Contains(err.Error(), tt.errHas)):
				t.Errorf("error %v, want it to contain %q", err, tt.errHas)
			}
		})
	}
}

func TestDark(t *testing.T) {
	tests := []struct {
		name     string
		old, new []Circuit
		want     string
	}{
		{"nothing changes", []Circuit{full("tor0:0", "tor1:0")}, []Circuit{full("tor1:0", "tor0:0")}, ""},
		{"new circuit", nil, []Circuit{full("tor0:0", "tor1:0")}, "tor0:0 tor1:0"},
		{"removed circuit", []Circuit{full("tor0:0", "tor1:0")}, nil, "tor0:0 tor1:0"},
		{"move one end", []Circuit{full("tor0:0", "tor1:0")}, []Circuit{full("tor0:0", "tor2:0")}, "tor0:0 tor1:0 tor2:0"},
		{"untouched circuit stays lit", []Circuit{full("tor0:0", "tor1:0"), full("tor2:0", "tor3:0")},
			[]Circuit{full("tor0:0", "tor3:0"), full("tor2:0", "tor1:0")}, "tor0:0 tor1:0 tor2:0 tor3:0"},
		{"keep one of two", []Circuit{full("tor0:0", "tor1:0"), full("tor2:0", "tor3:0")}, []Circuit{full("tor2:0", "tor3:0")}, "tor0:0 tor1:0"},
		{"half duplex reversal", []Circuit{simplex("tor0:0", "tor1:0")}, []Circuit{simplex("tor1:0", "tor0:0")}, "tor0:0 tor1:0"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var names []string
			for _, d := range Dark(Config{tt.old}, Config{tt.new}) {
				names = append(names, d.String())
			}
			if got := strings.Join(names, " "); got != tt.want {
				t.Errorf("dark = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestConnectDisconnect(t *testing.T) {
	c := Config{[]Circuit{full("tor0:0", "tor1:0"), full("tor2:0", "tor3:0")}}
	c = c.Connect(u("tor0:0"), u("tor2:0"), false)
	if len(c.Circuits) != 1 || c.Circuits[0] != full("tor0:0", "tor2:0") {
		t.Errorf("connect: %v", c.Circuits)
	}
	c, found := c.Disconnect(u("tor2:0"))
	if !found || len(c.Circuits) != 0 {
		t.Errorf("disconnect: %v %v", c.Circuits, found)
	}
	if _, found := c.Disconnect(u("tor2:0")); found {
		t.Error("disconnect of a free port reports found")
	}
}

func TestParseUplink(t *testing.T) {
	for _, bad := range []string{"tor0", "torx:1", "tor-1:0", "", "tor1:"} {
		if _, err := ParseUplink(bad); err == nil {
			t.Errorf("ParseUplink(%q) accepted", bad)
		}
	}
	if v, err := ParseUplink("3:2"); err != nil || v != (Uplink{3, 2}) {
		t.Errorf("ParseUplink(3:2) = %v, %v", v, err)
	}
}
