package main

import (
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"strconv"

	"github.com/ocsemu/ocsemu/dataplane/safefile"
	"github.com/ocsemu/ocsemu/workers"
	"github.com/ocsemu/ocsemu/workers/record"
)

// comparisonHeader and phasesHeader are the first rows of comparison.csv
// and phases.csv.
var (
	comparisonHeader = []string{"job", "iteration", "phase", "predicted_ms", "measured_ms", "rel_err", "predicted_end_ms", "measured_end_ms"}
	phasesHeader     = []string{"job", "iteration", "phase", "ranks", "bytes", "time_ms", "algbw_gbps", "busbw_gbps", "verified"}
)

func nsToMs(ns int64) string { return strconv.FormatFloat(float64(ns)/1e6, 'f', 6, 64) }

func fmtFloat(x float64) string { return strconv.FormatFloat(x, 'g', -1, 64) }

// writeComparisonCSV writes comparison.json's rows as CSV: durations and
// ends in ms, rel_err as a fraction ((measured - predicted) / predicted).
func writeComparisonCSV(w io.Writer, rows []record.Comparison) error {
	cw := csv.NewWriter(w)
	if err := cw.Write(comparisonHeader); err != nil {
		return err
	}
	for _, c := range rows {
		if err := cw.Write([]string{c.Job, strconv.Itoa(c.Iteration), c.Phase, nsToMs(c.PredictedNs), nsToMs(c.MeasuredNs),
			fmtFloat(c.RelErr), nsToMs(c.PredEndNs), nsToMs(c.MeasEndNs)}); err != nil {
			return err
		}
	}
	cw.Flush()
	return cw.Error()
}

// writePhasesCSV writes the measured per-phase statistics (nccl-tests
// style: bytes per rank, time of the slowest rank, bandwidths in Gbit/s).
func writePhasesCSV(w io.Writer, stats []workers.PhaseStat) error {
	cw := csv.NewWriter(w)
	if err := cw.Write(phasesHeader); err != nil {
		return err
	}
	for _, s := range stats {
		if err := cw.Write([]string{s.Job, strconv.Itoa(s.Iteration), s.Phase, strconv.Itoa(s.Ranks), strconv.FormatInt(s.Bytes, 10),
			nsToMs(s.DurationNs), fmtFloat(s.AlgBwBps / 1e9), fmtFloat(s.BusBwBps / 1e9), strconv.FormatBool(s.Verified)}); err != nil {
			return err
		}
	}
	cw.Flush()
	return cw.Error()
}

// writeCSVFile creates path and fills it with write.
func writeCSVFile(path string, write func(io.Writer) error) error {
	f, err := safefile.Create(path)
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	err = write(f)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

// writeCSVs writes comparison.csv and phases.csv into dir.
func writeCSVs(dir string, cmp []record.Comparison, stats []workers.PhaseStat) error {
	return errors.Join(
		writeCSVFile(filepath.Join(dir, "comparison.csv"), func(w io.Writer) error { return writeComparisonCSV(w, cmp) }),
		writeCSVFile(filepath.Join(dir, "phases.csv"), func(w io.Writer) error { return writePhasesCSV(w, stats) }),
	)
}
