package report

import (
	"encoding/json"
	"math"
	"regexp"
	"strings"
	"testing"

	"github.com/ocsemu/ocsemu/ocsfabric/circuit"
	"github.com/ocsemu/ocsemu/workers/record"
)

func TestRateSteps(t *testing.T) {
	const ms = int64(1e6)
	for _, tc := range []struct {
		name  string
		t     []int64
		bytes []uint64
		want  []rateStep
	}{
		{"none", nil, nil, nil},
		{"one sample", []int64{0}, []uint64{5}, nil},
		{"steady", []int64{0, 100 * ms, 200 * ms}, []uint64{0, 12_500_000, 12_500_000},
			// 12.5 MB in 100 ms = 1000 Mbit/s, then idle.
			[]rateStep{{0, 100 * ms, 12_500_000, 1000}, {100 * ms, 200 * ms, 0, 0}}},
		{"counter reset breaks the line", []int64{0, 100 * ms, 200 * ms, 300 * ms}, []uint64{1000, 1_250_000 + 1000, 500, 1_250_500},
			[]rateStep{{0, 100 * ms, 1_250_000, 100}, {200 * ms, 300 * ms, 1_250_000, 100}}},
		{"missing samples: one step at the mean", []int64{0, 100 * ms, 400 * ms}, []uint64{0, 1_250_000, 5_000_000},
			[]rateStep{{0, 100 * ms, 1_250_000, 100}, {100 * ms, 400 * ms, 3_750_000, 100}}},
		{"time not advancing is skipped", []int64{0, 0, 100 * ms}, []uint64{0, 7, 1_250_000},
			[]rateStep{{0, 100 * ms, 1_250_000, 100}}},
		{"a late stamp: the short interval merges with the long one before it", []int64{0, 20 * ms, 100 * ms, 102 * ms, 122 * ms},
			// 20→100 read 0.1 MB, 100→102 read 3.9 MB (15.6 Gbit/s on a 1 Gbit/s port): one 82 ms step.
			[]uint64{0, 2_500_000, 2_600_000, 6_500_000, 9_000_000},
			[]rateStep{{0, 20 * ms, 2_500_000, 1000}, {20 * ms, 102 * ms, 4_000_000, 4_000_000 * 8e3 / float64(82*ms)}, {102 * ms, 122 * ms, 2_500_000, 1000}}},
		{"a short first interval merges with the next", []int64{0, 2 * ms, 22 * ms, 42 * ms}, []uint64{0, 1_000_000, 2_500_000, 5_000_000},
			[]rateStep{{0, 22 * ms, 2_500_000, 2_500_000 * 8e3 / float64(22*ms)}, {22 * ms, 42 * ms, 2_500_000, 1000}}},
		{"a short last interval merges with the one before", []int64{0, 20 * ms, 40 * ms, 41 * ms}, []uint64{0, 2_500_000, 5_000_000, 5_500_000},
			[]rateStep{{0, 20 * ms, 2_500_000, 1000}, {20 * ms, 41 * ms, 3_000_000, 3_000_000 * 8e3 / float64(21*ms)}}},
		{"no merge across a counter reset", []int64{0, 20 * ms, 40 * ms, 41 * ms, 62 * ms, 82 * ms}, []uint64{0, 2_500_000, 5_000_000, 100, 2_625_100, 5_125_100},
			// 40→41 ms is short but the counter went down: a break, and the
			// 41→62 ms interval keeps its bytes.
			[]rateStep{{0, 20 * ms, 2_500_000, 1000}, {20 * ms, 40 * ms, 2_500_000, 1000}, {41 * ms, 62 * ms, 2_625_000, 1000}, {62 * ms, 82 * ms, 2_500_000, 1000}}},
		{"unequal lengths use the shorter", []int64{0, 100 * ms, 200 * ms}, []uint64{0, 1_250_000},
			[]rateStep{{0, 100 * ms, 1_250_000, 100}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := rateSteps(tc.t, tc.bytes)
			if len(got) != len(tc.want) {
				t.Fatalf("got %+v, want %+v", got, tc.want)
			}
			for i := range got {
				g, w := got[i], tc.want[i]
				if g.T0 != w.T0 || g.T1 != w.T1 || g.Bytes != w.Bytes || math.Abs(g.Mbps-w.Mbps) > 1e-9 {
					t.Errorf("step %d: got %+v, want %+v", i, g, w)
				}
			}
		})
	}
}

// A testdata run given a data file with shaper counters and OCS events:
// the report draws a strip per busy port with its line and rate, shades
// the dark period on the port that went dark, and says how many idle
// ports it left out.
func TestReportShowsThroughputPerPort(t *testing.T) {
	dir := copyRun(t, "testdata/quickstart")
	const ms = int64(1e6)
	ts := []int64{0, 100 * ms, 200 * ms, 300 * ms}
	ev, _ := json.Marshal(map[string]any{"kind": "slot", "effective_ns": 150 * ms, "dark_until_ns": 151 * ms, "dark": []string{"tor0:1"}})
	d := &RunData{Measurement: &record.Run{}, Prediction: &record.Run{},
		Series: Series{
			Shapers: []ShaperSeries{
				{Link: "tor0:up1", RateBps: 125_000_000, TNs: ts, Bytes: []uint64{0, 12_500_000, 12_500_000, 20_000_000}},
				{Link: "r0s0:eth0", RateBps: 125_000_000, TNs: ts, Bytes: []uint64{0, 6_250_000, 12_500_000, 18_750_000}},
				{Link: "tor1:up0", RateBps: 125_000_000, TNs: ts, Bytes: []uint64{300, 300, 300, 300}},
			},
			OCSEvents: []json.RawMessage{ev},
		}}
	if err := WriteRunData(dir, d); err != nil {
		t.Fatal(err)
	}
	html := render(t, dir)
	for _, want := range []string{"<h2>Throughput per port</h2>", `<svg class="throughput" id="throughput"`,
		">tor0:up1</text>", ">r0s0:eth0</text>", "peak 1000 Mbit/s", "peak 500 Mbit/s",
		"1 of 3 shaped ports never carried traffic and are left out", "configured rate 1000 Mbit/s", "dark 150.00–151.00 ms: tor0:1"} {
		if !strings.Contains(html, want) {
			t.Errorf("report lacks %q", want)
		}
	}
	if strings.Contains(html, ">tor1:up0</text>") {
		t.Error("the idle port tor1:up0 is drawn")
	}
	if n := strings.Count(html, `<g class="port">`); n != 2 {
		t.Errorf("%d port strips, want 2", n)
	}
	if n := strings.Count(html, `<rect class="dark-own"`); n != 1 {
		t.Errorf("%d own dark bands, want 1 (tor0:up1 only)", n)
	}
	m := regexp.MustCompile(`<svg class="throughput"[\s\S]*?</svg>`).FindString(html)
	if strings.Count(m, "<polyline") != 2 {
		t.Errorf("throughput svg has %d lines, want 2", strings.Count(m, "<polyline"))
	}
}

// A run without a data file says so instead of drawing.
func TestReportThroughputWithoutData(t *testing.T) {
	html := render(t, copyRun(t, "testdata/quickstart"))
	if !strings.Contains(html, `<p id="throughput" class="note">This run has no data file`) {
		t.Error("report of a run without data file does not say why it has no throughput")
	}
}

func TestOnUplink(t *testing.T) {
	u := circuit.Uplink{Rack: 2, Port: 1}
	for link, want := range map[string]bool{"tor2:up1": true, "ocs0:tor2u1": true, "ocs3:tor2u1": true, "tor2:up11": false, "tor12:up1": false, "r2s1:eth0": false, "tor2:s1": false, "ocs0:tor2u11": false} {
		if got := onUplink(link, u); got != want {
			t.Errorf("onUplink(%q, %v) = %v, want %v", link, u, got, want)
		}
	}
}

func TestSampleInterval(t *testing.T) {
	for _, tc := range []struct {
		ts   []int64
		want string
	}{
		{[]int64{0, 20e6, 40e6, 61e6, 80e6}, "20 ms"}, // one late sample
		{[]int64{0, 100e6, 200e6}, "100 ms"},
		{[]int64{5}, "?"},
		{nil, "?"},
	} {
		if got := sampleInterval(tc.ts); got != tc.want {
			t.Errorf("sampleInterval(%v) = %q, want %q", tc.ts, got, tc.want)
		}
	}
}
