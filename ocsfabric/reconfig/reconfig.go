// Package reconfig holds the one set of bounds every way into the OCS
// checks a reconfiguration against: the scenario's
// fabric.ocs.reconfig_delay, the CLI's --delay, and the delay, at_ns and
// start_ns of apply files, schedule files and API requests. It imports
// only the shared vocabulary (dataplane/limits, dataplane/units), so that
// the scenario and the OCS can both use it.
package reconfig

import (
	"fmt"
	"strings"
	"time"

	"github.com/ocsemu/ocsemu/dataplane/limits"
	"github.com/ocsemu/ocsemu/dataplane/units"
)

const (
	// MinDelay is the shortest reconfiguration delay (dark period): 0, an
	// ideal switch whose ports never go dark (dataplane/limits).
	MinDelay = time.Duration(limits.MinReconfigDelayNs)
	// MaxDelay is the longest: 10 s, far beyond real optical switches
	// (tens of ms for MEMS, µs to ns for fast ones), so that a mistyped
	// unit ("100h") is refused rather than darkening ports for days.
	MaxDelay = time.Duration(limits.MaxReconfigDelayNs)
	// MaxAhead is how far ahead of the OCS clock a change (at_ns) or a
	// schedule (start_ns) may be timed: an hour, longer than the stages of
	// any plan emu runs, and short enough to catch an instant in the wrong
	// clock (wall-clock ns are decades ahead of CLOCK_MONOTONIC) or unit.
	// A change waits for its instant while holding the OCS.
	MaxAhead = time.Hour
	// MaxSlot is the longest slot of a schedule (a clock plan's stage,
	// until the next one starts): the instants of a long schedule stay
	// far from int64's end.
	MaxSlot = time.Hour
)

// CheckDelay refuses a delay outside [MinDelay, MaxDelay]. The message
// names the value and the range; the caller prefixes the field or flag.
func CheckDelay(d time.Duration) error {
	if d < MinDelay || d > MaxDelay {
		return fmt.Errorf("must be between %v and %v, got %v", MinDelay, MaxDelay, d)
	}
	return nil
}

// ParseDelay reads a delay written "50ms", "20us" (or "20µs"), "1.5s" or
// "0", and checks its bounds. A bare number other than 0 is refused for
// lack of a unit.
func ParseDelay(s string) (time.Duration, error) {
	s = strings.TrimSpace(s)
	neg := strings.HasPrefix(s, "-")
	d, err := units.ParseDuration(strings.TrimPrefix(s, "-"))
	if err != nil {
		return 0, err
	}
	if neg { // a negative delay is out of range, whatever its unit
		return 0, CheckDelay(-d.D())
	}
	return d.D(), CheckDelay(d.D())
}

// CheckAt checks the CLOCK_MONOTONIC instant (ns) of a change or of a
// schedule's start against the OCS clock now. 0 means as soon as possible;
// any other instant must lie after now and at most MaxAhead after it.
func CheckAt(at, now int64) error {
	switch {
	case at == 0:
		return nil
	case at < 0:
		return fmt.Errorf("%d is negative: give a CLOCK_MONOTONIC instant in ns (GET /v1/clock reads it), or 0 for as soon as possible", at)
	case at <= now:
		return fmt.Errorf("%d is %v in the past (the OCS clock reads %d): give an instant up to %v ahead of GET /v1/clock, or 0 for as soon as possible",
			at, round(time.Duration(now-at)), now, MaxAhead)
	case at-now > int64(MaxAhead):
		return fmt.Errorf("%d is %v ahead of the OCS clock (%d): at most %v ahead is allowed",
			at, round(time.Duration(at-now)), now, MaxAhead)
	}
	return nil
}

// round keeps a distance readable: ms above a second, µs below.
func round(d time.Duration) time.Duration {
	if d >= time.Second {
		return d.Round(time.Millisecond)
	}
	return d.Round(time.Microsecond)
}
