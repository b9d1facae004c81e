package labs

import (
	"os"
	"path/filepath"
	"testing"
)

func TestMadeByCheck(t *testing.T) {
	tmp := os.TempDir()
	for _, tt := range []struct {
		source, lab string
		want        bool
	}{
		{filepath.Join(tmp, "emu-lab-123456", "qs-check.yaml"), "qs-check", true},
		{filepath.Join(tmp, "emu-lab-123456", "other.yaml"), "qs-check", false},
		{"scenarios/quickstart.yaml", "quickstart", false},
		{"quickstart", "quickstart", false},
		{filepath.Join(tmp, "emu-lab-1", "deeper", "qs-check.yaml"), "qs-check", false},
		{filepath.Join(tmp, "mine", "qs-check.yaml"), "qs-check", false},
		{"/var/tmp/emu-lab-99/qs-check.yaml", "qs-check", true}, // TMPDIR changed since
		{"emu-lab-1/qs-check.yaml", "qs-check", false},
	} {
		if got := madeByCheck(tt.source, tt.lab); got != tt.want {
			t.Errorf("madeByCheck(%q, %q) = %v, want %v", tt.source, tt.lab, got, tt.want)
		}
	}
}
