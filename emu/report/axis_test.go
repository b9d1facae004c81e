package report

import (
	"math"
	"strings"
	"testing"
)

func TestAxisX(t *testing.T) {
	for _, tc := range []struct {
		name      string
		t0, t1, t int64
		x0, w     float64
		want      float64
	}{
		{"start", 0, 1e9, 0, 100, 1000, 100},
		{"end", 0, 1e9, 1e9, 100, 1000, 1100},
		{"middle", 0, 1e9, 5e8, 100, 1000, 600},
		{"negative start", -2e8, 8e8, 0, 0, 1000, 200},
		{"beyond the end", 0, 1e9, 2e9, 0, 100, 200},
		{"degenerate span widened to 1 ms", 5, 5, 5 + 5e5, 0, 100, 50},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := NewAxis(tc.t0, tc.t1, tc.x0, tc.w).X(tc.t); math.Abs(got-tc.want) > 1e-9 {
				t.Errorf("X(%d) = %v, want %v", tc.t, got, tc.want)
			}
		})
	}
}

func TestAxisWMinimum(t *testing.T) {
	a := NewAxis(0, 1e9, 0, 1000)
	if w := a.W(0, 1); w != 0.5 {
		t.Errorf("W of a 1 ns phase = %v, want the 0.5 px minimum", w)
	}
	if w := a.W(0, 1e8); math.Abs(w-100) > 1e-9 {
		t.Errorf("W(0, 100ms) = %v, want 100", w)
	}
}

func TestAxisTicks(t *testing.T) {
	for _, tc := range []struct {
		name   string
		t0, t1 int64
		want   string
	}{
		{"1.4 s in about 10", 0, 1_400_000_000, "0 200 400 600 800 1000 1200 1400"},
		{"from before time zero, no -0", -150_000_000, 450_000_000, "-100 0 100 200 300 400"},
		{"sub-millisecond", 0, 1_000_000, "0.0 0.1 0.2 0.3 0.4 0.5 0.6 0.7 0.8 0.9 1.0"},
		{"step 5", 0, 40_000_000, "0 5 10 15 20 25 30 35 40"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := NewAxis(tc.t0, tc.t1, 0, 1000)
			var got []string
			for _, tk := range a.Ticks(10) {
				got = append(got, tk.Label)
				if tk.X < -1e-6 || tk.X > 1000+1e-6 {
					t.Errorf("tick %s at x=%v is off the axis", tk.Label, tk.X)
				}
			}
			if s := strings.Join(got, " "); s != tc.want {
				t.Errorf("ticks = %q, want %q", s, tc.want)
			}
		})
	}
}

func TestNiceStep(t *testing.T) {
	for raw, want := range map[float64]float64{0.13: 0.2, 1: 1, 1.2: 2, 3: 5, 7: 10, 140: 200, 0: 1} {
		if got := niceStep(raw); math.Abs(got-want) > 1e-12 {
			t.Errorf("niceStep(%v) = %v, want %v", raw, got, want)
		}
	}
}
