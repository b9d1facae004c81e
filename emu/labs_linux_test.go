package main

import (
	"strings"
	"testing"

	"github.com/ocsemu/ocsemu/dataplane/fabric/fabrictest"
	"github.com/ocsemu/ocsemu/dataplane/netns"
)

// TestLabSelftest runs every lab's checks, live ones included, against its
// solution (all pass) and its starting point (exactly the expected ones
// fail), as CI does with `emu lab selftest`.
func TestLabSelftest(t *testing.T) {
	fabrictest.SkipUnlessRoot(t)
	bin := buildEmu(t)
	prefix := fabrictest.UniqueLab("lt")
	labsOf := func() []string {
		var out []string
		for _, n := range []string{"01", "02", "03", "04", "05", "06"} {
			out = append(out, prefix+"-"+n)
		}
		return out
	}
	t.Cleanup(func() {
		for _, l := range labsOf() {
			fabrictest.AssertGone(t, l)
			left, _ := netns.List(l + "-") // lab 01's hand-made namespaces
			if len(left) > 0 {
				t.Errorf("lab 01 left namespaces behind: %v", left)
			}
		}
	})
	out, err := run(t, bin, "lab", "selftest", "--lab-prefix", prefix)
	if err != nil || !strings.Contains(out, "every solution passes, every starting point fails exactly its expected checks") {
		t.Fatalf("emu lab selftest: %v\n%s", err, out)
	}
	if n := strings.Count(out, "checks passed"); n != 12 {
		t.Errorf("%d check runs, want 12 (6 labs x solution, start):\n%s", n, out)
	}
}

func TestLabCheckRefusals(t *testing.T) {
	bin := buildEmu(t)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"lab", "check", "../../etc"}, "invalid lab name"},
		{[]string{"lab", "check", "/tmp"}, "not a lab folder"},
		{[]string{"lab", "check", "99-nothing"}, "no lab named"},
		{[]string{"lab", "check", "02-circuits", "--against", "/nonexistent"}, "want start, solution or a folder"},
		{[]string{"lab", "check", "02-circuits", "--against", "solution", "--lab-name", "../x"}, "invalid lab name"},
		{[]string{"lab", "start", "04", "/proc/forbidden"}, "forbidden"},
	} {
		out, err := run(t, bin, tc.args...)
		if err == nil || !strings.Contains(out, tc.want) {
			t.Errorf("emu %s: %v, want an error with %q:\n%s", strings.Join(tc.args, " "), err, tc.want, out)
		}
	}
	out, err := run(t, bin, "lab", "list")
	if err != nil || strings.Count(out, "checks)") < 5 {
		t.Errorf("emu lab list: %v\n%s", err, out)
	}
}
