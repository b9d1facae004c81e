package ocs

import (
	"bytes"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/ocsemu/ocsemu/dataplane/topo"
	"github.com/ocsemu/ocsemu/dataplane/units"
	"github.com/ocsemu/ocsemu/ocsfabric/circuit"
	"github.com/ocsemu/ocsemu/ocsfabric/reconfig"
)

// testLayout is 4 racks of 2 uplinks over 2 OCS: tor<r>:0 on ocs0, tor<r>:1 on ocs1.
func testLayout() circuit.Layout {
	return circuit.LayoutOf(topo.Spec{Racks: 4, UplinksPerToR: 2,
		OCSSwitches: 2, Spread: topo.SpreadRoundRobin})
}

// testNow is an OCS clock reading for the checks of at_ns and start_ns.
const testNow = int64(1_590_112_871_786)

func checkErr(t *testing.T, err error, want []string) {
	t.Helper()
	if len(want) == 0 {
		if err != nil {
			t.Errorf("unexpected error: %v", err)
		}
		return
	}
	if err == nil {
		t.Fatalf("want an error containing %q, got none", want)
	}
	for _, w := range want {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("error\n%v\ndoes not contain %q", err, w)
		}
	}
}

// Errors speak the file format: file:line, key, what was found and an
// example of the expected form; never a Go type.
func TestParseApplyFile(t *testing.T) {
	tests := []struct {
		name, in string
		want     []string
	}{
		{"valid", "circuits:\n  - {a: tor0:0, b: tor1:0}\n  - {a: tor2:0, b: tor3:0}\ndelay: 10ms\n", nil},
		{"valid json", `{"circuits":[{"a":"tor0:0","b":"tor1:0","simplex":true}],"delay":"20us","at_ns":5}`, nil},
		{"empty list removes all", "circuits: []\n", nil},
		{"circuit as a pair", "circuits: [[tor0:0, tor1:0]]\n",
			[]string{"c.yaml:1: circuits[0]: got a list, want a circuit, a mapping with a and b", "e.g. {a: tor0:0, b: tor1:0}"}},
		{"circuit as a pair in json", `{"circuits": [["tor0:0", "tor1:0"]]}`,
			[]string{"c.yaml:1: circuits[0]: got a list", `e.g. {"a":"tor0:0","b":"tor1:0"}`}},
		{"missing b", "circuits:\n  - {a: tor0:0, b: tor1:0}\n  - {a: tor2:0}\n", []string{"c.yaml:3: circuits[1]: missing b, e.g. {a: tor0:0, b: tor1:0}"}},
		{"bad port", "circuits:\n  - {a: tor0, b: tor1:0}\n", []string{`c.yaml:2: circuits[0].a: uplink "tor0": want tor<rack>:<uplink>, e.g. tor0:1`}},
		{"unknown key", "circuits: []\ndely: 10ms\n", []string{`c.yaml:2: unknown key "dely" (known keys: circuits, delay, at_ns)`}},
		{"no circuits key", "delay: 10ms\n", []string{"c.yaml:1: missing circuits", "an empty list removes every circuit"}},
		{"negative delay", "circuits: []\ndelay: -5ms\n", []string{"c.yaml:2: delay: must be between 0s and 10s, got -5ms"}},
		{"huge delay", "circuits: []\ndelay: 100h\n", []string{"c.yaml:2: delay: must be between 0s and 10s, got 100h0m0s"}},
		{"delay without unit", "circuits: []\ndelay: 50\n", []string{`c.yaml:2: delay: duration "50" has no unit`}},
		{"at_ns text", "circuits: []\nat_ns: soon\n", []string{`c.yaml:2: at_ns: got the text "soon", want a CLOCK_MONOTONIC instant in integer ns`}},
		{"simplex yes", "circuits: [{a: tor0:0, b: tor1:0, simplex: yes}]\n", []string{`circuits[0].simplex: got the text "yes", want true or false`}},
		{"not a mapping", "- a\n", []string{"c.yaml:1: got a list, want a mapping with circuits"}},
		{"empty", "", []string{"c.yaml: the file is empty"}},
		{"duplicate key", "circuits: []\ncircuits: []\n", []string{`c.yaml:2: key "circuits" appears twice (lines 1 and 2)`}},
		{"two documents", "circuits: []\n---\ncircuits: []\n", []string{"more than one YAML document"}},
		{"alias", "circuits: &c []\ndelay: *c\n", []string{"aliases (*c) are not supported"}},
		{"bad yaml", "circuits: [\n", []string{"c.yaml:", "invalid YAML"}},
		{"bad json", "{\"circuits\": [}\n", []string{"c.yaml:1: invalid JSON"}},
		{"all errors at once", "circuits:\n  - [tor0:0, tor1:0]\n  - {a: tor0:0}\ndelay: -1ms\n", []string{"c.yaml:2:", "c.yaml:3:", "c.yaml:4:"}},
		{"the first 20 errors and a count", "circuits:\n" + strings.Repeat("  - [tor0:0, tor1:0]\n", 100), []string{"c.yaml:21: circuits[19]", "... and 80 more problems"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ParseApplyFile([]byte(tt.in), "c.yaml")
			checkErr(t, err, tt.want)
		})
	}
	req, err := ParseApplyFile([]byte("circuits: [{a: tor0:0, b: tor1:0}]\ndelay: 20µs\nat_ns: 7\n"), "c.yaml")
	want := ConfigRequest{Circuits: []circuit.Circuit{{A: circuit.Uplink{Rack: 0}, B: circuit.Uplink{Rack: 1}}}, Delay: dur(20 * time.Microsecond), AtNs: 7}
	if err != nil || !reflect.DeepEqual(req, want) {
		t.Errorf("got %+v, %v; want %+v", req, err, want)
	}
}

func dur(d time.Duration) *units.Duration { sd := units.Duration(d); return &sd }

func TestParseScheduleFile(t *testing.T) {
	tests := []struct {
		name, in string
		want     []string
	}{
		{"rotor", "slots:\n  - {duration: 1ms, circuits: [{a: tor0:0, b: tor1:0}, {a: tor2:0, b: tor3:0}]}\n  - {duration: 1ms, circuits: [{a: tor0:0, b: tor2:0}, {a: tor1:0, b: tor3:0}]}\ncycles: 500\ndelay: 20us\nstart_ns: 0\n", nil},
		{"dark slot", "slots: [{duration: 1ms}]\n", nil},
		{"circuit as a pair", "slots:\n  - {duration: 1ms, circuits: [[tor0:0, tor1:0]]}\n", []string{"s.yaml:2: slots[0].circuits[0]: got a list, want a circuit", "e.g. {a: tor0:0, b: tor1:0}"}},
		{"no slots", "cycles: 5\n", []string{"s.yaml:1: missing slots, e.g. slots: [{duration: 1ms"}},
		{"empty slots", "slots: []\n", []string{"s.yaml:1: slots: the list is empty; want at least one slot"}},
		{"slots as a mapping", "slots: {duration: 1ms}\n", []string{"s.yaml:1: slots: got a mapping, want a list of slots"}},
		{"zero duration", "slots:\n  - {duration: 0s}\n", []string{"s.yaml:2: slots[0].duration: must be positive"}},
		{"duration over an hour", "slots:\n  - {duration: 2h}\n", []string{"s.yaml:2: slots[0].duration: must be at most 1h0m0s, got 2h0m0s"}},
		{"no duration", "slots:\n  - {circuits: []}\n", []string{"s.yaml:2: slots[0]: missing duration, e.g. {duration: 1ms"}},
		{"duration without unit", "slots:\n  - duration: 5\n", []string{`s.yaml:2: slots[0].duration: duration "5" has no unit`}},
		{"negative cycles", "slots: [{duration: 1ms}]\ncycles: -1\n", []string{"s.yaml:2: cycles: -1 is negative"}},
		{"cycles text", "slots: [{duration: 1ms}]\ncycles: many\n", []string{`s.yaml:2: cycles: got the text "many", want a whole number`}},
		{"huge delay", "slots: [{duration: 1ms}]\ndelay: 100h\n", []string{"s.yaml:2: delay: must be between 0s and 10s, got 100h0m0s"}},
		{"unknown slot key", "slots:\n  - {duration: 1ms, circuit: []}\n", []string{`s.yaml:2: slots[0]: unknown key "circuit" (known keys: duration, circuits)`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ParseScheduleFile([]byte(tt.in), "s.yaml")
			checkErr(t, err, tt.want)
		})
	}
}

// The API bodies go through the same decoder (JSON examples, lines only
// for bodies of several lines), then the checks against the fabric and
// the OCS clock.
func TestDecodeRequests(t *testing.T) {
	tests := []struct {
		name   string
		decode func([]byte) error
		body   string
		want   []string
	}{
		{"config", cfgDecode, `{"circuits":[{"a":"tor0:0","b":"tor1:0"}],"delay":"10ms"}`, nil},
		{"config null circuits (Go client, empty map)", cfgDecode, `{"circuits":null}`, nil},
		{"config at_ns ahead", cfgDecode, `{"circuits":[],"at_ns":1590113871786}`, nil},
		{"config at_ns 1", cfgDecode, `{"circuits":[],"at_ns":1}`, []string{"at_ns: 1 is 26m30.113s in the past (the OCS clock reads 1590112871786)", "or 0 for as soon as possible"}},
		{"config at_ns too far", cfgDecode, `{"circuits":[],"at_ns":8790112871786}`, []string{"at_ns: 8790112871786 is 2h0m0s ahead", "at most 1h0m0s ahead"}},
		{"config at_ns float", cfgDecode, `{"circuits":[],"at_ns":1e9}`, []string{"at_ns: got the number 1e9, want a CLOCK_MONOTONIC instant in integer ns"}},
		{"config negative delay", cfgDecode, `{"circuits":[],"delay":"-5ms"}`, []string{"delay: must be between 0s and 10s, got -5ms"}},
		{"config pair", cfgDecode, `{"circuits":[["tor0:0","tor1:0"]]}`, []string{`circuits[0]: got a list, want a circuit`, `e.g. {"a":"tor0:0","b":"tor1:0"}`}},
		{"config multi-line names lines", cfgDecode, "{\n  \"circuits\": [],\n  \"delay\": 5\n}", []string{`line 3: delay: duration "5" has no unit`}},
		{"config across switches", cfgDecode, `{"circuits":[{"a":"tor0:0","b":"tor1:1"}]}`, []string{"invalid configuration: circuit 0 (tor0:0<->tor1:1): tor0:0 is cabled to ocs0 but tor1:1 to ocs1"}},
		{"config unknown key", cfgDecode, `{"circuits":[],"at":5}`, []string{`unknown key "at" (known keys: circuits, delay, at_ns)`}},
		{"config: the first 20 errors and a count", cfgDecode, `{"circuits":[` + strings.Repeat(`{"a":"tor0:0","b":"tor1:0"},`, 100) + `{"a":"tor0:0","b":"tor1:0"}]}`,
			[]string{"circuit 5 (tor0:0<->tor1:0): tor0:0 is already in circuit tor0:0<->tor1:0", "\n... and 180 more problems"}},
		{"config empty", cfgDecode, ``, []string{"the request body is empty"}},
		{"config trailing data", cfgDecode, `{"circuits":[]} {}`, []string{"more data after the end"}},
		{"connect", connDecode, `{"a":"tor0:1","b":"tor2:1","delay":"1ms"}`, nil},
		{"connect missing b", connDecode, `{"a":"tor0:1"}`, []string{`missing b, e.g. {"a":"tor0:1","b":"tor2:0","delay":"1ms"}`}},
		{"connect no such rack", connDecode, `{"a":"tor0:1","b":"tor9:1"}`, []string{"tor9:1: no rack 9 (the fabric has 4 racks)"}},
		{"connect delay too long", connDecode, `{"a":"tor0:1","b":"tor2:1","delay":"100h"}`, []string{"delay: must be between 0s and 10s, got 100h0m0s"}},
		{"connect simplex on full duplex", connDecode, `{"a":"tor0:1","b":"tor2:1","simplex":true}`, []string{"simplex circuits need ocs.duplex: half"}},
		{"disconnect", discDecode, `{"port":"tor0:1"}`, nil},
		{"disconnect bad port", discDecode, `{"port":"x"}`, []string{`port: uplink "x": want tor<rack>:<uplink>`}},
		{"disconnect no such uplink", discDecode, `{"port":"tor0:5"}`, []string{"tor0:5: no uplink 5"}},
		{"schedule", schedDecode, `{"slots":[{"duration":"1ms","circuits":[{"a":"tor0:0","b":"tor1:0"}]}],"cycles":2}`, nil},
		{"schedule start_ns 1", schedDecode, `{"slots":[{"duration":"1ms"}],"start_ns":1}`, []string{"start_ns: 1 is 26m30.113s in the past"}},
		{"schedule bad slot", schedDecode, `{"slots":[{"duration":"1ms","circuits":[{"a":"tor0:0","b":"tor0:0"}]}]}`, []string{"slot 0: circuit 0 (tor0:0<->tor0:0): both ends are on rack 0"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			checkErr(t, tt.decode([]byte(tt.body)), tt.want)
		})
	}
}

func cfgDecode(b []byte) error {
	_, err := DecodeConfigRequest(b, testLayout(), testNow)
	return err
}

func connDecode(b []byte) error {
	_, err := DecodeConnectRequest(b, testLayout())
	return err
}

func discDecode(b []byte) error {
	_, err := DecodeDisconnectRequest(b, testLayout())
	return err
}

func schedDecode(b []byte) error {
	_, err := DecodeSchedule(b, testLayout(), testNow)
	return err
}

// What the Go client sends decodes to what it meant.
func TestClientBodiesRoundTrip(t *testing.T) {
	l := testLayout()
	u := func(s string) circuit.Uplink { v, _ := circuit.ParseUplink(s); return v }
	cfg := ConfigRequest{Circuits: []circuit.Circuit{{A: u("tor0:0"), B: u("tor1:0")}}, Delay: dur(time.Millisecond), AtNs: testNow + 1}
	b, _ := json.Marshal(cfg)
	if got, err := DecodeConfigRequest(b, l, testNow); err != nil || !reflect.DeepEqual(got, cfg) {
		t.Errorf("config: %s -> %+v, %v", b, got, err)
	}
	b, _ = json.Marshal(ConfigRequest{})
	if got, err := DecodeConfigRequest(b, l, testNow); err != nil || len(got.Circuits) != 0 {
		t.Errorf("empty config: %s -> %+v, %v", b, got, err)
	}
	sched := Schedule{Slots: []Slot{{Duration: units.Duration(time.Millisecond)}, {Circuits: cfg.Circuits, Duration: units.Duration(time.Second)}}, Cycles: 3, Delay: dur(0)}
	b, _ = json.Marshal(sched)
	if got, err := DecodeSchedule(b, l, testNow); err != nil || !reflect.DeepEqual(got, sched) {
		t.Errorf("schedule: %s -> %+v, %v", b, got, err)
	}
	conn := ConnectRequest{A: u("tor0:1"), B: u("tor3:1"), Delay: dur(0)}
	b, _ = json.Marshal(conn)
	if got, err := DecodeConnectRequest(b, l); err != nil || !reflect.DeepEqual(got, conn) {
		t.Errorf("connect: %s -> %+v, %v", b, got, err)
	}
	disc := DisconnectRequest{Port: u("tor3:1")}
	b, _ = json.Marshal(disc)
	if got, err := DecodeDisconnectRequest(b, l); err != nil || !reflect.DeepEqual(got, disc) {
		t.Errorf("disconnect: %s -> %+v, %v", b, got, err)
	}
}

// A body over the limit is answered 413 with the limit, not cut and
// reported as a JSON error; a bad body is answered 400 with the format's
// words. Both are refused before the controller is used, so a zero
// Controller serves.
func TestAPIRefusesBadBodies(t *testing.T) {
	h := (&Controller{}).Handler()
	big := append([]byte(`{"circuits":[`), bytes.Repeat([]byte(`{"a":"tor0:0","b":"tor1:0"},`), MaxBodyBytes/28+1)...)
	for _, tt := range []struct {
		method, path string
		body         []byte
		code         int
		want         string
	}{
		{"PUT", "/v1/config", big, http.StatusRequestEntityTooLarge, "request body over the limit of 16 MiB (16777216 bytes)"},
		{"POST", "/v1/schedule", big, http.StatusRequestEntityTooLarge, "over the limit of 16 MiB"},
		{"POST", "/v1/connect", big, http.StatusRequestEntityTooLarge, "over the limit of 16 MiB"},
		{"POST", "/v1/disconnect", big, http.StatusRequestEntityTooLarge, "over the limit of 16 MiB"},
		{"PUT", "/v1/config", []byte(`{"circuits":[["tor0:0","tor1:0"]]}`), http.StatusBadRequest, "circuits[0]: got a list, want a circuit"},
		// Within the size limit, but a value per two bytes: refused before
		// any tree is built (it took 1.8 GB and 11 s).
		{"PUT", "/v1/config", append(append([]byte(`{"circuits":[0`), bytes.Repeat([]byte(",0"), maxSeparators+1)...), "]}"...), http.StatusBadRequest, "holds 1048577 commas and lines, more than the 1048576"},
		{"POST", "/v1/connect", []byte(`{"a":"tor0:0","b":"tor1:0","delay":"-5ms"}`), http.StatusBadRequest, "delay: must be between 0s and 10s, got -5ms"},
	} {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(tt.method, tt.path, bytes.NewReader(tt.body)))
		var e struct{ Error string }
		_ = json.Unmarshal(rec.Body.Bytes(), &e)
		if rec.Code != tt.code || !strings.Contains(e.Error, tt.want) {
			t.Errorf("%s %s (%d bytes): %d %q, want %d with %q", tt.method, tt.path, len(tt.body), rec.Code, e.Error, tt.code, tt.want)
		}
	}
}

var quoted = regexp.MustCompile(`"(?:[^"\\]|\\.)*"`)

var goWords = regexp.MustCompile(`!!\w+|\b(circuit|scenario|ocs|time)\.[A-Z]\w*|Go (struct|value)|unmarshal`)

// noGoTypes fails when an error names Go types or YAML tags instead of
// the format.
func noGoTypes(t *testing.T, err error) {
	if err == nil {
		return
	}
	// User text is quoted in messages; only the rest must speak the format.
	if m := goWords.FindString(quoted.ReplaceAllString(err.Error(), `""`)); m != "" {
		t.Fatalf("error speaks Go, not the format (%q): %v", m, err)
	}
}

var applySeeds = []string{
	"circuits:\n  - {a: tor0:0, b: tor1:0}\n  - {a: tor2:0, b: tor3:0}\ndelay: 10ms\n",
	`{"circuits":[{"a":"tor0:0","b":"tor1:0","simplex":true}],"delay":"20us","at_ns":5}`,
	"circuits: []\n", "circuits: [[tor0:0, tor1:0]]\n", "circuits: [{a: tor0:0}]\ndelay: -5ms\nat_ns: 1\n",
	"circuits: &c []\ndelay: *c\n", "- a\n", "", "circuits: [\n", "{\"circuits\": [}\n", "circuits: []\n---\nx: 1\n",
	"circuits: [{a: tor0:0, b: tor1:0, simplex: yes}]\nat_ns: 1e9\n",
}

var scheduleSeeds = []string{
	"slots:\n  - {duration: 1ms, circuits: [{a: tor0:0, b: tor1:0}, {a: tor2:0, b: tor3:0}]}\n  - {duration: 1ms, circuits: [{a: tor0:0, b: tor2:0}, {a: tor1:0, b: tor3:0}]}\ncycles: 500\ndelay: 20us\nstart_ns: 0\n",
	`{"slots":[{"duration":"1ms","circuits":[{"a":"tor0:0","b":"tor1:0"}]}],"cycles":2,"start_ns":1590112871787}`,
	"slots: [{duration: 1ms}]\n", "slots: []\n", "slots: {duration: 1ms}\n", "slots:\n  - duration: 5\ncycles: -1\n",
	"slots: [{duration: 0s, circuits: [[tor0:0, tor1:0]]}]\ndelay: 100h\n",
}

// The file parsers never crash, accept only values within bounds, speak
// the format in their errors, and read what they accept the same way
// again once written as JSON (the API's form).
func FuzzParseApplyFile(f *testing.F) {
	for _, s := range applySeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		req, err := ParseApplyFile(data, "f")
		noGoTypes(t, err)
		if err != nil {
			return
		}
		if checkDelay(req.Delay) != nil || req.AtNs < 0 {
			t.Fatalf("accepted out of bounds: %+v", req)
		}
		b, err := json.Marshal(req)
		if err != nil {
			t.Fatal(err)
		}
		var again ConfigRequest
		if err := parseBody(b, applyForm, func(d *decoder, v *value) { again = d.config(v) }); err != nil || !reflect.DeepEqual(again, req) {
			t.Fatalf("round trip: %+v -> %s -> %+v, %v", req, b, again, err)
		}
	})
}

func FuzzParseScheduleFile(f *testing.F) {
	for _, s := range scheduleSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		s, err := ParseScheduleFile(data, "f")
		noGoTypes(t, err)
		if err != nil {
			return
		}
		if len(s.Slots) == 0 || s.Cycles < 0 || s.StartNs < 0 || checkDelay(s.Delay) != nil {
			t.Fatalf("accepted out of bounds: %+v", s)
		}
		for _, sl := range s.Slots {
			if sl.Duration <= 0 {
				t.Fatalf("accepted a slot of %v", sl.Duration)
			}
		}
		b, err := json.Marshal(s)
		if err != nil {
			t.Fatal(err)
		}
		var again Schedule
		if err := parseBody(b, scheduleForm, func(d *decoder, v *value) { again = d.schedule(v) }); err != nil || !reflect.DeepEqual(again, s) {
			t.Fatalf("round trip: %+v -> %s -> %+v, %v", s, b, again, err)
		}
	})
}

// Each API handler's decode and check path: never a crash, errors in the
// format's words, and what is accepted is valid for the fabric, within the
// delay bounds and timed within reach of the OCS clock.
func FuzzDecodeConfigRequest(f *testing.F) {
	for _, s := range []string{`{"circuits":[{"a":"tor0:0","b":"tor1:0"}],"delay":"10ms"}`, `{"circuits":null}`,
		`{"circuits":[],"at_ns":1590113871786}`, `{"circuits":[],"at_ns":1}`, `{"circuits":[["tor0:0","tor1:0"]]}`,
		"{\n  \"circuits\": [],\n  \"delay\": 5\n}", `{"circuits":[{"a":"tor0:0","b":"tor1:1"}]}`, `{"circuits":[]} {}`, ``, `[`} {
		f.Add([]byte(s))
	}
	l := testLayout()
	f.Fuzz(func(t *testing.T, body []byte) {
		req, err := DecodeConfigRequest(body, l, testNow)
		noGoTypes(t, err)
		if err != nil {
			return
		}
		if l.Validate(circuit.Config{Circuits: req.Circuits}) != nil || checkDelay(req.Delay) != nil || reconfig.CheckAt(req.AtNs, testNow) != nil {
			t.Fatalf("accepted an invalid request: %+v", req)
		}
	})
}

func FuzzDecodeConnectRequest(f *testing.F) {
	for _, s := range []string{`{"a":"tor0:1","b":"tor2:1","delay":"1ms"}`, `{"a":"tor0:1"}`, `{"a":"tor0:1","b":"tor9:1"}`,
		`{"a":"tor0:1","b":"tor2:1","simplex":true}`, `{"a":1,"b":true}`, `{"a":"tor0:0","b":"tor1:0","delay":"-5ms"}`} {
		f.Add([]byte(s))
	}
	l := testLayout()
	f.Fuzz(func(t *testing.T, body []byte) {
		req, err := DecodeConnectRequest(body, l)
		noGoTypes(t, err)
		if err != nil {
			return
		}
		if l.Validate(circuit.Config{Circuits: []circuit.Circuit{req.Circuit(l)}}) != nil || checkDelay(req.Delay) != nil {
			t.Fatalf("accepted an invalid request: %+v", req)
		}
	})
}

func FuzzDecodeDisconnectRequest(f *testing.F) {
	for _, s := range []string{`{"port":"tor0:1"}`, `{"port":"x"}`, `{"port":"tor0:5"}`, `{"port":"tor3:1","delay":"100h"}`, `{}`} {
		f.Add([]byte(s))
	}
	l := testLayout()
	f.Fuzz(func(t *testing.T, body []byte) {
		req, err := DecodeDisconnectRequest(body, l)
		noGoTypes(t, err)
		if err != nil {
			return
		}
		if l.Check(req.Port) != nil || checkDelay(req.Delay) != nil {
			t.Fatalf("accepted an invalid request: %+v", req)
		}
	})
}

func FuzzDecodeSchedule(f *testing.F) {
	for _, s := range scheduleSeeds {
		f.Add([]byte(s))
	}
	for _, s := range []string{`{"slots":[{"duration":"1ms","circuits":[{"a":"tor0:0","b":"tor1:0"}]}],"cycles":2}`,
		`{"slots":[{"duration":"1ms"}],"start_ns":1}`, `{"slots":[{"duration":"1ms","circuits":[{"a":"tor0:0","b":"tor0:0"}]}]}`} {
		f.Add([]byte(s))
	}
	l := testLayout()
	f.Fuzz(func(t *testing.T, body []byte) {
		s, err := DecodeSchedule(body, l, testNow)
		noGoTypes(t, err)
		if err != nil {
			return
		}
		if s.Validate(l) != nil || reconfig.CheckAt(s.StartNs, testNow) != nil {
			t.Fatalf("accepted an invalid schedule: %+v", s)
		}
	})
}

// The event log stops at its limit, says so once, and the OCS goes on.
func TestEventLogBounded(t *testing.T) {
	defer func(old int64) { MaxEventLogBytes = old }(MaxEventLogBytes)
	MaxEventLogBytes = 4 << 10
	f, err := os.CreateTemp(t.TempDir(), "ocs-events")
	if err != nil {
		t.Fatal(err)
	}
	c := &Controller{evFile: f, log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	for i := 0; i < 1000; i++ {
		c.emit(&Event{Kind: "slot", Slot: i})
	}
	fi, _ := f.Stat()
	if fi.Size() > MaxEventLogBytes || fi.Size() < MaxEventLogBytes/2 {
		t.Errorf("the log holds %d bytes, want at most %d (and most of it used)", fi.Size(), MaxEventLogBytes)
	}
	if err := c.EventLogErr(); err == nil || !strings.Contains(err.Error(), "reached its limit") {
		t.Errorf("EventLogErr() = %v", err)
	}
	if c.seq != 1000 {
		t.Errorf("%d events numbered, want 1000: the OCS must go on", c.seq)
	}
}

// Stopping when no schedule runs says so (the CLI prints it).
func TestAPIStopWithoutSchedule(t *testing.T) {
	h := (&Controller{}).Handler()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("DELETE", "/v1/schedule", nil))
	if rec.Code != http.StatusOK || !strings.Contains(rec.Body.String(), `"none running"`) {
		t.Errorf("DELETE /v1/schedule with none running: %d %s", rec.Code, rec.Body.String())
	}
}
