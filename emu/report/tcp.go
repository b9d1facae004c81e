package report

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
)

// maxSeries bounds the connections drawn per job chart.
const maxSeries = 16

type series struct {
	Name    string
	Colour  string
	Points  string // SVG polyline points
	LegendY float64
	Last    Sample
	Samples int
}

type panel struct {
	Title    string
	Y0, H    float64
	MaxLabel string
	Series   []series
}

type tcpChart struct {
	Job           string
	Width, Height float64
	Panels        []panel
	Ticks         []Tick
	AxisY         float64
	Reconfigs     []line
	Note          string
	Retrans       int64
}

type conn struct {
	rank, peer int
}

func connName(c conn) string {
	from := fmt.Sprintf("rank %d", c.rank)
	if c.rank == -1 {
		from = "ps"
	}
	to := fmt.Sprintf("rank %d", c.peer)
	if c.peer == -1 {
		to = "ps"
	}
	return from + " → " + to
}

// buildTCP draws one chart per job: cwnd (segments) and RTT (ms) of every
// connection over time from time zero, with reconfiguration instants.
func buildTCP(r *Run) ([]tcpChart, string) {
	if len(r.Samples) == 0 {
		return nil, "the records hold no TCP samples"
	}
	note := ""
	zero := r.ZeroNs
	if !r.ZeroOK {
		zero = slices.MinFunc(r.Samples, func(a, b Sample) int { return cmp.Compare(a.TNs, b.TNs) }).TNs
		note = "time zero could not be recovered from the records (no phase records); times are from the first TCP sample"
	}
	byJob := map[string]map[conn][]Sample{}
	for _, s := range r.Samples {
		if byJob[s.Job] == nil {
			byJob[s.Job] = map[conn][]Sample{}
		}
		c := conn{s.Rank, s.Peer}
		byJob[s.Job][c] = append(byJob[s.Job][c], s)
	}
	var jobs []string
	for _, j := range jobOrder(r) {
		if byJob[j] != nil {
			jobs = append(jobs, j)
		}
	}
	for j := range byJob {
		if !slices.Contains(jobs, j) {
			jobs = append(jobs, j)
		}
	}
	reconf := reconfigInstants(r)
	var charts []tcpChart
	for _, j := range jobs {
		charts = append(charts, tcpFor(j, byJob[j], zero, reconf))
	}
	return charts, note
}

func tcpFor(job string, conns map[conn][]Sample, zero int64, reconf []int64) tcpChart {
	keys := make([]conn, 0, len(conns))
	for c := range conns {
		keys = append(keys, c)
	}
	slices.SortFunc(keys, func(a, b conn) int {
		if a.rank != b.rank {
			return cmp.Compare(a.rank, b.rank)
		}
		return cmp.Compare(a.peer, b.peer)
	})
	ch := tcpChart{Job: job, Width: chartLeft + chartWidth + 200}
	if len(keys) > maxSeries {
		ch.Note = fmt.Sprintf("%d connections; the first %d (by rank, peer) are drawn", len(keys), maxSeries)
		keys = keys[:maxSeries]
	}
	var t0, t1 int64
	first := true
	var maxCwnd, maxRTT int64
	for _, c := range keys {
		for _, s := range conns[c] {
			t := s.TNs - zero
			if first || t < t0 {
				t0 = t
			}
			if first || t > t1 {
				t1 = t
			}
			first = false
			maxCwnd = max(maxCwnd, s.Cwnd)
			maxRTT = max(maxRTT, s.RTTUs)
		}
		ss := conns[c]
		ch.Retrans += ss[len(ss)-1].Retrans
	}
	t0 = min(t0, 0)
	ax := NewAxis(t0, t1, chartLeft, chartWidth)
	const panelH, top, gap = 120.0, 20.0, 40.0
	metric := []struct {
		title string
		max   int64
		val   func(Sample) int64
		label func(int64) string
	}{
		{"cwnd (segments)", maxCwnd, func(s Sample) int64 { return s.Cwnd }, func(v int64) string { return fmt.Sprint(v) }},
		{"RTT (ms)", maxRTT, func(s Sample) int64 { return s.RTTUs }, func(v int64) string { return trimFloat(float64(v)/1000, 2) }},
	}
	y := top
	for _, m := range metric {
		p := panel{Title: m.title, Y0: y, H: panelH, MaxLabel: m.label(m.max)}
		top := float64(max(m.max, 1))
		for i, c := range keys {
			var pts []string
			for _, s := range conns[c] {
				x := ax.X(s.TNs - zero)
				py := y + panelH - float64(m.val(s))/top*panelH
				pts = append(pts, trimFloat(x, 1)+","+trimFloat(py, 1))
			}
			ss := conns[c]
			p.Series = append(p.Series, series{Name: connName(c), Colour: palette[i%len(palette)], Points: strings.Join(pts, " "),
				LegendY: y + 12 + float64(i)*13, Last: ss[len(ss)-1], Samples: len(ss)})
		}
		ch.Panels = append(ch.Panels, p)
		y += panelH + gap
	}
	ch.AxisY = y - gap + 4
	ch.Ticks = ax.Ticks(10)
	for _, t := range reconf {
		if t < t0 || t > t1 {
			continue
		}
		x := ax.X(t)
		ch.Reconfigs = append(ch.Reconfigs, line{X1: x, Y1: top, X2: x, Y2: ch.AxisY})
	}
	ch.Height = max(ch.AxisY+30, top+float64(len(keys))*13+20)
	return ch
}
