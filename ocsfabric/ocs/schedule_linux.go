package ocs

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/ocsemu/ocsemu/dataplane/monoclock"
	"github.com/ocsemu/ocsemu/dataplane/units"
	"github.com/ocsemu/ocsemu/ocsfabric/circuit"
	"github.com/ocsemu/ocsemu/ocsfabric/fastpath"
	"github.com/ocsemu/ocsemu/ocsfabric/reconfig"
)

// Slot is one configuration of a time-slotted schedule.
type Slot struct {
	Circuits []circuit.Circuit `json:"circuits" yaml:"circuits"`
	Duration units.Duration    `json:"duration" yaml:"duration"`
}

// Schedule is a sequence of configurations with slot lengths, run once or
// cycled (rotor style), as TOPO-X's 1 ms slots and ODDL-style per-flow
// switching need.
type Schedule struct {
	Slots []Slot `json:"slots" yaml:"slots"`
	// Cycles is how many times the sequence runs; 0 means until stopped.
	Cycles int `json:"cycles" yaml:"cycles"`
	// Delay overrides the scenario's reconfiguration delay.
	Delay *units.Duration `json:"delay,omitempty" yaml:"delay,omitempty"`
	// StartNs is the CLOCK_MONOTONIC start; 0 means 20 ms from now. Any
	// other instant must lie ahead of the OCS clock, by at most
	// reconfig.MaxAhead.
	StartNs int64 `json:"start_ns,omitempty" yaml:"start_ns,omitempty"`
}

// MaxSlot bounds a slot's duration (reconfig.MaxSlot).
const MaxSlot = reconfig.MaxSlot

// ErrScheduleRunning refuses manual changes while a schedule owns the OCS.
var ErrScheduleRunning = errors.New("a schedule is running: stop it first (emu ocs schedule --stop)")

// Validate checks every slot against the layout, the cycles and the delay.
func (s Schedule) Validate(l circuit.Layout) error {
	if len(s.Slots) == 0 {
		return errors.New("schedule has no slots")
	}
	var errs []error
	for i, sl := range s.Slots {
		if d := sl.Duration.D(); d <= 0 || d > MaxSlot {
			errs = append(errs, fmt.Errorf("slot %d: duration must be positive and at most %v, got %v", i, MaxSlot, d))
		}
		if err := l.Validate(circuit.Config{Circuits: sl.Circuits}); err != nil {
			errs = append(errs, fmt.Errorf("slot %d: %w", i, capJoined(err)))
		}
	}
	if s.Cycles < 0 {
		errs = append(errs, errors.New("cycles must not be negative"))
	}
	errs = append(errs, checkDelay(s.Delay))
	return capJoined(errors.Join(errs...))
}

// StartSchedule validates a schedule and runs it in the background. Slot
// i takes effect at StartNs plus the durations of the slots before it,
// timed by the kernel. The controller stages slots ahead, each into a
// generation of its own (up to fastpath.Generations-1 armed at once, at
// most stageAhead ahead unless it is the next), so the kernel switches on
// its own while the controller waits for a CPU.
func (c *Controller) StartSchedule(s Schedule) error {
	if err := s.Check(c.layout, int64(fastpath.Monotonic())); err != nil {
		return err
	}
	return c.runSchedule(s)
}

// runSchedule runs a schedule already checked (the API checks it against
// the instant its request came in, see DecodeSchedule).
func (c *Controller) runSchedule(s Schedule) error {
	c.schedMu.Lock()
	defer c.schedMu.Unlock()
	if c.sched != nil {
		return ErrScheduleRunning
	}
	ctx, cancel := context.WithCancel(context.Background())
	c.sched = cancel
	delay := time.Duration(-1)
	if s.Delay != nil {
		delay = s.Delay.D()
	}
	start := s.StartNs
	if start == 0 {
		start = int64(fastpath.Monotonic()) + int64(20*time.Millisecond)
	}
	c.schedWG.Add(1)
	go func() {
		defer c.schedWG.Done()
		// The OCS takes manual changes again by the time the end is logged.
		var end Event
		defer func() {
			c.schedMu.Lock()
			c.sched = nil
			c.schedMu.Unlock()
			cancel()
			c.emit(&end)
		}()
		c.emit(&Event{Kind: "schedule-start", Scheduled: start, Effective: start})
		at := start
		n := 0
		for cycle := 0; s.Cycles == 0 || cycle < s.Cycles; cycle++ {
			for i, sl := range s.Slots {
				if err := c.stageSlot(ctx, circuit.Config{Circuits: sl.Circuits}, delay, at, i); err != nil {
					if ctx.Err() != nil {
						end = c.endSchedule(n)
						return
					}
					c.log.Error("schedule slot failed", "slot", i, "err", err)
				}
				at += int64(sl.Duration)
				n++
			}
		}
		// Let the last slot run its length before declaring the end.
		if monoclock.SleepUntil(ctx, at) != nil {
			end = c.endSchedule(n)
			return
		}
		c.mu.Lock()
		c.commitLocked()
		c.mu.Unlock()
		c.routes.flush()
		end = Event{Kind: "schedule-end", Scheduled: at, Effective: int64(fastpath.Monotonic()), Slot: n}
	}()
	return nil
}

// stageAhead bounds how far ahead of its instant a slot is staged, unless
// it is the next one to take effect.
const stageAhead = 50 * time.Millisecond

// cancelGuard: a stopped schedule keeps the slots armed within it of now
// (they may be taking effect as the stop comes), and disarms the rest.
const cancelGuard = 200 * time.Microsecond

// stageSlot stages one slot for instant at, as soon as a generation is free
// and at is within stageAhead (at once when no slot is armed), and hands
// its routes to the route worker, which logs its event once they follow.
func (c *Controller) stageSlot(ctx context.Context, cfg circuit.Config, delay time.Duration, at int64, slot int) error {
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		c.mu.Lock()
		c.commitLocked()
		gen, retry, ok := c.gen.Free()
		if ok && (len(c.armed) == 0 || at-int64(fastpath.Monotonic()) <= int64(c.stageAhead)) {
			ev, t, unreach, err := c.stageLocked(gen, cfg, delay, at, "slot", slot)
			c.mu.Unlock()
			if err != nil {
				return err
			}
			ev.Unreachable = len(unreach)
			c.routes.submit(&routeJob{table: t, unreach: unreach, ev: ev})
			return nil
		}
		c.mu.Unlock()
		wake := at - int64(c.stageAhead)
		if !ok {
			wake = int64(retry)
		}
		if err := monoclock.SleepUntil(ctx, wake); err != nil {
			return err
		}
	}
}

// endSchedule ends a stopped schedule after n slots: slots armed beyond
// cancelGuard are disarmed (and never logged), the others take effect.
// It returns the end event.
func (c *Controller) endSchedule(n int) Event {
	c.mu.Lock()
	cut, dropped := c.cancelLocked(cancelGuard)
	n -= dropped
	c.routes.cancel(cut)
	c.mu.Unlock()
	_ = monoclock.SleepUntil(context.Background(), cut)
	c.mu.Lock()
	c.commitLocked()
	c.mu.Unlock()
	c.routes.flush()
	now := int64(fastpath.Monotonic())
	return Event{Kind: "schedule-end", Scheduled: now, Effective: now, Slot: n}
}

// StopSchedule stops a running schedule and waits for it; the current
// slot's circuits stay.
func (c *Controller) StopSchedule() {
	c.schedMu.Lock()
	cancel := c.sched
	c.schedMu.Unlock()
	if cancel != nil {
		cancel()
	}
	c.schedWG.Wait()
}

// ScheduleRunning reports whether a schedule owns the OCS.
func (c *Controller) ScheduleRunning() bool {
	c.schedMu.Lock()
	defer c.schedMu.Unlock()
	return c.sched != nil
}
