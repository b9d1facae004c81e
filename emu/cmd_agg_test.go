package main

import "testing"

func TestCheckToR(t *testing.T) {
	for _, c := range []struct {
		lab, tor string
		ok       bool
	}{
		{"inc-demo", "tor0", true},
		{"inc-demo", "tor12", true},
		{"../etc", "tor0", false},
		{"inc-demo", "tor", false},
		{"inc-demo", "tor-1", false},
		{"inc-demo", "tor0/../../x", false},
		{"inc-demo", "r0s0", false},
		{"", "tor0", false},
	} {
		if err := checkToR(c.lab, c.tor); (err == nil) != c.ok {
			t.Errorf("checkToR(%q, %q) = %v", c.lab, c.tor, err)
		}
	}
}
