package flowmodel

import (
	"strings"
	"testing"

	"github.com/ocsemu/ocsemu/emu/scenario"
)

func TestUnlimitedLinks(t *testing.T) {
	tests := []struct {
		kind           string
		server, uplink scenario.Rate
		want           string // "" = no warning
	}{
		{scenario.KindEPS, 1e9, 0, ""},
		{scenario.KindOCS, 1e9, 1e9, ""},
		{scenario.KindOCS, 1e9, 0, ""}, // server links bound every flow
		{scenario.KindEPS, 0, 0, "the fabric's links are unlimited (fabric.rates.server not set), so the flow model cannot predict transfer times"},
		{scenario.KindOCS, 0, 0, "(fabric.rates.server and fabric.rates.uplink not set)"},
		{scenario.KindHybrid, 0, 0, "Set fabric.rates.server and fabric.rates.uplink to the rates to emulate, e.g. 1Gbit"},
		{scenario.KindOCS, 0, 1e9, "fabric.rates.server is unlimited, so transfers within a rack take no time"},
		{scenario.KindHybrid, 0, 1e9, "transfers within a rack and over the packet core take no time"},
	}
	for _, tt := range tests {
		f := scenario.Fabric{Kind: tt.kind, Rates: scenario.Rates{Server: tt.server, Uplink: tt.uplink}}
		got := UnlimitedLinks(f)
		if tt.want == "" && got != "" || !strings.Contains(got, tt.want) {
			t.Errorf("%s server %v uplink %v: got %q, want %q", tt.kind, tt.server, tt.uplink, got, tt.want)
		}
	}
}
