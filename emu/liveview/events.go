package liveview

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/ocsemu/ocsemu/emu/plural"
	"github.com/ocsemu/ocsemu/ocsfabric/ocs"
)

// EventLog is the "events" event: the newest OCS events, described, and
// the slots of a running schedule counted rather than listed (a 1 ms
// rotor switches a thousand times a second).
type EventLog struct {
	Recent    []EventLine `json:"recent"` // newest first
	Slots     int         `json:"slots"`  // slot events seen since the view started
	LateSlots int         `json:"late_slots"`
}

// EventLine is one OCS event as the page lists it.
type EventLine struct {
	Seq  int    `json:"seq"`
	At   string `json:"at"` // wall clock when the view received it, or "logged before"
	Kind string `json:"kind"`
	Text string `json:"text"`
	eff  int64  // the event's effective time: with Seq, which event it is (Seq restarts with the OCS)
}

// MaxEventLines is how many events the page lists (not slots).
const MaxEventLines = 12

// eventFollower follows the OCS event stream, reconnecting when it breaks
// (the OCS restarted, the lab was redeployed).
type eventFollower struct {
	mu  sync.Mutex
	log EventLog
}

// Describe words an OCS event as `emu ocs connect` and the live view show
// it.
func Describe(ev ocs.Event) string {
	if ev.Error != "" {
		return "error: " + ev.Error
	}
	var b strings.Builder
	switch ev.Kind {
	case "schedule-start", "schedule-end":
		return ev.Kind
	}
	b.WriteString(plural.Of(len(ev.Circuits), "circuit"))
	if len(ev.Dark) > 0 {
		var ds []string
		for _, d := range ev.Dark {
			ds = append(ds, d.String())
		}
		fmt.Fprintf(&b, "; %s dark for %v (%s)", plural.Of(len(ev.Dark), "port"), time.Duration(ev.DelayNs), strings.Join(ds, " "))
	}
	if ev.LateNs > 0 {
		fmt.Fprintf(&b, "; switched %v late", time.Duration(ev.LateNs))
	}
	if ev.PathsNs > 0 {
		fmt.Fprintf(&b, "; ToR paths switched with the circuits (skew %v)", time.Duration(ev.PathSkewNs))
	}
	if ev.RoutesDoneNs > 0 && ev.Effective > 0 {
		fmt.Fprintf(&b, "; netlink routes followed %v after (%d changed)", time.Duration(ev.RoutesDoneNs-ev.Effective).Round(time.Microsecond), ev.RoutesChanged)
	}
	fmt.Fprintf(&b, "; %s unreachable", plural.Of(ev.Unreachable, "rack pair"))
	return b.String()
}

func (f *eventFollower) add(ev ocs.Event, now time.Time) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if ev.Kind == "slot" {
		f.log.Slots++
		if ev.LateNs > 0 {
			f.log.LateSlots++
		}
		return
	}
	at := "logged before"
	if !now.IsZero() {
		at = now.Format("15:04:05.000")
	}
	line := EventLine{Seq: ev.Seq, At: at, Kind: ev.Kind, Text: Describe(ev), eff: ev.Effective}
	for _, l := range f.log.Recent {
		if l.Seq == ev.Seq && l.eff == ev.Effective {
			return // listed already (logged, then streamed, or the other way)
		}
	}
	f.log.Recent = append([]EventLine{line}, f.log.Recent...)
	if now.IsZero() {
		// A logged event may be older than lines the stream brought.
		slices.SortStableFunc(f.log.Recent, func(a, b EventLine) int { return cmp.Compare(b.eff, a.eff) })
	}
	if len(f.log.Recent) > MaxEventLines {
		f.log.Recent = f.log.Recent[:MaxEventLines]
	}
}

// seed lists events logged before the view started (oldest first), marked
// as such; an event listed already is not listed twice.
func (f *eventFollower) seed(evs []ocs.Event) {
	for _, ev := range evs {
		f.add(ev, time.Time{})
	}
}

func (f *eventFollower) snapshot() EventLog {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := f.log
	out.Recent = append([]EventLine{}, f.log.Recent...)
	return out
}

// follow reads events until ctx ends; after a break it waits a second
// and subscribes again.
func (f *eventFollower) follow(ctx context.Context, src OCS) {
	for ctx.Err() == nil {
		_ = src.Events(ctx, func(ev ocs.Event) bool {
			f.add(ev, time.Now())
			return ctx.Err() == nil
		})
		select {
		case <-ctx.Done():
		case <-time.After(time.Second):
		}
	}
}
