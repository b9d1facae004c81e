package main

import (
	"testing"

	"github.com/ocsemu/ocsemu/emu/plan"
)

func TestNearestRank(t *testing.T) {
	three := []float64{0.5, 0.646, 0.898}
	for _, tc := range []struct {
		xs   []float64
		p    float64
		want float64
	}{
		{nil, 0.5, 0},
		{three, 0.5, 0.646},
		{three, 0.9, 0.898},
		{three, 1, 0.898},
		{[]float64{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}, 0.9, 9},
		{[]float64{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}, 0.5, 5},
		{[]float64{7}, 0.9, 7},
	} {
		if got := nearestRank(tc.xs, tc.p); got != tc.want {
			t.Errorf("nearestRank(%v, %v) = %v, want %v", tc.xs, tc.p, got, tc.want)
		}
	}
}

func TestStageLengths(t *testing.T) {
	st := func(ds ...int64) *plan.Plan {
		p := &plan.Plan{}
		for _, d := range ds {
			p.Stages = append(p.Stages, plan.Stage{DurationNs: d})
		}
		return p
	}
	for _, tc := range []struct {
		name string
		p    *plan.Plan
		want string
	}{
		{"no stages", st(), ""},
		{"barrier stages have no length", st(0, 0), ""},
		{"equal slots", st(100e6, 100e6), " of 100ms"},
		{"one long stage (static)", st(11_670_190_404), " of 11.67s"},
		{"a range", st(1e6, 1_200e6, 50e6), " of 1ms to 1.2s"},
	} {
		if got := stageLengths(tc.p); got != tc.want {
			t.Errorf("%s: got %q, want %q", tc.name, got, tc.want)
		}
	}
}
