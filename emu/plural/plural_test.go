package plural

import "testing"

func TestOf(t *testing.T) {
	for _, tc := range []struct {
		n          int
		noun, want string
	}{
		{1, "circuit", "1 circuit"},
		{0, "circuit", "0 circuits"},
		{3, "rack pair", "3 rack pairs"},
		{2, "activity", "2 activities"},
		{1, "activity", "1 activity"},
		{4, "delay", "4 delays"},
	} {
		if got := Of(tc.n, tc.noun); got != tc.want {
			t.Errorf("Of(%d, %q) = %q, want %q", tc.n, tc.noun, got, tc.want)
		}
	}
}
