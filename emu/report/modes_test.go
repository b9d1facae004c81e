package report

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/ocsemu/ocsemu/emu/fidelity"
)

func TestTwoModes(t *testing.T) {
	const ms = int64(1e6)
	tests := []struct {
		name       string
		xs         []int64
		ok         bool
		fast, slow Mode
	}{
		// The quickstart's first push, 2 and 3 runs: 32.8 ms apart, 12.6%
		// of the median, wider than either group.
		{"two groups", []int64{271 * ms, 227 * ms, 214 * ms, 260 * ms, 275 * ms}, true,
			Mode{Runs: 2, MinNs: 214 * ms, MaxNs: 227 * ms, MedianNs: 220_500_000}, Mode{Runs: 3, MinNs: 260 * ms, MaxNs: 275 * ms, MedianNs: 271 * ms}},
		{"one run apart is not a group", []int64{210 * ms, 260 * ms, 262 * ms, 265 * ms, 270 * ms}, false, Mode{}, Mode{}},
		{"gap below 10% of the median", []int64{200 * ms, 201 * ms, 220 * ms, 221 * ms}, false, Mode{}, Mode{}},
		// 25 ms apart, but the slower group spans 30 ms: one spread.
		{"gap narrower than a group", []int64{200 * ms, 205 * ms, 230 * ms, 260 * ms}, false, Mode{}, Mode{}},
		{"too few runs", []int64{100 * ms, 101 * ms, 200 * ms}, false, Mode{}, Mode{}},
		{"all equal", []int64{5 * ms, 5 * ms, 5 * ms, 5 * ms}, false, Mode{}, Mode{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fast, slow, ok := twoModes(tt.xs)
			if ok != tt.ok || fast != tt.fast || slow != tt.slow {
				t.Errorf("twoModes = %+v, %+v, %v; want %+v, %+v, %v", fast, slow, ok, tt.fast, tt.slow, tt.ok)
			}
		})
	}
}

func TestModesText(t *testing.T) {
	const ms = int64(1e6)
	row := RepeatRow{Job: "ps", Iteration: 0, Phase: "push", Predicted: []int64{201 * ms, 210 * ms, 250 * ms},
		Modes: []Mode{{Runs: 2, MinNs: 210 * ms, MaxNs: 230 * ms, MedianNs: 220 * ms}, {Runs: 3, MinNs: 270 * ms, MaxNs: 280 * ms, MedianNs: 275 * ms}}}
	want := "ps iteration 0 push: 2 runs at 210.0-230.0 ms, 3 at 270.0-280.0 ms; tcp-aware 250.0 ms lies between them: the faster group's median is -12.0% off it, the slower's +10.0%"
	if got := row.ModesText(); got != want {
		t.Errorf("got  %q\nwant %q", got, want)
	}
	row.Predicted[modelTCPAware] = 0 // judged against the calibrated model then
	if got := row.ModesText(); !strings.Contains(got, "calibrated 210.0 ms lies within the faster group: the faster group's median is +4.8% off it, the slower's +31.0%") {
		t.Errorf("without a TCP-aware prediction: %q", got)
	}
	for p, want := range map[int64]string{200 * ms: "below both", 250 * ms: "between them", 275 * ms: "within the slower group", 300 * ms: "above both"} {
		row.Predicted[modelCalibrated] = p
		if got := row.ModesText(); !strings.Contains(got, "lies "+want) {
			t.Errorf("at %d ms: %q, want it to say %q", p/ms, got, want)
		}
	}
	if got := (RepeatRow{}).ModesText(); got != "" {
		t.Errorf("one kind: %q, want nothing", got)
	}
}

// A set whose push ran at 110-112 ms twice and 150-155 ms three times
// names its two kinds in the text, the JSON and the page; one of a single
// kind names none.
func TestRepeatsTwoModes(t *testing.T) {
	set := func(pushes ...float64) *RepeatTable {
		var runs []*Run
		for i, p := range pushes {
			runs = append(runs, fakeRun("run"+string(rune('a'+i)), p, fidelity.Pass))
		}
		tab, err := Repeats(runs)
		if err != nil {
			t.Fatal(err)
		}
		return tab
	}
	tab := set(150, 110, 155, 112, 152)
	push := tab.Rows[1]
	if len(push.Modes) != 2 || push.Modes[0].Runs != 2 || push.Modes[1].Runs != 3 || tab.Rows[0].Modes != nil {
		t.Fatalf("modes: push %+v, compute %+v", push.Modes, tab.Rows[0].Modes)
	}
	var text bytes.Buffer
	if err := tab.WriteText(&text); err != nil {
		t.Fatal(err)
	}
	want := "j iteration 0 push: 2 runs at 110.0-112.0 ms, 3 at 150.0-155.0 ms; tcp-aware 120.0 ms lies between them"
	if !strings.Contains(text.String(), "two kinds of run") || !strings.Contains(text.String(), want) {
		t.Errorf("text lacks the two kinds:\n%s", text.String())
	}
	page, err := RenderRepeat(tab, t.TempDir())
	if err != nil || !strings.Contains(string(page), "Two kinds of run") || !strings.Contains(string(page), "<li>"+want) {
		t.Errorf("page: %v; lacks the two kinds", err)
	}
	js, err := json.Marshal(tab)
	if err != nil || !strings.Contains(string(js), `"modes":[{"runs":2,"min_ns":110000000`) {
		t.Errorf("json: %v %s", err, js)
	}
	one := set(150, 148, 155, 152, 151)
	text.Reset()
	if err := one.WriteText(&text); err != nil {
		t.Fatal(err)
	}
	if one.Rows[1].Modes != nil || strings.Contains(text.String(), "two kinds") {
		t.Errorf("one kind named two: %+v\n%s", one.Rows[1].Modes, text.String())
	}
}

// A task graph's set attributes hundreds of phases: the summary names the
// ten its median runs leave furthest off and twenty diagnoses, and counts
// the rest; repeat.json keeps them all.
func TestRepeatSummaryCapsLongLists(t *testing.T) {
	tab := &RepeatTable{Lab: "l", Scheduler: "s"}
	for i := range 25 {
		tab.Diagnoses = append(tab.Diagnoses, fmt.Sprintf("diagnosis %02d", i))
	}
	m := MedianAttribution{Phases: 12}
	for i := range 12 {
		m.Left = append(m.Left, fmt.Sprintf("phase %02d", i))
	}
	tab.MedianAttribution = &m
	tab.Attribution = &fidelity.Tally{}
	var b bytes.Buffer
	if err := tab.WriteText(&b); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, want := range []string{"diagnosis 19\n", "and 5 more (repeat.json", "Left: phase 09\n", "and 2 more left, less far off"} {
		if !strings.Contains(out, want) {
			t.Errorf("summary lacks %q:\n%s", want, out)
		}
	}
	for _, not := range []string{"diagnosis 20", "Left: phase 10"} {
		if strings.Contains(out, not) {
			t.Errorf("summary names %q past the cap", not)
		}
	}
	page, err := RenderRepeat(tab, t.TempDir())
	if err != nil || strings.Contains(string(page), "diagnosis 20") || !strings.Contains(string(page), "And 5 more diagnoses") {
		t.Errorf("page: %v; want 20 diagnoses and the count of the rest", err)
	}
}
