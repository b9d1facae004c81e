package report

import "math"

// Axis maps times (ns from time zero) onto SVG x coordinates: T0 lands on
// X0 and T1 on X0 + Width. A degenerate span (T1 <= T0) is widened to 1 ms
// so nothing divides by zero.
type Axis struct {
	T0, T1    int64
	X0, Width float64
}

// NewAxis returns an axis over [t0, t1].
func NewAxis(t0, t1 int64, x0, width float64) Axis {
	if t1 <= t0 {
		t1 = t0 + 1_000_000
	}
	return Axis{T0: t0, T1: t1, X0: x0, Width: width}
}

// X is the x coordinate of time t.
func (a Axis) X(t int64) float64 {
	return a.X0 + float64(t-a.T0)/float64(a.T1-a.T0)*a.Width
}

// W is the width of the interval [s, e], at least 0.5 px so a very short
// phase stays visible.
func (a Axis) W(s, e int64) float64 {
	return max(0.5, a.X(e)-a.X(s))
}

// Tick is one labelled mark on the axis.
type Tick struct {
	X     float64
	Label string // milliseconds
}

// Ticks returns marks at a round step in milliseconds (1, 2 or 5 times a
// power of ten), about n of them over the axis.
func (a Axis) Ticks(n int) []Tick {
	if n < 1 {
		n = 1
	}
	spanMs := float64(a.T1-a.T0) / 1e6
	step := niceStep(spanMs / float64(n))
	var ticks []Tick
	first := math.Ceil(float64(a.T0)/1e6/step) * step
	for ms := first; ms <= float64(a.T1)/1e6+step*1e-9; ms += step {
		if math.Abs(ms) < step*1e-9 {
			ms = 0 // not "-0"
		}
		t := int64(math.Round(ms * 1e6))
		ticks = append(ticks, Tick{X: a.X(t), Label: fmtMs(ms, step)})
	}
	return ticks
}

// niceStep rounds raw up to 1, 2 or 5 times a power of ten.
func niceStep(raw float64) float64 {
	if raw <= 0 || math.IsNaN(raw) || math.IsInf(raw, 0) {
		return 1
	}
	p := math.Pow(10, math.Floor(math.Log10(raw)))
	for _, m := range []float64{1, 2, 5, 10} {
		if m*p >= raw*(1-1e-9) {
			return m * p
		}
	}
	return 10 * p
}

func fmtMs(ms, step float64) string {
	if step >= 1 {
		return trimFloat(ms, 0)
	}
	return trimFloat(ms, int(math.Ceil(-math.Log10(step))))
}
