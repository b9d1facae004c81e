package report

import (
	"bytes"
	"encoding/csv"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/ocsemu/ocsemu/emu/fidelity"
	"github.com/ocsemu/ocsemu/emu/plan"
	"github.com/ocsemu/ocsemu/emu/scenario"
	"github.com/ocsemu/ocsemu/workers/record"
)

// row is one comparison row: predicted and measured in ms.
func row(phase string, pred, meas float64) record.Comparison {
	p, m := int64(pred*1e6), int64(meas*1e6)
	return record.Comparison{Job: "j", Phase: phase, PredictedNs: p, MeasuredNs: m, RelErr: relErr(float64(p), float64(m))}
}

// fakeRun is a run of one plan: a compute phase of 10 ms and a push the
// ideal model puts at 100 ms, the calibrated at 105 and the TCP-aware at
// 120, measured push ms as given.
func fakeRun(dir string, push float64, verdict fidelity.Status) *Run {
	return &Run{
		Dir:         dir,
		Scenario:    &scenario.Scenario{Name: "lab"},
		Plan:        &plan.Plan{Scheduler: "fcfs"},
		Prediction:  &record.Run{MakespanNs: 110e6},
		Measurement: &record.Run{MakespanNs: int64((10 + push) * 1e6)},
		Compare:     []record.Comparison{row("compute", 10, 10), row("push", 100, push)},
		Data: &RunData{
			ComparisonCalibrated: []record.Comparison{row("compute", 10, 10), row("push", 105, push)},
			ComparisonTCPAware:   []record.Comparison{row("compute", 10, 10), row("push", 120, push)},
			Verdict:              fidelity.Verdict{Status: verdict},
		},
	}
}

func TestRepeats(t *testing.T) {
	for _, tc := range []struct {
		name                 string
		pushes               []float64
		median, lo, hi       float64 // ms
		spread               float64
		errTCP               float64
		insideTCP, insideIdl int
		runMaxTCP            []float64
	}{
		{"odd count: the middle run", []float64{130, 110, 121}, 121, 110, 130, 20.0 / 121, 1.0 / 120, 1, 0,
			[]float64{10.0 / 120, 10.0 / 120, 1.0 / 120}},
		{"even count: mean of the middle two", []float64{100, 140, 120, 124}, 122, 100, 140, 40.0 / 122, 2.0 / 120, 1, 1,
			[]float64{20.0 / 120, 20.0 / 120, 0, 4.0 / 120}},
		{"every run alike: no spread", []float64{120, 120}, 120, 120, 120, 0, 0, 1, 0, []float64{0, 0}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var runs []*Run
			for i, p := range tc.pushes {
				runs = append(runs, fakeRun("run"+string(rune('a'+i)), p, fidelity.Warn))
			}
			tab, err := Repeats(runs)
			if err != nil {
				t.Fatal(err)
			}
			if len(tab.Rows) != 2 || len(tab.Runs) != len(tc.pushes) {
				t.Fatalf("rows %d runs %d", len(tab.Rows), len(tab.Runs))
			}
			push := tab.Rows[1]
			if push.Phase != "push" || push.Runs != len(tc.pushes) {
				t.Fatalf("row %+v", push)
			}
			if push.MedianNs != int64(tc.median*1e6) || push.MinNs != int64(tc.lo*1e6) || push.MaxNs != int64(tc.hi*1e6) {
				t.Errorf("median/min/max %d %d %d, want %v %v %v ms", push.MedianNs, push.MinNs, push.MaxNs, tc.median, tc.lo, tc.hi)
			}
			if !near(float64(push.Spread), tc.spread) {
				t.Errorf("spread %v, want %v", push.Spread, tc.spread)
			}
			if !near(float64(push.Err[2]), tc.errTCP) || !near(float64(push.Err[0]), (tc.median-100)/100) || !near(float64(push.Err[1]), (tc.median-105)/105) {
				t.Errorf("errors %v, want tcp-aware %v", push.Err, tc.errTCP)
			}
			if len(tab.Fits) != 3 {
				t.Fatalf("fits %+v", tab.Fits)
			}
			tcp, ideal := tab.Fits[2], tab.Fits[0]
			if tcp.Model != "tcp-aware" || tcp.Phases != 1 || !near(tcp.MaxAbs, math.Abs(tc.errTCP)) {
				t.Errorf("tcp-aware fit %+v (compute phases must not count)", tcp)
			}
			if tcp.Status != fidelity.AccuracyStatus(math.Abs(tc.errTCP), math.Abs(tc.errTCP)) || ideal.Status != fidelity.AccuracyStatus(math.Abs(tc.median-100)/100, math.Abs(tc.median-100)/100) {
				t.Errorf("grades: tcp-aware %s, ideal %s", tcp.Status, ideal.Status)
			}
			if tc.median == 121 && (tcp.Status != fidelity.Pass || ideal.Status != fidelity.Fail) {
				t.Errorf("grades: tcp-aware %s (1%% off), ideal %s (21%% off)", tcp.Status, ideal.Status)
			}
			if tcp.Inside != tc.insideTCP || ideal.Inside != tc.insideIdl {
				t.Errorf("inside: tcp-aware %d ideal %d, want %d %d", tcp.Inside, ideal.Inside, tc.insideTCP, tc.insideIdl)
			}
			for i, want := range tc.runMaxTCP {
				if !near(float64(tcp.RunMaxAbs[i]), want) {
					t.Errorf("run %d max |error| %v, want %v", i, tcp.RunMaxAbs[i], want)
				}
			}
			if tab.SpreadMaxPhase != "j iteration 0 push" || !near(tab.SpreadMax, tc.spread) {
				t.Errorf("spread summary %v %q", tab.SpreadMax, tab.SpreadMaxPhase)
			}
			var text, table bytes.Buffer
			if err := tab.WriteText(&text); err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(text.String(), "runs of one plan (lab, fcfs)") || !strings.Contains(text.String(), "verdict warn") {
				t.Errorf("text:\n%s", text.String())
			}
			if err := tab.WriteCSV(&table); err != nil {
				t.Fatal(err)
			}
			rows, err := csv.NewReader(&table).ReadAll()
			if err != nil || len(rows) != 3 || rows[0][4] != "ideal_ms" || rows[0][6] != "tcp_aware_ms" {
				t.Errorf("csv %v %v", rows, err)
			}
		})
	}
}

func TestRepeatsRefusesOtherPlans(t *testing.T) {
	a, b := fakeRun("a", 120, fidelity.Pass), fakeRun("b", 121, fidelity.Pass)
	for _, tc := range []struct {
		name string
		edit func(r *Run)
		want string
	}{
		{"one run only", nil, "want 2 or more"},
		{"other plan hash", func(r *Run) { a.Meta, r.Meta = &Meta{PlanSHA256: "aa"}, &Meta{PlanSHA256: "bb"} }, "ran different plans"},
		{"other prediction", func(r *Run) { r.Compare[1].PredictedNs++ }, "predicts j iteration 0 phase push differently"},
		{"a phase more", func(r *Run) { r.Compare = append(r.Compare, row("pull", 1, 1)) }, "has 3 phases"},
		{"another version of the TCP-aware model", func(r *Run) { r.Data.ComparisonTCPAware[1].PredictedNs++ }, "tcp-aware model predicts j iteration 0 phase push differently"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a.Meta = nil
			r := fakeRun("b", 121, fidelity.Pass)
			runs := []*Run{a}
			if tc.edit != nil {
				tc.edit(r)
				runs = append(runs, r)
			}
			if _, err := Repeats(runs); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("got %v, want %q", err, tc.want)
			}
		})
	}
	if _, err := Repeats([]*Run{a, b}); err != nil {
		t.Errorf("runs of one plan refused: %v", err)
	}
}

func TestRepeatsWithoutModels(t *testing.T) {
	// Runs written before the data file have only the ideal model.
	a, b := fakeRun("a", 120, ""), fakeRun("b", 130, "")
	a.Data, b.Data = nil, nil
	tab, err := Repeats([]*Run{a, b})
	if err != nil {
		t.Fatal(err)
	}
	if len(tab.Fits) != 1 || tab.Fits[0].Model != "ideal" || !math.IsNaN(float64(tab.Rows[1].Err[2])) {
		t.Errorf("fits %+v, row %+v", tab.Fits, tab.Rows[1])
	}
	var text bytes.Buffer
	if err := tab.WriteText(&text); err != nil || !strings.Contains(text.String(), "no verdict") {
		t.Errorf("text %v:\n%s", err, text.String())
	}
	// What does not exist is null in JSON, and reads back as NaN.
	data, err := json.Marshal(tab)
	if err != nil || !strings.Contains(string(data), `"err_vs_median":[0.25,null,null]`) {
		t.Fatalf("json %v: %s", err, data)
	}
	var back RepeatTable
	if err := json.Unmarshal(data, &back); err != nil || !math.IsNaN(float64(back.Rows[1].Err[1])) || back.Rows[1].Err[0] != 0.25 {
		t.Errorf("read back %v: %+v", err, back.Rows)
	}
}

func TestRenderRepeat(t *testing.T) {
	root := t.TempDir()
	for _, d := range []string{"runa", "runb", "set"} {
		if err := os.Mkdir(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	a, b := fakeRun(filepath.Join(root, "runa"), 120, fidelity.Pass), fakeRun(filepath.Join(root, "runb"), 130, fidelity.Fail)
	for _, r := range []*Run{a, b} {
		r.Scenario.Name = "<lab>"
	}
	tab, err := Repeats([]*Run{a, b})
	if err != nil {
		t.Fatal(err)
	}
	page, err := RenderRepeat(tab, filepath.Join(root, "set"))
	if err != nil {
		t.Fatal(err)
	}
	html := string(page)
	// Written into the current directory instead, the links follow.
	here, err := RenderRepeat(tab, root)
	if err != nil || !strings.Contains(string(here), `href="runa/report.html"`) {
		t.Errorf("page in the runs' parent: %v, links %q", err, regexp.MustCompile(`href="[^"]*"`).FindAllString(string(here), -1))
	}
	for _, want := range []string{
		`<svg id="ranges"`,
		`href="../runa/report.html"`, `href="../runb/report.html"`,
		`&lt;lab&gt;`, // escaped
		`j iteration 0 push: measured 120.0-130.0 ms over 2 runs`, // the range bar's title
		`j iteration 0 push: tcp-aware model 120.0 ms (median measured &#43;4.2%)`,
	} {
		if !strings.Contains(html, want) {
			t.Errorf("page lacks %q", want)
		}
	}
	if strings.Contains(html, "<lab>") {
		t.Error("the lab name is not escaped")
	}
	// One range bar per predicted communication phase (the compute phase
	// has none), with three model marks and a median mark.
	if n := strings.Count(html, `fill="`+rangeFill+`"><title>`); n != 1 {
		t.Errorf("%d range bars, want 1", n)
	}
	if n := strings.Count(html, `fill="`+medianFill+`"><title>`); n != 1 {
		t.Errorf("%d median marks, want 1", n)
	}
}

// The set's attribution tally, in text and on the page: run a's push is
// 30% over the TCP-aware model with 2 ms unexplained, run b's 40% over
// with 20 ms unexplained.
func TestRepeatAttributionTally(t *testing.T) {
	a, b := fakeRun("runa", 156, fidelity.Pass), fakeRun("runb", 168, fidelity.Fail)
	attr := func(rel float64, residual int64) []fidelity.Attribution {
		return []fidelity.Attribution{{Job: "j", Phase: "push", TCPAwareNs: 120e6, RelErrTCP: rel, Parts: map[string]int64{fidelity.PartResidual: residual}}}
	}
	a.Data.Attribution, b.Data.Attribution = attr(0.3, 2e6), attr(0.4, 20e6)
	// b's push also names its busiest link: the set's diagnosis has it.
	b.Data.Attribution[0].Link = &fidelity.LinkUse{Link: "tor0:up0", OwnNs: 50e6, OthersNs: 50e6, ModelOwnNs: 40e6, ModelOthersNs: 60e6}
	tab, err := Repeats([]*Run{a, b})
	if err != nil {
		t.Fatal(err)
	}
	if tl := tab.Attribution; tl == nil || tl.Runs != 2 || tl.Phases != 2 || tl.Explained != 1 || tl.Over != 1 || tl.Worst != "j iteration 0 push" {
		t.Fatalf("tally %+v", tab.Attribution)
	}
	var txt bytes.Buffer
	if err := tab.WriteText(&txt); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(txt.String(), "2 phases more than 10% off the TCP-aware model in 2 runs; the parts explain 1 of them to within 5 points") ||
		!strings.Contains(txt.String(), "0 faster than the models and the measured parts say (a negative residual: only inc_round and beside, of the measured parts, can be negative), 1 slower; worst j iteration 0 push, +16.7 points") ||
		!strings.Contains(txt.String(), "   j 0 push on tor0:up0, 1 run: own 50% (40), others 50% (60), idle 0% (0)\n") {
		t.Errorf("text:\n%s", txt.String())
	}
	page, err := RenderRepeat(tab, ".")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(page), `<ul id="attribution-diagnoses"><li>j 0 push on tor0:up0, 1 run: own 50% (40), others 50% (60), idle 0% (0)</li></ul>`) {
		t.Errorf("page lacks the set's diagnoses")
	}
	if !strings.Contains(string(page), `id="attribution-tally"`) || !strings.Contains(string(page), "1 slower; worst j iteration 0 push, &#43;16.7 points.") {
		t.Errorf("page lacks the tally: %s", regexp.MustCompile(`<p id="attribution-tally">[^<]*`).FindString(string(page)))
	}
	if !strings.Contains(string(page), `<p id="attribution-medians">Attribution, against the medians: 1 phase more than 10% off the TCP-aware model; the median run&#39;s parts explain 0 of them to within 5 points. Left: j iteration 0 push, &#43;9.2 points (median runs runa and runb). </p>`) {
		t.Errorf("page lacks the check against the medians: %s", regexp.MustCompile(`<p id="attribution-medians">[^\n]*`).FindString(string(page)))
	}
	// Runs without a data file have no tally.
	a.Data, b.Data = nil, nil
	if tab, err := Repeats([]*Run{a, b}); err != nil || tab.Attribution != nil {
		t.Errorf("tally without data files: %+v, %v", tab, err)
	}
}

// The attribution's bar against the medians: the TCP-aware model puts
// the push at 120 ms; a run's push more than 5% off has an attribution
// row with the residual given (ms), the others leave their error.
func TestMedianAttribution(t *testing.T) {
	type run struct {
		push     float64 // measured ms
		residual float64 // ms; attributed when the push is more than 5% off
	}
	for _, tc := range []struct {
		name              string
		runs              []run
		noTCPAware        bool // the runs have no TCP-aware comparison: the calibrated model (105 ms) judges
		phases, explained int
		text              string // the line under the tally, and the left one
	}{
		{"median within 10%: nothing to judge", []run{{100, 0}, {125, 0}, {150, 30}}, false, 0, 0,
			"against the medians: no phase more than 10% off the TCP-aware model"},
		{"odd: the median run explains it", []run{{100, 0}, {150, 4}, {160, 40}}, false, 1, 1,
			"against the medians: 1 phase more than 10% off the TCP-aware model; the median run's parts explain 1 of them to within 5 points"},
		{"odd: the median run leaves 10 points", []run{{100, 0}, {150, 12}, {160, 1}}, false, 1, 0,
			"against the medians: 1 phase more than 10% off the TCP-aware model; the median run's parts explain 0 of them to within 5 points\n   Left: j iteration 0 push, +10.0 points (median run runb)"},
		{"faster: a negative residual", []run{{100, -18}, {90, -25}, {125, 0}}, false, 1, 0,
			"Left: j iteration 0 push, -15.0 points (median run runa)"},
		{"even: the mean of the middle two", []run{{150, 10}, {140, 0}, {100, 0}, {160, 0}}, false, 1, 1, "explain 1 of them to within 5 points"},
		// (14.4 + 3.6) / 120 / 2 = 7.5 points.
		{"even: the mean leaves too much", []run{{150, 14.4}, {140, 3.6}, {100, 0}, {160, 0}}, false, 1, 0,
			"Left: j iteration 0 push, +7.5 points (median runs runb and runa)"},
		// 125 ms is 4.2% over 120, not attributed: its error is its
		// residual; with 150's 12 ms (10 points): (4.17 + 10) / 2.
		{"even: a middle run not attributed leaves its error", []run{{125, 0}, {150, 12}, {100, 0}, {160, 0}}, false, 1, 0,
			"Left: j iteration 0 push, +7.1 points (median runs runa and runb)"},
		// Judged against the calibrated model (105 ms): the median run's
		// push at 150 is 42.9% over, and it is not attributed here (the
		// attribution rows name the TCP-aware model): its error stays.
		{"judged by the calibrated model", []run{{100, 0}, {150, 0}, {160, 0}}, true, 1, 0,
			"against the medians: 1 phase more than 10% off the TCP-aware model; the median run's parts explain 0 of them to within 5 points\n   Left: j iteration 0 push, +42.9 points (median run runb)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var runs []*Run
			for i, r := range tc.runs {
				fr := fakeRun("run"+string(rune('a'+i)), r.push, fidelity.Warn)
				if tc.noTCPAware {
					fr.Data.ComparisonTCPAware = nil
				} else if rel := (r.push - 120) / 120; math.Abs(rel) > fidelity.AttributeAbove {
					fr.Data.Attribution = []fidelity.Attribution{{Job: "j", Phase: "push", TCPAwareNs: 120e6, MeasuredNs: int64(r.push * 1e6), RelErrTCP: rel,
						Parts: map[string]int64{fidelity.PartResidual: int64(r.residual * 1e6)}}}
				}
				runs = append(runs, fr)
			}
			tab, err := Repeats(runs)
			if err != nil {
				t.Fatal(err)
			}
			m := tab.MedianAttribution
			if m == nil || m.Phases != tc.phases || m.Explained != tc.explained || len(m.Left) != tc.phases-tc.explained {
				t.Fatalf("check %+v, want %d phases, %d explained", m, tc.phases, tc.explained)
			}
			var txt bytes.Buffer
			if err := tab.WriteText(&txt); err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(txt.String(), tc.text) {
				t.Errorf("text lacks %q:\n%s", tc.text, txt.String())
			}
		})
	}
	// A middle run without the model's figures for the phase is named,
	// not counted as explained.
	a, b, c := fakeRun("runa", 100, fidelity.Warn), fakeRun("runb", 150, fidelity.Warn), fakeRun("runc", 160, fidelity.Warn)
	b.Data.ComparisonCalibrated, b.Data.ComparisonTCPAware = b.Data.ComparisonCalibrated[:1], b.Data.ComparisonTCPAware[:1]
	if tab, err := Repeats([]*Run{a, b, c}); err != nil || tab.MedianAttribution == nil || tab.MedianAttribution.Explained != 0 ||
		!slices.Equal(tab.MedianAttribution.Left, []string{"j iteration 0 push, no model figures in its median run runb"}) {
		t.Errorf("a median run without figures: %+v, %v", tab.MedianAttribution, err)
	}
	// A run without a data file: no check.
	a, b = fakeRun("runa", 150, fidelity.Warn), fakeRun("runb", 150, fidelity.Warn)
	b.Data = nil
	if tab, err := Repeats([]*Run{a, b}); err != nil || tab.MedianAttribution != nil {
		t.Errorf("check without data files: %+v, %v", tab.MedianAttribution, err)
	}
}
