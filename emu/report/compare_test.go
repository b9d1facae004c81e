package report

import (
	"bytes"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func near(a, b float64) bool { return math.Abs(a-b) <= 1e-6*math.Max(1, math.Abs(b)) }

func TestCompareAggregates(t *testing.T) {
	tab, err := CompareRuns([]string{"testdata/quickstart", "testdata/plan-demo"})
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(tab.Kinds, ","); got != "allreduce,alltoall,compute,pull,push" {
		t.Errorf("kinds = %s", got)
	}
	for i, want := range []struct {
		name, lab, sched, mode string
		pred, meas             int64
		err                    float64
		predMean, measMean     float64
		predMax, measMax       int64
		reconfigs              int
		kindErr                map[string]float64
	}{
		{"quickstart", "quickstart", "fcfs", "clock", 1327959557, 1465119947, 137160390.0 / 1327959557,
			(693979776 + 1327959557) / 2.0, (998789089 + 1465119947) / 2.0, 1327959557, 1465119947, 0,
			map[string]float64{"allreduce": 0.536439, "compute": 0.079266, "pull": 0.301122, "push": 0.066914}},
		{"plan-demo", "plan-demo", "fcfs", "clock", 1676612736, 1884553518, (1884553518.0 - 1676612736) / 1676612736,
			(1676612736 + 631939141 + 97775531) / 3.0, (1884553518 + 793405383 + 233410629) / 3.0, 1676612736, 1884553518, 2,
			map[string]float64{"allreduce": 0.267276, "alltoall": 2.10289, "compute": 0.348513, "pull": 0.695545, "push": 0.454983}},
	} {
		r := tab.Rows[i]
		if r.Name != want.name || r.Lab != want.lab || r.Scheduler != want.sched || r.Mode != want.mode {
			t.Errorf("row %d: %s %s %s %s", i, r.Name, r.Lab, r.Scheduler, r.Mode)
		}
		if r.PredMakespanNs != want.pred || r.MeasMakespanNs != want.meas || !near(r.MakespanErr, want.err) {
			t.Errorf("row %d makespan: %d %d %v, want %d %d %v", i, r.PredMakespanNs, r.MeasMakespanNs, r.MakespanErr, want.pred, want.meas, want.err)
		}
		if !near(r.PredMeanJCTNs, want.predMean) || !near(r.MeasMeanJCTNs, want.measMean) || r.PredMaxJCTNs != want.predMax || r.MeasMaxJCTNs != want.measMax {
			t.Errorf("row %d JCT: mean %v %v max %d %d", i, r.PredMeanJCTNs, r.MeasMeanJCTNs, r.PredMaxJCTNs, r.MeasMaxJCTNs)
		}
		if r.Reconfigs != want.reconfigs {
			t.Errorf("row %d reconfigurations = %d, want %d", i, r.Reconfigs, want.reconfigs)
		}
		if len(r.KindErr) != len(want.kindErr) {
			t.Errorf("row %d kinds = %v", i, r.KindErr)
		}
		for k, e := range want.kindErr {
			if math.Abs(r.KindErr[k]-e) > 1e-6 {
				t.Errorf("row %d %s mean error = %v, want %v", i, k, r.KindErr[k], e)
			}
		}
	}
	if got := tab.Rows[0].KindErrs(tab.Kinds); got[1] != "-" || got[0] != "+53.6%" {
		t.Errorf("quickstart per-kind cells = %v (no alltoall: -)", got)
	}
	var text bytes.Buffer
	if err := tab.WriteText(&text); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(text.String()), "\n")
	if len(lines) != 3 || !strings.Contains(lines[1], "+10.3%") || !strings.Contains(lines[2], "+210.3%") {
		t.Errorf("text table:\n%s", text.String())
	}
}

func TestCompareHTML(t *testing.T) {
	dirs := []string{"testdata/quickstart", "testdata/plan-demo", "testdata/quickstart"}
	tab, err := CompareRuns(dirs)
	if err != nil {
		t.Fatal(err)
	}
	tab.Rows[2].Lab = `<script>alert("x")</script>`
	page, err := RenderCompare(tab)
	if err != nil {
		t.Fatal(err)
	}
	html := string(page)
	if n := strings.Count(html, `<tr class="run">`); n != len(dirs) {
		t.Errorf("%d run rows, want %d", n, len(dirs))
	}
	if n := strings.Count(html, `<rect class="bar"`); n != 2*len(dirs) {
		t.Errorf("%d makespan bars, want %d", n, 2*len(dirs))
	}
	low := strings.ToLower(html)
	for _, bad := range []string{"http://", "https://", "<script", "src=", "@import"} {
		if strings.Contains(low, bad) {
			t.Errorf("page holds %q: it must be offline and script-free", bad)
		}
	}
	if !strings.Contains(html, "&lt;script&gt;") {
		t.Error("the lab name is not escaped")
	}
}

func TestCompareRefuses(t *testing.T) {
	if _, err := CompareRuns([]string{"testdata/quickstart"}); err == nil || !strings.Contains(err.Error(), "2 or more") {
		t.Errorf("one run: err = %v", err)
	}
	broken := copyRun(t, "testdata/plan-demo")
	if err := os.Remove(filepath.Join(broken, "measurement.json")); err != nil {
		t.Fatal(err)
	}
	_, err := CompareRuns([]string{"testdata/quickstart", broken})
	if err == nil || !strings.Contains(err.Error(), broken) || !strings.Contains(err.Error(), "missing measurement.json") {
		t.Errorf("incomplete run: err = %v", err)
	}
	if _, err := CompareRuns([]string{"testdata/quickstart", "testdata/nope"}); err == nil || !strings.Contains(err.Error(), "testdata/nope") {
		t.Errorf("no such directory: err = %v", err)
	}
}
