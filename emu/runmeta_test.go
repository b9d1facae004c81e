package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/ocsemu/ocsemu/emu/report"
	"github.com/ocsemu/ocsemu/emu/scenario"
)

// writeRunMeta reads the sysctls and kernel from procSys and hashes
// plan.json as written.
func TestWriteRunMeta(t *testing.T) {
	old := procSys
	procSys = t.TempDir()
	defer func() { procSys = old }()
	for k, v := range map[string]string{"net/ipv4/tcp_congestion_control": "cubic\n", "net/ipv4/tcp_wmem": "4096\t16384\t4194304\n", "kernel/osrelease": "6.8.0-test\n"} {
		p := filepath.Join(procSys, k)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(v), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	dir := filepath.Join(t.TempDir(), "20261122-023000")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "plan.json"), []byte("{}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	s := &scenario.Scenario{Scheduler: scenario.Scheduler{Name: "fcfs", Slot: scenario.Duration(time.Second)}}
	if err := writeRunMeta(dir, s, "", "fcfs", time.Unix(0, 0)); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(filepath.Join(dir, report.MetaFile))
	if err != nil {
		t.Fatal(err)
	}
	var m report.Meta
	if err := json.Unmarshal(data, &m); err != nil {
		t.Fatal(err)
	}
	// sha256("{}\n")
	if m.Kernel != "6.8.0-test" || m.Sysctls["net.ipv4.tcp_wmem"] != "4096 16384 4194304" || m.Sysctls["net.ipv4.tcp_congestion_control"] != "cubic" ||
		len(m.Sysctls) != 2 || m.PlanSHA256 != "ca3d163bab055381827226140568f3bef7eaac187cebd76878e0b63e9e442356" ||
		m.SchedulerSlot != "1s" || m.RunDir != "20261122-023000" || m.GoVersion == "" {
		t.Errorf("run.json = %s", data)
	}
}
