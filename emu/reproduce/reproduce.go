// Package reproduce runs the seed papers' comparisons with the flow model
// at the papers' scale and renders them as tables (docs/reproductions.md is
// written from them by `emu reproduce`). Each paper registers one Study in
// its own file (paper000.go, ...).
package reproduce

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"sort"
	"strings"
	"time"
)

// Options are what every study takes.
type Options struct {
	// Seeds is how many seeds each point averages (0: the study's default).
	Seeds int
	// Quick shrinks a study (fewer points, seeds and jobs) for tests.
	Quick bool
	Log   *slog.Logger
}

// Table is one reproduced comparison.
type Table struct {
	Title  string
	Header []string
	Rows   [][]string
	// Notes say where and why our figures differ from the paper's, and
	// which choices were ours.
	Notes []string
	// Timings is how long each scheduler took to plan (and simulate).
	Timings []Timing
}

// Timing is one scheduler's planning cost in a study.
type Timing struct {
	Scheduler string
	Case      string
	Plan      time.Duration
	Simulate  time.Duration
}

// Study reproduces one paper's comparison.
type Study struct {
	Paper string // "000", "001/002", "003", "004"
	Name  string // short name, e.g. "paper000"
	Run   func(ctx context.Context, o Options) ([]Table, error)
}

var studies = map[string]Study{}

// Register adds a study; each paper's file calls it from init.
func Register(s Study) {
	if _, dup := studies[s.Name]; dup {
		panic("reproduce: duplicate study " + s.Name)
	}
	studies[s.Name] = s
}

// Studies lists the registered studies by name.
func Studies() []Study {
	out := make([]Study, 0, len(studies))
	for _, s := range studies {
		out = append(out, s)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// Lookup finds a study by name.
func Lookup(name string) (Study, error) {
	s, ok := studies[name]
	if !ok {
		var known []string
		for _, k := range Studies() {
			known = append(known, k.Name)
		}
		return Study{}, fmt.Errorf("unknown study %q (known: %s)", name, strings.Join(known, ", "))
	}
	return s, nil
}

// Markdown writes a table as GitHub markdown, its notes and timings below.
func (t Table) Markdown(w io.Writer) error {
	var b strings.Builder
	fmt.Fprintf(&b, "### %s\n\n", t.Title)
	if len(t.Header) > 0 {
		b.WriteString("| " + strings.Join(t.Header, " | ") + " |\n")
		b.WriteString("|" + strings.Repeat(" --- |", len(t.Header)) + "\n")
		for _, r := range t.Rows {
			b.WriteString("| " + strings.Join(r, " | ") + " |\n")
		}
		b.WriteString("\n")
	}
	for _, n := range t.Notes {
		b.WriteString("- " + n + "\n")
	}
	if len(t.Timings) > 0 {
		b.WriteString("\nPlanning cost on this machine:\n\n| scheduler | case | plan | simulate |\n| --- | --- | --- | --- |\n")
		for _, tm := range t.Timings {
			fmt.Fprintf(&b, "| %s | %s | %.3f s | %.3f s |\n", tm.Scheduler, tm.Case, tm.Plan.Seconds(), tm.Simulate.Seconds())
		}
	}
	b.WriteString("\n")
	_, err := io.WriteString(w, b.String())
	return err
}
