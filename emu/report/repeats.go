package report

import (
	"bytes"
	"cmp"
	_ "embed"
	"encoding/csv"
	"fmt"
	"html/template"
	"io"
	"math"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/ocsemu/ocsemu/emu/fidelity"
	"github.com/ocsemu/ocsemu/workers/job"
	"github.com/ocsemu/ocsemu/workers/record"
)

// Repeated runs of one plan: TCP does not share a link the same way twice,
// so one run reads a contended phase only to within its run-to-run spread.
// A set of runs gives each phase's median and range, the three models'
// errors against the median, and how far single runs scatter.

// RepeatFile and RepeatCSV are what `emu run --repeat` writes into the
// set's directory.
const (
	RepeatFile = "repeat.json"
	RepeatCSV  = "repeat.csv"
)

// Models are the flow model's three modes, in the order tables show them.
var Models = []string{"ideal", "calibrated", "tcp-aware"}

// Indexes of the models in Models (and in a row's Predicted and Err).
const (
	modelIdeal = iota
	modelCalibrated
	modelTCPAware
)

// Float is a float64 that JSON writes as null when it is NaN or
// infinite (a figure that does not exist).
type Float float64

// MarshalJSON writes f, or null.
func (f Float) MarshalJSON() ([]byte, error) {
	x := float64(f)
	if math.IsNaN(x) || math.IsInf(x, 0) {
		return []byte("null"), nil
	}
	return strconv.AppendFloat(nil, x, 'g', -1, 64), nil
}

// UnmarshalJSON reads a number, or null as NaN.
func (f *Float) UnmarshalJSON(b []byte) error {
	if string(b) == "null" {
		*f = Float(math.NaN())
		return nil
	}
	x, err := strconv.ParseFloat(string(b), 64)
	*f = Float(x)
	return err
}

// RepeatRow is one phase over the runs of a set. Times are ns; errors
// are signed fractions, (measured - predicted) / predicted, NaN where a
// model has no prediction.
type RepeatRow struct {
	Job       string `json:"job"`
	Iteration int    `json:"iteration"`
	Phase     string `json:"phase"`
	Runs      int    `json:"runs"` // runs that measured the phase
	// Predicted is each model's time (Models' order; 0: the model has no
	// prediction); a plan's predictions are the same in every run.
	Predicted []int64 `json:"predicted_ns"`
	MedianNs  int64   `json:"median_ns"`
	MinNs     int64   `json:"min_ns"`
	MaxNs     int64   `json:"max_ns"`
	// Spread is (max - min) / median: how far runs scatter.
	Spread Float `json:"spread"`
	// Err is each model's error against the median (Models' order).
	Err []Float `json:"err_vs_median"`
	// Modes, for a communication phase whose runs fell into two kinds
	// (modes.go), are the faster and the slower group; nil otherwise.
	Modes []Mode `json:"modes,omitempty"`
}

// ModelFit is one model against the set, over communication phases.
type ModelFit struct {
	Model string `json:"model"`
	// Against each phase's median measurement.
	MedianAbs float64 `json:"median_abs_err"`
	MaxAbs    float64 `json:"max_abs_err"`
	MaxPhase  string  `json:"max_phase"`
	Phases    int     `json:"phases"`
	// Inside counts the phases whose prediction lies within the measured
	// range [min, max].
	Inside int `json:"inside_range"`
	// Status grades MedianAbs and MaxAbs as the verdict's accuracy line
	// grades a single run.
	Status fidelity.Status `json:"status"`
	// RunMedianAbs and RunMaxAbs are the same figures for each run alone
	// (the run's own verdict line), in the set's order.
	RunMedianAbs []Float `json:"run_median_abs_err"`
	RunMaxAbs    []Float `json:"run_max_abs_err"`
}

// RepeatRun is one run of the set.
type RepeatRun struct {
	Name    string `json:"name"` // the run directory's own name
	Verdict string `json:"verdict,omitempty"`
	// MakespanNs is measured.
	MakespanNs int64  `json:"makespan_ns"`
	dir        string // as loaded, for the page's links
}

// RepeatTable is a set of runs of one plan.
type RepeatTable struct {
	Lab       string      `json:"lab"`
	Scheduler string      `json:"scheduler"`
	Runs      []RepeatRun `json:"runs"`
	// PredMakespanNs is the ideal model's makespan.
	PredMakespanNs int64       `json:"predicted_makespan_ns"`
	Rows           []RepeatRow `json:"phases"`
	Fits           []ModelFit  `json:"models"`
	// SpreadMedian and SpreadMax summarise the spreads of the
	// communication phases the model predicts; SpreadMaxPhase names the
	// widest.
	SpreadMedian   Float   `json:"spread_median"`
	SpreadMax      float64 `json:"spread_max"`
	SpreadMaxPhase string  `json:"spread_max_phase"`
	// Attribution tallies the runs' attributions (runs with a data file):
	// how many phases more than 10% off the TCP-aware model they explain.
	Attribution *fidelity.Tally `json:"attribution,omitempty"`
	// MedianAttribution reads the attribution's bar against the medians:
	// nil unless every run has a data file.
	MedianAttribution *MedianAttribution `json:"median_attribution,omitempty"`
	// Repredicted says who predicted the runs again (`emu compare
	// --repeat --repredict`: the calibrated and TCP-aware models, the
	// replay and the attribution, measurements and verdicts as recorded);
	// empty: as recorded.
	Repredicted string `json:"repredicted,omitempty"`
	// Diagnoses are the attributions' diagnoses over the set
	// (fidelity.DiagnosisSet): medians per phase of its busiest link's
	// shares and queue and of an INC push's round trip.
	Diagnoses []string `json:"diagnoses,omitempty"`
}

// RepeatRuns loads run directories of one plan and summarises them.
func RepeatRuns(dirs []string) (*RepeatTable, error) {
	if len(dirs) < 2 {
		return nil, fmt.Errorf("repeat: want 2 or more runs of one plan, got %d", len(dirs))
	}
	runs := make([]*Run, 0, len(dirs))
	for _, d := range dirs {
		r, err := Load(d)
		if err != nil {
			return nil, err
		}
		runs = append(runs, r)
	}
	return Repeats(runs)
}

type phaseKey = job.Key

// modelComparisons is a run's comparison rows per model (Models' order);
// a model the run did not record is nil.
func modelComparisons(r *Run) [][]record.Comparison {
	out := make([][]record.Comparison, len(Models))
	out[modelIdeal] = r.Compare
	if r.Data != nil {
		out[modelCalibrated], out[modelTCPAware] = r.Data.ComparisonCalibrated, r.Data.ComparisonTCPAware
	}
	return out
}

// Repeats summarises loaded runs. They must be runs of one plan: the
// same plan hash where the runs recorded one, and the same ideal
// prediction of every phase.
func Repeats(runs []*Run) (*RepeatTable, error) {
	if len(runs) < 2 {
		return nil, fmt.Errorf("repeat: want 2 or more runs of one plan, got %d", len(runs))
	}
	first := runs[0]
	t := &RepeatTable{Lab: first.Summary.Lab, Scheduler: first.Plan.Scheduler, PredMakespanNs: first.Prediction.MakespanNs}
	if t.Lab == "" {
		t.Lab = first.Scenario.Name
	}
	type acc struct {
		row  RepeatRow
		meas []int64
	}
	var order []phaseKey
	phases := map[phaseKey]*acc{}
	for i, r := range runs {
		if err := samePlan(first, r); err != nil {
			return nil, err
		}
		t.Runs = append(t.Runs, RepeatRun{Name: runName(r.Dir), Verdict: verdictOf(r), MakespanNs: r.Measurement.MakespanNs, dir: r.Dir})
		for m, cs := range modelComparisons(r) {
			for _, c := range cs {
				k := phaseKey{Job: c.Job, Iteration: c.Iteration, Phase: c.Phase}
				a := phases[k]
				if a == nil {
					if i > 0 && m == 0 {
						return nil, fmt.Errorf("repeat: %s has phase %s that %s lacks: not runs of one plan", r.Dir, k, first.Dir)
					}
					if m > 0 {
						continue // a model row without an ideal row: ignore
					}
					a = &acc{row: RepeatRow{Job: c.Job, Iteration: c.Iteration, Phase: c.Phase, Predicted: make([]int64, len(Models))}}
					phases[k] = a
					order = append(order, k)
				}
				if m == 0 {
					a.meas = append(a.meas, c.MeasuredNs)
				}
				if i == 0 {
					a.row.Predicted[m] = c.PredictedNs
				}
			}
		}
	}
	for _, k := range order {
		a := phases[k]
		row := a.row
		row.Runs = len(a.meas)
		row.MedianNs, row.MinNs, row.MaxNs = medianRange(a.meas)
		row.Spread = Float(math.NaN())
		if row.MedianNs > 0 {
			row.Spread = Float(float64(row.MaxNs-row.MinNs) / float64(row.MedianNs))
		}
		row.Err = make([]Float, len(Models))
		for m, p := range row.Predicted {
			row.Err[m] = Float(relErr(float64(p), float64(row.MedianNs)))
		}
		if predicted(row) {
			if fast, slow, ok := twoModes(a.meas); ok {
				row.Modes = []Mode{fast, slow}
			}
		}
		t.Rows = append(t.Rows, row)
	}
	t.fit(runs)
	var diag fidelity.DiagnosisSet
	for _, r := range runs {
		if r.Data != nil {
			if t.Attribution == nil {
				t.Attribution = &fidelity.Tally{}
			}
			t.Attribution.Add(r.Data.Attribution)
			diag.Add(r.Data.Attribution)
		}
	}
	t.Diagnoses = diag.Lines()
	t.MedianAttribution = medianAttribution(t.Rows, runs)
	return t, nil
}

// MedianAttribution is the attribution's bar read against the set's
// medians, as the model's accuracy is: every phase whose median is more
// than fidelity.JudgedAbove off the TCP-aware model (the calibrated one
// without it) must be accounted for to within fidelity.ExplainedWithin by
// the run whose measurement is the median. With an even count the median
// is the mean of the middle two, and so is its residual share (the parts
// add up). A run's phase that was not attributed (within
// fidelity.AttributeAbove of the model) leaves its whole error as the
// residual.
type MedianAttribution struct {
	Phases    int `json:"phases"` // medians more than JudgedAbove off
	Explained int `json:"explained"`
	// Left names each phase not accounted for, with its residual share
	// (signed points of the prediction) and the median run(s).
	Left []string `json:"left,omitempty"`
}

// judgedModel is the model a phase is judged against, as the attribution
// judges it: the TCP-aware model where it predicts the phase, else the
// calibrated one.
func judgedModel(row RepeatRow) int {
	if row.Predicted[modelTCPAware] > 0 {
		return modelTCPAware
	}
	return modelCalibrated
}

// medianAttribution checks the rows' medians against the runs'
// attributions; nil if a run has no data file.
func medianAttribution(rows []RepeatRow, runs []*Run) *MedianAttribution {
	// residual is one run's residual share of a phase: its attribution's,
	// or its whole error against the judged model where it was not
	// attributed.
	type residual struct {
		measNs int64
		share  float64
		ok     bool // false: the run has no figure for the phase
		run    string
	}
	// Per run, each phase's measurement as the rows' medians took it (the
	// ideal comparison, which every run has) and its residual share.
	meas := make([]map[phaseKey]int64, len(runs))
	byRun := make([]map[phaseKey]float64, len(runs))
	for i, r := range runs {
		if r.Data == nil {
			return nil
		}
		meas[i], byRun[i] = map[phaseKey]int64{}, map[phaseKey]float64{}
		for _, c := range modelComparisons(r)[modelIdeal] {
			meas[i][phaseKey{Job: c.Job, Iteration: c.Iteration, Phase: c.Phase}] = c.MeasuredNs
		}
		for _, m := range []int{modelCalibrated, modelTCPAware} { // TCP-aware last: it wins where both exist
			for _, c := range modelComparisons(r)[m] {
				byRun[i][phaseKey{Job: c.Job, Iteration: c.Iteration, Phase: c.Phase}] = c.RelErr
			}
		}
		for _, a := range r.Data.Attribution {
			if share, ok := a.ResidualShare(); ok {
				byRun[i][phaseKey{Job: a.Job, Iteration: a.Iteration, Phase: a.Phase}] = share
			}
		}
	}
	out := &MedianAttribution{}
	var left []leftPhase
	for _, row := range rows {
		m := judgedModel(row)
		if !predicted(row) || row.Predicted[m] <= 0 || math.IsNaN(float64(row.Err[m])) || math.Abs(float64(row.Err[m])) <= fidelity.JudgedAbove {
			continue
		}
		k := phaseKey{Job: row.Job, Iteration: row.Iteration, Phase: row.Phase}
		var rs []residual
		for i, r := range runs {
			if v, ok := meas[i][k]; ok {
				share, known := byRun[i][k]
				rs = append(rs, residual{v, share, known, runName(r.Dir)})
			}
		}
		if len(rs) == 0 {
			continue
		}
		slices.SortStableFunc(rs, func(a, b residual) int { return cmp.Compare(a.measNs, b.measNs) })
		mid := rs[len(rs)/2 : len(rs)/2+1]
		if len(rs)%2 == 0 {
			mid = rs[len(rs)/2-1 : len(rs)/2+1]
		}
		var share float64
		var names []string
		known := true
		for _, x := range mid {
			share += x.share / float64(len(mid))
			names = append(names, x.run)
			known = known && x.ok
		}
		out.Phases++
		which := "median run " + names[0]
		if len(names) == 2 {
			which = "median runs " + names[0] + " and " + names[1]
		}
		switch {
		case !known:
			left = append(left, leftPhase{math.Inf(1), fmt.Sprintf("%s, no model figures in its %s", phaseName(row), which)})
		case math.Abs(share) <= fidelity.ExplainedWithin:
			out.Explained++
		default:
			left = append(left, leftPhase{math.Abs(share), fmt.Sprintf("%s, %+.1f points (%s)", phaseName(row), 100*share, which)})
		}
	}
	// Most off first (those without figures before all), so that a cut
	// list (Lines) names the worst.
	slices.SortStableFunc(left, func(a, b leftPhase) int { return cmp.Compare(b.off, a.off) })
	for _, l := range left {
		out.Left = append(out.Left, l.text)
	}
	return out
}

// leftPhase is a phase the median run leaves, with how far off it is.
type leftPhase struct {
	off  float64
	text string
}

// Lines says the check in a sentence or two.
func (m MedianAttribution) Lines() []string {
	if m.Phases == 0 {
		return []string{fmt.Sprintf("against the medians: no phase more than %.0f%% off the TCP-aware model", 100*fidelity.JudgedAbove)}
	}
	phases := fmt.Sprintf("%d phases", m.Phases)
	if m.Phases == 1 {
		phases = "1 phase"
	}
	out := []string{fmt.Sprintf("against the medians: %s more than %.0f%% off the TCP-aware model; the median run's parts explain %d of them to within %.0f points",
		phases, 100*fidelity.JudgedAbove, m.Explained, 100*fidelity.ExplainedWithin)}
	for _, l := range m.Left[:min(len(m.Left), fidelity.LeftByPhaseShown)] {
		out = append(out, "Left: "+l)
	}
	if more := len(m.Left) - fidelity.LeftByPhaseShown; more > 0 {
		out = append(out, fmt.Sprintf("and %d more left, less far off", more))
	}
	return out
}

// DiagnosesShown is how many diagnosis lines a set's summary prints (a
// task graph attributes hundreds of phases); repeat.json keeps them all.
const DiagnosesShown = 20

// ShownDiagnoses are the diagnoses a set's summary prints, and how many
// it leaves out.
func (t *RepeatTable) ShownDiagnoses() (lines []string, more int) {
	n := min(len(t.Diagnoses), DiagnosesShown)
	return t.Diagnoses[:n], len(t.Diagnoses) - n
}

// fit fills the models' figures and the spread summary.
func (t *RepeatTable) fit(runs []*Run) {
	var spreads []float64
	for _, row := range t.Rows {
		if !predicted(row) || math.IsNaN(float64(row.Spread)) {
			continue
		}
		spreads = append(spreads, float64(row.Spread))
		if float64(row.Spread) > t.SpreadMax || t.SpreadMaxPhase == "" {
			t.SpreadMax, t.SpreadMaxPhase = float64(row.Spread), phaseName(row)
		}
	}
	t.SpreadMedian = Float(math.NaN())
	if len(spreads) > 0 {
		t.SpreadMedian = Float(Summarize(spreads).Median)
	}
	for m, name := range Models {
		f := ModelFit{Model: name}
		var abs []float64
		for _, row := range t.Rows {
			e := float64(row.Err[m])
			if row.Phase == job.PhaseCompute || math.IsNaN(e) {
				continue
			}
			abs = append(abs, math.Abs(e))
			if math.Abs(e) > f.MaxAbs || f.MaxPhase == "" {
				f.MaxAbs, f.MaxPhase = math.Abs(e), phaseName(row)
			}
			if p := row.Predicted[m]; p >= row.MinNs && p <= row.MaxNs {
				f.Inside++
			}
		}
		if len(abs) == 0 {
			continue
		}
		f.Phases, f.MedianAbs = len(abs), Summarize(abs).Median
		f.Status = fidelity.AccuracyStatus(f.MedianAbs, f.MaxAbs)
		for _, r := range runs {
			med, mx, n := fidelity.AbsStats(modelComparisons(r)[m])
			if n == 0 {
				med, mx = math.NaN(), math.NaN()
			}
			f.RunMedianAbs, f.RunMaxAbs = append(f.RunMedianAbs, Float(med)), append(f.RunMaxAbs, Float(mx))
		}
		t.Fits = append(t.Fits, f)
	}
}

// samePlan refuses a run of another plan than first's.
func samePlan(first, r *Run) error {
	if first.Meta != nil && r.Meta != nil && first.Meta.PlanSHA256 != "" && first.Meta.PlanSHA256 != r.Meta.PlanSHA256 {
		return fmt.Errorf("repeat: %s and %s ran different plans (plan.json differs): a set is runs of one plan", first.Dir, r.Dir)
	}
	mine, theirs := modelComparisons(first), modelComparisons(r)
	for m := range Models {
		pred := map[phaseKey]int64{}
		for _, c := range mine[m] {
			pred[phaseKey{Job: c.Job, Iteration: c.Iteration, Phase: c.Phase}] = c.PredictedNs
		}
		if m == 0 && len(theirs[m]) != len(pred) {
			return fmt.Errorf("repeat: %s has %d phases, %s %d: not runs of one plan", r.Dir, len(theirs[m]), first.Dir, len(pred))
		}
		if len(mine[m]) == 0 || len(theirs[m]) == 0 {
			continue // a run from before the model
		}
		for _, c := range theirs[m] {
			k := phaseKey{Job: c.Job, Iteration: c.Iteration, Phase: c.Phase}
			if p, ok := pred[k]; !ok || p != c.PredictedNs {
				if m == 0 {
					return fmt.Errorf("repeat: %s predicts %s differently from %s: not runs of one plan", r.Dir, k, first.Dir)
				}
				return fmt.Errorf("repeat: %s's %s model predicts %s differently from %s's: runs of one plan made by different versions of the model (--repredict predicts them again with this emu's)", r.Dir, Models[m], k, first.Dir)
			}
		}
	}
	return nil
}

func verdictOf(r *Run) string {
	if r.Data == nil {
		return ""
	}
	return string(r.Data.Verdict.Status)
}

func runName(dir string) string {
	if res, err := filepath.EvalSymlinks(dir); err == nil {
		return filepath.Base(res)
	}
	return filepath.Base(dir)
}

// predicted reports whether a row is a communication phase the model
// predicts (an INC pull moves nothing in the model: it has no time).
func predicted(r RepeatRow) bool {
	return r.Phase != job.PhaseCompute && r.Predicted[0] > 0
}

func phaseName(r RepeatRow) string {
	return fmt.Sprintf("%s iteration %d %s", r.Job, r.Iteration, r.Phase)
}

// medianRange is the median (the mean of the middle two for an even
// count), the least and the largest of xs.
func medianRange(xs []int64) (med, lo, hi int64) {
	if len(xs) == 0 {
		return 0, 0, 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	n := len(s)
	med = s[n/2]
	if n%2 == 0 {
		med = (s[n/2-1] + s[n/2]) / 2
	}
	return med, s[0], s[n-1]
}

// WriteText prints the set: per phase the models beside the measured
// median and range, then each model's fit and the spread.
func (t *RepeatTable) WriteText(w io.Writer) error {
	fmt.Fprintf(w, "== %d runs of one plan (%s, %s): each phase's measured median and range against the models\n", len(t.Runs), t.Lab, t.Scheduler)
	fmt.Fprintln(w, "   error = (median measured - predicted) / predicted; spread = (max - min) / median")
	if t.Repredicted != "" {
		fmt.Fprintf(w, "   the calibrated and TCP-aware models and the attributions predicted again by %s; the measurements and verdicts as recorded\n", t.Repredicted)
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "job\titer\tphase\tideal ms\tcalibrated ms\ttcp-aware ms\tmedian ms\tmin ms\tmax ms\tspread\terror ideal\tcalibrated\ttcp-aware\t")
	for _, r := range t.Rows {
		cells := []string{r.Job, strconv.Itoa(r.Iteration), r.Phase}
		for _, p := range r.Predicted {
			cells = append(cells, msOrDash(p))
		}
		cells = append(cells, fmtMsF(float64(r.MedianNs)), fmtMsF(float64(r.MinNs)), fmtMsF(float64(r.MaxNs)), pctUnsigned(float64(r.Spread)))
		for _, e := range r.Err {
			cells = append(cells, pct(float64(e)))
		}
		fmt.Fprintln(tw, strings.Join(cells, "\t")+"\t")
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(w, "\n== model accuracy over the set (communication phases)\n")
	for _, f := range t.Fits {
		fmt.Fprintf(w, "   %-4s  %-10s against the medians: median |error| %s, max %s (%s); prediction inside the measured range in %d of %d phases\n",
			f.Status, f.Model, pctUnsigned(f.MedianAbs), pctUnsigned(f.MaxAbs), f.MaxPhase, f.Inside, f.Phases)
		fmt.Fprintf(w, "   %-4s  %-10s single runs: median |error| %s, max %s\n", "", "", rangeOf(f.RunMedianAbs), rangeOf(f.RunMaxAbs))
	}
	fmt.Fprintf(w, "   (pass: median <= %.0f%% and max <= %.0f%%, as the verdict's accuracy line)\n", 100*fidelity.AccuracyMedianPass, 100*fidelity.AccuracyMaxPass)
	fmt.Fprintf(w, "   run-to-run spread of a phase: median %s, max %s (%s)\n", pctUnsigned(float64(t.SpreadMedian)), pctUnsigned(t.SpreadMax), t.SpreadMaxPhase)
	if ms := t.ModesLines(); len(ms) > 0 {
		fmt.Fprintf(w, "   two kinds of run (groups of %d or more, at least %.0f%% of the median apart; the phase's median mixes them):\n", ModeMinRuns, 100*ModeGap)
		for _, l := range ms {
			fmt.Fprintf(w, "     %s\n", l)
		}
	}
	if t.Attribution != nil {
		fmt.Fprintln(w, "\n== attribution over the set (each run's attribution.csv; docs/fidelity.md)")
		t.Attribution.Print(w)
		if m := t.MedianAttribution; m != nil {
			for _, l := range m.Lines() {
				fmt.Fprintf(w, "   %s\n", l)
			}
		}
		if shown, more := t.ShownDiagnoses(); len(shown) > 0 || more > 0 {
			fmt.Fprintln(w, "   busiest links, INC round trips and slow-start exits of the attributed phases, measured (the model's): where residuals went, not parts")
			for _, d := range shown {
				fmt.Fprintf(w, "   %s\n", d)
			}
			if more > 0 {
				fmt.Fprintf(w, "   and %d more (repeat.json of `emu run --repeat` has them all)\n", more)
			}
		}
	}
	fmt.Fprintln(w, "\n== runs")
	for i, r := range t.Runs {
		v := r.Verdict
		if v == "" {
			v = "no verdict"
		}
		fmt.Fprintf(w, "   %d  %s  makespan %s ms  verdict %s\n", i+1, r.Name, fmtMsF(float64(r.MakespanNs)), v)
	}
	return nil
}

// WriteCSV writes one row per phase.
func (t *RepeatTable) WriteCSV(w io.Writer) error {
	cw := csv.NewWriter(w)
	head := []string{"job", "iteration", "phase", "runs"}
	for _, m := range Models {
		head = append(head, strings.ReplaceAll(m, "-", "_")+"_ms")
	}
	head = append(head, "median_ms", "min_ms", "max_ms", "spread")
	for _, m := range Models {
		head = append(head, "rel_err_"+strings.ReplaceAll(m, "-", "_"))
	}
	if err := cw.Write(head); err != nil {
		return err
	}
	ms := func(ns int64) string { return strconv.FormatFloat(float64(ns)/1e6, 'f', 6, 64) }
	fl := func(x Float) string { return strconv.FormatFloat(float64(x), 'g', -1, 64) }
	for _, r := range t.Rows {
		row := []string{r.Job, strconv.Itoa(r.Iteration), r.Phase, strconv.Itoa(r.Runs)}
		for _, p := range r.Predicted {
			row = append(row, ms(p))
		}
		row = append(row, ms(r.MedianNs), ms(r.MinNs), ms(r.MaxNs), fl(r.Spread))
		for _, e := range r.Err {
			row = append(row, fl(e))
		}
		if err := cw.Write(row); err != nil {
			return err
		}
	}
	cw.Flush()
	return cw.Error()
}

func msOrDash(ns int64) string {
	if ns <= 0 {
		return "-"
	}
	return fmtMsF(float64(ns))
}

func pctUnsigned(x float64) string {
	if math.IsNaN(x) {
		return "-"
	}
	return fmt.Sprintf("%.1f%%", 100*x)
}

// rangeOf is "a-b%" over xs, NaNs skipped.
func rangeOf(xs []Float) string {
	var v []float64
	for _, x := range xs {
		if !math.IsNaN(float64(x)) {
			v = append(v, float64(x))
		}
	}
	if len(v) == 0 {
		return "-"
	}
	return fmt.Sprintf("%.1f-%.1f%%", 100*slices.Min(v), 100*slices.Max(v))
}

//go:embed repeat.html.tmpl
var repeatTmpl string

// RepeatPage is what `emu run --repeat` writes beside repeat.json.
const RepeatPage = "repeat.html"

const (
	rangeFill  = "#f2b8b9"
	medianFill = "#8b1a1c"
)

// modelFills are the marks of Models' predictions.
var modelFills = []string{"#999", "#4e79a7", "#000"}

// rangeChart draws, per communication phase, the measured range as a bar
// with its median and each model's prediction as ticks, on one axis of
// phase time.
func rangeChart(t *RepeatTable) compareChart {
	const top, rowH, gap = 30.0, 14.0, 8.0
	// The axis spans the figures shown, from a round 10 ms below 90% of
	// the least: the ranges are what to compare, not their length.
	var end int64
	start := int64(math.MaxInt64)
	for _, r := range t.Rows {
		if !predicted(r) {
			continue
		}
		end, start = max(end, r.MaxNs), min(start, r.MinNs)
		for _, p := range r.Predicted {
			if p > 0 {
				end, start = max(end, p), min(start, p)
			}
		}
	}
	start = max(0, start*9/10/10_000_000*10_000_000)
	ax := NewAxis(min(start, end), end, chartLeft+80, chartWidth-80)
	c := compareChart{Width: chartLeft + chartWidth + 20}
	y := top
	tick := func(ns int64, fill, title string) {
		c.Bars = append(c.Bars, bar{X: ax.X(ns) - 1, Y: y - 2, W: 3, H: rowH + 4, Fill: fill, Title: title})
	}
	for _, r := range t.Rows {
		if !predicted(r) {
			continue
		}
		name := phaseName(r)
		c.Labels = append(c.Labels, label{X: chartLeft + 74, Y: y + rowH - 3, Text: fmt.Sprintf("%s %d %s", r.Job, r.Iteration, r.Phase)})
		c.Bars = append(c.Bars, bar{X: ax.X(r.MinNs), Y: y, W: ax.W(r.MinNs, r.MaxNs), H: rowH, Fill: rangeFill,
			Title: fmt.Sprintf("%s: measured %s-%s ms over %d runs", name, fmtMsF(float64(r.MinNs)), fmtMsF(float64(r.MaxNs)), r.Runs)})
		for m, p := range r.Predicted {
			if p > 0 {
				tick(p, modelFills[m], fmt.Sprintf("%s: %s model %s ms (median measured %s)", name, Models[m], fmtMsF(float64(p)), pct(float64(r.Err[m]))))
			}
		}
		tick(r.MedianNs, medianFill, fmt.Sprintf("%s: median measured %s ms", name, fmtMsF(float64(r.MedianNs))))
		y += rowH + gap
	}
	c.AxisY = y
	c.Ticks = ax.Ticks(10)
	c.Height = y + 30
	return c
}

// runLink is a run of the page with the way to its report.
type runLink struct {
	RepeatRun
	Href string
}

// RenderRepeat builds the set's page, to be written into pageDir:
// self-contained HTML, inline CSS and SVG, every string escaped; each run
// links to its own report, relative to pageDir.
func RenderRepeat(t *RepeatTable, pageDir string) ([]byte, error) {
	tmpl, err := template.New("repeat").Funcs(template.FuncMap{
		"msi": func(ns int64) string { return msOrDash(ns) },
		"upct": func(x any) string {
			switch v := x.(type) {
			case Float:
				return pctUnsigned(float64(v))
			case float64:
				return pctUnsigned(v)
			}
			return "-"
		},
		"spct": func(x Float) string { return pct(float64(x)) },
		"sign": func(x Float) string {
			switch {
			case math.IsNaN(float64(x)):
				return ""
			case x >= 0:
				return "pos"
			}
			return "neg"
		},
		"span":     rangeOf,
		"modeGap":  func() string { return fmt.Sprintf("%.0f%%", 100*ModeGap) },
		"modeRuns": func() int { return ModeMinRuns },
	}).Parse(repeatTmpl)
	if err != nil {
		return nil, err
	}
	var b bytes.Buffer
	var runs []runLink
	for _, r := range t.Runs {
		runs = append(runs, runLink{RepeatRun: r, Href: reportHref(pageDir, r)})
	}
	shown, more := t.ShownDiagnoses()
	pg := struct {
		CSS   template.CSS
		Title string
		T     *RepeatTable
		Runs  []runLink
		Chart compareChart
		Shown []string // diagnoses on the page
		More  int      // and how many left out
	}{template.CSS(css), fmt.Sprintf("emu: %d runs of %s (%s)", len(t.Runs), t.Lab, t.Scheduler), t, runs, rangeChart(t), shown, more}
	if err := tmpl.Execute(&b, pg); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// reportHref is the way from pageDir to a run's report.html: relative
// where both paths resolve, else the run directory's absolute path.
func reportHref(pageDir string, r RepeatRun) string {
	dir := r.dir
	if dir == "" {
		return r.Name + "/report.html"
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return filepath.ToSlash(filepath.Join(dir, "report.html"))
	}
	if res, err := filepath.EvalSymlinks(abs); err == nil {
		abs = res
	}
	if base, err := filepath.Abs(pageDir); err == nil {
		if res, err := filepath.EvalSymlinks(base); err == nil {
			base = res
		}
		if rel, err := filepath.Rel(base, abs); err == nil {
			return filepath.ToSlash(filepath.Join(rel, "report.html"))
		}
	}
	return filepath.ToSlash(filepath.Join(abs, "report.html"))
}
