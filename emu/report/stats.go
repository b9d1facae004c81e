package report

import (
	"math"
	"slices"
)

// Stats summarises signed relative errors ((measured - predicted) /
// predicted): positive means the emulation was slower than the model.
type Stats struct {
	N      int
	Mean   float64
	Median float64
	P90    float64 // nearest rank: the ceil(0.9 N)-th smallest
	Max    float64 // the largest signed value, not the largest magnitude
}

// Summarize computes Stats over xs; with no values it returns N = 0 and
// zeros, which the report prints as "-". NaN values are skipped.
func Summarize(xs []float64) Stats {
	v := make([]float64, 0, len(xs))
	for _, x := range xs {
		if !math.IsNaN(x) {
			v = append(v, x)
		}
	}
	if len(v) == 0 {
		return Stats{}
	}
	slices.Sort(v)
	n := len(v)
	sum := 0.0
	for _, x := range v {
		sum += x
	}
	s := Stats{N: n, Mean: sum / float64(n), Max: v[n-1]}
	if n%2 == 1 {
		s.Median = v[n/2]
	} else {
		s.Median = (v[n/2-1] + v[n/2]) / 2
	}
	s.P90 = v[nearestRank(0.9, n)-1]
	return s
}

// nearestRank is the 1-based rank ceil(p n), at least 1.
func nearestRank(p float64, n int) int {
	r := int(math.Ceil(p*float64(n) - 1e-9))
	return max(1, min(n, r))
}
