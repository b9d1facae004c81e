package workers_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ocsemu/ocsemu/workers"
	"github.com/ocsemu/ocsemu/workers/job"
)

func validSpec() workers.Spec {
	return workers.Spec{
		Job:   job.Job{Name: "j", Pattern: "ring", Workers: []string{"r0s0", "r1s0"}, Bytes: 1 << 20, Iterations: 2},
		Rank:  1,
		Addrs: map[string]string{"r0s0": "10.0.0.1", "r1s0": "10.0.1.1"},
		Ports: []int{20000, 20000}, Timeout: time.Minute, TCPInfoEvery: 50 * time.Millisecond,
		Coordinator: "/run/x.sock", Out: "/tmp/j-rank1.jsonl",
	}
}

// TestSpecValidate: `emu worker --spec` refuses a bad spec with the field,
// the value and the allowed range, before it allocates anything.
func TestSpecValidate(t *testing.T) {
	tests := []struct {
		name string
		mod  func(*workers.Spec)
		want []string
	}{
		{"valid", func(*workers.Spec) {}, nil},
		{"valid ps server", func(s *workers.Spec) {
			s.Job.Pattern, s.Job.PS, s.Rank = "ps", "r2s0", workers.PSRank
			s.Addrs["r2s0"], s.Ports = "10.0.2.1", []int{20000, 20000, 20001}
		}, nil},
		{"valid clock gates", func(s *workers.Spec) {
			s.Mode, s.Gates = job.ModeClock, []workers.Gate{{0, -1}, {0, 5}, {1, -1}, {1, 9}}
		}, nil},
		{"iterations negative", func(s *workers.Spec) { s.Job.Iterations = -1 }, []string{"job.iterations: -1, want 1 to 100000"}},
		{"iterations huge", func(s *workers.Spec) { s.Job.Iterations = 9999999999 }, []string{"job.iterations: 9999999999, want 1 to 100000"}},
		{"iterations huge in clock mode", func(s *workers.Spec) { s.Mode, s.Job.Iterations = job.ModeClock, 1<<40 }, []string{"job.iterations"}},
		{"bytes unaligned", func(s *workers.Spec) { s.Job.Bytes = 1001 }, []string{"job.bytes", "multiple of 4"}},
		{"bytes below a element per rank", func(s *workers.Spec) { s.Job.Bytes = 4 }, []string{"job.bytes", "at least 4 per rank"}},
		{"too many ranks", func(s *workers.Spec) { s.Job.Workers = make([]string, workers.MaxRanks+1) }, []string{"job.workers: 4097 ranks, want 1 to 4096"}},
		{"hd of three", func(s *workers.Spec) {
			s.Job.Pattern, s.Job.Workers = "hd", []string{"r0s0", "r1s0", "r2s0"}
		}, []string{"power-of-two"}},
		{"rank out of range", func(s *workers.Spec) { s.Rank = 2 }, []string{"rank: 2, want 0 to 1"}},
		{"ps rank in a ring", func(s *workers.Spec) { s.Rank = workers.PSRank }, []string{"rank: -1 (the parameter server) in a ring job"}},
		{"ps without server", func(s *workers.Spec) { s.Job.Pattern = "ps" }, []string{"job.ps"}},
		{"missing address", func(s *workers.Spec) { delete(s.Addrs, "r0s0") }, []string{`addrs: server "r0s0" has no IPv4 address`}},
		{"ports short", func(s *workers.Spec) { s.Ports = s.Ports[:1] }, []string{"ports: 1 ports for 2 rank processes"}},
		{"port out of range", func(s *workers.Spec) { s.Ports[1] = 70000 }, []string{"ports[1]: 70000, want 1 to 65535"}},
		{"gates short", func(s *workers.Spec) { s.Mode = job.ModeBarrier }, []string{"gates: 0 gates, want one per phase (4)"}},
		{"bad mode", func(s *workers.Spec) { s.Mode = "slotted" }, []string{`mode: "slotted"`}},
		{"gates of a per-step ring", func(s *workers.Spec) { s.Mode, s.Job.Steps = job.ModeBarrier, true },
			[]string{"gates: 0 gates, want one per phase (6)"}}, // 2 x (compute + 2 steps)
		{"steps of a ps job", func(s *workers.Spec) { s.Job.Pattern, s.Job.PS, s.Job.Steps = "ps", "r1s0", true }, []string{"job.steps"}},
		{"negative compute", func(s *workers.Spec) { s.Job.ComputeNs = -1 }, []string{"job.compute_ns: -1"}},
		{"negative timeout", func(s *workers.Spec) { s.Timeout = -time.Second }, []string{"timeout: -1s"}},
		{"negative sampling", func(s *workers.Spec) { s.TCPInfoEvery = -time.Second }, []string{"tcpinfo_every: -1s"}},
		{"ring not the workers", func(s *workers.Spec) { s.Job.Ring = []string{"r0s0", "r0s0"} }, []string{"job.ring"}},
		{"hostile job name", func(s *workers.Spec) { s.Job.Name = "../x" }, []string{"job.name"}},
		{"no coordinator", func(s *workers.Spec) { s.Coordinator = "" }, []string{"coordinator"}},
		{"no records file", func(s *workers.Spec) { s.Out = "" }, []string{"out: the records file is required"}},
		{"records file that is a directory", func(s *workers.Spec) { s.Out = "/tmp/" }, []string{`out: "/tmp/": want a file path`}},
		{"relative coordinator", func(s *workers.Spec) { s.Coordinator = "x.sock" }, []string{`coordinator: "x.sock": want the absolute path of a unix socket`}},
		{"namespace that is a path", func(s *workers.Spec) { s.NS = "../../proc/1/ns/net" }, []string{`netns: "../../proc/1/ns/net": want a namespace name`}},
		{"valid namespace", func(s *workers.Spec) { s.NS = "emu-t.r1s0" }, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := validSpec()
			tt.mod(&s)
			err := s.Validate()
			if tt.want == nil {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("accepted; want %q", tt.want)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
		})
	}
}

// TestReadSpec: a spec file with an unknown field or a bad value is
// refused with the file's name; a valid one reads back.
func TestReadSpec(t *testing.T) {
	dir := t.TempDir()
	good := validSpec()
	data, _ := json.Marshal(good)
	write := func(name string, b []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	if s, err := workers.ReadSpec(write("good.json", data)); err != nil || s.Job.Iterations != 2 || s.Ports[1] != 20000 {
		t.Fatalf("valid spec: %v %+v", err, s)
	}
	typo := strings.Replace(string(data), `"timeout"`, `"timeuot"`, 1)
	if _, err := workers.ReadSpec(write("typo.json", []byte(typo))); err == nil || !strings.Contains(err.Error(), "typo.json") || !strings.Contains(err.Error(), "timeuot") {
		t.Errorf("unknown field: %v", err)
	}
	bad := good
	bad.Job.Iterations = -1
	data, _ = json.Marshal(bad)
	if _, err := workers.ReadSpec(write("bad.json", data)); err == nil || !strings.Contains(err.Error(), "bad.json") || !strings.Contains(err.Error(), "job.iterations: -1") {
		t.Errorf("bad iterations: %v", err)
	}
}
