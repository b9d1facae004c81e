package netns

import (
	"errors"
	"strings"
	"testing"
)

// A name reaches a path under /run/netns: only a plain name may.
func TestNamesArePlain(t *testing.T) {
	for _, tt := range []struct {
		name string
		ok   bool
	}{
		{"emu-quickstart.r0s0", true},
		{"lab01-check-h0", true},
		{"", false},
		{".", false},
		{"..", false},
		{"../../proc/1/ns/net", false},
		{"a/b", false},
		{"a\x00b", false},
		{strings.Repeat("a", 256), false},
	} {
		err := checkName(tt.name)
		if (err == nil) != tt.ok {
			t.Errorf("checkName(%q) = %v, want ok %v", tt.name, err, tt.ok)
		}
		if tt.ok {
			continue
		}
		if err := Do(tt.name, func() error { return nil }); !errors.Is(err, ErrBadName) {
			t.Errorf("Do(%q) = %v, want ErrBadName", tt.name, err)
		}
		if err := Delete(tt.name); !errors.Is(err, ErrBadName) {
			t.Errorf("Delete(%q) = %v, want ErrBadName", tt.name, err)
		}
		if Exists(tt.name) {
			t.Errorf("Exists(%q) = true", tt.name)
		}
	}
}
