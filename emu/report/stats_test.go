package report

import (
	"math"
	"testing"
)

func TestSummarize(t *testing.T) {
	nan := math.NaN()
	for _, tc := range []struct {
		name string
		in   []float64
		want Stats
	}{
		{"empty", nil, Stats{}},
		{"only NaN", []float64{nan}, Stats{}},
		{"single", []float64{0.25}, Stats{N: 1, Mean: 0.25, Median: 0.25, P90: 0.25, Max: 0.25}},
		{"single negative", []float64{-0.1}, Stats{N: 1, Mean: -0.1, Median: -0.1, P90: -0.1, Max: -0.1}},
		{"two, even median", []float64{0.3, -0.1}, Stats{N: 2, Mean: 0.1, Median: 0.1, P90: 0.3, Max: 0.3}},
		{"signed max is not the largest magnitude", []float64{-0.9, 0.1, 0.2}, Stats{N: 3, Mean: (-0.9 + 0.1 + 0.2) / 3, Median: 0.1, P90: 0.2, Max: 0.2}},
		{"ten: p90 is the 9th smallest", []float64{10, 9, 8, 7, 6, 5, 4, 3, 2, 1}, Stats{N: 10, Mean: 5.5, Median: 5.5, P90: 9, Max: 10}},
		{"eleven: p90 is the 10th smallest", []float64{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11}, Stats{N: 11, Mean: 6, Median: 6, P90: 10, Max: 11}},
		{"NaN skipped", []float64{1, nan, 3}, Stats{N: 2, Mean: 2, Median: 2, P90: 3, Max: 3}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := Summarize(tc.in)
			close := func(a, b float64) bool { return math.Abs(a-b) < 1e-12 }
			if got.N != tc.want.N || !close(got.Mean, tc.want.Mean) || !close(got.Median, tc.want.Median) ||
				!close(got.P90, tc.want.P90) || !close(got.Max, tc.want.Max) {
				t.Errorf("Summarize(%v) = %+v, want %+v", tc.in, got, tc.want)
			}
		})
	}
}

func TestSummarizeLeavesInputAlone(t *testing.T) {
	in := []float64{3, 1, 2}
	Summarize(in)
	if in[0] != 3 || in[1] != 1 || in[2] != 2 {
		t.Errorf("Summarize reordered its input: %v", in)
	}
}

// A phase the model gives no time (an INC pull) counts in no kind's error
// and reads "-" on the page, not +0.0%.
func TestNoPredictionNoError(t *testing.T) {
	cs := []Comparison{
		{Job: "vgg", Phase: "push", PredictedNs: 100, MeasuredNs: 110, RelErr: 0.1},
		{Job: "vgg", Phase: "pull", PredictedNs: 0, MeasuredNs: 4, RelErr: 0},
	}
	for _, ks := range buildStats(cs) {
		if ks.Kind == "pull" {
			t.Errorf("the unpredicted pull has a kind of its own: %+v", ks)
		}
		if ks.N != 1 {
			t.Errorf("%s: %d errors, want the push's alone", ks.Kind, ks.N)
		}
	}
	rows, _ := buildErrors(&Run{Compare: cs})
	if got := pct(rows[1].RelErr); got != "-" {
		t.Errorf("the pull's error reads %q, want -", got)
	}
	if got := pct(rows[0].RelErr); got != "+10.0%" {
		t.Errorf("the push's error reads %q", got)
	}
}
