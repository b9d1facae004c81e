package reproduce

import (
	"context"
	"strconv"
	"testing"

	"github.com/ocsemu/ocsemu/emu/dlrm"
	"github.com/ocsemu/ocsemu/emu/plan"
)

// The synthesised DLRM graph checks as a plan job, in a topological order.
func TestDLRMJob(t *testing.T) {
	j, err := DLRMJob(dlrm.DLRM2, 16, 1, 10e6, 2)
	if err != nil {
		t.Fatal(err)
	}
	// 16 emb + 16 bot + 240 a2f + 16 top + 16 topb + 240 a2b + 16 botb + 4 x 16 ar + 16 embu + 16 upd
	if got, want := len(j.Tasks), 16*7+4*16+2*240; got != want {
		t.Errorf("%d tasks, want %d", got, want)
	}
	var a2f int64
	for _, tk := range j.Tasks {
		if tk.Name == "a2f-0-1" {
			a2f = tk.Bytes
		}
	}
	if a2f != 4*256*256*4 { // 1 table x 4 GPUs x 256 samples x 256 floats
		t.Errorf("a2f-0-1 carries %d B, want 1 MiB", a2f)
	}
	s := Paper004Fabric(16, 4, 4, 10)
	p := &plan.Plan{Version: plan.Version, Mode: plan.ModeClock, Jobs: []plan.Job{j}}
	if err := plan.Check(p, s); err == nil {
		t.Fatal("a plan without stages checks")
	}
}

// The quick study (rows 5 and 14): topox is faster than static where
// bandwidth is scarce (row 5); topox lands within 15% of the paper's
// TOPO-X figure at both rows, while our static is faster than the paper's
// TopoOpt at row 5 (where the gap to the paper's speed-up comes from).
func TestPaper004Quick(t *testing.T) {
	st, err := Lookup("paper004")
	if err != nil {
		t.Fatal(err)
	}
	tables, err := st.Run(context.Background(), Options{Quick: true})
	if err != nil {
		t.Fatal(err)
	}
	rows := tables[0].Rows
	col := func(r, c int) float64 {
		v, err := strconv.ParseFloat(rows[r][c], 64)
		if err != nil {
			t.Fatalf("row %d column %d: %v", r, c, err)
		}
		return v
	}
	if sp5 := col(0, 7); sp5 <= 1 {
		t.Errorf("row 5 speed-up %.2f, want > 1", sp5)
	}
	for r, no := range []int{5, 14} {
		if x := col(r, 11); x < 0.85 || x > 1.15 {
			t.Errorf("row %d: topox / paper Topo-X %.2f, want within 15%%", no, x)
		}
	}
	if s5 := col(0, 12); s5 >= 1 {
		t.Errorf("row 5: static / paper TopoOpt %.2f, want below 1", s5)
	}
	t.Log(rows)
}
