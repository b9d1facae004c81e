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

func TestNodeNames(t *testing.T) {
	for _, tc := range []struct {
		name      string
		rack, idx int
		ok        bool
	}{
		{"r0s0", 0, 0, true},
		{"r12s3", 12, 3, true},
		{"r4095s249", 4095, 249, true},
		{"r01s0", 0, 0, false},
		{"r-1s0", 0, 0, false},
		{"r+1s0", 0, 0, false},
		{"r1s", 0, 0, false},
		{"rs1", 0, 0, false},
		{"tor1", 0, 0, false},
		{"r1s1x", 0, 0, false},
		{"r99999999999s0", 0, 0, false},
	} {
		r, i, ok := ParseServer(tc.name)
		if ok != tc.ok || (ok && (r != tc.rack || i != tc.idx)) {
			t.Errorf("ParseServer(%q) = %d, %d, %v; want %d, %d, %v", tc.name, r, i, ok, tc.rack, tc.idx, tc.ok)
		}
		if ok && ServerName(r, i) != tc.name {
			t.Errorf("ServerName(%d, %d) = %q, want %q", r, i, ServerName(r, i), tc.name)
		}
	}
	for _, tc := range []struct {
		name string
		rack int
		ok   bool
	}{{"tor0", 0, true}, {"tor17", 17, true}, {"tor017", 0, false}, {"tor", 0, false}, {"r0s0", 0, false}, {"tor-1", 0, false}} {
		r, ok := ParseToR(tc.name)
		if ok != tc.ok || (ok && r != tc.rack) {
			t.Errorf("ParseToR(%q) = %d, %v; want %d, %v", tc.name, r, ok, tc.rack, tc.ok)
		}
		if ok && ToRName(r) != tc.name {
			t.Errorf("ToRName(%d) = %q", r, ToRName(r))
		}
	}
	if got := NSName("lab", "tor3"); got != "emu-lab.tor3" {
		t.Errorf("NSName = %q", got)
	}
	if got := OCSPortIface(12, 3); got != "tor12u3" {
		t.Errorf("OCSPortIface = %q", got)
	}
	if got := UplinkIface(7) + OCSName(2); got != "up7ocs2" {
		t.Errorf("UplinkIface+OCSName = %q", got)
	}
}

func TestLabOfNS(t *testing.T) {
	for _, tc := range []struct {
		ns, lab string
		ok      bool
	}{
		{"emu-q.r0s0", "q", true},
		{"emu-a-b.tor1", "a-b", true},
		{"emu-.x", "", false},
		{"emu-a*b.x", "", false},
		{"emu-..x", "", false},
		{"other.x", "", false},
		{"emu-nodot", "", false},
	} {
		lab, ok := LabOfNS(tc.ns)
		if ok != tc.ok || (ok && lab != tc.lab) {
			t.Errorf("LabOfNS(%q) = %q, %v; want %q, %v", tc.ns, lab, ok, tc.lab, tc.ok)
		}
	}
}
