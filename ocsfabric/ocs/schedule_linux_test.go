package ocs_test

import (
	"context"
	"testing"
	"time"

	"github.com/ocsemu/ocsemu/dataplane/fabric"
	"github.com/ocsemu/ocsemu/dataplane/fabric/fabrictest"
	"github.com/ocsemu/ocsemu/ocsfabric/circuit"
	"github.com/ocsemu/ocsemu/ocsfabric/fastpath"
	"github.com/ocsemu/ocsemu/ocsfabric/ocs"
)

// slotEvents collects a schedule's slot events until its end.
func slotEvents(t *testing.T, evs <-chan ocs.Event) (slots []ocs.Event, end ocs.Event) {
	t.Helper()
	timeout := time.After(time.Minute)
	for {
		select {
		case ev, ok := <-evs:
			if !ok {
				t.Fatal("event stream closed before the schedule ended")
			}
			switch ev.Kind {
			case "slot":
				slots = append(slots, ev)
			case "schedule-end":
				return slots, ev
			}
		case <-timeout:
			t.Fatal("the schedule did not end")
		}
	}
}

// TestScheduleStagedAhead runs a rotor schedule whose slots are staged
// ahead into generations of their own: every slot is logged once, in
// order, with its dark period following from the slot before, and a
// manual change after it starts from the last slot.
func TestScheduleStagedAhead(t *testing.T) {
	_, ctl, _ := startOCS(t, "stgsch", "{kind: ocs, racks: 4, servers_per_rack: 1, uplinks_per_tor: 1}")
	c := func(a, z string) circuit.Circuit { return circuit.Circuit{A: up(t, a), B: up(t, z)} }
	matchings := [][]circuit.Circuit{
		{c("tor0:0", "tor1:0"), c("tor2:0", "tor3:0")},
		{c("tor0:0", "tor2:0"), c("tor1:0", "tor3:0")},
		{c("tor0:0", "tor3:0"), c("tor1:0", "tor2:0")},
	}
	const slotLen, delay, cycles = 2 * time.Millisecond, 100 * time.Microsecond, 10
	var slots []ocs.Slot
	for _, m := range matchings {
		slots = append(slots, ocs.Slot{Circuits: m, Duration: scenarioDuration(slotLen)})
	}
	d := scenarioDuration(delay)
	evs, stop := ctl.Subscribe()
	defer stop()
	if err := ctl.StartSchedule(ocs.Schedule{Slots: slots, Cycles: cycles, Delay: &d}); err != nil {
		t.Fatal(err)
	}
	got, end := slotEvents(t, evs)
	if len(got) != cycles*len(matchings) {
		t.Fatalf("%d slot events, want %d", len(got), cycles*len(matchings))
	}
	late := 0
	for i, ev := range got {
		if i > 0 && ev.Scheduled-got[i-1].Scheduled != int64(slotLen) {
			t.Errorf("slot %d at %d, %v after the one before; want %v", i, ev.Scheduled, time.Duration(ev.Scheduled-got[i-1].Scheduled), slotLen)
		}
		if ev.Effective < ev.Scheduled || ev.LateNs != ev.Effective-ev.Scheduled || ev.PathSkewNs != 0 {
			t.Errorf("slot %d: scheduled %d, effective %d, late %d, path skew %d", i, ev.Scheduled, ev.Effective, ev.LateNs, ev.PathSkewNs)
		}
		if len(ev.Dark) != 4 || ev.DarkUntil != ev.Scheduled+int64(delay) {
			t.Errorf("slot %d: %d ports dark until %d, want 4 until %d", i, len(ev.Dark), ev.DarkUntil, ev.Scheduled+int64(delay))
		}
		if ev.LateNs > 0 {
			late++
		}
	}
	t.Logf("%d slots of %v, %d late", len(got), slotLen, late)
	if last := got[len(got)-1]; end.Scheduled != last.Scheduled+int64(slotLen) {
		t.Errorf("schedule ended at %d, want %d", end.Scheduled, last.Scheduled+int64(slotLen))
	}
	if cfg := ctl.Config(); len(circuit.Dark(cfg, circuit.Config{Circuits: matchings[(cycles*3-1)%3]})) != 0 {
		t.Errorf("after the schedule: circuits %v, want the last slot's %v", cfg.Circuits, matchings[2])
	}
	// A manual change starts from the last slot: only the ports it moves go dark.
	ev, err := ctl.Apply(context.Background(), circuit.Config{Circuits: matchings[2][:1]}, delay, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(ev.Dark) != 2 || ev.DarkUntil != ev.Scheduled+int64(delay) {
		t.Errorf("manual change after the schedule: %d ports dark until %d, want 2 until %d", len(ev.Dark), ev.DarkUntil, ev.Scheduled+int64(delay))
	}
}

// twoSlots is a lab running a two-slot schedule staged a whole slot
// ahead, once its first slot took effect and its second is armed.
type twoSlots struct {
	lab           *fabric.Lab
	ctl           *ocs.Controller
	first, second []circuit.Circuit
	firstEv       ocs.Event
	evs           <-chan ocs.Event
}

func startTwoSlots(t *testing.T, name string, slotLen time.Duration) *twoSlots {
	t.Helper()
	lab, ctl, _ := startOCS(t, name, "{kind: ocs, racks: 4, servers_per_rack: 1, uplinks_per_tor: 1, rates: {server: 1Gbit, uplink: 1Gbit}}")
	c := func(a, z string) circuit.Circuit { return circuit.Circuit{A: up(t, a), B: up(t, z)} }
	ts := &twoSlots{lab: lab, ctl: ctl,
		first:  []circuit.Circuit{c("tor0:0", "tor1:0"), c("tor2:0", "tor3:0")},
		second: []circuit.Circuit{c("tor0:0", "tor2:0"), c("tor1:0", "tor3:0")}}
	ctl.SetStageAhead(2 * slotLen)
	evs, stop := ctl.Subscribe()
	t.Cleanup(stop)
	ts.evs = evs
	if err := ctl.StartSchedule(ocs.Schedule{Cycles: 1, Slots: []ocs.Slot{
		{Circuits: ts.first, Duration: scenarioDuration(slotLen)}, {Circuits: ts.second, Duration: scenarioDuration(slotLen)}}}); err != nil {
		t.Fatal(err)
	}
	for ev := range evs {
		if ev.Kind == "slot" {
			ts.firstEv = ev
			break
		}
	}
	armed := false
	for deadline := time.Now().Add(slotLen / 2); !armed && time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		armed = ctl.ArmedAhead() == 1
	}
	if !armed {
		// ArmedAhead counts switches still ahead: once the second slot's
		// instant has passed (the first slot's event came late), it is 0
		// because the machine was slow, not because nothing was armed.
		if late := time.Duration(int64(fastpath.Monotonic()) - ts.firstEv.Scheduled); late >= slotLen {
			t.Skipf("%v after the first slot's instant, past the second's: the machine was too slow to see it armed", late)
		}
		t.Fatalf("the second slot is not armed %v into the first (armed ahead: %d)", slotLen/2, ctl.ArmedAhead())
	}
	return ts
}

// TestStopDisarmsStagedSlot stops a schedule while its next slot is
// armed in the kernel: that slot never takes effect, and the current
// slot's circuits stay past its instant. Slots are staged a whole slot
// ahead here, so the second is armed well before the stop.
func TestStopDisarmsStagedSlot(t *testing.T) {
	const slotLen = 300 * time.Millisecond
	ts := startTwoSlots(t, "stgstop", slotLen)
	ctl, evs, first, firstEv, hs := ts.ctl, ts.evs, ts.first, ts.firstEv, fabrictest.Hosts(ts.lab)
	ctl.StopSchedule()
	if late := time.Duration(int64(fastpath.Monotonic()) - firstEv.Scheduled); late > slotLen {
		t.Skipf("stopped %v after the first slot, past the second's instant: the machine was too slow", late)
	}
	got, end := slotEvents(t, evs)
	if len(got) != 0 {
		t.Errorf("the disarmed slot was logged: %+v", got)
	}
	if end.Slot != 1 {
		t.Errorf("schedule ended after %d slots, want 1: the armed second slot was not disarmed", end.Slot)
	}
	// Past the second slot's instant the first slot's circuits still carry.
	waitFor(t, "the second slot's instant does not pass", time.Minute, func() bool {
		return time.Duration(int64(fastpath.Monotonic())-firstEv.Scheduled) > slotLen+50*time.Millisecond
	})
	if cfg := ctl.Config(); len(circuit.Dark(cfg, circuit.Config{Circuits: first})) != 0 {
		t.Errorf("after stop: circuits %v, want the first slot's %v", cfg.Circuits, first)
	}
	if !reach(t, hs[0], hs[1]) {
		t.Error("rack 0 no longer reaches rack 1 over the first slot's circuit")
	}
	if reach(t, hs[0], hs[2]) {
		t.Error("rack 0 reaches rack 2: the disarmed slot's circuit was switched in")
	}
}

// TestRestartDuringSchedule: a second OCS process takes over while a
// schedule's next slot is armed in the kernel (staged a whole slot
// ahead here). It keeps the slot in effect and disarms the one ahead,
// whose schedule it does not run.
func TestRestartDuringSchedule(t *testing.T) {
	const slotLen = 500 * time.Millisecond
	ts := startTwoSlots(t, "stgrst", slotLen)
	lab, ctl, first, firstEv, hs := ts.lab, ts.ctl, ts.first, ts.firstEv, fabrictest.Hosts(ts.lab)
	ctl2, err := ocs.New(context.Background(), lab, ocs.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer ctl2.Close()
	// Checked before the old process stops, which disarms it too.
	if late := time.Duration(int64(fastpath.Monotonic()) - firstEv.Scheduled); late > slotLen {
		t.Skipf("took over %v after the first slot, past the second's instant: the machine was too slow", late)
	}
	if n := ctl2.PendingSwitches(); n != 0 {
		t.Errorf("taken over: %d switches still armed, want the second slot disarmed", n)
	}
	ctl.StopSchedule() // the old process is gone: it writes nothing more
	if got := ctl2.Config(); len(circuit.Dark(got, circuit.Config{Circuits: first})) != 0 {
		t.Errorf("taken over: circuits %v, want the slot in effect %v", got.Circuits, first)
	}
	waitFor(t, "the second slot's instant does not pass", time.Minute, func() bool {
		return time.Duration(int64(fastpath.Monotonic())-firstEv.Scheduled) > slotLen+50*time.Millisecond
	})
	if !reach(t, hs[0], hs[1]) {
		t.Error("rack 0 no longer reaches rack 1 after the takeover")
	}
	if reach(t, hs[0], hs[2]) {
		t.Error("rack 0 reaches rack 2: the slot armed by the old process was switched in")
	}
}
