package inc

import "testing"

// TestWindow follows the congestion window through slow start,
// additive increase, one decrease per congestion event, and its bounds.
func TestWindow(t *testing.T) {
	type step struct {
		results        int // results counted first
		timeout, next  int // then a timeout of this block (-1: none), next unsent block
		wantDecrease   bool
		wantSize, slot int // size with slot slots in use, after the step
	}
	for _, c := range []struct {
		name  string
		slots int
		fixed bool
		steps []step
	}{
		{"slow start doubles per window, capped by the slots", 256, false, []step{
			{0, -1, 0, false, 32, 256},
			{32, -1, 0, false, 64, 256},
			{64, -1, 0, false, 128, 256},
			{1000, -1, 0, false, 256, 256},
			{0, -1, 0, false, 100, 100},
		}},
		{"a mark cuts 30% once per congestion event", 256, false, []step{
			{68, -1, 0, false, 100, 256},
			{0, 50, 200, true, 70, 256},
			{0, 120, 200, false, 70, 256}, // sent before the decrease
			{0, 199, 210, false, 70, 256},
			{0, 200, 300, true, 49, 256}, // sent after it
		}},
		{"additive increase after a decrease", 256, false, []step{
			{68, -1, 0, false, 100, 256},
			{0, 10, 20, true, 70, 256},
			{71, -1, 0, false, 71, 256},
			{73, -1, 0, false, 72, 256},
		}},
		{"never below the minimum", 256, false, []step{
			{0, 0, 1, true, 22, 256},
			{0, 1, 2, true, 16, 256},
			{0, 5, 9, true, 16, 256},
			{0, 5, 9, false, 8, 8},
		}},
		{"fixed window", 64, true, []step{
			{0, -1, 0, false, 64, 64},
			{0, 3, 70, false, 64, 64},
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			w := newWindow(c.slots, c.fixed)
			for i, s := range c.steps {
				for range s.results {
					w.grow()
				}
				if s.timeout >= 0 {
					if got := w.congestion(s.timeout, s.next); got != s.wantDecrease {
						t.Errorf("step %d: mark on block %d decreased %v, want %v", i, s.timeout, got, s.wantDecrease)
					}
				}
				if got := w.size(s.slot); got != s.wantSize {
					t.Errorf("step %d: size %d (cwnd %.2f), want %d", i, got, w.cwnd, s.wantSize)
				}
			}
		})
	}
}
