package report

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/ocsemu/ocsemu/dataplane/limits"
	"github.com/ocsemu/ocsemu/dataplane/safefile"
	"github.com/ocsemu/ocsemu/emu/plan"
	"github.com/ocsemu/ocsemu/emu/scenario"
	"github.com/ocsemu/ocsemu/workers/record"
)

// Required lists what a run directory must hold (records/ is a directory).
var Required = []string{"scenario.yaml", "plan.json", "prediction.json", "measurement.json", "comparison.json", "summary.json", "records"}

// Comparison is one row of comparison.json's "comparison" list.
type Comparison = record.Comparison

// Summary is the part of summary.json the header shows.
type Summary struct {
	Lab      string `json:"lab"`
	Scenario string `json:"scenario"`
	Kind     string `json:"kind"`
	Nodes    int    `json:"nodes"`
	Links    int    `json:"links"`
}

// Sample is one TCP_INFO record of a rank's JSONL ("type":"tcp").
type Sample struct {
	Job     string `json:"job"`
	Rank    int    `json:"rank"` // -1: the job's parameter server
	Peer    int    `json:"peer"`
	TNs     int64  `json:"t_ns"` // CLOCK_MONOTONIC
	Cwnd    int64  `json:"cwnd"`
	RTTUs   int64  `json:"rtt_us"`
	Retrans int64  `json:"retrans_total"`
}

// rankPhase is one phase record of a rank's JSONL ("type":"phase").
type rankPhase struct {
	Job       string `json:"job"`
	Iteration int    `json:"iteration"`
	Phase     string `json:"phase"`
	Rank      int    `json:"rank"`
	StartNs   int64  `json:"start_ns"` // CLOCK_MONOTONIC
}

// Run is a run directory, read.
type Run struct {
	Dir         string
	Scenario    *scenario.Scenario
	Plan        *plan.Plan
	Prediction  *record.Run
	Measurement *record.Run
	Compare     []Comparison
	Summary     Summary
	// Meta is run.json, nil for runs written before emu kept it.
	Meta    *Meta
	Samples []Sample
	// ZeroNs is time zero on CLOCK_MONOTONIC, recovered from the records:
	// the earliest rank start of the first measured phase minus that
	// phase's start in measurement.json. ZeroOK is false when the records
	// hold no phase to recover it from.
	ZeroNs int64
	ZeroOK bool
	// Data is the run's data file (DataFile): the fidelity verdict, the
	// attribution and the calibrated model; nil for runs before it.
	Data *RunData
}

// Load reads and checks a run directory. Every missing file is named.
func Load(dir string) (*Run, error) {
	fi, err := os.Stat(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("run directory %s does not exist (want results/<lab>/<date-time> or results/<lab>/latest, which emu run writes)", dir)
	}
	if err != nil {
		return nil, fmt.Errorf("run directory: %w", err)
	}
	if !fi.IsDir() {
		return nil, fmt.Errorf("run directory: %s is not a directory (want results/<lab>/<date-time> or results/<lab>/latest)", dir)
	}
	var missing []string
	for _, f := range Required {
		if _, err := os.Stat(filepath.Join(dir, f)); errors.Is(err, fs.ErrNotExist) {
			missing = append(missing, f)
		} else if err != nil {
			return nil, err
		}
	}
	if len(missing) > 0 {
		return nil, fmt.Errorf("%s is not a complete run directory: missing %s (an `emu run` writes them all)", dir, strings.Join(missing, ", "))
	}
	r := &Run{Dir: dir}
	data, err := safefile.Read(filepath.Join(dir, "scenario.yaml"), scenario.MaxFileBytes)
	if err != nil {
		return nil, err
	}
	if r.Scenario, err = scenario.Parse(data, filepath.Join(dir, "scenario.yaml")); err != nil {
		return nil, err
	}
	var cmp struct {
		Compare []Comparison `json:"comparison"`
	}
	for _, f := range []struct {
		name string
		v    any
	}{{"plan.json", &r.Plan}, {"prediction.json", &r.Prediction}, {"measurement.json", &r.Measurement}, {"comparison.json", &cmp}, {"summary.json", &r.Summary}} {
		if err := readJSON(filepath.Join(dir, f.name), f.v); err != nil {
			return nil, err
		}
	}
	if r.Plan == nil || r.Prediction == nil || r.Measurement == nil {
		return nil, fmt.Errorf("%s: plan.json, prediction.json and measurement.json must each hold an object", dir)
	}
	r.Compare = cmp.Compare
	if _, err := os.Stat(filepath.Join(dir, MetaFile)); err == nil {
		if err := readJSON(filepath.Join(dir, MetaFile), &r.Meta); err != nil {
			return nil, err
		}
	} else if !errors.Is(err, fs.ErrNotExist) {
		return nil, err
	}
	if r.Data, err = ReadRunData(dir); errors.Is(err, fs.ErrNotExist) {
		r.Data = nil
	} else if err != nil {
		return nil, err
	}
	phases, err := r.readRecords(filepath.Join(dir, "records"))
	if err != nil {
		return nil, err
	}
	r.ZeroNs, r.ZeroOK = timeZero(r.Measurement.Phases, phases)
	return r, nil
}

func readJSON(path string, v any) error {
	data, err := safefile.Read(path, limits.MaxFileBytes)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(data, v); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return nil
}

// readRecords reads every records/*.jsonl: TCP samples into r.Samples,
// phase records returned. Lines of other types are skipped.
func (r *Run) readRecords(dir string) ([]rankPhase, error) {
	files, err := record.Files(dir)
	if err != nil {
		return nil, err
	}
	var phases []rankPhase
	for _, f := range files {
		fh, err := safefile.Open(f)
		if err != nil {
			return nil, err
		}
		sc := bufio.NewScanner(fh)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for n := 1; sc.Scan(); n++ {
			line := sc.Bytes()
			if len(strings.TrimSpace(string(line))) == 0 {
				continue
			}
			var head struct {
				Type string `json:"type"`
			}
			if err := json.Unmarshal(line, &head); err != nil {
				fh.Close()
				return nil, fmt.Errorf("%s:%d: %w", f, n, err)
			}
			switch head.Type {
			case "tcp":
				var s Sample
				if err := json.Unmarshal(line, &s); err != nil {
					fh.Close()
					return nil, fmt.Errorf("%s:%d: %w", f, n, err)
				}
				r.Samples = append(r.Samples, s)
			case "phase":
				var p rankPhase
				if err := json.Unmarshal(line, &p); err != nil {
					fh.Close()
					return nil, fmt.Errorf("%s:%d: %w", f, n, err)
				}
				phases = append(phases, p)
			}
		}
		err = sc.Err()
		fh.Close()
		if err != nil {
			return nil, fmt.Errorf("%s: %w", f, err)
		}
	}
	return phases, nil
}

// timeZero recovers time zero (CLOCK_MONOTONIC) from the first measured
// phase: its start in measurement.json is the earliest rank's start from
// time zero, and the records hold that start on the monotonic clock.
func timeZero(measured []record.Phase, recs []rankPhase) (int64, bool) {
	for _, m := range measured {
		first, ok := int64(0), false
		for _, p := range recs {
			if p.Job == m.Job && p.Iteration == m.Iteration && p.Phase == m.Phase && (!ok || p.StartNs < first) {
				first, ok = p.StartNs, true
			}
		}
		if ok {
			return first - m.StartNs, true
		}
	}
	return 0, false
}
