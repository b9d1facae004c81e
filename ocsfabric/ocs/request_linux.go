package ocs

// Files (`emu ocs apply`, `emu ocs schedule`) and API request bodies are
// read in two steps: the text into a tree of values that keeps each
// value's line, then the tree against the format. Every error names the
// file and line, the key, what was found and the form expected, with an
// example, never a Go type. Nothing here needs a kernel: these are the
// functions the fuzz targets drive.

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/ocsemu/ocsemu/dataplane/units"
	"github.com/ocsemu/ocsemu/ocsfabric/circuit"
	"github.com/ocsemu/ocsemu/ocsfabric/reconfig"
)

// ParseError is one problem in a file or request body.
type ParseError struct {
	Source string // file name; "" for a request body
	Line   int    // 0 if unknown or the body is one line
	Field  string // key path, e.g. "slots[1].circuits[0].a"; "" for the whole document
	Msg    string
}

func (e *ParseError) Error() string {
	var b strings.Builder
	switch {
	case e.Source != "" && e.Line > 0:
		fmt.Fprintf(&b, "%s:%d: ", e.Source, e.Line)
	case e.Source != "":
		b.WriteString(e.Source + ": ")
	case e.Line > 0:
		fmt.Fprintf(&b, "line %d: ", e.Line)
	}
	if e.Field != "" {
		b.WriteString(e.Field + ": ")
	}
	b.WriteString(e.Msg)
	return b.String()
}

// ParseApplyFile reads an `emu ocs apply` file (YAML, or JSON):
//
//	circuits: [{a: tor0:0, b: tor1:0}]   # required; [] removes every circuit
//	delay: 10ms                          # optional
//	at_ns: 0                             # optional
//
// It checks the form and the bounds of delay, not the circuits against a
// fabric: the OCS process does that.
func ParseApplyFile(data []byte, source string) (ConfigRequest, error) {
	var req ConfigRequest
	err := parseFile(data, source, applyForm, func(d *decoder, v *value) { req = d.config(v) })
	return req, err
}

// ParseScheduleFile reads an `emu ocs schedule` file (YAML, or JSON); see
// Schedule.
func ParseScheduleFile(data []byte, source string) (Schedule, error) {
	var s Schedule
	err := parseFile(data, source, scheduleForm, func(d *decoder, v *value) { s = d.schedule(v) })
	return s, err
}

// DecodeConfigRequest reads and checks a PUT /v1/config body against the
// fabric and the OCS clock now.
func DecodeConfigRequest(body []byte, l circuit.Layout, now int64) (ConfigRequest, error) {
	var req ConfigRequest
	if err := parseBody(body, applyForm, func(d *decoder, v *value) { req = d.config(v) }); err != nil {
		return req, err
	}
	return req, req.Check(l, now)
}

// DecodeConnectRequest reads and checks a POST /v1/connect body.
func DecodeConnectRequest(body []byte, l circuit.Layout) (ConnectRequest, error) {
	var req ConnectRequest
	if err := parseBody(body, connectForm, func(d *decoder, v *value) { req = d.connect(v) }); err != nil {
		return req, err
	}
	return req, req.Check(l)
}

// DecodeDisconnectRequest reads and checks a POST /v1/disconnect body.
func DecodeDisconnectRequest(body []byte, l circuit.Layout) (DisconnectRequest, error) {
	var req DisconnectRequest
	if err := parseBody(body, disconnectForm, func(d *decoder, v *value) { req = d.disconnect(v) }); err != nil {
		return req, err
	}
	return req, req.Check(l)
}

// DecodeSchedule reads and checks a POST /v1/schedule body.
func DecodeSchedule(body []byte, l circuit.Layout, now int64) (Schedule, error) {
	var s Schedule
	if err := parseBody(body, scheduleForm, func(d *decoder, v *value) { s = d.schedule(v) }); err != nil {
		return s, err
	}
	return s, s.Check(l, now)
}

// Check validates a configuration request: its delay, its instant against
// the OCS clock now, and its circuits against the fabric.
func (r ConfigRequest) Check(l circuit.Layout, now int64) error {
	var errs []error
	if err := checkDelay(r.Delay); err != nil {
		errs = append(errs, err)
	}
	if err := reconfig.CheckAt(r.AtNs, now); err != nil {
		errs = append(errs, fmt.Errorf("at_ns: %w", err))
	}
	if err := l.Validate(circuit.Config{Circuits: r.Circuits}); err != nil {
		errs = append(errs, fmt.Errorf("invalid configuration: %w", capJoined(err)))
	}
	return errors.Join(errs...)
}

// maxErrors bounds the problems reported at once: a body of a million bad
// circuits is answered with the first ones and a count, not 100 MB.
const maxErrors = 20

// capJoined keeps the first maxErrors of joined errors and counts the rest.
func capJoined(err error) error {
	j, ok := err.(interface{ Unwrap() []error })
	if !ok || len(j.Unwrap()) <= maxErrors {
		return err
	}
	errs := j.Unwrap()
	return errors.Join(append(errs[:maxErrors:maxErrors], fmt.Errorf("... and %d more problems", len(errs)-maxErrors))...)
}

// Circuit is the circuit a connect request patches: simplex if asked, or
// if the fabric is half duplex.
func (r ConnectRequest) Circuit(l circuit.Layout) circuit.Circuit {
	return circuit.Circuit{A: r.A, B: r.B, Simplex: r.Simplex || l.HalfDuplex}
}

// Check validates a connect request: the ports exist and may form a
// circuit, and the delay is within bounds. The circuits the new one
// replaces need no check.
func (r ConnectRequest) Check(l circuit.Layout) error {
	if err := errors.Join(l.Check(r.A), l.Check(r.B)); err != nil {
		return err
	}
	var errs []error
	if err := l.Validate(circuit.Config{Circuits: []circuit.Circuit{r.Circuit(l)}}); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(append(errs, checkDelay(r.Delay))...)
}

// Check validates a disconnect request: the port exists, the delay is
// within bounds.
func (r DisconnectRequest) Check(l circuit.Layout) error {
	return errors.Join(l.Check(r.Port), checkDelay(r.Delay))
}

// Check validates a schedule against the fabric and its start against the
// OCS clock now.
func (s Schedule) Check(l circuit.Layout, now int64) error {
	err := s.Validate(l)
	if aerr := reconfig.CheckAt(s.StartNs, now); aerr != nil {
		err = errors.Join(err, fmt.Errorf("start_ns: %w", aerr))
	}
	return err
}

func checkDelay(d *units.Duration) error {
	if d == nil {
		return nil
	}
	if err := reconfig.CheckDelay(d.D()); err != nil {
		return fmt.Errorf("delay: %w", err)
	}
	return nil
}

// form is the shape a value must have, with an example in each language.
type form struct{ what, yaml, json string }

var (
	applyForm = form{"a mapping with circuits (and optional delay, at_ns)",
		"circuits: [{a: tor0:0, b: tor1:0}, {a: tor2:0, b: tor3:0}]",
		`{"circuits":[{"a":"tor0:0","b":"tor1:0"}],"delay":"10ms"}`}
	scheduleForm = form{"a mapping with slots (and optional cycles, delay, start_ns)",
		"slots: [{duration: 1ms, circuits: [{a: tor0:0, b: tor1:0}]}, {duration: 1ms, circuits: [{a: tor0:0, b: tor2:0}]}]",
		`{"slots":[{"duration":"1ms","circuits":[{"a":"tor0:0","b":"tor1:0"}]}],"cycles":0}`}
	connectForm = form{"a mapping with a and b (and optional simplex, delay)",
		"{a: tor0:1, b: tor2:0}", `{"a":"tor0:1","b":"tor2:0","delay":"1ms"}`}
	disconnectForm = form{"a mapping with port (and optional delay)",
		"{port: tor0:1}", `{"port":"tor0:1"}`}
	circuitsForm = form{"a list of circuits",
		"[{a: tor0:0, b: tor1:0}, {a: tor2:0, b: tor3:0}]", `[{"a":"tor0:0","b":"tor1:0"}]`}
	circuitForm = form{"a circuit, a mapping with a and b (and optional simplex: true for one direction)",
		"{a: tor0:0, b: tor1:0}", `{"a":"tor0:0","b":"tor1:0"}`}
	slotsForm = form{"a list of slots",
		"[{duration: 1ms, circuits: [{a: tor0:0, b: tor1:0}]}]", `[{"duration":"1ms","circuits":[{"a":"tor0:0","b":"tor1:0"}]}]`}
	slotForm = form{"a slot, a mapping with duration and circuits",
		"{duration: 1ms, circuits: [{a: tor0:0, b: tor1:0}]}", `{"duration":"1ms","circuits":[{"a":"tor0:0","b":"tor1:0"}]}`}
	portForm     = form{"a port tor<rack>:<uplink>", "tor0:1", `"tor0:1"`}
	delayForm    = form{"a duration", "10ms", `"10ms"`}
	durationForm = form{"a duration", "1ms", `"1ms"`}
	instantForm  = form{"a CLOCK_MONOTONIC instant in integer ns (0: as soon as possible)", "0", "0"}
	countForm    = form{"a whole number", "500", "500"}
	boolForm     = form{"true or false", "true", "true"}
)

// maxDepth bounds nesting: no valid document is deeper than 6.
const maxDepth = 32

// maxSeparators bounds a document's commas and line breaks, and with them
// the values its tree can hold (each takes one, bar the first at each
// level): a schedule of 1,000 slots of 256 circuits needs about 512k.
// A body of bare zeros within MaxBodyBytes would otherwise build 8
// million values, gigabytes, before any check.
const maxSeparators = 1 << 20

// tooMany refuses a document with more than maxSeparators separators.
func tooMany(data []byte) error {
	if n := bytes.Count(data, []byte{','}) + bytes.Count(data, []byte{'\n'}); n > maxSeparators {
		return &lineError{0, fmt.Sprintf("holds %d commas and lines, more than the %d any circuit configuration or schedule needs", n, maxSeparators)}
	}
	return nil
}

type kind int

const (
	kNull kind = iota
	kString
	kNumber
	kBool
	kMap
	kList
)

// value is one node of a document, with the line it starts on.
type value struct {
	kind  kind
	line  int
	text  string   // scalars
	keys  []*value // mapping keys (strings), in order
	vals  []*value // mapping values, parallel to keys
	items []*value // list items
}

// describe says what a value is, for "got ..." in messages.
func (v *value) describe() string {
	switch v.kind {
	case kNull:
		return "nothing"
	case kString:
		t := v.text
		if r := []rune(t); len(r) > 40 {
			t = string(r[:40]) + "..."
		}
		return fmt.Sprintf("the text %q", t)
	case kNumber:
		return "the number " + v.text
	case kBool:
		return v.text
	case kMap:
		return "a mapping"
	default:
		return "a list"
	}
}

// parseFile reads a file as JSON if it is JSON, else as YAML, and decodes
// its tree with fn.
func parseFile(data []byte, source string, top form, fn func(*decoder, *value)) error {
	if source == "" {
		source = "-"
	}
	d := &decoder{source: source}
	if err := tooMany(data); err != nil {
		return d.wrap(err)
	}
	v, jerr := fromJSON(data)
	if jerr == nil {
		d.json = true
	} else {
		var yerr error
		if v, yerr = fromYAML(data); yerr != nil {
			if looksJSON(data) {
				return d.wrap(jerr)
			}
			return d.wrap(yerr)
		}
	}
	if v == nil {
		return &ParseError{Source: source, Msg: "the file is empty; want " + top.what + ", e.g. " + top.yaml}
	}
	fn(d, v)
	return d.err()
}

// looksJSON reports text that starts like a JSON object, `{"`, so that
// its JSON error is shown rather than YAML's.
func looksJSON(data []byte) bool {
	rest, ok := bytes.CutPrefix(bytes.TrimSpace(data), []byte("{"))
	return ok && bytes.HasPrefix(bytes.TrimSpace(rest), []byte(`"`))
}

// parseBody reads a JSON request body and decodes its tree with fn. Line
// numbers are given only for bodies of several lines.
func parseBody(body []byte, top form, fn func(*decoder, *value)) error {
	d := &decoder{json: true, noLines: !bytes.ContainsRune(bytes.TrimSpace(body), '\n')}
	if err := tooMany(body); err != nil {
		return d.wrap(err)
	}
	v, err := fromJSON(body)
	if err != nil {
		return d.wrap(err)
	}
	if v == nil {
		return &ParseError{Msg: "the request body is empty; want " + top.what + ", e.g. " + top.json}
	}
	fn(d, v)
	return d.err()
}

// lineError is a syntax error found while building the tree.
type lineError struct {
	line int
	msg  string
}

func (e *lineError) Error() string { return e.msg }

// fromYAML builds the tree of one YAML document; nil if it is empty.
func fromYAML(data []byte) (*value, error) {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, nil
		}
		return nil, yamlError(err)
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); err == nil {
		return nil, &lineError{extra.Line, "holds more than one YAML document (---): write one"}
	} else if !errors.Is(err, io.EOF) {
		return nil, yamlError(err)
	}
	if len(doc.Content) == 0 {
		return nil, nil
	}
	return yamlValue(doc.Content[0], 0)
}

// yamlError turns "yaml: line 3: did not find expected key" into a line
// and a message.
func yamlError(err error) error {
	msg := strings.TrimPrefix(err.Error(), "yaml: ")
	line := 0
	if rest, ok := strings.CutPrefix(msg, "line "); ok {
		if n, after, ok := strings.Cut(rest, ": "); ok {
			if l, err := strconv.Atoi(n); err == nil {
				line, msg = l, after
			}
		}
	}
	return &lineError{line, "invalid YAML: " + msg}
}

func yamlValue(n *yaml.Node, depth int) (*value, error) {
	if depth > maxDepth {
		return nil, &lineError{n.Line, fmt.Sprintf("nested deeper than %d levels", maxDepth)}
	}
	v := &value{line: n.Line}
	switch n.Kind {
	case yaml.AliasNode:
		return nil, &lineError{n.Line, fmt.Sprintf("aliases (*%s) are not supported: write the value out", n.Value)}
	case yaml.MappingNode:
		v.kind = kMap
		seen := map[string]int{}
		for i := 0; i+1 < len(n.Content); i += 2 {
			k := n.Content[i]
			if k.Kind != yaml.ScalarNode || k.ShortTag() == "!!merge" {
				return nil, &lineError{k.Line, "a key must be a plain word such as circuits"}
			}
			if prev, ok := seen[k.Value]; ok {
				return nil, &lineError{k.Line, fmt.Sprintf("key %q appears twice (lines %d and %d)", k.Value, prev, k.Line)}
			}
			seen[k.Value] = k.Line
			c, err := yamlValue(n.Content[i+1], depth+1)
			if err != nil {
				return nil, err
			}
			v.keys = append(v.keys, &value{kind: kString, line: k.Line, text: k.Value})
			v.vals = append(v.vals, c)
		}
	case yaml.SequenceNode:
		v.kind = kList
		for _, c := range n.Content {
			cv, err := yamlValue(c, depth+1)
			if err != nil {
				return nil, err
			}
			v.items = append(v.items, cv)
		}
	case yaml.ScalarNode:
		v.text = n.Value
		switch n.ShortTag() {
		case "!!null":
			v.kind = kNull
		case "!!bool":
			v.kind = kBool
			v.text = strings.ToLower(n.Value)
		case "!!int", "!!float":
			v.kind = kNumber
		default:
			v.kind = kString
		}
	default:
		return nil, &lineError{n.Line, "unexpected YAML node"}
	}
	return v, nil
}

// fromJSON builds the tree of a JSON document; nil if there is none.
func fromJSON(data []byte) (*value, error) {
	if len(bytes.TrimSpace(data)) == 0 {
		return nil, nil
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	lc := &lineCounter{data: data, line: 1}
	v, err := jsonValue(dec, lc, 0)
	if err != nil {
		return nil, err
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, &lineError{lc.at(dec.InputOffset()), "invalid JSON: more data after the end of the document"}
	}
	return v, nil
}

// lineCounter maps increasing byte offsets to lines.
type lineCounter struct {
	data []byte
	pos  int
	line int
}

func (lc *lineCounter) at(off int64) int {
	end := min(int(off), len(lc.data))
	if end > lc.pos {
		lc.line += bytes.Count(lc.data[lc.pos:end], []byte{'\n'})
		lc.pos = end
	}
	return lc.line
}

func jsonValue(dec *json.Decoder, lc *lineCounter, depth int) (*value, error) {
	tok, err := dec.Token()
	line := lc.at(dec.InputOffset())
	if err != nil {
		return nil, jsonError(err, lc, dec)
	}
	if depth > maxDepth {
		return nil, &lineError{line, fmt.Sprintf("nested deeper than %d levels", maxDepth)}
	}
	v := &value{line: line}
	switch t := tok.(type) {
	case json.Delim:
		switch t {
		case '{':
			v.kind = kMap
			seen := map[string]int{}
			for dec.More() {
				kt, err := dec.Token()
				kline := lc.at(dec.InputOffset())
				if err != nil {
					return nil, jsonError(err, lc, dec)
				}
				k, ok := kt.(string)
				if !ok {
					return nil, &lineError{kline, "invalid JSON: a key must be a string"}
				}
				if prev, ok := seen[k]; ok {
					return nil, &lineError{kline, fmt.Sprintf("key %q appears twice (lines %d and %d)", k, prev, kline)}
				}
				seen[k] = kline
				c, err := jsonValue(dec, lc, depth+1)
				if err != nil {
					return nil, err
				}
				v.keys = append(v.keys, &value{kind: kString, line: kline, text: k})
				v.vals = append(v.vals, c)
			}
		case '[':
			v.kind = kList
			for dec.More() {
				c, err := jsonValue(dec, lc, depth+1)
				if err != nil {
					return nil, err
				}
				v.items = append(v.items, c)
			}
		default:
			return nil, &lineError{line, fmt.Sprintf("invalid JSON: unexpected %q", rune(t))}
		}
		if _, err := dec.Token(); err != nil { // the closing } or ]
			return nil, jsonError(err, lc, dec)
		}
	case string:
		v.kind, v.text = kString, t
	case json.Number:
		v.kind, v.text = kNumber, t.String()
	case bool:
		v.kind, v.text = kBool, strconv.FormatBool(t)
	case nil:
		v.kind = kNull
	}
	return v, nil
}

func jsonError(err error, lc *lineCounter, dec *json.Decoder) error {
	var se *json.SyntaxError
	switch {
	case errors.As(err, &se):
		return &lineError{lc.at(se.Offset), "invalid JSON: " + se.Error()}
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return &lineError{lc.at(dec.InputOffset()), "invalid JSON: it ends early (a missing } or ]?)"}
	}
	return &lineError{lc.at(dec.InputOffset()), "invalid JSON: " + err.Error()}
}

// decoder checks a tree against a format and gathers every problem.
type decoder struct {
	source  string
	json    bool // examples in JSON
	noLines bool
	errs    []error // the first maxErrors
	n       int     // all of them
}

func (d *decoder) err() error {
	if d.n > maxErrors {
		return errors.Join(append(d.errs, fmt.Errorf("... and %d more problems", d.n-maxErrors))...)
	}
	return errors.Join(d.errs...)
}

func (d *decoder) wrap(err error) error {
	var le *lineError
	if errors.As(err, &le) {
		return d.errAt(le.line, "", le.msg)
	}
	return &ParseError{Source: d.source, Msg: err.Error()}
}

func (d *decoder) errAt(line int, field, msg string) *ParseError {
	if d.noLines {
		line = 0
	}
	return &ParseError{Source: d.source, Line: line, Field: field, Msg: msg}
}

func (d *decoder) bad(line int, field, format string, a ...any) {
	if d.n++; d.n <= maxErrors {
		d.errs = append(d.errs, d.errAt(line, field, fmt.Sprintf(format, a...)))
	}
}

func (d *decoder) example(f form) string {
	if d.json {
		return f.json
	}
	return f.yaml
}

// wrong reports a value of the wrong shape.
func (d *decoder) wrong(v *value, field string, f form) {
	d.bad(v.line, field, "got %s, want %s, e.g. %s", v.describe(), f.what, d.example(f))
}

// fields checks that v is a mapping of known keys and returns its values
// by key; nil if v is not a mapping.
func (d *decoder) fields(v *value, field string, f form, known ...string) map[string]*value {
	if v.kind != kMap {
		d.wrong(v, field, f)
		return nil
	}
	out := map[string]*value{}
	for i, k := range v.keys {
		if !slices.Contains(known, k.text) {
			// The key is the user's text: quoted, never part of the path.
			d.bad(k.line, field, "unknown key %q (known keys: %s); e.g. %s", k.text, strings.Join(known, ", "), d.example(f))
			continue
		}
		out[k.text] = v.vals[i]
	}
	return out
}

// require reports a missing key.
func (d *decoder) require(m map[string]*value, parent *value, field, key string, f form) (*value, bool) {
	v, ok := m[key]
	if !ok || v.kind == kNull {
		d.bad(parent.line, field, "missing %s, e.g. %s", key, d.example(f))
		return nil, false
	}
	return v, true
}

func join(field, key string) string {
	if field == "" {
		return key
	}
	return field + "." + key
}

func (d *decoder) config(v *value) ConfigRequest {
	var r ConfigRequest
	m := d.fields(v, "", applyForm, "circuits", "delay", "at_ns")
	if m == nil {
		return r
	}
	if c, ok := m["circuits"]; !ok {
		d.bad(v.line, "", "missing circuits, e.g. %s (an empty list removes every circuit)", d.example(applyForm))
	} else {
		r.Circuits = d.circuits(c, "circuits")
	}
	r.Delay = d.delay(m["delay"], "delay")
	r.AtNs = d.instant(m["at_ns"], "at_ns")
	return r
}

func (d *decoder) connect(v *value) ConnectRequest {
	var r ConnectRequest
	m := d.fields(v, "", connectForm, "a", "b", "simplex", "delay")
	if m == nil {
		return r
	}
	if a, ok := d.require(m, v, "", "a", connectForm); ok {
		r.A = d.port(a, "a")
	}
	if b, ok := d.require(m, v, "", "b", connectForm); ok {
		r.B = d.port(b, "b")
	}
	r.Simplex = d.bool(m["simplex"], "simplex")
	r.Delay = d.delay(m["delay"], "delay")
	return r
}

func (d *decoder) disconnect(v *value) DisconnectRequest {
	var r DisconnectRequest
	m := d.fields(v, "", disconnectForm, "port", "delay")
	if m == nil {
		return r
	}
	if p, ok := d.require(m, v, "", "port", disconnectForm); ok {
		r.Port = d.port(p, "port")
	}
	r.Delay = d.delay(m["delay"], "delay")
	return r
}

func (d *decoder) schedule(v *value) Schedule {
	var s Schedule
	m := d.fields(v, "", scheduleForm, "slots", "cycles", "delay", "start_ns")
	if m == nil {
		return s
	}
	if sl, ok := d.require(m, v, "", "slots", scheduleForm); ok {
		if sl.kind != kList {
			d.wrong(sl, "slots", slotsForm)
		} else if len(sl.items) == 0 {
			d.bad(sl.line, "slots", "the list is empty; want at least one slot, e.g. %s", d.example(slotsForm))
		}
		for i, it := range sl.items {
			s.Slots = append(s.Slots, d.slot(it, fmt.Sprintf("slots[%d]", i)))
		}
	}
	if c := m["cycles"]; c != nil && c.kind != kNull {
		n, err := strconv.Atoi(c.text)
		switch {
		case c.kind != kNumber || err != nil:
			d.bad(c.line, "cycles", "got %s, want %s (0: until stopped), e.g. %s", c.describe(), countForm.what, countForm.yaml)
		case n < 0:
			d.bad(c.line, "cycles", "%d is negative; want 0 (until stopped) or more", n)
		default:
			s.Cycles = n
		}
	}
	s.Delay = d.delay(m["delay"], "delay")
	s.StartNs = d.instant(m["start_ns"], "start_ns")
	return s
}

func (d *decoder) slot(v *value, field string) Slot {
	var s Slot
	m := d.fields(v, field, slotForm, "duration", "circuits")
	if m == nil {
		return s
	}
	if du, ok := d.require(m, v, field, "duration", slotForm); ok {
		f := join(field, "duration")
		if du.kind != kString && du.kind != kNumber {
			d.wrong(du, f, durationForm)
		} else if dur, err := units.ParseDuration(du.text); err != nil {
			d.bad(du.line, f, "%v", err)
		} else if dur <= 0 {
			d.bad(du.line, f, "must be positive, e.g. %s", d.example(durationForm))
		} else if dur.D() > MaxSlot {
			d.bad(du.line, f, "must be at most %v, got %v", MaxSlot, dur.D())
		} else {
			s.Duration = dur
		}
	}
	if c, ok := m["circuits"]; ok {
		s.Circuits = d.circuits(c, join(field, "circuits"))
	}
	return s
}

// circuits reads a list of circuits; nothing (null) is the empty list.
func (d *decoder) circuits(v *value, field string) []circuit.Circuit {
	if v.kind == kNull {
		return nil
	}
	if v.kind != kList {
		d.wrong(v, field, circuitsForm)
		return nil
	}
	out := []circuit.Circuit{}
	for i, it := range v.items {
		f := fmt.Sprintf("%s[%d]", field, i)
		m := d.fields(it, f, circuitForm, "a", "b", "simplex")
		if m == nil {
			continue
		}
		var c circuit.Circuit
		if a, ok := d.require(m, it, f, "a", circuitForm); ok {
			c.A = d.port(a, join(f, "a"))
		}
		if b, ok := d.require(m, it, f, "b", circuitForm); ok {
			c.B = d.port(b, join(f, "b"))
		}
		c.Simplex = d.bool(m["simplex"], join(f, "simplex"))
		out = append(out, c)
	}
	return out
}

func (d *decoder) port(v *value, field string) circuit.Uplink {
	if v.kind != kString && v.kind != kNumber {
		d.wrong(v, field, portForm)
		return circuit.Uplink{}
	}
	u, err := circuit.ParseUplink(v.text)
	if err != nil {
		d.bad(v.line, field, "%v", err)
	}
	return u
}

func (d *decoder) bool(v *value, field string) bool {
	if v == nil || v.kind == kNull {
		return false
	}
	if v.kind != kBool {
		d.wrong(v, field, boolForm)
		return false
	}
	return v.text == "true"
}

// delay reads an optional reconfiguration delay within reconfig's bounds.
func (d *decoder) delay(v *value, field string) *units.Duration {
	if v == nil || v.kind == kNull {
		return nil
	}
	if v.kind != kString && v.kind != kNumber {
		d.wrong(v, field, delayForm)
		return nil
	}
	dur, err := reconfig.ParseDelay(v.text)
	if err != nil {
		d.bad(v.line, field, "%v", err)
		return nil
	}
	sd := units.Duration(dur)
	return &sd
}

// instant reads an optional CLOCK_MONOTONIC instant; its distance from now
// is checked against the OCS clock (reconfig.CheckAt).
func (d *decoder) instant(v *value, field string) int64 {
	if v == nil || v.kind == kNull {
		return 0
	}
	n, err := strconv.ParseInt(v.text, 10, 64)
	if v.kind != kNumber || err != nil {
		d.wrong(v, field, instantForm)
		return 0
	}
	if n < 0 {
		d.bad(v.line, field, "%d is negative: want %s", n, instantForm.what)
		return 0
	}
	return n
}
