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
		{"starts at 256 blocks or the slots in use", 1024, false, []step{
			{0, -1, 0, false, 256, 1024},
			{0, -1, 0, false, 100, 100},
		}},
		{"a mark cuts 30% once per congestion event", 1024, false, []step{
			{0, 50, 300, true, 179, 1024},
			{0, 120, 300, false, 179, 1024}, // sent before the decrease
			{0, 299, 310, false, 179, 1024},
			{0, 300, 400, true, 125, 1024}, // sent after it
		}},
		{"additive increase, up to the slots", 300, false, []step{
			{257, -1, 0, false, 257, 300},
			{0, 10, 20, true, 179, 300},
			{180, -1, 0, false, 180, 300},
			{100000, -1, 0, false, 300, 300},
		}},
		{"never below the minimum", 1024, false, []step{
			{0, 0, 1, true, 179, 1024},
			{0, 1, 2, true, 125, 1024},
			{0, 2, 3, true, 87, 1024},
			{0, 3, 4, true, 61, 1024},
			{0, 4, 5, true, 43, 1024},
			{0, 5, 6, true, 30, 1024},
			{0, 6, 7, true, 21, 1024},
			{0, 7, 8, true, 16, 1024},
			{0, 8, 9, true, 16, 1024},
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
