package scenario

import (
	"strings"
	"testing"
)

func TestRename(t *testing.T) {
	tests := []struct {
		name, lab    string
		wantErr      string
		wantName     string
		fits, refits []string // plan scenario names that fit, and that do not
	}{
		{name: "a name of one's own", lab: "alice-qs", wantName: "alice-qs", fits: []string{"quickstart", "alice-qs"}, refits: []string{"other", ""}},
		{name: "the same name", lab: "quickstart", wantName: "quickstart", fits: []string{"quickstart"}, refits: []string{"alice-qs"}},
		{name: "a path", lab: "../etc", wantErr: "invalid lab name", wantName: "quickstart", fits: []string{"quickstart"}, refits: []string{"../etc"}},
		{name: "upper case", lab: "Alice", wantErr: "invalid lab name", wantName: "quickstart", fits: []string{"quickstart"}},
		{name: "a glob", lab: "q*", wantErr: "invalid lab name", wantName: "quickstart", fits: []string{"quickstart"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := &Scenario{Name: "quickstart"}
			err := s.Rename(tt.lab)
			if tt.wantErr == "" && err != nil || tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)) {
				t.Fatalf("Rename(%q) = %v, want error %q", tt.lab, err, tt.wantErr)
			}
			if s.Name != tt.wantName {
				t.Errorf("Name = %q, want %q", s.Name, tt.wantName)
			}
			for _, p := range tt.fits {
				if !s.Fits(p) {
					t.Errorf("a plan for %q does not fit, want it to", p)
				}
			}
			for _, p := range tt.refits {
				if s.Fits(p) {
					t.Errorf("a plan for %q fits, want it refused", p)
				}
			}
		})
	}
	// Renamed twice, the scenario's own name still fits.
	s := &Scenario{Name: "quickstart"}
	_ = s.Rename("a1")
	_ = s.Rename("a2")
	if !s.Fits("quickstart") || s.Fits("a1") {
		t.Errorf("renamed twice: fits quickstart %v (want true), a1 %v (want false)", s.Fits("quickstart"), s.Fits("a1"))
	}
}
