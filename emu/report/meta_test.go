package report

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"runtime/debug"
	"strings"
	"testing"
	"time"
)

func TestBuildMeta(t *testing.T) {
	start := time.Date(2026, 11, 22, 2, 30, 0, 0, time.UTC)
	doctor := start.Add(-time.Hour)
	plan := []byte(`{"scheduler":"fcfs"}` + "\n")
	sum := sha256.Sum256(plan)
	planHash := hex.EncodeToString(sum[:])
	bi := &debug.BuildInfo{GoVersion: "go1.25.0", Main: debug.Module{Version: ""}, Settings: []debug.BuildSetting{
		{Key: "vcs.revision", Value: "0123456789abcdef0123"}, {Key: "vcs.time", Value: "2026-11-22T02:00:00Z"}, {Key: "vcs.modified", Value: "true"}}}
	for _, tc := range []struct {
		name string
		in   MetaInput
		want func(m Meta) string // "" when m is right, else what is wrong
	}{
		{"scheduler plan, build info, doctor", MetaInput{Build: bi, GoVersion: "go0", Kernel: "6.8.0-45-generic\n",
			Sysctls:  map[string]string{"net.ipv4.tcp_rmem": "4096\t131072\t6291456\n", "net.core.rmem_max": "212992\n", "net.ipv4.other": "x"},
			VethGbps: 31.5, DoctorAt: doctor, Plan: plan, Scheduler: "fcfs", Slot: "1s", Start: start, Dir: "results/cmpa/20261122-023000"},
			func(m Meta) string {
				switch {
				case m.EmuVersion != "(devel)" || m.VCSRevision != "0123456789abcdef0123" || !m.VCSModified || m.VCSTime == "":
					return "version/vcs"
				case m.GoVersion != "go1.25.0":
					return "go version from build info"
				case m.Kernel != "6.8.0-45-generic":
					return "kernel trimmed"
				case len(m.Sysctls) != 2 || m.Sysctls["net.ipv4.tcp_rmem"] != "4096 131072 6291456" || m.Sysctls["net.core.rmem_max"] != "212992":
					return "sysctls: only the listed keys, whitespace collapsed"
				case m.VethGbps != 31.5 || m.DoctorWhen == nil || !m.DoctorWhen.Equal(doctor):
					return "doctor"
				case m.PlanSHA256 != planHash || m.PlanFrom != "scheduler" || m.Scheduler != "fcfs" || m.SchedulerSlot != "1s":
					return "plan"
				case !m.Start.Equal(start) || m.RunDir != "20261122-023000":
					return "start/dir"
				}
				return ""
			}},
		{"--plan file, no build info, no doctor", MetaInput{GoVersion: "go1.24.1", Kernel: "6.1.0", Plan: plan, PlanFile: "/tmp/p.json",
			Scheduler: "static", Slot: "1s", Start: start, Dir: "x/y/z"},
			func(m Meta) string {
				switch {
				case m.EmuVersion != "unknown" || m.VCSRevision != "" || m.GoVersion != "go1.24.1":
					return "no build info"
				case m.PlanFrom != "/tmp/p.json" || m.SchedulerSlot != "" || m.Scheduler != "static":
					return "plan from file keeps no scenario slot"
				case m.VethGbps != 0 || m.DoctorWhen != nil || len(m.Sysctls) != 0:
					return "nothing measured"
				}
				return ""
			}},
		{"no plan (no jobs)", MetaInput{Build: &debug.BuildInfo{Main: debug.Module{Version: "v0.3.0"}}, GoVersion: "go1.24.1", DoctorAt: doctor, Dir: "d"},
			func(m Meta) string {
				if m.EmuVersion != "v0.3.0" || m.GoVersion != "go1.24.1" || m.PlanSHA256 != "" || m.PlanFrom != "" || m.DoctorWhen != nil {
					return "tagged version, no plan, no doctor time without a measurement"
				}
				return ""
			}},
	} {
		m := BuildMeta(tc.in)
		if bad := tc.want(m); bad != "" {
			t.Errorf("%s: %s wrong: %+v", tc.name, bad, m)
		}
	}
}

// The header shows run.json when a run has one; runs without still render.
func TestReportHeaderShowsMeta(t *testing.T) {
	dir := copyRun(t, "testdata/quickstart")
	html := render(t, dir)
	if strings.Contains(html, `id="meta-version"`) {
		t.Error("a run without run.json shows metadata")
	}
	plan, err := os.ReadFile(filepath.Join(dir, "plan.json"))
	if err != nil {
		t.Fatal(err)
	}
	m := BuildMeta(MetaInput{Build: &debug.BuildInfo{Main: debug.Module{Version: "v9.9.9"}, GoVersion: "go1.25.0"}, Kernel: "6.8.0-<test>",
		Sysctls: map[string]string{"net.ipv4.tcp_congestion_control": "bbr"}, Plan: plan, Scheduler: "fcfs", Dir: dir})
	data, _ := json.Marshal(m)
	if err := os.WriteFile(filepath.Join(dir, MetaFile), data, 0o644); err != nil {
		t.Fatal(err)
	}
	html = render(t, dir)
	for _, want := range []string{"v9.9.9", "6.8.0-&lt;test&gt;", "congestion control bbr", "sha256 " + m.PlanSHA256[:12], `title="` + m.PlanSHA256 + `"`} {
		if !strings.Contains(html, want) {
			t.Errorf("report header lacks %q", want)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, MetaFile), []byte("{bad"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(dir); err == nil || !strings.Contains(err.Error(), MetaFile) {
		t.Errorf("a broken run.json: err = %v, want one naming %s", err, MetaFile)
	}
}
