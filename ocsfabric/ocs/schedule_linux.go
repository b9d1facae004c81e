package ocs

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/ocsemu/ocsemu/dataplane/units"
	"github.com/ocsemu/ocsemu/ocsfabric/circuit"
	"github.com/ocsemu/ocsemu/ocsfabric/fastpath"
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

// ErrScheduleRunning refuses manual changes while a schedule owns the OCS.
var ErrScheduleRunning = errors.New("a schedule is running: stop it first (emu ocs schedule --stop)")

// Validate checks every slot against the layout, the cycles and the delay.
func (s Schedule) Validate(l circuit.Layout) error {
	if len(s.Slots) == 0 {
		return errors.New("schedule has no slots")
	}
	var errs []error
	for i, sl := range s.Slots {
		if sl.Duration.D() <= 0 {
			errs = append(errs, fmt.Errorf("slot %d: duration must be positive", i))
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
// timed by the kernel; the controller writes each slot into the spare
// generation while the previous one runs.
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
		defer func() {
			c.schedMu.Lock()
			c.sched = nil
			c.schedMu.Unlock()
		}()
		c.emit(&Event{Kind: "schedule-start", Scheduled: start, Effective: start})
		at := start
		n := 0
		for cycle := 0; s.Cycles == 0 || cycle < s.Cycles; cycle++ {
			for i, sl := range s.Slots {
				if ctx.Err() != nil {
					c.emit(&Event{Kind: "schedule-end", Scheduled: int64(fastpath.Monotonic()), Effective: int64(fastpath.Monotonic()), Slot: n})
					return
				}
				c.mu.Lock()
				_, err := c.applyLocked(ctx, circuit.Config{Circuits: sl.Circuits}, delay, at, "slot", i)
				c.mu.Unlock()
				if err != nil {
					c.log.Error("schedule slot failed", "slot", i, "err", err)
				}
				at += int64(sl.Duration)
				n++
			}
		}
		// Let the last slot run its length before declaring the end.
		if wait := time.Duration(at - int64(fastpath.Monotonic())); wait > 0 {
			select {
			case <-time.After(wait):
			case <-ctx.Done():
			}
		}
		c.emit(&Event{Kind: "schedule-end", Scheduled: at, Effective: int64(fastpath.Monotonic()), Slot: n})
	}()
	return nil
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
