package labs

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/ocsemu/ocsemu/dataplane/fabric"
	"github.com/ocsemu/ocsemu/dataplane/names"
	"github.com/ocsemu/ocsemu/ocsfabric/circuit"
	"github.com/ocsemu/ocsemu/ocsfabric/ocs"
)

// Lab 05: the student completes a rotor schedule (the three matchings of
// four racks) with a slot length that keeps the dark time small, and
// measures TCP's throughput under short and long slots.

func studentSchedule(e *Env) (ocs.Schedule, error) {
	return studentFile(e, "schedule.yaml", ocs.ParseScheduleFile)
}

// rotorPairs lists the rack pairs no slot of the schedule connects directly.
func rotorPairs(s ocs.Schedule, racks int) []string {
	direct := map[[2]int]bool{}
	for _, sl := range s.Slots {
		for a, peers := range (circuit.Config{Circuits: sl.Circuits}).RackGraph() {
			for b := range peers {
				direct[[2]int{a, b}] = true
			}
		}
	}
	var missing []string
	for a := 0; a < racks; a++ {
		for b := a + 1; b < racks; b++ {
			if !direct[[2]int{a, b}] || !direct[[2]int{b, a}] {
				missing = append(missing, fmt.Sprintf("%d-%d", a, b))
			}
		}
	}
	return missing
}

func init() {
	registry["05-rotor"] = []Check{
		{Name: "schedule.yaml parses as an `emu ocs schedule` file", Run: func(ctx context.Context, e *Env) (string, error) {
			s, err := studentSchedule(e)
			if err != nil {
				return "", err
			}
			return fmt.Sprintf("%d slots, cycles %d", len(s.Slots), s.Cycles), nil
		}},
		{Name: "every slot fits the fabric", Run: func(ctx context.Context, e *Env) (string, error) {
			s, err := studentSchedule(e)
			if err != nil {
				return "", errors.New("schedule.yaml did not parse (see above)")
			}
			if err := s.Validate(e.layout()); err != nil {
				return "", err
			}
			return "ports exist, one circuit per port per slot", nil
		}},
		{Name: "it is a rotor: every rack pair gets a direct circuit in some slot", FailsOnStart: true, Run: func(ctx context.Context, e *Env) (string, error) {
			s, err := studentSchedule(e)
			if err != nil {
				return "", errors.New("schedule.yaml did not parse (see above)")
			}
			if m := rotorPairs(s, e.Scenario.Fabric.Racks); len(m) > 0 {
				return "", fmt.Errorf("no slot connects rack pair(s) %s", strings.Join(m, " "))
			}
			return fmt.Sprintf("all %d rack pairs over %d slots", e.Scenario.Fabric.Racks*(e.Scenario.Fabric.Racks-1)/2, len(s.Slots)), nil
		}},
		{Name: "the dark period is at most 10% of every slot", FailsOnStart: true, Run: func(ctx context.Context, e *Env) (string, error) {
			s, err := studentSchedule(e)
			if err != nil {
				return "", errors.New("schedule.yaml did not parse (see above)")
			}
			dark := e.Scenario.Spec().ReconfigDelay.D()
			if s.Delay != nil {
				dark = s.Delay.D()
			}
			for i, sl := range s.Slots {
				if d := sl.Duration.D(); dark*10 > d {
					return "", fmt.Errorf("slot %d lasts %v and is dark for %v of it (%.0f%%)", i, d, dark, 100*float64(dark)/float64(d))
				}
			}
			return fmt.Sprintf("dark %v per slot of at least %v", dark, 10*dark), nil
		}},
		{Name: "live: with the schedule running, r0s0 reaches r1s0 during its slots", Root: true, Run: func(ctx context.Context, e *Env) (string, error) {
			s, err := studentSchedule(e)
			if err != nil {
				return "", errors.New("schedule.yaml did not parse (see above)")
			}
			lab, err := e.Live(ctx)
			if err != nil {
				return "", err
			}
			cl := ocs.NewClient(fabric.LabFile(lab, "ocs.sock"))
			s.Cycles, s.StartNs = 0, 0
			if err := cl.Schedule(ctx, s); err != nil {
				return "", fmt.Errorf("start the schedule: %w", err)
			}
			defer cl.StopSchedule(context.WithoutCancel(ctx))
			time.Sleep(100 * time.Millisecond)
			// 7.3 ms between pings: an interval that is a multiple of half
			// the rotor's cycle (10 ms against a 4 ms cycle) samples only
			// two phases of it, and both can fall where r0-r1 is dark or
			// unpatched (start/ failed so about half the time).
			out, err := inNS(ctx, names.NSName(lab, "r0s0"), "ping", "-c", "100", "-i", "0.0073", "-W", "1", "10.0.1.1")
			if !strings.Contains(out, " 0 received") && strings.Contains(out, "received") {
				return tail(out, 2), nil
			}
			return "", fmt.Errorf("no ping reply from r1s0 in 100 tries while the schedule ran: %v\n%s", err, tail(out, 2))
		}},
		{Name: "answer: longer slots give TCP more throughput", FailsOnStart: true, Run: func(ctx context.Context, e *Env) (string, error) {
			short, err := e.Number("short_slot_mbps")
			if err != nil {
				return "", err
			}
			long, err := e.Number("long_slot_mbps")
			if err != nil {
				return "", err
			}
			if long <= short {
				return "", fmt.Errorf("you measured %v Mbit/s with 50 ms slots and %v with 2 ms: measure again (iperf3 -t 10, the schedule running)", long, short)
			}
			return fmt.Sprintf("%v Mbit/s with 50 ms slots, %v with 2 ms", long, short), nil
		}},
		{Name: "answer: the throughput stays within the pair's share of the rotor", FailsOnStart: true, Run: func(ctx context.Context, e *Env) (string, error) {
			long, err := e.Number("long_slot_mbps")
			if err != nil {
				return "", err
			}
			sp := e.Scenario.Spec()
			share := sp.UplinkRate.Bps() / 1e6 / float64(sp.Racks-1) // one slot in racks-1
			switch {
			case long > 1.1*share:
				return "", fmt.Errorf("%v Mbit/s is more than rack 0 -> 1 can get: its circuit is up one slot in %d, %.0f Mbit/s at most", long, sp.Racks-1, share)
			case long >= 0.9*share:
				// The ceiling, not a measurement: TCP through a rotor stalls
				// at every switch (10.7-39.7 Mbit/s measured at 50 ms slots).
				return "", fmt.Errorf("%v Mbit/s is the rotor's ceiling for the pair (%.0f), not what TCP got: answer the sender's bitrate iperf3 printed with 50 ms slots", long, share)
			}
			return fmt.Sprintf("%v of at most %.0f Mbit/s (%.0f%%)", long, share, 100*long/share), nil
		}},
	}
}
