package labs

import (
	"context"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ocsemu/ocsemu/emu/scenario"
	"github.com/ocsemu/ocsemu/ocsfabric/circuit"
	"github.com/ocsemu/ocsemu/ocsfabric/ocs"
)

func TestValidName(t *testing.T) {
	for _, tc := range []struct {
		name string
		ok   bool
	}{
		{"02-circuits", true},
		{"01-fabric-by-hand", true},
		{"2-circuits", false},
		{"02-../etc", false},
		{"../02-circuits", false},
		{"02-Circuits", false},
		{"02-", false},
		{"02-a/b", false},
		{"", false},
	} {
		if err := ValidName(tc.name); (err == nil) != tc.ok {
			t.Errorf("ValidName(%q) = %v, want ok=%v", tc.name, err, tc.ok)
		}
	}
}

func TestEveryLabIsComplete(t *testing.T) {
	ls, err := List()
	if err != nil {
		t.Fatal(err)
	}
	if len(ls) < 6 {
		t.Fatalf("%d labs, want at least 6", len(ls))
	}
	for _, l := range ls {
		for _, f := range []string{"README.md", "scenario.yaml", "start", "solution"} {
			if _, err := fs.Stat(l.files, f); err != nil {
				t.Errorf("lab %s: %v", l.Name, err)
			}
		}
		if _, err := l.Scenario(); err != nil {
			t.Errorf("lab %s: %v", l.Name, err)
		}
		readme, _ := fs.ReadFile(l.files, "README.md")
		for _, h := range []string{"**Goal.**", "## Background", "## Steps", "## Questions", "## Time it took"} {
			if !strings.Contains(string(readme), h) {
				t.Errorf("lab %s: README has no %q", l.Name, h)
			}
		}
		failing := 0
		for _, c := range l.Checks() {
			if c.FailsOnStart {
				failing++
			}
		}
		if failing == 0 || failing == len(l.Checks()) {
			t.Errorf("lab %s: %d of %d checks fail on start: a starting point should pass some and fail some", l.Name, failing, len(l.Checks()))
		}
	}
}

func TestGetByNumberAndRefusals(t *testing.T) {
	l, err := Get("04")
	if err != nil || l.Name != "04-plan" {
		t.Fatalf("Get(04) = %v, %v", l, err)
	}
	for _, bad := range []string{"99-nothing", "../../etc", "4", "04-plan/../05-rotor"} {
		if _, err := Get(bad); err == nil {
			t.Errorf("Get(%q) found a lab", bad)
		}
	}
	if err := l.Extract("../start", t.TempDir()); err == nil {
		t.Error("Extract of ../start was not refused")
	}
}

func TestStartAndResolve(t *testing.T) {
	l, _ := Get("02-circuits")
	dir := filepath.Join(t.TempDir(), "mine")
	written, err := l.Start(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(written) != 5 { // README, scenario, ring.yaml, answers.yaml, marker
		t.Errorf("wrote %v", written)
	}
	if _, err := l.Start(dir); err == nil || !strings.Contains(err.Error(), "never overwrites") {
		t.Errorf("a second start: %v, want a refusal to overwrite", err)
	}
	got, work, err := Resolve(dir)
	if err != nil || got.Name != "02-circuits" || work != dir {
		t.Errorf("Resolve(copy) = %v %q %v", got, work, err)
	}
	other := t.TempDir()
	if _, _, err := Resolve(other); err == nil {
		t.Errorf("Resolve of a folder that is no lab: no error")
	}
	// Inside the copy, as the READMEs have students work: the lab's name
	// finds ".", another lab's name does not.
	t.Chdir(dir)
	if got, work, err := Resolve("02-circuits"); err != nil || got.Name != "02-circuits" || work != "." {
		t.Errorf("Resolve(name) inside the copy = %v %q %v, want the copy", got, work, err)
	}
	if _, work, err := Resolve("05"); err != nil || work != "" {
		t.Errorf("Resolve(another lab) inside a copy of 02 = %q %v, want no work folder", work, err)
	}
}

func TestIsRing(t *testing.T) {
	c := func(a, b string) circuit.Circuit {
		ua, _ := circuit.ParseUplink(a)
		ub, _ := circuit.ParseUplink(b)
		return circuit.Circuit{A: ua, B: ub}
	}
	for _, tc := range []struct {
		name string
		cs   []circuit.Circuit
		want string
	}{
		{"ring", []circuit.Circuit{c("tor0:0", "tor1:0"), c("tor1:1", "tor2:1"), c("tor2:0", "tor3:0"), c("tor3:1", "tor0:1")}, ""},
		{"two pairs", []circuit.Circuit{c("tor0:0", "tor1:0"), c("tor2:0", "tor3:0")}, "rack 0 has circuits to 1"},
		{"two cycles", []circuit.Circuit{c("tor0:0", "tor1:0"), c("tor0:1", "tor1:1"), c("tor2:0", "tor3:0"), c("tor2:1", "tor3:1")}, "rack 0 has circuits to 1"},
		{"star", []circuit.Circuit{c("tor0:0", "tor1:0"), c("tor0:1", "tor2:1"), c("tor3:0", "tor2:0")}, "rack 1 has circuits to 1"},
	} {
		err := isRing(circuit.Config{Circuits: tc.cs}, 4)
		if (tc.want == "") != (err == nil) || err != nil && !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", tc.name, err, tc.want)
		}
	}
}

func TestRotorPairs(t *testing.T) {
	l, _ := Get("05-rotor")
	for _, tc := range []struct{ sub, want string }{{"solution", ""}, {"start", "0-3 1-2"}} {
		data, _ := fs.ReadFile(l.files, tc.sub+"/schedule.yaml")
		s, err := ocs.ParseScheduleFile(data, "schedule.yaml")
		if err != nil {
			t.Fatal(err)
		}
		if got := strings.Join(rotorPairs(s, 4), " "); got != tc.want {
			t.Errorf("%s: missing %q, want %q", tc.sub, got, tc.want)
		}
	}
}

func TestMedian(t *testing.T) {
	for _, tc := range []struct {
		xs   []float64
		want float64
	}{{[]float64{3}, 3}, {[]float64{5, 1, 3}, 3}, {[]float64{4, 1, 3, 2}, 2.5}} {
		if got := median(tc.xs); got != tc.want {
			t.Errorf("median(%v) = %v, want %v", tc.xs, got, tc.want)
		}
	}
}

// TestFileChecks runs every check that reads files only (no root) against
// each lab's solution, where all must pass, and its starting point, where
// exactly the FailsOnStart ones must fail. The root ones run in
// `emu lab selftest` (CI, and TestLabSelftest in package main).
func TestFileChecks(t *testing.T) {
	ls, err := List()
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range ls {
		s, err := l.Scenario()
		if err != nil {
			t.Fatal(err)
		}
		for _, which := range []string{"solution", "start"} {
			dir := t.TempDir()
			if err := l.Extract(which, dir); err != nil {
				t.Fatal(err)
			}
			e := &Env{Lab: l, Work: dir, Scenario: s, LabName: "ui-unused"}
			for _, c := range l.Checks() {
				if c.Root {
					continue
				}
				detail, err := c.Run(context.Background(), e)
				want := which == "solution" || !c.FailsOnStart
				if (err == nil) != want {
					t.Errorf("lab %s, %s/: %q: passed=%v (%s %v), want passed=%v", l.Name, which, c.Name, err == nil, detail, err, want)
				}
			}
		}
	}
}

func TestRunPrintsTally(t *testing.T) {
	l, _ := Get("04-plan")
	s, _ := l.Scenario()
	dir := t.TempDir()
	l.Extract("start", dir)
	var b strings.Builder
	res := Run(context.Background(), &Env{Lab: l, Work: dir, Scenario: s, LabName: "ui-unused"}, io.MultiWriter(&b))
	if len(res) != len(l.Checks()) || !strings.Contains(b.String(), "2 of 6 checks passed") || !strings.Contains(b.String(), "FAIL  the jobs interleave") {
		t.Errorf("output:\n%s", b.String())
	}
	os.RemoveAll(dir)
}

// TestMeasurementBelowTheLinkRateIsRefused needs no lab: a figure faster
// than the links allow fails before anything is measured.
func TestMeasurementBelowTheLinkRateIsRefused(t *testing.T) {
	l, _ := Get("03")
	s, _ := l.Scenario()
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "answers.yaml"), []byte("ring_measured_ms: 120\n"), 0o644)
	e := &Env{Lab: l, Work: dir, Scenario: s, LabName: "ui-unused"}
	_, err := measuredLike(context.Background(), e, "ring_measured_ms", lab03Ring, []string{"allreduce"})
	if err == nil || !strings.Contains(err.Error(), "faster than the links allow (201.3 ms") {
		t.Errorf("got %v", err)
	}
}

// TestQueuesAnswers runs lab 06's checks on the solution with one thing
// changed each: fair.yaml, an answer, or a recorded run; want "" means
// the check still passes.
func TestQueuesAnswers(t *testing.T) {
	l, s := lab06(t)
	const fifoRun = "results/lab06/20261127-201733/comparison.csv"
	type edit struct{ file, from, to string }
	for _, tc := range []struct {
		name, file, from, to, check, want string
		also                              []edit
	}{
		{"fair.yaml changes the rate too", "fair.yaml", "uplink: 1Gbit", "uplink: 2Gbit", "nothing else changed", "more than switch_queue", nil},
		{"fair.yaml changes a job", "fair.yaml", "bytes: 32MiB, compute: 10ms, iterations: 1}\n  - {name: b", "bytes: 16MiB, compute: 10ms, iterations: 1}\n  - {name: b", "nothing else changed", "jobs differ", nil},
		{"fair.yaml renamed", "fair.yaml", "name: lab06", "name: lab06-fair", "nothing else changed", "keep name: lab06", nil},
		{"fair.yaml with defaults and an empty list written out", "fair.yaml", "  switch_queue: fair", "  switch_queue: fair\n  mtu: 1500\n  server_queue: fifo\n  loss: []", "nothing else changed", "", nil},
		{"the model's time, not the run's", "answers.yaml", "fifo_one_hop_ms: 326.67", "fifo_one_hop_ms: 382.84", "1-hop flow ends well before", "answer from that run's table", nil},
		{"the max-min model for the FIFO run", "answers.yaml", "fifo_model: tcp-aware", "fifo_model: ideal", "predicted the FIFO run", "ideal says b's push takes 537 ms", nil},
		{"the model as the report writes it", "answers.yaml", "fifo_model: tcp-aware", "fifo_model: TCP-aware", "predicted the FIFO run", "", nil},
		{"the FIFO run's times as the fair ones", "answers.yaml", "fair_one_hop_ms: 551.67", "fair_one_hop_ms: 326.67", "share max-min", "answer from that run's table", nil},
		{"a FIFO run whose 1-hop flow did not end early", fifoRun, "b,0,push,536.870912,326.669924", "b,0,push,536.870912,540.0", "1-hop flow ends well before", "did not end well before",
			[]edit{{"answers.yaml", "fifo_one_hop_ms: 326.67", "fifo_one_hop_ms: 540.0"}}},
		{"a FIFO run closer to max-min", fifoRun, "b,0,push,536.870912,326.669924", "b,0,push,536.870912,480.0", "predicted the FIFO run", "no closer to the TCP-aware model",
			[]edit{{"answers.yaml", "fifo_one_hop_ms: 326.67", "fifo_one_hop_ms: 480.0"}}},
		{"a misspelt key", "answers.yaml", "fifo_two_hop_ms: 563.78", "fifo_two_hop: 563.78", "1-hop flow ends well before",
			`fifo_two_hop_ms is not answered yet; answers.yaml has "fifo_two_hop", which is not one of this lab's answers: misspelt?`, nil},
		{"a run of another scenario only", "results/lab06/20261127-201733/scenario.yaml", "    - name: c", "    - name: z", "1-hop flow ends well before", "no run of this lab's scenario with switch_queue fifo", nil},
		{"no runs at all", "results/lab06/20261127-201733/scenario.yaml", "switch_queue: fifo", "switch_queue: fair", "1-hop flow ends well before", "no run of this lab's scenario with switch_queue fifo", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			if err := l.Extract("solution", dir); err != nil {
				t.Fatal(err)
			}
			for _, ed := range append([]edit{{tc.file, tc.from, tc.to}}, tc.also...) {
				p := filepath.Join(dir, filepath.FromSlash(ed.file))
				data, err := os.ReadFile(p)
				if err != nil {
					t.Fatal(err)
				}
				if !strings.Contains(string(data), ed.from) {
					t.Fatalf("%s has no %q", ed.file, ed.from)
				}
				if err := os.WriteFile(p, []byte(strings.Replace(string(data), ed.from, ed.to, 1)), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			e := &Env{Lab: l, Work: dir, Scenario: s, LabName: "ui-unused"}
			for _, c := range l.Checks() {
				if !strings.Contains(c.Name, tc.check) {
					continue
				}
				_, err := c.Run(context.Background(), e)
				if tc.want == "" && err != nil || tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)) {
					t.Errorf("%q: %v, want %q", c.Name, err, tc.want)
				}
				return
			}
			t.Fatalf("no check named like %q", tc.check)
		})
	}
}

// A run under a lab name of the student's own (emu run --lab-name on a
// shared machine) lands in results/<that name>/ and still counts.
func TestQueuesRunUnderAnotherLabName(t *testing.T) {
	l, s := lab06(t)
	dir := t.TempDir()
	if err := l.Extract("solution", dir); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(filepath.Join(dir, "results", "lab06"), filepath.Join(dir, "results", "stu-06")); err != nil {
		t.Fatal(err)
	}
	e := &Env{Lab: l, Work: dir, Scenario: s, LabName: "ui-unused"}
	for _, c := range l.Checks() {
		if strings.Contains(c.Name, "1-hop flow ends well before") {
			if _, err := c.Run(context.Background(), e); err != nil {
				t.Errorf("a run in results/stu-06: %v", err)
			}
			return
		}
	}
	t.Fatal("no check of the 1-hop flow")
}

// lab06 returns lab 06 and its scenario.
func lab06(t *testing.T) (*Lab, *scenario.Scenario) {
	t.Helper()
	l, err := Get("06-queues")
	if err != nil {
		t.Fatal(err)
	}
	s, err := l.Scenario()
	if err != nil {
		t.Fatal(err)
	}
	return l, s
}
