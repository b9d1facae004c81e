package scenario_test

import (
	"strings"
	"testing"

	"github.com/ocsemu/ocsemu/emu/scenario"
	"github.com/ocsemu/ocsemu/ocsfabric/reconfig"
)

// The scenario's fabric.ocs.reconfig_delay takes exactly the delays the
// CLI, apply and schedule files and the API take.
func TestScenarioAgrees(t *testing.T) {
	for _, tt := range []struct {
		delay  string
		errHas string
	}{
		{"0s", ""},
		{"10s", ""},
		{"10001ms", "x.yaml:3: fabric.ocs.reconfig_delay: must be between 0s and 10s, got 10.001s"},
		{"100h", "fabric.ocs.reconfig_delay: must be between 0s and 10s, got 100h0m0s"},
	} {
		_, err := scenario.Parse([]byte("name: t\nfabric:\n  ocs: {reconfig_delay: "+tt.delay+"}\n  racks: 2\n  servers_per_rack: 1\n"), "x.yaml")
		_, perr := reconfig.ParseDelay(tt.delay)
		if (err == nil) != (perr == nil) {
			t.Errorf("%s: scenario says %v, ParseDelay says %v", tt.delay, err, perr)
		}
		if tt.errHas != "" && (err == nil || !strings.Contains(err.Error(), tt.errHas)) {
			t.Errorf("%s: error %v, want it to contain %q", tt.delay, err, tt.errHas)
		}
	}
}
