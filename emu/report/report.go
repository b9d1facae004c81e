// Package report turns a run directory (results/<lab>/<date-time>) into
// one self-contained HTML file: header, timeline of predicted and
// measured phases, circuit map, signed error table, TCP charts and
// throughput per port with the OCS dark periods. It is
// pure: it reads files and writes HTML with inline SVG and CSS, nothing
// fetched from anywhere.
package report

import (
	"bytes"
	_ "embed"
	"fmt"
	"html/template"
	"math"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/ocsemu/ocsemu/dataplane/safefile"
	"github.com/ocsemu/ocsemu/dataplane/topo"
	"github.com/ocsemu/ocsemu/emu/fidelity"
	"github.com/ocsemu/ocsemu/emu/plural"
	"github.com/ocsemu/ocsemu/ocsfabric/circuit"
	"github.com/ocsemu/ocsemu/workers/record"
)

//go:embed report.css
var css string

//go:embed report.html.tmpl
var pageTmpl string

// File is the name of the report inside the run directory.
const File = "report.html"

// Write builds the report of the run in dir and writes dir/report.html,
// returning its path.
func Write(dir string) (string, error) {
	r, err := Load(dir)
	if err != nil {
		return "", err
	}
	html, err := Render(r)
	if err != nil {
		return "", err
	}
	p := filepath.Join(dir, File)
	if err := safefile.Write(p, html, 0o644); err != nil {
		return "", fmt.Errorf("report: %w", err)
	}
	return p, nil
}

// msText is ns as ms with two decimals, "0.00" for what rounds to zero
// from below (not "-0.00").
func msText(ns int64) string {
	v := float64(ns) / 1e6
	if math.Abs(v) < 0.005 {
		v = 0
	}
	return trimFloat(v, 2)
}

// Render builds the HTML of a loaded run.
func Render(r *Run) ([]byte, error) {
	t, err := template.New("page").Funcs(template.FuncMap{
		"ms":  msText,
		"pct": pct,
		"add": func(a, b float64) float64 { return a + b },
		"short": func(s string) string {
			if len(s) > 12 {
				return s[:12]
			}
			return s
		},
	}).Parse(pageTmpl)
	if err != nil {
		return nil, err
	}
	var b bytes.Buffer
	if err := t.Execute(&b, build(r)); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

func trimFloat(x float64, prec int) string { return strconv.FormatFloat(x, 'f', prec, 64) }

func pct(x float64) string {
	if math.IsNaN(x) || math.IsInf(x, 0) {
		return "-"
	}
	return fmt.Sprintf("%+.1f%%", 100*x)
}

// page is what the template shows.
type page struct {
	CSS                          template.CSS
	Dir                          string
	Title, Scenario, Description string
	Scheduler, Mode, Fabric      string
	Lab, Kind                    string
	PredMakespan, MeasMakespan   int64
	MakespanErr                  float64
	Reconfigs, PortsReconfigured int
	Timeline                     timeline
	Circuits                     []circuitRow
	NoCircuits                   string
	Errors                       []errorRow
	HasCalibrated                bool
	Verdict                      *fidelity.Verdict
	Attribution                  []attributionRow
	Diagnoses                    []string // the attribution's (fidelity.Diagnoses)
	Parts                        []string
	Tally                        *fidelity.Tally
	ErrorStats                   []kindStats
	TCP                          []tcpChart
	TCPNote                      string
	Throughput                   throughputChart
	Meta                         *Meta
}

type kindStats struct {
	Kind string
	Stats
}

const (
	chartLeft  = 120.0
	chartWidth = 1000.0
)

// rect is one phase bar.
type rect struct {
	X, Y, W, H float64
	Fill       string
	Title      string
}

type line struct{ X1, Y1, X2, Y2 float64 }

type label struct {
	X, Y float64
	Text string
}

type timeline struct {
	Width, Height float64
	Rects         []rect
	Stages        []line
	Labels        []label
	Ticks         []Tick
	AxisY         float64
	Legend        []legendItem
	PredRects     int
	MeasRects     int
}

type legendItem struct {
	X    float64
	Fill string
	Text string
}

var palette = []string{"#4e79a7", "#f28e2b", "#59a14f", "#e15759", "#76b7b2", "#edc948", "#b07aa1", "#ff9da7", "#9c755f", "#bab0ac"}

// jobOrder lists the plan's jobs, then any other job a record names.
func jobOrder(r *Run) []string {
	var jobs []string
	seen := map[string]bool{}
	add := func(j string) {
		if !seen[j] {
			seen[j] = true
			jobs = append(jobs, j)
		}
	}
	for _, j := range r.Plan.Jobs {
		add(j.Name)
	}
	for _, p := range r.Prediction.Phases {
		add(p.Job)
	}
	for _, p := range r.Measurement.Phases {
		add(p.Job)
	}
	return jobs
}

// jobPhases are the whole-job phases (rank -1) of one job.
func jobPhases(run *record.Run, job string) []record.Phase {
	var out []record.Phase
	for _, p := range run.Phases {
		if p.Job == job && p.Rank == -1 {
			out = append(out, p)
		}
	}
	return out
}

func build(r *Run) page {
	s := r.Scenario
	f := s.Fabric
	pg := page{
		CSS:               template.CSS(css),
		Dir:               r.Dir,
		Title:             "emu report: " + s.Name,
		Scenario:          s.Name,
		Description:       s.Description,
		Scheduler:         r.Plan.Scheduler,
		Mode:              r.Plan.Mode,
		Lab:               r.Summary.Lab,
		Kind:              f.Kind,
		PredMakespan:      r.Prediction.MakespanNs,
		MeasMakespan:      r.Measurement.MakespanNs,
		MakespanErr:       math.NaN(),
		Reconfigs:         r.Measurement.Reconfigurations,
		PortsReconfigured: r.Measurement.PortsReconfigured,
		Meta:              r.Meta,
	}
	if pg.PredMakespan > 0 {
		pg.MakespanErr = float64(pg.MeasMakespan-pg.PredMakespan) / float64(pg.PredMakespan)
	}
	pg.Fabric = fmt.Sprintf("%s fabric, %s × %s, server links %s, %s", f.Kind, plural.Of(f.Racks, "rack"), plural.Of(f.ServersPerRack, "server"), f.Rates.Server, f.TCP.CongestionControl)
	switch {
	case f.ServerQueue == topo.QueueFair && f.SwitchQueue == topo.QueueFair:
		pg.Fabric += " (fair server and switch queues)"
	case f.ServerQueue == topo.QueueFair:
		pg.Fabric += " (fair server queues)"
	case f.SwitchQueue == topo.QueueFair:
		pg.Fabric += " (fair switch queues)"
	}
	if f.Kind == "ocs" {
		pg.Fabric += fmt.Sprintf(", %s per ToR over %d OCS, reconfiguration delay %s", plural.Of(f.UplinksPerToR, "uplink"), f.OCS.Switches, f.OCS.ReconfigDelay)
	} else {
		pg.Fabric += fmt.Sprintf(", packet core oversubscription %v", f.EPS.Oversubscription)
	}
	if r.Summary.Nodes > 0 {
		pg.Fabric += fmt.Sprintf("; %d namespaces, %d links", r.Summary.Nodes, r.Summary.Links)
	}
	kinds := phaseKinds(r)
	pg.Timeline = buildTimeline(r, kinds)
	pg.Circuits, pg.NoCircuits = buildCircuits(r)
	pg.ErrorStats = buildStats(r.Compare)
	pg.Errors, pg.HasCalibrated = buildErrors(r)
	if r.Data != nil {
		pg.Verdict = &r.Data.Verdict
		pg.Parts = fidelity.Parts
		pg.Tally = &fidelity.Tally{}
		pg.Tally.Add(r.Data.Attribution)
		pg.Diagnoses = fidelity.Diagnoses(r.Data.Attribution)
		for _, a := range r.Data.Attribution {
			row := attributionRow{Attribution: a}
			for _, p := range fidelity.Parts {
				row.PartNs = append(row.PartNs, a.Parts[p])
			}
			pg.Attribution = append(pg.Attribution, row)
		}
	}
	pg.TCP, pg.TCPNote = buildTCP(r)
	pg.Throughput = buildThroughput(r)
	return pg
}

// errorRow is one phase of the error table, with the calibrated model's
// prediction when the run has one.
type errorRow struct {
	Comparison
	HasCal bool
	CalNs  int64
	CalErr float64
	HasTCP bool
	TCPNs  int64
	TCPErr float64
}

type attributionRow struct {
	fidelity.Attribution
	PartNs []int64
}

func buildErrors(r *Run) ([]errorRow, bool) {
	cal, tcp := map[[3]any]Comparison{}, map[[3]any]Comparison{}
	if r.Data != nil {
		for _, c := range r.Data.ComparisonCalibrated {
			cal[[3]any{c.Job, c.Iteration, c.Phase}] = c
		}
		for _, c := range r.Data.ComparisonTCPAware {
			tcp[[3]any{c.Job, c.Iteration, c.Phase}] = c
		}
	}
	var out []errorRow
	// A phase a model gives no time (an INC pull) has no error: NaN, which
	// the page prints as "-".
	relErr := func(c Comparison) float64 {
		if c.PredictedNs <= 0 {
			return math.NaN()
		}
		return c.RelErr
	}
	for _, c := range r.Compare {
		row := errorRow{Comparison: c}
		row.RelErr = relErr(c)
		if k, ok := cal[[3]any{c.Job, c.Iteration, c.Phase}]; ok {
			row.HasCal, row.CalNs, row.CalErr = true, k.PredictedNs, relErr(k)
		}
		if k, ok := tcp[[3]any{c.Job, c.Iteration, c.Phase}]; ok {
			row.HasTCP, row.TCPNs, row.TCPErr = true, k.PredictedNs, relErr(k)
		}
		out = append(out, row)
	}
	return out, len(cal) > 0
}

// phaseKinds maps every phase kind to a colour, in first-seen order.
func phaseKinds(r *Run) map[string]string {
	m := map[string]string{}
	var order []string
	for _, run := range []*record.Run{r.Prediction, r.Measurement} {
		for _, p := range run.Phases {
			if _, ok := m[p.Phase]; !ok {
				m[p.Phase] = palette[len(order)%len(palette)]
				order = append(order, p.Phase)
			}
		}
	}
	return m
}

// timelineEnd is the end of the timeline's axis (from time zero): the
// latest phase end of every drawn run. The throughput chart shares it.
func timelineEnd(r *Run) int64 {
	end := max(r.Prediction.MakespanNs, r.Measurement.MakespanNs)
	runs := []*record.Run{r.Prediction, r.Measurement}
	if r.Data != nil && r.Data.TCPAware != nil {
		runs = append(runs, r.Data.TCPAware)
	}
	for _, rn := range runs {
		for _, p := range rn.Phases {
			end = max(end, p.EndNs)
		}
	}
	return end
}

func buildTimeline(r *Run, colour map[string]string) timeline {
	const rowH, gap, top = 18.0, 10.0, 30.0
	// Rows per job: the ideal prediction, the TCP-aware one when the run's
	// data file has it, and the measurement.
	type row struct {
		kind     string
		run      *record.Run
		measured bool
	}
	rows := []row{{"predicted", r.Prediction, false}}
	if r.Data != nil && r.Data.TCPAware != nil {
		rows = append(rows, row{"TCP-aware", r.Data.TCPAware, false})
	}
	rows = append(rows, row{"measured", r.Measurement, true})
	end := timelineEnd(r)
	ax := NewAxis(0, end, chartLeft, chartWidth)
	tl := timeline{Width: chartLeft + chartWidth + 20}
	y := top
	for _, job := range jobOrder(r) {
		for i, rw := range rows {
			kind := rw.kind
			tl.Labels = append(tl.Labels, label{X: chartLeft - 6, Y: y + rowH*0.7, Text: job + " " + kind})
			for _, p := range jobPhases(rw.run, job) {
				dur := p.EndNs - p.StartNs
				title := fmt.Sprintf("%s %s: iteration %d %s, %s to %s ms (%s ms)", job, kind, p.Iteration, p.Phase,
					trimFloat(float64(p.StartNs)/1e6, 2), trimFloat(float64(p.EndNs)/1e6, 2), trimFloat(float64(dur)/1e6, 2))
				if p.DurationNs > 0 {
					title += fmt.Sprintf("; slowest rank %s ms", trimFloat(float64(p.DurationNs)/1e6, 2))
				}
				tl.Rects = append(tl.Rects, rect{X: ax.X(p.StartNs), Y: y, W: ax.W(p.StartNs, p.EndNs), H: rowH, Fill: colour[p.Phase], Title: title})
				switch {
				case i == 0:
					tl.PredRects++
				case rw.measured:
					tl.MeasRects++
				}
			}
			for _, st := range stageStarts(r, rw.measured) {
				x := ax.X(st)
				tl.Stages = append(tl.Stages, line{X1: x, Y1: y - 2, X2: x, Y2: y + rowH + 2})
			}
			y += rowH + 2
		}
		y += gap
	}
	tl.AxisY = y
	tl.Ticks = ax.Ticks(10)
	names := make([]string, 0, len(colour))
	for k := range colour {
		names = append(names, k)
	}
	slices.Sort(names)
	for i, k := range names {
		tl.Legend = append(tl.Legend, legendItem{X: chartLeft + float64(i)*110, Fill: colour[k], Text: k})
	}
	tl.Height = y + 30
	return tl
}

// stageStarts are the stage boundaries: planned (plan.json) for the
// prediction, as run (measurement.json) for the measurement.
func stageStarts(r *Run, measured bool) []int64 {
	var out []int64
	if measured {
		for _, s := range r.Measurement.Stages {
			out = append(out, s.StartNs)
		}
		return out
	}
	for _, s := range r.Plan.Stages {
		out = append(out, s.StartNs)
	}
	return out
}

type circuitRow struct {
	First, Last int
	StartNs     int64
	MeasStartNs int64
	HasMeas     bool
	Pairs       string
	Circuits    int
	Changed     bool
}

// rackPairs describes a configuration by the rack pairs its circuits
// join, e.g. "r0–r1 ×2, r1–r2".
func rackPairs(cs []circuit.Circuit) string {
	if len(cs) == 0 {
		return "no circuits"
	}
	count := map[string]int{}
	var keys []string
	for _, c := range cs {
		a, b := c.A.Rack, c.B.Rack
		sep := "–"
		if c.Simplex {
			sep = "→"
		} else if a > b {
			a, b = b, a
		}
		k := fmt.Sprintf("r%d%sr%d", a, sep, b)
		if count[k] == 0 {
			keys = append(keys, k)
		}
		count[k]++
	}
	slices.Sort(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = k
		if count[k] > 1 {
			parts[i] += fmt.Sprintf(" ×%d", count[k])
		}
	}
	return strings.Join(parts, ", ")
}

func sameCircuits(a, b []circuit.Circuit) bool {
	key := func(cs []circuit.Circuit) []string {
		out := make([]string, len(cs))
		for i, c := range cs {
			out[i] = c.String()
		}
		slices.Sort(out)
		return out
	}
	return slices.Equal(key(a), key(b))
}

// buildCircuits lists the plan's circuit configurations over time,
// consecutive stages with the same circuits in one row.
func buildCircuits(r *Run) ([]circuitRow, string) {
	if r.Scenario.Fabric.Kind != "ocs" {
		return nil, "packet core, no circuits"
	}
	var rows []circuitRow
	for i, st := range r.Plan.Stages {
		if n := len(rows); n > 0 && sameCircuits(r.Plan.Stages[i-1].Circuits, st.Circuits) {
			rows[n-1].Last = i
			continue
		}
		row := circuitRow{First: i, Last: i, StartNs: st.StartNs, Pairs: rackPairs(st.Circuits), Circuits: len(st.Circuits), Changed: i > 0}
		for _, m := range r.Measurement.Stages {
			if m.Index == i {
				row.MeasStartNs, row.HasMeas = m.StartNs, true
			}
		}
		rows = append(rows, row)
	}
	return rows, ""
}

// reconfigInstants are the planned starts of stages whose circuits differ
// from the previous stage's, in ns from time zero (measured starts when
// measurement.json has the stage).
func reconfigInstants(r *Run) []int64 {
	if r.Scenario.Fabric.Kind != "ocs" {
		return nil
	}
	var out []int64
	for i := 1; i < len(r.Plan.Stages); i++ {
		if sameCircuits(r.Plan.Stages[i-1].Circuits, r.Plan.Stages[i].Circuits) {
			continue
		}
		t := r.Plan.Stages[i].StartNs
		for _, m := range r.Measurement.Stages {
			if m.Index == i {
				t = m.StartNs
			}
		}
		out = append(out, t)
	}
	return out
}

// buildStats summarises the signed errors per phase kind, then over all.
func buildStats(cs []Comparison) []kindStats {
	by := map[string][]float64{}
	var all []float64
	var order []string
	for _, c := range cs {
		if c.PredictedNs <= 0 {
			continue // no prediction (an INC pull): no error to count
		}
		if _, ok := by[c.Phase]; !ok {
			order = append(order, c.Phase)
		}
		by[c.Phase] = append(by[c.Phase], c.RelErr)
		all = append(all, c.RelErr)
	}
	slices.Sort(order)
	var out []kindStats
	for _, k := range order {
		out = append(out, kindStats{Kind: k, Stats: Summarize(by[k])})
	}
	return append(out, kindStats{Kind: "all phases", Stats: Summarize(all)})
}
