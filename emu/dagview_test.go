package main

import (
	"fmt"
	"testing"

	"github.com/ocsemu/ocsemu/emu/fidelity"
)

// The terminal's worst rows are the worst by the error the attribution is
// judged by (TCP-aware where present), not by the calibrated one.
func TestWorstAttributionsByJudgedError(t *testing.T) {
	var as []fidelity.Attribution
	for i := range maxAttributionRows + 5 {
		// Calibrated errors grow with i, TCP-aware errors shrink with i.
		as = append(as, fidelity.Attribution{Job: fmt.Sprint(i), RelErr: float64(i), TCPAwareNs: 1, RelErrTCP: -float64(100 - i)})
	}
	got, note := worstAttributions(as)
	if len(got) != maxAttributionRows || note == "" {
		t.Fatalf("%d rows, note %q: want %d and a note", len(got), note, maxAttributionRows)
	}
	for k, a := range got {
		if want := fmt.Sprint(k); a.Job != want {
			t.Fatalf("row %d is job %s, want %s (largest |TCP-aware error| first)", k, a.Job, want)
		}
	}
}
