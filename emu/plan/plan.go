// Package plan is the contract between a scheduler and the emulator: a
// versioned JSON timeline of stages, each with the circuit map of every
// OCS, the (job, iteration, phase) activities that start in it, optional
// flow start times and rate caps, and the scheduler's own predictions. A
// scheduler in any language writes this JSON (docs/plan.md, and the JSON
// Schema in docs/plan.schema.json); Check refuses a wrong plan with the
// stage, job and field that are wrong, before anything runs.
package plan

import (
	"bytes"
	"encoding"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"reflect"
	"slices"
	"strings"

	"github.com/ocsemu/ocsemu/dataplane/limits"
	"github.com/ocsemu/ocsemu/dataplane/names"
	"github.com/ocsemu/ocsemu/dataplane/safefile"
	"github.com/ocsemu/ocsemu/emu/scenario"
	"github.com/ocsemu/ocsemu/ocsfabric/circuit"
	"github.com/ocsemu/ocsemu/workers/job"
)

// Version is the plan format version this code writes and the newest it
// reads. Version 2 adds per-step activities (Job.Steps, Activity.Step),
// task-graph jobs (pattern "dag", Job.Tasks) and INC decided per stage
// (Activity.INC); MinVersion files keep working unchanged.
const Version = 2

// MinVersion is the oldest plan format version this code reads.
const MinVersion = 1

// Execution modes.
const (
	// ModeBarrier: a stage starts when the previous one has finished, or
	// at its planned start if that is later.
	ModeBarrier = "barrier"
	// ModeClock: a stage starts exactly at its planned start (time slots,
	// rotor schedules); activities may run on into later stages.
	ModeClock = "clock"
)

// Plan is a whole plan.
type Plan struct {
	Version   int    `json:"plan_version"`
	Scenario  string `json:"scenario"`
	Scheduler string `json:"scheduler"`
	Mode      string `json:"mode"`
	// ReconfigDelayNs overrides the scenario's reconfiguration delay.
	ReconfigDelayNs *int64  `json:"reconfig_delay_ns,omitempty"`
	Jobs            []Job   `json:"jobs"`
	Stages          []Stage `json:"stages"`
	// Predicted is what the scheduler itself expects (optional).
	Predicted *Predicted `json:"predicted,omitempty"`
}

// Job is a job as the plan runs it.
type Job struct {
	Name       string   `json:"name"`
	Pattern    string   `json:"pattern"`
	Workers    []string `json:"workers"`
	Bytes      int64    `json:"bytes"`      // per worker per iteration
	ComputeNs  int64    `json:"compute_ns"` // per iteration
	Iterations int      `json:"iterations"`
	ArrivalNs  int64    `json:"arrival_ns,omitempty"`
	// INC: aggregate in the ToRs (hierarchically, rooted at Aggregator).
	INC        bool   `json:"inc,omitempty"`
	Aggregator string `json:"aggregator,omitempty"` // root ToR, e.g. tor3
	// PS is the server of the CPU parameter server (ps without INC).
	PS string `json:"ps,omitempty"`
	// Ring is the ring order (ring pattern, paper 002 chooses it).
	Ring []string `json:"ring,omitempty"`
	// CongestionControl overrides the scenario's for this job's sockets.
	CongestionControl string `json:"congestion_control,omitempty"`
	// Steps (v2, hd and ring): the all-reduce runs one algorithm step at
	// a time, each step an activity of its own (Activity.Step), so that
	// circuits can change between steps (paper 003).
	Steps bool `json:"steps,omitempty"`
	// Tasks (v2, pattern dag) are one iteration's task graph: compute and
	// transfer tasks with dependencies (paper 004). Iteration i+1 starts
	// after every task of iteration i has finished.
	Tasks []Task `json:"tasks,omitempty"`

	dag *dagIndex // built on first use from Tasks
}

// Task is one node of a dag job's task graph (the workers' own type: the
// workers run it as the plan gives it). Its name is the phase name its
// activity gives.
type Task = job.Task

// Stage is one step of the timeline.
type Stage struct {
	// StartNs is the planned start from time zero: exact in clock mode,
	// the earliest start in barrier mode.
	StartNs int64 `json:"start_ns"`
	// DurationNs is the slot length (clock mode, required).
	DurationNs int64 `json:"duration_ns,omitempty"`
	// Circuits is the circuit map of every OCS during the stage.
	Circuits []circuit.Circuit `json:"circuits"`
	// Activities start in this stage.
	Activities []Activity `json:"activities"`
	// PredictedNs is the scheduler's own predicted duration (optional).
	PredictedNs int64 `json:"predicted_ns,omitempty"`
}

// Activity is one (job, iteration, phase) starting in a stage.
type Activity struct {
	Job       string `json:"job"`
	Iteration int    `json:"iteration"`
	Phase     string `json:"phase"`
	// Step (v2) is the all-reduce step of a job with steps: true.
	Step *int `json:"step,omitempty"`
	// INC (v2) decides in-network aggregation for this push or pull (the
	// stage's decision, paper 000); nil keeps the job's inc.
	INC *bool `json:"inc,omitempty"`
	// StartNs, if set, is the phase's start from time zero (flow start
	// times, TOPO-X): the phase starts then, or when its predecessor ends
	// if that is later.
	StartNs *int64 `json:"start_ns,omitempty"`
	// RateCapBps caps every flow of the phase (bits/s; 0 = none).
	RateCapBps float64 `json:"rate_cap_bps,omitempty"`
	// Flows caps single flows (bits/s).
	Flows []FlowCap `json:"flows,omitempty"`
}

// FlowCap is a per-flow rate cap. Endpoints are servers, or ToRs for INC.
type FlowCap struct {
	Src        string  `json:"src"`
	Dst        string  `json:"dst"`
	RateCapBps float64 `json:"rate_cap_bps"`
}

// Predicted holds a scheduler's own expectations.
type Predicted struct {
	MakespanNs int64            `json:"makespan_ns,omitempty"`
	JobsNs     map[string]int64 `json:"jobs_ns,omitempty"` // job completion times
}

// Key names one phase of one iteration of one job.
type Key = job.Key

// MaxFileBytes bounds a plan file.
const MaxFileBytes = limits.MaxFileBytes

// Load reads and decodes a plan file (Check it against its scenario).
func Load(path string) (*Plan, error) {
	data, err := safefile.Read(path, MaxFileBytes)
	if err != nil {
		return nil, fmt.Errorf("read plan: %w", err)
	}
	return Parse(data, path)
}

// Parse decodes plan JSON strictly: unknown fields and trailing data are
// refused, and errors carry line and column.
func Parse(data []byte, source string) (*Plan, error) {
	// Keys first: the decoder would report an unknown one only at the end
	// of the value it is in, and match one of another case.
	if err := checkKeys(data); err != nil {
		return nil, fmt.Errorf("%s: %w", source, err)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var p Plan
	if err := dec.Decode(&p); err != nil {
		return nil, fmt.Errorf("%s: %s", source, jsonErr(data, dec, err))
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, fmt.Errorf("%s: trailing data after the plan object", source)
	}
	if p.Version < MinVersion || p.Version > Version {
		return nil, fmt.Errorf("%s: plan_version %d is not supported (this emu reads versions %d to %d)", source, p.Version, MinVersion, Version)
	}
	return &p, nil
}

// jsonErr adds a line and column to a JSON decoding error.
func jsonErr(data []byte, dec *json.Decoder, err error) string {
	off := dec.InputOffset()
	var se *json.SyntaxError
	var te *json.UnmarshalTypeError
	switch {
	case errors.As(err, &se):
		off = se.Offset
	case errors.As(err, &te):
		off = te.Offset
		return fmt.Sprintf("%s: field %q: %s is not a valid %s", lineCol(data, off), te.Field, te.Value, te.Type)
	}
	msg := strings.TrimPrefix(err.Error(), "json: ")
	if errors.Is(err, io.ErrUnexpectedEOF) {
		// The decoder reads a value whole before it reports a cut one:
		// the place to look is the end of the file.
		return fmt.Sprintf("%s: the file ends inside a value (an object, list or string not closed)", lineCol(data, int64(len(bytes.TrimRight(data, " \t\r\n")))))
	}
	return fmt.Sprintf("%s: %s", lineCol(data, off), msg)
}

// checkKeys refuses, at its line and column, an object that gives a key
// twice (encoding/json would keep the last value) and a key the plan
// format does not have, or has in another case (encoding/json would match
// "B" to "b", and reports an unknown key only at the end of the value it
// is in). It walks the tokens along the Go types of the plan; values of a
// type that decodes itself, and maps' keys, are not checked. Syntax
// errors are left to the decoder, which reports them.
func checkKeys(data []byte) error {
	type frame struct {
		obj       bool
		t         reflect.Type // the container's type; nil: not checked
		expectKey bool
		key       string
		idx       int
		next      reflect.Type     // the type of the value that comes next
		keys      map[string]int64 // key -> offset of its first use
	}
	var stack []*frame
	done := func() { // a value of the innermost container is complete
		if len(stack) == 0 {
			return
		}
		if f := stack[len(stack)-1]; f.obj {
			f.expectKey = true
		} else {
			f.idx++
		}
	}
	path := func() string {
		var b strings.Builder
		for _, f := range stack {
			if f.obj {
				if b.Len() > 0 {
					b.WriteByte('.')
				}
				b.WriteString(f.key)
			} else {
				fmt.Fprintf(&b, "[%d]", f.idx)
			}
		}
		return b.String()
	}
	// valueType is the type the next value of the innermost container has.
	valueType := func() reflect.Type {
		if len(stack) == 0 {
			return reflect.TypeOf(Plan{})
		}
		f := stack[len(stack)-1]
		if f.obj {
			return f.next
		}
		if f.t != nil && (f.t.Kind() == reflect.Slice || f.t.Kind() == reflect.Array) {
			return checkedType(f.t.Elem())
		}
		return nil
	}
	fieldsOf := map[reflect.Type]map[string]reflect.Type{} // built once per type
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	for {
		off := dec.InputOffset()
		tok, err := dec.Token()
		if err != nil {
			return nil // io.EOF, or a syntax error the decoder has reported
		}
		var top *frame
		if len(stack) > 0 {
			top = stack[len(stack)-1]
		}
		if k, ok := tok.(string); ok && top != nil && top.obj && top.expectKey {
			// The key starts after the separators that precede it.
			for off < int64(len(data)) && strings.IndexByte(" \t\r\n,:", data[off]) >= 0 {
				off++
			}
			top.key, top.expectKey, top.next = k, false, nil
			if first, dup := top.keys[k]; dup {
				return fmt.Errorf("%s: duplicate key %q (%s, first given at %s)", lineCol(data, off), k, path(), lineCol(data, first))
			}
			if top.keys == nil {
				top.keys = map[string]int64{}
			}
			top.keys[k] = off
			switch {
			case top.t == nil:
			case top.t.Kind() == reflect.Map:
				top.next = checkedType(top.t.Elem())
			case top.t.Kind() == reflect.Struct:
				fields, ok := fieldsOf[top.t]
				if !ok {
					fields = jsonFields(top.t)
					fieldsOf[top.t] = fields
				}
				ft, ok := fields[k]
				if !ok {
					where := ""
					if full := path(); full != k {
						where = " (" + full + ")"
					}
					return fmt.Errorf("%s: unknown key %q%s%s", lineCol(data, off), k, where, suggestKey(k, fields))
				}
				top.next = checkedType(ft)
			}
			continue
		}
		switch tok {
		case json.Delim('{'):
			stack = append(stack, &frame{obj: true, t: valueType(), expectKey: true})
		case json.Delim('['):
			stack = append(stack, &frame{t: valueType()})
		case json.Delim('}'), json.Delim(']'):
			stack = stack[:len(stack)-1]
			done()
		default:
			done()
		}
	}
}

var (
	jsonUnmarshaler = reflect.TypeOf((*json.Unmarshaler)(nil)).Elem()
	textUnmarshaler = reflect.TypeOf((*encoding.TextUnmarshaler)(nil)).Elem()
)

// checkedType is t with pointers taken off, or nil where checkKeys does
// not look inside: a type that decodes itself, an interface.
func checkedType(t reflect.Type) reflect.Type {
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	decodesItself := func(u reflect.Type) bool { return t.Implements(u) || reflect.PointerTo(t).Implements(u) }
	if t == nil || t.Kind() == reflect.Interface || decodesItself(jsonUnmarshaler) || decodesItself(textUnmarshaler) {
		return nil
	}
	return t
}

// jsonFields maps a struct's JSON keys to their types, embedded structs'
// keys included.
func jsonFields(t reflect.Type) map[string]reflect.Type {
	m := map[string]reflect.Type{}
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		switch {
		case name == "-" || !f.IsExported() && !f.Anonymous:
		case f.Anonymous && name == "" && checkedType(f.Type) != nil && checkedType(f.Type).Kind() == reflect.Struct:
			maps.Copy(m, jsonFields(checkedType(f.Type)))
		case name == "":
			m[f.Name] = f.Type
		default:
			m[name] = f.Type
		}
	}
	return m
}

// suggestKey names the key meant: the same in another case, or one a
// typo away; else the keys there are.
func suggestKey(k string, fields map[string]reflect.Type) string {
	names := slices.Sorted(maps.Keys(fields))
	for _, n := range names {
		if strings.EqualFold(n, k) {
			return fmt.Sprintf(": keys are lower case, did you mean %q?", n)
		}
	}
	best, bestD := "", 3
	for _, n := range names {
		if d := scenario.EditDistance(strings.ToLower(k), n); d < bestD {
			best, bestD = n, d
		}
	}
	if best != "" {
		return fmt.Sprintf(", did you mean %q?", best)
	}
	return " (known keys: " + strings.Join(names, ", ") + ")"
}

func lineCol(data []byte, off int64) string {
	if off > int64(len(data)) {
		off = int64(len(data))
	}
	line := 1 + bytes.Count(data[:off], []byte("\n"))
	col := off - int64(bytes.LastIndexByte(data[:off], '\n'))
	return fmt.Sprintf("line %d col %d", line, col)
}

// Write saves a plan as indented JSON.
func (p *Plan) Write(path string) error {
	data, err := json.MarshalIndent(p, "", " ")
	if err != nil {
		return err
	}
	return safefile.Write(path, append(data, '\n'), 0o644)
}

// JobsFromScenario turns scenario jobs into plan jobs.
func JobsFromScenario(s *scenario.Scenario) []Job {
	var out []Job
	for _, j := range s.Jobs {
		pj := Job{Name: j.Name, Pattern: j.Pattern, Workers: j.Workers, Bytes: int64(j.Bytes),
			ComputeNs: int64(j.ComputeTime()), Iterations: j.Iterations, ArrivalNs: int64(j.Arrival), INC: j.INC}
		if j.TCP != nil {
			pj.CongestionControl = j.TCP.CongestionControl
		}
		switch {
		case j.Pattern == scenario.PatternDAG:
			// The scenario's check has synthesised the graph once already.
			pj.Tasks, _ = j.Tasks()
			pj.ComputeNs = 0
		case j.Pattern == scenario.PatternPS && j.INC:
			pj.Aggregator = DefaultAggregator(j.Workers)
		case j.Pattern == scenario.PatternPS:
			pj.PS = j.PSServer()
		case j.Pattern == scenario.PatternRing:
			pj.Ring = j.RingOrder()
		}
		out = append(out, pj)
	}
	return out
}

// DefaultAggregator is the root ToR of hierarchical INC: the ToR of the
// rack holding most workers (lowest rack on ties).
func DefaultAggregator(workers []string) string {
	count := map[int]int{}
	best, bestN := -1, 0
	for _, w := range workers {
		r, _, _ := names.ParseServer(w)
		count[r]++
	}
	for r, n := range count {
		if n > bestN || n == bestN && r < best {
			best, bestN = r, n
		}
	}
	return names.ToRName(best)
}
