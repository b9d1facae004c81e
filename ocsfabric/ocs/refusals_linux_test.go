package ocs_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/ocsemu/ocsemu/ocsfabric/circuit"
	"github.com/ocsemu/ocsemu/ocsfabric/ocs"
)

// Out-of-bounds delays and instants are refused through the API and by
// the controller itself, and nothing changes.
func TestAPIRefusesOutOfBounds(t *testing.T) {
	_, ctl, cl := startOCS(t, "bnd", "{kind: ocs, racks: 2, servers_per_rack: 1, ocs: {reconfig_delay: 1ms}, rates: {server: 1Gbit, uplink: 1Gbit}}")
	ctx := context.Background()
	pair := []circuit.Circuit{{A: up(t, "tor0:0"), B: up(t, "tor1:0")}}
	long := scenarioDuration(100 * time.Hour)
	for _, tt := range []struct {
		name string
		err  error
		want string
	}{
		{"at_ns 1", func() error { _, err := cl.Apply(ctx, ocs.ConfigRequest{Circuits: pair, AtNs: 1}); return err }(), "at_ns: 1 is"},
		{"delay 100h", func() error {
			_, err := cl.Connect(ctx, ocs.ConnectRequest{A: pair[0].A, B: pair[0].B, Delay: &long})
			return err
		}(), "delay: must be between 0s and 10s, got 100h0m0s"},
		{"start_ns 1", cl.Schedule(ctx, ocs.Schedule{Slots: []ocs.Slot{{Circuits: pair, Duration: scenarioDuration(time.Millisecond)}}, StartNs: 1}), "start_ns: 1 is"},
		{"controller delay", func() error { _, err := ctl.Apply(ctx, circuit.Config{Circuits: pair}, 11*time.Second, 0); return err }(), "delay: must be between 0s and 10s, got 11s"},
		{"controller at", func() error { _, err := ctl.Apply(ctx, circuit.Config{Circuits: pair}, -1, 1); return err }(), "in the past"},
	} {
		if tt.err == nil || !strings.Contains(tt.err.Error(), tt.want) {
			t.Errorf("%s: error %v, want it to contain %q", tt.name, tt.err, tt.want)
		}
	}
	if n := len(ctl.Config().Circuits); n != 0 || ctl.ScheduleRunning() {
		t.Errorf("a refused request changed the OCS: %d circuits, schedule running %v", n, ctl.ScheduleRunning())
	}
}
