package report

import (
	"bytes"
	_ "embed"
	"fmt"
	"html/template"
	"io"
	"math"
	"path/filepath"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/ocsemu/ocsemu/workers/record"
)

//go:embed compare.html.tmpl
var compareTmpl string

// CompareFile is the default name of `emu compare`'s page.
const CompareFile = "compare.html"

// RunRow is one run of a comparison: what it ran and how far the flow
// model was from the emulation. Errors are signed, (measured -
// predicted) / predicted; NaN when there is nothing to divide by.
type RunRow struct {
	Dir       string // as given
	Name      string // the run directory's own name (results/<lab>/latest resolved)
	Lab       string
	Scheduler string
	Mode      string
	Kind      string // fabric kind

	PredMakespanNs, MeasMakespanNs int64
	MakespanErr                    float64
	PredMeanJCTNs, MeasMeanJCTNs   float64
	PredMaxJCTNs, MeasMaxJCTNs     int64
	Jobs                           int
	// Reconfigs is the prediction's count of circuit reconfigurations.
	Reconfigs int
	// KindErr is the mean signed error of each phase kind
	// (comparison.json); a kind the run lacks is absent.
	KindErr map[string]float64
}

// CompareTable is the comparison of two or more runs.
type CompareTable struct {
	Rows  []RunRow
	Kinds []string // every phase kind of any run, sorted
}

// CompareRuns loads every run directory (each must be complete: the error
// names the directory and what it lacks) and aggregates them.
func CompareRuns(dirs []string) (*CompareTable, error) {
	if len(dirs) < 2 {
		return nil, fmt.Errorf("compare: want 2 or more run directories, got %d", len(dirs))
	}
	var runs []*Run
	for _, d := range dirs {
		r, err := Load(d)
		if err != nil {
			return nil, err
		}
		runs = append(runs, r)
	}
	return Aggregate(runs), nil
}

// jctStats is the mean and largest JCT of a run's jobs.
func jctStats(jobs []record.Job) (mean float64, maxNs int64) {
	if len(jobs) == 0 {
		return math.NaN(), 0
	}
	sum := 0.0
	for _, j := range jobs {
		sum += float64(j.JCTNs)
		maxNs = max(maxNs, j.JCTNs)
	}
	return sum / float64(len(jobs)), maxNs
}

func relErr(pred, meas float64) float64 {
	if pred <= 0 || math.IsNaN(pred) || math.IsNaN(meas) {
		return math.NaN()
	}
	return (meas - pred) / pred
}

// Aggregate builds the comparison of loaded runs.
func Aggregate(runs []*Run) *CompareTable {
	t := &CompareTable{}
	kinds := map[string]bool{}
	for _, r := range runs {
		name := filepath.Base(r.Dir)
		if res, err := filepath.EvalSymlinks(r.Dir); err == nil {
			name = filepath.Base(res)
		}
		row := RunRow{
			Dir: r.Dir, Name: name, Lab: r.Summary.Lab, Scheduler: r.Plan.Scheduler, Mode: r.Plan.Mode, Kind: r.Scenario.Fabric.Kind,
			PredMakespanNs: r.Prediction.MakespanNs, MeasMakespanNs: r.Measurement.MakespanNs,
			Reconfigs: r.Prediction.Reconfigurations, Jobs: len(r.Measurement.Jobs), KindErr: map[string]float64{},
		}
		if row.Lab == "" {
			row.Lab = r.Scenario.Name
		}
		row.MakespanErr = relErr(float64(row.PredMakespanNs), float64(row.MeasMakespanNs))
		row.PredMeanJCTNs, row.PredMaxJCTNs = jctStats(r.Prediction.Jobs)
		row.MeasMeanJCTNs, row.MeasMaxJCTNs = jctStats(r.Measurement.Jobs)
		for _, ks := range buildStats(r.Compare) {
			if ks.Kind == "all phases" || ks.N == 0 {
				continue
			}
			row.KindErr[ks.Kind] = ks.Mean
			kinds[ks.Kind] = true
		}
		t.Rows = append(t.Rows, row)
	}
	for k := range kinds {
		t.Kinds = append(t.Kinds, k)
	}
	slices.Sort(t.Kinds)
	return t
}

func fmtMsF(ns float64) string {
	if math.IsNaN(ns) {
		return "-"
	}
	return trimFloat(ns/1e6, 1)
}

// KindErrs lists a row's mean errors in the order of kinds ("-" where the
// run has no phase of that kind).
func (r RunRow) KindErrs(kinds []string) []string {
	out := make([]string, len(kinds))
	for i, k := range kinds {
		if e, ok := r.KindErr[k]; ok {
			out[i] = pct(e)
		} else {
			out[i] = "-"
		}
	}
	return out
}

// WriteText prints the comparison as an aligned table.
func (t *CompareTable) WriteText(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	head := []string{"run", "lab", "scheduler", "mode", "makespan pred ms", "meas ms", "error", "mean JCT pred ms", "meas ms", "max JCT pred ms", "meas ms", "reconfigs"}
	for _, k := range t.Kinds {
		head = append(head, k+" err")
	}
	fmt.Fprintln(tw, strings.Join(head, "\t")+"\t")
	for _, r := range t.Rows {
		cells := []string{r.Name, r.Lab, r.Scheduler, r.Mode, fmtMsF(float64(r.PredMakespanNs)), fmtMsF(float64(r.MeasMakespanNs)), pct(r.MakespanErr),
			fmtMsF(r.PredMeanJCTNs), fmtMsF(r.MeasMeanJCTNs), fmtMsF(float64(r.PredMaxJCTNs)), fmtMsF(float64(r.MeasMaxJCTNs)), fmt.Sprint(r.Reconfigs)}
		cells = append(cells, r.KindErrs(t.Kinds)...)
		fmt.Fprintln(tw, strings.Join(cells, "\t")+"\t")
	}
	return tw.Flush()
}

// bar is one bar of the makespan chart.
type bar struct {
	X, Y, W, H float64
	Fill       string
	Title      string
}

type compareChart struct {
	Width, Height float64
	Bars          []bar
	Labels        []label
	Ticks         []Tick
	AxisY         float64
}

type comparePage struct {
	CSS   template.CSS
	Title string
	T     *CompareTable
	Chart compareChart
}

const (
	predFill = "#9db7d5"
	measFill = "#e15759"
)

// makespanChart draws, per run, its predicted and its measured makespan
// as two horizontal bars on one time axis.
func makespanChart(t *CompareTable) compareChart {
	const top, barH, gap = 30.0, 16.0, 14.0
	var end int64
	for _, r := range t.Rows {
		end = max(end, r.PredMakespanNs, r.MeasMakespanNs)
	}
	ax := NewAxis(0, end, chartLeft+80, chartWidth-80)
	c := compareChart{Width: chartLeft + chartWidth + 20}
	y := top
	for _, r := range t.Rows {
		c.Labels = append(c.Labels, label{X: chartLeft + 74, Y: y + barH + 4, Text: r.Lab + " " + r.Name})
		for i, v := range []int64{r.PredMakespanNs, r.MeasMakespanNs} {
			kind, fill := "predicted", predFill
			if i == 1 {
				kind, fill = "measured", measFill
			}
			c.Bars = append(c.Bars, bar{X: ax.X(0), Y: y, W: ax.W(0, v), H: barH, Fill: fill,
				Title: fmt.Sprintf("%s %s (%s): %s makespan %s ms", r.Lab, r.Name, r.Scheduler, kind, trimFloat(float64(v)/1e6, 1))})
			y += barH + 2
		}
		y += gap
	}
	c.AxisY = y
	c.Ticks = ax.Ticks(10)
	c.Height = y + 30
	return c
}

// RenderCompare builds the comparison page: self-contained HTML, inline
// CSS and SVG, every string escaped.
func RenderCompare(t *CompareTable) ([]byte, error) {
	tmpl, err := template.New("compare").Funcs(template.FuncMap{
		"ms":   fmtMsF,
		"msi":  func(ns int64) string { return fmtMsF(float64(ns)) },
		"pct":  pct,
		"sign": func(x float64) string { return map[bool]string{true: "pos", false: "neg"}[x >= 0] },
	}).Parse(compareTmpl)
	if err != nil {
		return nil, err
	}
	var b bytes.Buffer
	pg := comparePage{CSS: template.CSS(css), Title: fmt.Sprintf("emu compare: %d runs", len(t.Rows)), T: t, Chart: makespanChart(t)}
	if err := tmpl.Execute(&b, pg); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}
