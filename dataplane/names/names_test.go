package names

import (
	"errors"
	"strings"
	"testing"
)

func TestValidLab(t *testing.T) {
	for _, tc := range []struct {
		name string
		ok   bool
	}{
		{"quickstart", true},
		{"a", true},
		{"rel-g1", true},
		{strings.Repeat("a", MaxLabLen), true},
		{strings.Repeat("a", MaxLabLen+1), false},
		{"", false},
		{"0lab", false},
		{"-lab", false},
		{"Lab", false},
		{"a.b", false},
		{"a/b", false},
		{"../x", false},
		{"rel-g*", false},
		{"a?", false},
		{"[a]", false},
		{"a b", false},
		{"a\n", false},
		{"é", false},
	} {
		err := ValidLab(tc.name)
		if (err == nil) != tc.ok {
			t.Errorf("ValidLab(%q) = %v, want ok=%v", tc.name, err, tc.ok)
		}
		if err != nil && !errors.Is(err, ErrBadLab) {
			t.Errorf("ValidLab(%q): error %v does not wrap ErrBadLab", tc.name, err)
		}
		if jerr := ValidJob(tc.name); (jerr == nil) != tc.ok || (jerr != nil && !errors.Is(jerr, ErrBadJob)) {
			t.Errorf("ValidJob(%q) = %v", tc.name, jerr)
		}
	}
}
