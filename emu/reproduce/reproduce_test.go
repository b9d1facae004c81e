package reproduce

import (
	"context"
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

// Every registered study runs (quick) and gives tables with rows, and
// paper 000's table has one row per job count with all four designs.
func TestStudiesRunQuick(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the flow model on every study")
	}
	for _, st := range Studies() {
		t.Run(st.Name, func(t *testing.T) {
			tables, err := st.Run(context.Background(), Options{Quick: true})
			if err != nil {
				t.Fatal(err)
			}
			if len(tables) == 0 {
				t.Fatal("no tables")
			}
			for _, tb := range tables {
				if len(tb.Rows) == 0 && len(tb.Timings) == 0 {
					t.Errorf("table %q is empty", tb.Title)
				}
				for i, r := range tb.Rows {
					if len(r) != len(tb.Header) {
						t.Errorf("table %q row %d has %d cells for %d columns", tb.Title, i, len(r), len(tb.Header))
					}
				}
			}
		})
	}
}

func TestPaper000Table(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the flow model")
	}
	tables, err := runPaper000(context.Background(), Options{Quick: true, Seeds: 1})
	if err != nil {
		t.Fatal(err)
	}
	main := tables[0]
	if len(main.Rows) != 2 || len(main.Header) != 1+3*4 {
		t.Fatalf("rows %d, columns %d: want 2 job counts and 4 designs x 3 measures", len(main.Rows), len(main.Header))
	}
	for _, want := range []string{"INC-LJF reconf.", "noINC-FCFS mean JCT"} {
		if !strings.Contains(strings.Join(main.Header, "|"), want) {
			t.Errorf("header lacks %q: %v", want, main.Header)
		}
	}
	if len(main.Timings) != 4 {
		t.Errorf("%d timings, want one per design", len(main.Timings))
	}
}
