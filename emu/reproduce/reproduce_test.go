package reproduce

import (
	"strings"
	"testing"
	"time"
)

func TestMarkdown(t *testing.T) {
	tb := Table{Title: "T", Header: []string{"a", "b"}, Rows: [][]string{{"1", "2"}},
		Notes: []string{"n"}, Timings: []Timing{{Scheduler: "s", Case: "c", Plan: time.Second}}}
	var b strings.Builder
	if err := tb.Markdown(&b); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"### T", "| a | b |", "| --- | --- |", "| 1 | 2 |", "- n", "| s | c | 1.000 s | 0.000 s |"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("markdown lacks %q:\n%s", want, b.String())
		}
	}
}

func TestLookupUnknown(t *testing.T) {
	if _, err := Lookup("nope"); err == nil || !strings.Contains(err.Error(), `unknown study "nope"`) {
		t.Fatalf("err = %v", err)
	}
}
