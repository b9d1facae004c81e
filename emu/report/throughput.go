package report

import (
	"cmp"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/ocsemu/ocsemu/ocsfabric/circuit"
)

// maxPorts bounds the ports drawn in the throughput chart: the busiest
// by bytes sent.
const maxPorts = 16

// rateStep is a port's mean rate over one counter interval [T0, T1]
// (ns from time zero).
type rateStep struct {
	T0, T1 int64
	Bytes  uint64
	Mbps   float64
}

// rateSteps turns a shaper's byte counter samples into rates, one step
// per interval between consecutive samples. An interval whose counter
// went down (the qdisc was replaced and its counter reset) gives no step,
// so the line breaks there; an interval longer than the usual one
// (samples missing) gives one step at its mean rate; samples whose time
// does not advance are skipped. An interval shorter than half the usual
// one is merged with the longer of its neighbours: on a loaded machine a
// sample's time can be taken milliseconds away from its counters' read,
// which made a 2 ms interval after an 80 ms one read 24 times the port's
// rate. Extra entries of the longer slice are ignored.
func rateSteps(tNs []int64, bytes []uint64) []rateStep {
	n := min(len(tNs), len(bytes))
	var kept []int // samples whose time advances
	for i := 0; i < n; i++ {
		if len(kept) == 0 || tNs[i] > tNs[kept[len(kept)-1]] {
			kept = append(kept, i)
		}
	}
	kept = mergeShortIntervals(tNs, bytes, kept)
	var out []rateStep
	for k := 1; k < len(kept); k++ {
		a, b := kept[k-1], kept[k]
		if bytes[b] >= bytes[a] {
			dt := tNs[b] - tNs[a]
			// bits per ns × 1e3 = Mbit/s.
			out = append(out, rateStep{T0: tNs[a], T1: tNs[b], Bytes: bytes[b] - bytes[a], Mbps: float64(bytes[b]-bytes[a]) * 8 * 1e3 / float64(dt)})
		}
	}
	return out
}

// mergeShortIntervals drops, for every interval between kept samples
// shorter than half their median interval, the sample it shares with its
// longer neighbour, so that the two make one interval. It never merges
// across a counter reset (the bytes going down): the merged interval would
// be dropped as a break, and a real interval's bytes with it.
func mergeShortIntervals(tNs []int64, bytes []uint64, kept []int) []int {
	if len(kept) < 4 { // too few intervals to tell the usual one
		return kept
	}
	d := make([]int64, 0, len(kept)-1)
	for k := 1; k < len(kept); k++ {
		d = append(d, tNs[kept[k]]-tNs[kept[k-1]])
	}
	slices.Sort(d)
	short := d[(len(d)-1)/2] / 2
	// interval k runs from sample kept[k] to kept[k+1]
	dt := func(k int) int64 { return tNs[kept[k+1]] - tNs[kept[k]] }
	counts := func(k int) bool { return bytes[kept[k+1]] >= bytes[kept[k]] }
	for k := 0; k+1 < len(kept) && len(kept) >= 3; {
		if dt(k) >= short || !counts(k) {
			k++
			continue
		}
		after := k+2 < len(kept) && counts(k+1)
		before := k > 0 && counts(k-1)
		switch {
		case after && (!before || dt(k+1) > dt(k-1)):
			kept = slices.Delete(kept, k+1, k+2) // merge with the interval after
		case before:
			kept = slices.Delete(kept, k, k+1) // merge with the interval before
			k--
		default:
			k++
		}
	}
	return kept
}

// darkPeriod is an OCS reconfiguration's dark time: its changed ports
// carry no light over [From, Until].
type darkPeriod struct {
	From, Until int64
	Ports       []circuit.Uplink
}

// darkPeriods reads the run's OCS events (times from time zero).
func darkPeriods(events []json.RawMessage) []darkPeriod {
	var out []darkPeriod
	for _, raw := range events {
		var ev struct {
			Effective int64            `json:"effective_ns"`
			DarkUntil int64            `json:"dark_until_ns"`
			Dark      []circuit.Uplink `json:"dark"`
		}
		if json.Unmarshal(raw, &ev) != nil || ev.DarkUntil <= ev.Effective {
			continue
		}
		out = append(out, darkPeriod{From: ev.Effective, Until: ev.DarkUntil, Ports: ev.Dark})
	}
	return out
}

// onUplink tells whether a shaped link (node:iface) is one end of ToR
// uplink u: the ToR's "torR:upP" or the OCS side "ocsK:torRuP".
func onUplink(link string, u circuit.Uplink) bool {
	if link == fmt.Sprintf("tor%d:up%d", u.Rack, u.Port) {
		return true
	}
	node, iface, ok := strings.Cut(link, ":")
	return ok && strings.HasPrefix(node, "ocs") && iface == fmt.Sprintf("tor%du%d", u.Rack, u.Port)
}

type band struct {
	X, W  float64
	Title string
}

type portStrip struct {
	Link       string
	Y0, H      float64
	Lines      []string // SVG polyline points, one per unbroken run
	RateY      float64  // the configured rate's y
	RateLabel  string
	PeakLabel  string
	Own        []band // this port's own dark periods
	Steps      int
	TotalBytes uint64
}

type throughputChart struct {
	Width, Height float64
	Strips        []portStrip
	Bands         []band // every dark period, across all strips
	Ticks         []Tick
	AxisY         float64
	ScaleLabel    string
	Every         string // the counters' usual sampling interval ("20 ms")
	Note          string
	Empty         string
}

// buildThroughput draws each busy shaped port's rate (Mbit/s per
// counter interval) on the timeline's time axis, with the OCS dark
// periods shaded and the configured rate dashed.
func buildThroughput(r *Run) throughputChart {
	if r.Data == nil {
		return throughputChart{Empty: "This run has no data file (" + DataFile + "), so no shaper counters to draw."}
	}
	if len(r.Data.Series.Shapers) == 0 {
		return throughputChart{Empty: "The run's data file holds no shaper counters."}
	}
	type port struct {
		s     ShaperSeries
		steps []rateStep
		total uint64
	}
	var busy []port
	idle := 0
	for _, s := range r.Data.Series.Shapers {
		p := port{s: s, steps: rateSteps(s.TNs, s.Bytes)}
		for _, st := range p.steps {
			p.total += st.Bytes
		}
		if p.total == 0 {
			idle++
			continue
		}
		busy = append(busy, p)
	}
	ch := throughputChart{Width: chartLeft + chartWidth + 20}
	var notes []string
	if idle > 0 {
		notes = append(notes, fmt.Sprintf("%d of %d shaped ports never carried traffic and are left out", idle, len(r.Data.Series.Shapers)))
	}
	if len(busy) == 0 {
		ch.Empty = "No shaped port carried traffic."
		ch.Note = strings.Join(notes, "; ")
		return ch
	}
	dark := darkPeriods(r.Data.Series.OCSEvents)
	wentDark := func(link string) bool {
		for _, d := range dark {
			if slices.ContainsFunc(d.Ports, func(u circuit.Uplink) bool { return onUplink(link, u) }) {
				return true
			}
		}
		return false
	}
	// Ports that went dark first, then the busiest.
	slices.SortStableFunc(busy, func(a, b port) int {
		if da, db := wentDark(a.s.Link), wentDark(b.s.Link); da != db {
			if da {
				return -1
			}
			return 1
		}
		return cmp.Compare(b.total, a.total)
	})
	if len(busy) > maxPorts {
		notes = append(notes, fmt.Sprintf("%d busy ports; %d are drawn: those that went dark, then those that sent the most bytes", len(busy), maxPorts))
		busy = busy[:maxPorts]
	}
	slices.SortFunc(busy, func(a, b port) int { return strings.Compare(a.s.Link, b.s.Link) })
	ch.Note = strings.Join(notes, "; ")

	end := timelineEnd(r)
	ax := NewAxis(0, end, chartLeft, chartWidth)
	// One scale for every strip, so strips compare: the highest configured
	// or measured rate.
	top := 0.0
	for _, p := range busy {
		top = max(top, float64(p.s.RateBps)*8/1e6)
		for _, st := range p.steps {
			top = max(top, st.Mbps)
		}
	}
	ch.ScaleLabel = trimFloat(top, 0) + " Mbit/s"
	ch.Every = sampleInterval(busy[0].s.TNs)
	const stripH, gap, first = 34.0, 8.0, 10.0
	clip := func(t int64) int64 { return min(max(t, 0), end) }
	y := first
	for _, p := range busy {
		st := portStrip{Link: p.s.Link, Y0: y, H: stripH, Steps: len(p.steps), TotalBytes: p.total}
		yOf := func(mbps float64) float64 { return y + stripH - mbps/top*stripH }
		var pts []string
		var last int64 = -1
		peak := 0.0
		flush := func() {
			if len(pts) > 0 {
				st.Lines = append(st.Lines, strings.Join(pts, " "))
			}
			pts = nil
		}
		for _, s := range p.steps {
			if s.T1 < 0 || s.T0 > end {
				continue
			}
			if s.T0 != last {
				flush()
			}
			py := trimFloat(yOf(s.Mbps), 1)
			pts = append(pts, trimFloat(ax.X(clip(s.T0)), 1)+","+py, trimFloat(ax.X(clip(s.T1)), 1)+","+py)
			last = s.T1
			peak = max(peak, s.Mbps)
		}
		flush()
		rate := float64(p.s.RateBps) * 8 / 1e6
		st.RateY = yOf(rate)
		st.RateLabel = trimFloat(rate, 0)
		st.PeakLabel = trimFloat(peak, 0)
		for _, d := range dark {
			for _, u := range d.Ports {
				if onUplink(p.s.Link, u) {
					st.Own = append(st.Own, darkBand(ax, d, clip))
					break
				}
			}
		}
		ch.Strips = append(ch.Strips, st)
		y += stripH + gap
	}
	for _, d := range dark {
		ch.Bands = append(ch.Bands, darkBand(ax, d, clip))
	}
	ch.AxisY = y - gap + 4
	ch.Ticks = ax.Ticks(10)
	ch.Height = ch.AxisY + 30
	return ch
}

// darkBand is a dark period on the axis, at least 2 px wide: a 1 ms
// reconfiguration on a second-long axis would otherwise not show.
func darkBand(ax Axis, d darkPeriod, clip func(int64) int64) band {
	x := ax.X(clip(d.From))
	w := max(2, ax.X(clip(d.Until))-x)
	ports := make([]string, len(d.Ports))
	for i, u := range d.Ports {
		ports[i] = u.String()
	}
	return band{X: x, W: w, Title: fmt.Sprintf("dark %s–%s ms: %s", trimFloat(float64(d.From)/1e6, 2), trimFloat(float64(d.Until)/1e6, 2), strings.Join(ports, ", "))}
}

// sampleInterval is the median interval between a series' samples, as
// "20 ms" (runs before 27 Nov read the shapers every 100 ms).
func sampleInterval(ts []int64) string {
	var d []int64
	for i := 1; i < len(ts); i++ {
		d = append(d, ts[i]-ts[i-1])
	}
	if len(d) == 0 {
		return "?"
	}
	slices.Sort(d)
	return trimFloat(float64(d[len(d)/2])/1e6, 0) + " ms"
}
