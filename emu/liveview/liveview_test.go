package liveview

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ocsemu/ocsemu/dataplane/topo"
	"github.com/ocsemu/ocsemu/dataplane/units"
	"github.com/ocsemu/ocsemu/ocsfabric/circuit"
	"github.com/ocsemu/ocsemu/ocsfabric/fastpath"
	"github.com/ocsemu/ocsemu/ocsfabric/ocs"
)

func up(r, p int) circuit.Uplink { return circuit.Uplink{Rack: r, Port: p} }

func TestRates(t *testing.T) {
	prev := map[circuit.Uplink]fastpath.Counters{
		up(0, 0): {FwdBytes: 1000, DarkPackets: 5},
		up(1, 0): {FwdBytes: 500},
		up(2, 0): {FwdBytes: 9000},
	}
	cur := []ocs.PortCounters{
		{Uplink: up(0, 0), Counters: fastpath.Counters{FwdBytes: 126000, DarkPackets: 25}}, // moved
		{Uplink: up(1, 0), Counters: fastpath.Counters{FwdBytes: 500}},                     // idle: left out
		{Uplink: up(2, 0), Counters: fastpath.Counters{FwdBytes: 100}},                     // went down: restart
		{Uplink: up(3, 0), Counters: fastpath.Counters{UnpatchedPackets: 10}},              // new port
	}
	got := rates(prev, cur, 500*time.Millisecond)
	want := []PortRate{
		{Port: "tor0:0", Bps: 8 * 125000 / 0.5, DarkPps: 40, DarkTotal: 25},
		{Port: "tor2:0", Bps: 8 * 100 / 0.5},
		{Port: "tor3:0", UnpatchedPps: 20, Unpatched: 10},
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("rates:\n got %+v\nwant %+v", got, want)
	}
	if r := rates(prev, cur, 0); r != nil {
		t.Errorf("zero interval: got %v, want nothing", r)
	}
}

func TestTopologyOf(t *testing.T) {
	sp := topo.Spec{Lab: "x", Kind: topo.FabricOCS, Racks: 2, ServersPerRack: 1, UplinksPerToR: 2, OCSSwitches: 2, UplinkRate: units.Rate(1e9)}
	tp := topologyOf(sp, false)
	var names []string
	for _, p := range tp.Ports {
		names = append(names, fmt.Sprintf("%s@ocs%d/%d", p.Name, p.OCS, p.Index))
	}
	if got, want := strings.Join(names, " "), "tor0:0@ocs0/0 tor0:1@ocs1/0 tor1:0@ocs0/1 tor1:1@ocs1/1"; got != want {
		t.Errorf("ports %q, want %q", got, want)
	}
	if eps := topologyOf(topo.Spec{Kind: topo.FabricEPS, Racks: 2}, false); len(eps.Ports) != 0 {
		t.Errorf("an eps fabric has no OCS ports, got %v", eps.Ports)
	}
}

func TestTimelineFollowsRecords(t *testing.T) {
	root := t.TempDir()
	run := filepath.Join(root, "20261122-030000")
	os.MkdirAll(filepath.Join(run, "records"), 0o755)
	link := filepath.Join(root, "latest")
	tl := newTimeline(link)
	if got := tl.read(); !strings.Contains(got.Message, "no run of this lab yet") {
		t.Errorf("before a run: %q", got.Message)
	}
	os.Symlink(filepath.Base(run), link)
	rec := filepath.Join(run, "records", "a-r0.jsonl")
	line := func(iter int, phase string, start, end int64) string {
		return fmt.Sprintf(`{"type":"phase","job":"a","iteration":%d,"phase":%q,"rank":0,"start_ns":%d,"end_ns":%d}`+"\n", iter, phase, start, end)
	}
	f, _ := os.Create(rec)
	defer f.Close()
	f.WriteString(line(0, "compute", 1e9, 1e9+10e6))
	f.WriteString(`{"type":"tcp","job":"a","rank":0}` + "\n")
	f.WriteString(line(0, "allreduce", 1e9+10e6, 1e9+40e6)[:30]) // half written
	got := tl.read()
	if !got.Running || len(got.Jobs) != 1 || len(got.Jobs[0].Phases) != 1 {
		t.Fatalf("after one phase: %+v", got)
	}
	f.WriteString(line(0, "allreduce", 1e9+10e6, 1e9+40e6)[30:])
	os.WriteFile(filepath.Join(run, "records", "a-r1.jsonl"), []byte(line(0, "allreduce", 1e9+12e6, 1e9+50e6)), 0o644)
	got = tl.read()
	ph := got.Jobs[0].Phases
	if len(ph) != 2 || ph[1].Phase != "allreduce" || ph[1].StartMs != 10 || ph[1].EndMs != 50 || ph[1].Ranks != 2 || got.SpanMs != 50 {
		t.Errorf("after the second phase: %+v", got)
	}
	os.WriteFile(filepath.Join(run, "measurement.json"), []byte("{}"), 0o644)
	if got := tl.read(); got.Running || !strings.Contains(got.Message, "finished") {
		t.Errorf("after the run: %+v", got)
	}
}

// fakeOCS is an OCS whose circuits the test changes.
type fakeOCS struct {
	mu       sync.Mutex
	circuits []circuit.Circuit
	err      error
	fwd      uint64
	events   []ocs.Event
}

func (f *fakeOCS) Config(context.Context) (ocs.ConfigView, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return ocs.ConfigView{Circuits: append([]circuit.Circuit(nil), f.circuits...)}, f.err
}

func (f *fakeOCS) Counters(context.Context) ([]ocs.PortCounters, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.fwd += 125000
	return []ocs.PortCounters{{Uplink: up(0, 0), Counters: fastpath.Counters{FwdBytes: f.fwd}}}, f.err
}

func (f *fakeOCS) Connect(_ context.Context, r ocs.ConnectRequest) (ocs.Event, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.circuits = append(f.circuits, circuit.Circuit{A: r.A, B: r.B})
	return ocs.Event{Seq: 7}, nil
}

func (f *fakeOCS) Disconnect(context.Context, ocs.DisconnectRequest) (ocs.Event, error) {
	return ocs.Event{}, errors.New("not in any circuit")
}

func (f *fakeOCS) Events(ctx context.Context, fn func(ocs.Event) bool) error {
	f.mu.Lock()
	evs := f.events
	f.events = nil
	f.mu.Unlock()
	for _, ev := range evs {
		if !fn(ev) {
			return nil
		}
	}
	<-ctx.Done()
	return nil
}

func (f *fakeOCS) set(cs []circuit.Circuit, err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.circuits, f.err = cs, err
}

var spec2 = topo.Spec{Lab: "t", Kind: topo.FabricOCS, Racks: 2, ServersPerRack: 1, UplinksPerToR: 1, OCSSwitches: 1}

// serve runs a Server on a loopback port until the test ends.
func serve(t *testing.T, o Options) string {
	t.Helper()
	o.Lab = "t"
	o.Interval = 20 * time.Millisecond
	s, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- s.Serve(ctx, ln) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	return "http://" + ln.Addr().String()
}

// events reads SSE events until want returns true or 5 s pass.
func events(t *testing.T, url string, want func(event, data string) bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", url+"/events", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Fatalf("content type %q", ct)
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 1<<20)
	event := ""
	for sc.Scan() {
		l := sc.Text()
		if e, ok := strings.CutPrefix(l, "event: "); ok {
			event = e
		}
		if d, ok := strings.CutPrefix(l, "data: "); ok && want(event, d) {
			return
		}
	}
	t.Fatalf("stream ended without the expected event: %v", sc.Err())
}

func TestServerPushesCircuitChanges(t *testing.T) {
	f := &fakeOCS{}
	url := serve(t, Options{Spec: func() (topo.Spec, error) { return spec2, nil }, OCS: f})
	var seen []string
	changed, drawn := false, false
	events(t, url, func(ev, data string) bool {
		seen = append(seen, ev)
		switch {
		case ev == "circuits" && !changed:
			f.set([]circuit.Circuit{{A: up(0, 0), B: up(1, 0)}}, nil)
			changed = true
		case ev == "circuits":
			var c Circuits
			json.Unmarshal([]byte(data), &c)
			drawn = len(c.Circuits) == 1 && c.Circuits[0].String() == "tor0:0<->tor1:0"
		case ev == "counters" && drawn:
			var s Sample
			json.Unmarshal([]byte(data), &s)
			// 125000 bytes per poll (20 ms apart, give or take the timer):
			// the rate times the interval it was taken over gives them back.
			if len(s.Ports) != 1 || s.DtMs <= 0 || math.Abs(s.Ports[0].Bps*s.DtMs/8000-125000) > 125 { // dt_ms is rounded to 1 µs
				t.Errorf("counters: %s", data)
			}
			return true
		}
		return false
	})
	joined := strings.Join(seen, " ")
	for _, want := range []string{"topology", "status", "counters"} {
		if !strings.Contains(joined, want) {
			t.Errorf("no %s event in %s", want, joined)
		}
	}
	// A circuit map that did not change is not sent again.
	if n := strings.Count(joined, "circuits"); n != 2 {
		t.Errorf("%d circuits events, want 2 (the first map and the change): %s", n, joined)
	}
}

func TestServerSaysWhatIsDown(t *testing.T) {
	deployed := false
	var mu sync.Mutex
	f := &fakeOCS{err: errors.New("connection refused")}
	url := serve(t, Options{
		Spec: func() (topo.Spec, error) {
			mu.Lock()
			defer mu.Unlock()
			if !deployed {
				return topo.Spec{}, errors.New("no such lab")
			}
			return spec2, nil
		},
		OCS:     f,
		Explain: func(err error) error { return fmt.Errorf("the OCS process of lab t is not running (%v)", err) },
	})
	var msgs []string
	events(t, url, func(ev, data string) bool {
		if ev != "status" {
			return false
		}
		var s Status
		json.Unmarshal([]byte(data), &s)
		msgs = append(msgs, s.Message)
		switch {
		case strings.Contains(s.Message, "is not deployed"):
			mu.Lock()
			deployed = true
			mu.Unlock()
		case strings.Contains(s.Message, "OCS process of lab t is not running"):
			f.set(nil, nil)
		case s.OK:
			return true
		}
		return false
	})
	if len(msgs) != 3 {
		t.Errorf("status messages: %q, want not deployed, OCS not running, answering", msgs)
	}
}

func TestServerChangeRequests(t *testing.T) {
	for _, tc := range []struct {
		name, host, ctype, site, path, body string
		allow                               bool
		code                                int
		want                                string
	}{
		{"read-only", "", "application/json", "", "/api/connect", `{"a":"tor0:0","b":"tor1:0"}`, false, 403, "read-only"},
		{"other host", "evil.example:80", "application/json", "", "/api/connect", `{"a":"tor0:0","b":"tor1:0"}`, true, 421, "not the address"},
		{"form post", "", "text/plain", "", "/api/connect", `{"a":"tor0:0","b":"tor1:0"}`, true, 415, "want application/json"},
		{"cross site", "", "application/json", "cross-site", "/api/connect", `{"a":"tor0:0","b":"tor1:0"}`, true, 403, "cross-site"},
		{"bad port", "", "application/json", "", "/api/connect", `{"a":"tor5:0","b":"tor1:0"}`, true, 400, "tor5"},
		{"too long", "", "application/json", "", "/api/connect", `{"a":"` + strings.Repeat("x", 5000) + `"}`, true, 413, "over"},
		{"connect", "", "application/json", "", "/api/connect", `{"a":"tor0:0","b":"tor1:0"}`, true, 200, `"seq":7`},
		{"OCS refuses", "", "application/json", "", "/api/disconnect", `{"port":"tor0:0"}`, true, 502, "not in any circuit"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			url := serve(t, Options{Spec: func() (topo.Spec, error) { return spec2, nil }, OCS: &fakeOCS{}, AllowChanges: tc.allow})
			// The poller reads the spec before changes are accepted: wait
			// for the topology it publishes then.
			events(t, url, func(ev, _ string) bool { return ev == "topology" })
			req, _ := http.NewRequest("POST", url+tc.path, strings.NewReader(tc.body))
			req.Header.Set("Content-Type", tc.ctype)
			if tc.host != "" {
				req.Host = tc.host
			}
			if tc.site != "" {
				req.Header.Set("Sec-Fetch-Site", tc.site)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			var b strings.Builder
			bufio.NewReader(resp.Body).WriteTo(&b)
			if resp.StatusCode != tc.code || !strings.Contains(b.String(), tc.want) {
				t.Errorf("%d %s, want %d containing %q", resp.StatusCode, b.String(), tc.code, tc.want)
			}
		})
	}
}

func TestPageAssetsEmbedded(t *testing.T) {
	url := serve(t, Options{Spec: func() (topo.Spec, error) { return spec2, nil }, OCS: &fakeOCS{}})
	for _, p := range []string{"/", "/app.js", "/app.css"} {
		resp, err := http.Get(url + p)
		if err != nil {
			t.Fatal(err)
		}
		var b strings.Builder
		bufio.NewReader(resp.Body).WriteTo(&b)
		resp.Body.Close()
		if resp.StatusCode != 200 || b.Len() < 100 || strings.Contains(b.String(), `src="http`) || strings.Contains(b.String(), `href="http`) {
			t.Errorf("%s: %d, %d bytes", p, resp.StatusCode, b.Len())
		}
		if !strings.Contains(resp.Header.Get("Content-Security-Policy"), "default-src 'self'") {
			t.Errorf("%s: no content security policy", p)
		}
	}
}

func TestEventLog(t *testing.T) {
	f := &eventFollower{}
	now := time.Date(2026, 11, 22, 3, 4, 5, 6e6, time.UTC)
	f.add(ocs.Event{Seq: 1, Kind: "reconfigure", Effective: 1000, RoutesDoneNs: 251000, DelayNs: 50e6,
		Dark: []circuit.Uplink{up(0, 0), up(1, 0)}, Circuits: []circuit.Circuit{{A: up(0, 0), B: up(1, 0)}}, Unreachable: 10}, now)
	f.add(ocs.Event{Seq: 2, Kind: "schedule-start"}, now)
	for i := 0; i < 5; i++ {
		f.add(ocs.Event{Seq: 3 + i, Kind: "slot", LateNs: int64(i % 2)}, now)
	}
	f.add(ocs.Event{Seq: 8, Kind: "reconfigure", Error: "write the port map: boom"}, now)
	got := f.snapshot()
	if got.Slots != 5 || got.LateSlots != 2 || len(got.Recent) != 3 {
		t.Fatalf("log %+v", got)
	}
	for i, want := range []string{
		"error: write the port map: boom",
		"schedule-start",
		"1 circuit; 2 ports dark for 50ms (tor0:0 tor1:0); netlink routes followed 250µs after (0 changed); 10 rack pairs unreachable",
	} {
		if got.Recent[i].Text != want {
			t.Errorf("line %d: %q, want %q", i, got.Recent[i].Text, want)
		}
	}
	if got.Recent[2].At != "03:04:05.006" || got.Recent[0].Seq != 8 {
		t.Errorf("newest first with wall-clock times: %+v", got.Recent)
	}
	for i := 0; i < 2*MaxEventLines; i++ {
		f.add(ocs.Event{Seq: 100 + i, Kind: "reconfigure"}, now)
	}
	if n := len(f.snapshot().Recent); n != MaxEventLines {
		t.Errorf("%d lines kept, want %d", n, MaxEventLines)
	}
	// Events logged before the view started are listed as such, once
	// each: the stream's copy of one, or a second reading of the log,
	// adds no line; the same sequence number after an OCS restart (another
	// instant) does; a logged event read late goes in its place by time.
	g := &eventFollower{}
	g.seed([]ocs.Event{{Seq: 1, Kind: "reconfigure", Effective: 1}, {Seq: 2, Kind: "reconfigure", PathsNs: 5, Effective: 5}})
	g.add(ocs.Event{Seq: 2, Kind: "reconfigure", PathsNs: 5, Effective: 5}, now)
	g.add(ocs.Event{Seq: 1, Kind: "reconfigure", Effective: 9}, now)
	g.seed([]ocs.Event{{Seq: 1, Kind: "reconfigure", Effective: 1}, {Seq: 3, Kind: "reconfigure", Effective: 7}})
	rec := g.snapshot().Recent
	var lines []string
	for _, l := range rec {
		lines = append(lines, fmt.Sprintf("%d@%d %s", l.Seq, l.eff, l.At))
	}
	if want := []string{"1@9 03:04:05.006", "3@7 logged before", "2@5 logged before", "1@1 logged before"}; !slices.Equal(lines, want) {
		t.Errorf("seeded then followed: %q, want %q", lines, want)
	}
	if !strings.Contains(rec[2].Text, "ToR paths switched with the circuits (skew 0s)") {
		t.Errorf("paths clause missing: %q", rec[2].Text)
	}
}

func TestServerPushesOCSEvents(t *testing.T) {
	f := &fakeOCS{events: []ocs.Event{{Seq: 4, Kind: "reconfigure", DelayNs: 1e6, Dark: []circuit.Uplink{up(0, 0)}}}}
	url := serve(t, Options{Spec: func() (topo.Spec, error) { return spec2, nil }, OCS: f})
	events(t, url, func(ev, data string) bool {
		if ev != "events" {
			return false
		}
		var l EventLog
		json.Unmarshal([]byte(data), &l)
		return len(l.Recent) == 1 && l.Recent[0].Seq == 4 && strings.Contains(l.Recent[0].Text, "1 port dark for 1ms (tor0:0)")
	})
}

func TestHostOnly(t *testing.T) {
	name, _ := os.Hostname()
	for _, tc := range []struct {
		listen, host string
		ok           bool
	}{
		{"127.0.0.1:8088", "127.0.0.1:8088", true},
		{"127.0.0.1:8088", "localhost:8088", true},
		{"127.0.0.1:8088", "10.0.0.5:8088", false},
		{"127.0.0.1:8088", "evil.example:8088", false},
		{"10.0.0.5:8088", "10.0.0.5:8088", true},
		{"10.0.0.5:8088", "localhost:8088", false},
		// --listen 0.0.0.0:8088 listens on [::]: any address of the
		// machine with the port, localhost and its name; never another
		// name (DNS rebinding) or another port.
		{"[::]:8088", "127.0.0.1:8088", true},
		{"[::]:8088", "192.168.1.20:8088", true},
		{"[::]:8088", "[fe80::1]:8088", true},
		{"[::]:8088", "localhost:8088", true},
		{"[::]:8088", name + ":8088", true},
		{"[::]:8088", "evil.example:8088", false},
		{"[::]:8088", "192.168.1.20:9999", false},
		{"[::]:8088", "192.168.1.20", false},
		{"0.0.0.0:8088", "192.168.1.20:8088", true},
	} {
		h := hostOnly(tc.listen, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
		req := httptest.NewRequest("GET", "/", nil)
		req.Host = tc.host
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if got := rec.Code == http.StatusOK; got != tc.ok {
			t.Errorf("listen %s, Host %s: %d, want allowed %v", tc.listen, tc.host, rec.Code, tc.ok)
		}
	}
}

// A run that says where its results go (RunDirOf) is followed there, even
// when the view's own results root has none.
func TestTimelineFollowsTheRunsResults(t *testing.T) {
	root := t.TempDir()
	run := filepath.Join(root, "elsewhere", "lab", "20261128-031344")
	os.MkdirAll(filepath.Join(run, "records"), 0o755)
	link := filepath.Join(root, "elsewhere", "lab", "latest")
	os.Symlink(filepath.Base(run), link)
	tl := newTimeline(filepath.Join(root, "results", "lab", "latest"))
	if got := tl.read(); !strings.Contains(got.Message, "no run of this lab yet") {
		t.Fatalf("without the run's link: %q", got.Message)
	}
	tl.resolve = func() string { return link }
	if got := tl.read(); got.Dir != run || !got.Running {
		t.Errorf("with the run's link: dir %q running %v, want %q", got.Dir, got.Running, run)
	}
}

// With a token, a change without it (another user on the machine who
// opened the port) is refused; with it, it goes through.
func TestChangesNeedTheToken(t *testing.T) {
	f := &fakeOCS{}
	url := serve(t, Options{Spec: func() (topo.Spec, error) { return spec2, nil }, OCS: f, AllowChanges: true, Token: "s3cret"})
	post := func(token string) int {
		req, _ := http.NewRequest("POST", url+"/api/connect", strings.NewReader(`{"a":"tor0:0","b":"tor1:0"}`))
		req.Header.Set("Content-Type", "application/json")
		if token != "" {
			req.Header.Set("X-Emu-Token", token)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	events(t, url, func(ev, _ string) bool { return ev == "topology" })
	for _, tc := range []struct {
		token string
		want  int
	}{{"", http.StatusForbidden}, {"guess", http.StatusForbidden}, {"s3cret", http.StatusOK}} {
		if got := post(tc.token); got != tc.want {
			t.Errorf("token %q: status %d, want %d", tc.token, got, tc.want)
		}
	}
}
