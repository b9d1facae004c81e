package report

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"fmt"
	"io"
	"path/filepath"

	"github.com/ocsemu/ocsemu/dataplane/limits"
	"github.com/ocsemu/ocsemu/dataplane/safefile"
	"github.com/ocsemu/ocsemu/emu/fidelity"
	"github.com/ocsemu/ocsemu/emu/hoststat"
	"github.com/ocsemu/ocsemu/workers/record"
)

// DataFile is the run's one self-describing data file: gzipped JSON with
// every series on one time axis (ns from time zero) and the run's
// metadata, made for plotting and for handing on (Flent's idea).
const (
	DataFile   = "run-data.json.gz"
	DataFormat = "emu-run-data/2"
	// DataFormatV1 is the format before 27 Nov 2026: the same, but the
	// rank phases' peer_recv_ns on CLOCK_MONOTONIC, not on the axis.
	DataFormatV1 = "emu-run-data/1"
)

// RunData is DataFile's content.
type RunData struct {
	Format string `json:"format"` // DataFormat
	// TimeZeroNs is time zero on CLOCK_MONOTONIC; every t_ns below is
	// from it.
	TimeZeroNs int64  `json:"time_zero_ns"`
	Axis       string `json:"axis"` // "ns from time zero"
	// Meta is run.json: version, commit, kernel, sysctls, plan hash,
	// scheduler (no seeds: the schedulers are deterministic), the machine
	// capacity `emu doctor` measured.
	Meta *Meta `json:"meta,omitempty"`
	// Scenario is the scenario's fabric and jobs as used (scenario.yaml).
	Scenario string `json:"scenario_yaml,omitempty"`
	// Qdiscs are the lab's root qdiscs (tc -s qdisc) when the workers
	// started and when they ended.
	QdiscsBefore json.RawMessage `json:"qdiscs_before,omitempty"`
	QdiscsAfter  json.RawMessage `json:"qdiscs_after,omitempty"`

	Series Series `json:"series"`
	// UplinkBytes is, per ToR uplink ("tor0:1"), the bytes the OCS fast
	// path forwarded from it during the run; the prediction's
	// uplink_bytes are the model's (the paths line of the verdict).
	UplinkBytes map[string]uint64 `json:"uplink_bytes,omitempty"`
	// INCWindowBytes is what each INC worker kept in flight (0: no INC,
	// or a window its congestion control adapted: --inc-cc); nil in runs
	// before 27 Nov 2026, which did not record it.
	INCWindowBytes *float64 `json:"inc_window_bytes,omitempty"`

	Prediction           *record.Run         `json:"prediction"`
	Calibrated           *record.Run         `json:"prediction_calibrated,omitempty"`
	TCPAware             *record.Run         `json:"prediction_tcp_aware,omitempty"`
	Measurement          *record.Run         `json:"measurement"`
	Comparison           []record.Comparison `json:"comparison"`
	ComparisonCalibrated []record.Comparison `json:"comparison_calibrated,omitempty"`
	ComparisonTCPAware   []record.Comparison `json:"comparison_tcp_aware,omitempty"`
	// Replay is the TCP-aware model with every phase started when the
	// emulation started it (the attribution's drift), clock plans only.
	Replay           *record.Run         `json:"prediction_replay,omitempty"`
	ComparisonReplay []record.Comparison `json:"comparison_replay,omitempty"`
	// CalibratedLockstep is the calibrated model with all-to-all and ring ranks in
	// lockstep (the attribution's framing and ranks parts).
	CalibratedLockstep           *record.Run            `json:"prediction_calibrated_lockstep,omitempty"`
	ComparisonCalibratedLockstep []record.Comparison    `json:"comparison_calibrated_lockstep,omitempty"`
	Verdict                      fidelity.Verdict       `json:"verdict"`
	Attribution                  []fidelity.Attribution `json:"attribution"`
}

// Series are the run's time series, t_ns from time zero.
type Series struct {
	HostCPU []hoststat.Sample `json:"host_cpu"`
	// Shapers: one per shaped link, its counters every 20 ms (100 ms in runs before 27 Nov 2026).
	Shapers []ShaperSeries `json:"shapers"`
	// TCP and RankPhases are the ranks' records as written (JSON
	// objects), times moved to the axis.
	TCP        Objects `json:"tcp"`
	RankPhases Objects `json:"rank_phases"`
	OCSEvents  Objects `json:"ocs_events,omitempty"`
	// Aggregators: one per ToR aggregator of a plan with INC, its hold
	// counters (inc.Stats.Holds and HoldNs) every 100 ms.
	Aggregators []AggregatorSeries `json:"aggregators,omitempty"`
}

// AggregatorSeries is one ToR aggregator over the run.
type AggregatorSeries struct {
	ToR    string   `json:"tor"`
	TNs    []int64  `json:"t_ns"`
	Holds  []uint64 `json:"holds"`
	HoldNs []uint64 `json:"hold_ns"`
}

// ShaperSeries is one shaped link over the run.
type ShaperSeries struct {
	Link    string   `json:"link"` // node:iface
	RateBps uint64   `json:"rate_bytes_per_s"`
	TNs     []int64  `json:"t_ns"`
	Bytes   []uint64 `json:"bytes"`
	Backlog []uint32 `json:"backlog_bytes"`
}

// WriteRunData writes d gzipped into dir, as DataFormat: every time in d
// must be on the axis, the ranks' per-peer ends too (format 1 left them
// on CLOCK_MONOTONIC; write such a file back only after moving them).
func WriteRunData(dir string, d *RunData) error {
	d.Format, d.Axis = DataFormat, "ns from time zero"
	path := filepath.Join(dir, DataFile)
	f, err := safefile.Create(path)
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	zw := gzip.NewWriter(f)
	err = json.NewEncoder(zw).Encode(d)
	if cerr := zw.Close(); err == nil {
		err = cerr
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

// MaxDataBytes bounds a data file uncompressed.
const MaxDataBytes = limits.MaxFileBytes

// ReadRunData reads dir's data file; os.ErrNotExist when the run has
// none (runs before it existed).
func ReadRunData(dir string) (*RunData, error) {
	path := filepath.Join(dir, DataFile)
	f, err := safefile.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	lr := &io.LimitedReader{R: zr, N: MaxDataBytes + 1}
	var d RunData
	if err := json.NewDecoder(lr).Decode(&d); err != nil {
		if lr.N <= 0 {
			return nil, fmt.Errorf("%s: more than %d MiB uncompressed (a 20 s run's is about 10 MiB): not a run's data file", path, MaxDataBytes>>20)
		}
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if d.Format != DataFormat && d.Format != DataFormatV1 {
		return nil, fmt.Errorf("%s: format %q, this emu reads %q and %q", path, d.Format, DataFormat, DataFormatV1)
	}
	fidelity.RenameOldParts(d.Attribution)
	return &d, nil
}

// Objects is a list of JSON objects kept as written. Decoding refuses
// any other element at once: a data file of a million bare zeros would
// otherwise cost a slice header each before its format was ever checked.
type Objects []json.RawMessage

// UnmarshalJSON decodes a list of objects, or null.
func (o *Objects) UnmarshalJSON(b []byte) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	tok, err := dec.Token()
	if err != nil {
		return err
	}
	if tok == nil {
		*o = nil
		return nil
	}
	if d, ok := tok.(json.Delim); !ok || d != '[' {
		return fmt.Errorf("want a list of objects, got %v", tok)
	}
	out := Objects{}
	for i := 0; dec.More(); i++ {
		var m json.RawMessage
		if err := dec.Decode(&m); err != nil {
			return err
		}
		if len(m) == 0 || m[0] != '{' {
			return fmt.Errorf("element %d is not an object", i)
		}
		out = append(out, m)
	}
	*o = out
	return nil
}
