package main

import (
	"testing"

	"github.com/ocsemu/ocsemu/ocsfabric/circuit"
	"github.com/ocsemu/ocsemu/ocsfabric/ocs"
	"github.com/ocsemu/ocsemu/workers/record"
)

// The measurement's reconfigurations are the OCS's own, counted as the
// flow model counts them (they were copied from the prediction).
func TestCountReconfigurations(t *testing.T) {
	up := func(s string) circuit.Uplink { u, _ := circuit.ParseUplink(s); return u }
	dark2 := []circuit.Uplink{up("tor0:0"), up("tor1:0")}
	for _, tt := range []struct {
		name         string
		evs          []ocs.Event
		want, wantPt int
	}{
		{"none", nil, 0, 0},
		{"a reconfiguration and a slot", []ocs.Event{{Kind: "reconfigure", Dark: dark2}, {Kind: "slot", Dark: dark2[:1]}}, 2, 3},
		{"a slot that changes nothing", []ocs.Event{{Kind: "slot"}}, 0, 0},
		{"a schedule's start and end", []ocs.Event{{Kind: "schedule-start"}, {Kind: "schedule-end", Dark: dark2}}, 0, 0},
		{"a failed change", []ocs.Event{{Kind: "reconfigure", Dark: dark2, Error: "no such port"}}, 0, 0},
	} {
		m := &record.Run{Reconfigurations: 9, PortsReconfigured: 9}
		countReconfigurations(m, tt.evs)
		if m.Reconfigurations != tt.want || m.PortsReconfigured != tt.wantPt {
			t.Errorf("%s: %d reconfigurations, %d ports; want %d, %d", tt.name, m.Reconfigurations, m.PortsReconfigured, tt.want, tt.wantPt)
		}
	}
}
