package reproduce

import (
	"context"
	"strconv"
	"testing"
)

// The quick paper 003 study runs both designs, and ODDL comes out no
// faster than the ideal network it is compared with, and within 1% of it.
func TestPaper003Quick(t *testing.T) {
	s, err := Lookup("paper003")
	if err != nil {
		t.Fatal(err)
	}
	tables, err := s.Run(context.Background(), Options{Quick: true})
	if err != nil {
		t.Fatal(err)
	}
	rows := tables[0].Rows
	eps, _ := strconv.ParseFloat(rows[0][2], 64)
	oddl, _ := strconv.ParseFloat(rows[1][2], 64)
	if eps < 97.2 || eps > 97.4 {
		t.Errorf("eps %.2f min, want the calibrated 97.3", eps)
	}
	if oddl < eps || oddl > eps*1.01 {
		t.Errorf("oddl %.2f min against eps %.2f: want within 1%% and not faster", oddl, eps)
	}
}
