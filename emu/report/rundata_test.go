package report

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/ocsemu/ocsemu/emu/fidelity"
	"github.com/ocsemu/ocsemu/emu/hoststat"
	"github.com/ocsemu/ocsemu/workers/record"
)

// A run with a data file: the data file reads back as written, and the
// report shows its verdict (every line, its status and why), the
// calibrated and TCP-aware columns, a TCP-aware row per job in the
// timeline, and the attribution table.
func TestReportShowsVerdictAndAttribution(t *testing.T) {
	dir := copyRun(t, "testdata/quickstart")
	var cmp struct {
		Compare []Comparison `json:"comparison"`
	}
	if err := readJSON(filepath.Join(dir, "comparison.json"), &cmp); err != nil {
		t.Fatal(err)
	}
	cal := append([]Comparison(nil), cmp.Compare...)
	for i := range cal {
		cal[i].PredictedNs = cal[i].PredictedNs * 1514 / 1448
	}
	d := &RunData{TimeZeroNs: 5e9, Comparison: cmp.Compare, ComparisonCalibrated: cal,
		Verdict: fidelity.Verdict{Status: fidelity.Fail, Lines: []fidelity.Line{
			{Check: "foreign load", Status: fidelity.Fail, Figure: "other processes took 48.0% of all CPUs", Why: "a <hog> competed"},
			{Check: "model accuracy", Status: fidelity.Pass, Figure: "median 2.0%"},
		}},
		Attribution: []fidelity.Attribution{{Job: "ring", Iteration: 1, Phase: "allreduce", IdealNs: 201e6, CalibratedNs: 210e6, MeasuredNs: 240e6,
			RelErr: 0.14, Parts: map[string]int64{fidelity.PartFraming: 9e6, fidelity.PartCPU: 25e6, fidelity.PartResidual: 5e6},
			Link: &fidelity.LinkUse{Link: "tor1:up0", OwnNs: 100e6, OthersNs: 120e6, IdleNs: 20e6, ModelOwnNs: 95e6, ModelOthersNs: 112.5e6, ModelIdleNs: 15e6}}},
		Series:      Series{HostCPU: []hoststat.Sample{{TNs: 100e6, Busy: 1, Foreign: 0.48}}},
		Measurement: &record.Run{}, Prediction: &record.Run{},
	}
	var tcp record.Run
	if err := readJSON(filepath.Join(dir, "prediction.json"), &tcp); err != nil {
		t.Fatal(err)
	}
	d.TCPAware = &tcp
	if err := WriteRunData(dir, d); err != nil {
		t.Fatal(err)
	}
	back, err := ReadRunData(dir)
	if err != nil {
		t.Fatal(err)
	}
	a, _ := json.Marshal(d)
	b, _ := json.Marshal(back)
	if string(a) != string(b) {
		t.Errorf("data file does not read back as written:\n%s\n%s", a, b)
	}
	html := render(t, dir)
	for _, want := range []string{"Fidelity verdict: <span class=\"v-fail\">fail", "other processes took 48.0% of all CPUs", "a &lt;hog&gt; competed",
		"<th>calibrated ms</th>", "<th>TCP-aware ms</th>", "<table id=\"attribution\">", ">ring TCP-aware</text>", "ring TCP-aware: iteration 0 allreduce", "<tr class=\"attr\"><td class=\"l\">ring</td><td>1</td>", "<td>25.00</td>", `<ul id="attribution-links"><li>ring 1 allreduce on tor1:up0: own 42% (43), others 50% (51), idle 8% (7)</li></ul>`,
		"<p id=\"attribution-tally\" class=\"note\">1 phase more than 10% off the TCP-aware model in the run; the parts explain 1 of them to within 5 points."} {
		if !strings.Contains(html, want) {
			t.Errorf("report lacks %q: %s", want, regexp.MustCompile(`<tr class="attr">.*`).FindString(html))
		}
	}
}

func TestRunDataRefusesOtherFormats(t *testing.T) {
	dir := t.TempDir()
	if _, err := ReadRunData(dir); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("no data file: %v, want ErrNotExist (older runs have none)", err)
	}
	if err := os.WriteFile(filepath.Join(dir, DataFile), []byte("not gzip"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadRunData(dir); err == nil || !strings.Contains(err.Error(), DataFile) {
		t.Errorf("a corrupt data file: %v", err)
	}
}

// A small compressed file must not make the report take gigabytes: a
// list of records holds objects only, and the data is bounded
// uncompressed.
func TestRunDataRefusesBombs(t *testing.T) {
	write := func(dir string, parts ...[]byte) {
		var b bytes.Buffer
		zw := gzip.NewWriter(&b)
		for _, p := range parts {
			zw.Write(p)
		}
		zw.Close()
		if err := os.WriteFile(filepath.Join(dir, DataFile), b.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	tests := []struct {
		name  string
		parts [][]byte
		want  string
	}{
		{"a list of zeros", [][]byte{[]byte(`{"format":"x","series":{"tcp":[0`), bytes.Repeat([]byte(",0"), 1<<20), []byte(`]}}`)}, "element 0 is not an object"},
		{"too much uncompressed", [][]byte{[]byte(`{"format": `), bytes.Repeat([]byte(" "), MaxDataBytes), []byte(`"x"}`)}, "more than 64 MiB uncompressed"},
		{"a list that is no list", [][]byte{[]byte(`{"format":"x","series":{"rank_phases":{"a":1}}}`)}, "want a list of objects"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			write(dir, tt.parts...)
			if _, err := ReadRunData(dir); err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("ReadRunData: %v, want %q", err, tt.want)
			}
		})
	}
}

func TestObjectsRoundTrip(t *testing.T) {
	var s Series
	in := `{"host_cpu":null,"shapers":null,"tcp":[{"a":1},{"b":[2]}],"rank_phases":null}`
	if err := json.Unmarshal([]byte(in), &s); err != nil {
		t.Fatal(err)
	}
	if len(s.TCP) != 2 || string(s.TCP[1]) != `{"b":[2]}` || s.RankPhases != nil {
		t.Errorf("decoded %q, %v", s.TCP, s.RankPhases)
	}
	out, err := json.Marshal(s)
	if err != nil || string(out) != in {
		t.Errorf("encoded %s, %v; want %s", out, err, in)
	}
}
