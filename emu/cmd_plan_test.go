package main

import "testing"

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
