package report

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/ocsemu/ocsemu/workers/record"
)

// render builds the report of a fixture run directory and returns its HTML.
func render(t *testing.T, dir string) string {
	t.Helper()
	p, err := Write(dir)
	if err != nil {
		t.Fatal(err)
	}
	if p != filepath.Join(dir, File) {
		t.Errorf("Write returned %s, want %s", p, filepath.Join(dir, File))
	}
	data, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

// copyRun copies a fixture run directory into a temporary one, so the
// report written there leaves testdata alone.
func copyRun(t *testing.T, src string) string {
	t.Helper()
	dst := t.TempDir()
	err := filepath.Walk(src, func(p string, fi os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		if fi.IsDir() {
			return os.MkdirAll(filepath.Join(dst, rel), 0o755)
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dst, rel), data, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
	return dst
}

func wholeJobPhases(t *testing.T, path string) int {
	t.Helper()
	var r record.Run
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, &r); err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, p := range r.Phases {
		if p.Rank == -1 {
			n++
		}
	}
	return n
}

func TestQuickstartReport(t *testing.T) {
	dir := copyRun(t, "testdata/quickstart")
	html := render(t, dir)
	// The fixture: 2 jobs x 3 iterations; ring has 2 phases, ps 3: 15
	// phases, each drawn once predicted and once measured.
	pred, meas := wholeJobPhases(t, filepath.Join(dir, "prediction.json")), wholeJobPhases(t, filepath.Join(dir, "measurement.json"))
	if pred != 15 || meas != 15 {
		t.Fatalf("fixture holds %d predicted and %d measured phases, want 15 each", pred, meas)
	}
	if n := strings.Count(html, `<rect class="phase"`); n != pred+meas {
		t.Errorf("%d phase rects, want %d (predicted and measured per phase)", n, pred+meas)
	}
	if n := strings.Count(html, "predicted: iteration"); n != pred {
		t.Errorf("%d predicted phase tooltips, want %d", n, pred)
	}
	if n := strings.Count(html, "measured: iteration"); n != meas {
		t.Errorf("%d measured phase tooltips, want %d", n, meas)
	}
	if n := strings.Count(html, `<tr class="err">`); n != 15 {
		t.Errorf("%d error table rows, want 15", n)
	}
	// One of them, from comparison.json: ring iteration 2 allreduce.
	if !regexp.MustCompile(`<td class="l">ring</td><td>2</td><td class="l">allreduce</td><td>201.33</td><td>387.95</td><td class="pos">&#43;92.7%</td>`).MatchString(html) {
		t.Error("the error table lacks ring/2/allreduce 201.33 ms predicted, 387.95 ms measured, +92.7%")
	}
	for _, want := range []string{
		"predicted 1327.96 ms, measured 1465.12 ms (&#43;10.3%)", // header makespan (html/template writes + as &#43;)
		"packet core, no circuits",
		`<td class="l">all phases</td><td>15</td>`,
		"eps fabric, 4 racks × 2 servers",
		`<svg id="timeline"`, `<svg class="tcp"`,
		"rank 0 → rank 1", "ps → rank 0",
	} {
		if !strings.Contains(html, want) {
			t.Errorf("report lacks %q", want)
		}
	}
	if n := strings.Count(html, `<svg class="tcp"`); n != 2 {
		t.Errorf("%d TCP charts, want one per job (2)", n)
	}
	if n := strings.Count(html, `<line class="stage"`); n == 0 {
		t.Error("no stage boundaries drawn")
	}
	for _, ext := range []string{"http://", "https://", "<script", "<link", "@import", "src="} {
		if strings.Contains(html, ext) {
			t.Errorf("report holds %q: it must need nothing from outside", ext)
		}
	}
}

func TestOCSReportShowsCircuitsAndReconfigurations(t *testing.T) {
	html := render(t, copyRun(t, "testdata/plan-demo"))
	for _, want := range []string{
		`<tr><td>0</td><td>0.00</td><td>0.00</td><td>5</td><td class="l">r0–r1 ×2, r0–r3, r1–r2, r2–r3</td><td class="l">initial</td></tr>`,
		`<tr><td>1–2</td><td>50.00</td><td>50.00</td><td>6</td><td class="l">r0–r1 ×2, r0–r3, r1–r2, r2–r3 ×2</td><td class="l">reconfigured</td></tr>`,
		`<tr><td>3–33</td><td>150.00</td><td>150.00</td><td>5</td>`,
	} {
		if !strings.Contains(html, want) {
			t.Errorf("circuit table lacks %q", want)
		}
	}
	if strings.Contains(html, "packet core, no circuits") {
		t.Error("an OCS run is reported as a packet core")
	}
	// Circuits change at 50 ms and 150 ms: two dashed lines per TCP chart.
	charts := strings.Count(html, `<svg class="tcp"`)
	if charts == 0 {
		t.Fatal("no TCP charts")
	}
	if n := strings.Count(html, `<line class="reconf"`); n != 2*charts {
		t.Errorf("%d reconfiguration marks over %d charts, want 2 per chart", n, charts)
	}
}

// Every string from the run's files is untrusted: a job called <script>
// must come out as text.
func TestReportEscapes(t *testing.T) {
	dir := copyRun(t, "testdata/quickstart")
	evil := `<script>alert("x")</script>`
	quoted, _ := json.Marshal(evil)
	files, _ := filepath.Glob(filepath.Join(dir, "records", "*.jsonl"))
	files = append(files, filepath.Join(dir, "plan.json"), filepath.Join(dir, "prediction.json"),
		filepath.Join(dir, "measurement.json"), filepath.Join(dir, "comparison.json"))
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		data = regexp.MustCompile(`"job":\s*"ring"`).ReplaceAll(data, []byte(`"job":`+string(quoted)))
		data = regexp.MustCompile(`"name":\s*"ring"`).ReplaceAll(data, []byte(`"name":`+string(quoted)))
		if err := os.WriteFile(f, data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	html := render(t, dir)
	if strings.Contains(html, "<script") {
		t.Error("the job name reached the HTML unescaped")
	}
	if n := strings.Count(html, "&lt;script&gt;"); n < 3 {
		t.Errorf("escaped job name found %d times, want it in the timeline, tables and charts", n)
	}
}

func TestLoadNamesWhatIsMissing(t *testing.T) {
	dir := copyRun(t, "testdata/quickstart")
	if err := os.Remove(filepath.Join(dir, "comparison.json")); err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(filepath.Join(dir, "records")); err != nil {
		t.Fatal(err)
	}
	_, err := Load(dir)
	if err == nil || !strings.Contains(err.Error(), "missing comparison.json, records") {
		t.Errorf("Load = %v, want it to name comparison.json and records", err)
	}
	if _, err := Load(filepath.Join(dir, "plan.json")); err == nil || !strings.Contains(err.Error(), "not a directory") {
		t.Errorf("Load(file) = %v, want 'not a directory'", err)
	}
	if _, err := Load(filepath.Join(dir, "nope")); err == nil {
		t.Error("Load of a missing directory succeeded")
	}
	bad := copyRun(t, "testdata/quickstart")
	if err := os.WriteFile(filepath.Join(bad, "measurement.json"), []byte("{"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(bad); err == nil || !strings.Contains(err.Error(), "measurement.json") {
		t.Errorf("Load with broken measurement.json = %v, want it named", err)
	}
}

// The report is pure: it links no kernel code (docs/architecture.md).
func TestReportLinksNoKernel(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", ".").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	for _, d := range strings.Fields(string(out)) {
		for _, k := range []string{"github.com/vishvananda/", "github.com/cilium/ebpf"} {
			if strings.HasPrefix(d, k) {
				t.Errorf("emu/report depends on %s", d)
			}
		}
	}
}

func TestMsText(t *testing.T) {
	for ns, want := range map[int64]string{0: "0.00", -11: "0.00", -4_999: "0.00", 1_234_567: "1.23", -5_000_000: "-5.00"} {
		if got := msText(ns); got != want {
			t.Errorf("msText(%d) = %q, want %q", ns, got, want)
		}
	}
}
