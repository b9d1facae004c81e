package main

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strings"
	"time"

	"github.com/ocsemu/ocsemu/dataplane/kcheck"
	"github.com/ocsemu/ocsemu/emu/report"
	"github.com/ocsemu/ocsemu/emu/scenario"
)

// procSys is where the root namespace's sysctls are read (a variable for
// tests).
var procSys = "/proc/sys"

// readSysctls reads report.SysctlKeys from procSys; keys that cannot be
// read are left out.
func readSysctls() map[string]string {
	out := map[string]string{}
	for _, k := range report.SysctlKeys {
		data, err := os.ReadFile(filepath.Join(procSys, strings.ReplaceAll(k, ".", "/")))
		if err == nil {
			out[k] = string(data)
		}
	}
	return out
}

// writeRunMeta reads the machine and writes dir/run.json. planFile is
// --plan (empty when the scenario's scheduler planned); plan.json is
// hashed as written, if the run has one.
func writeRunMeta(dir string, s *scenario.Scenario, planFile, scheduler string, start time.Time) error {
	in := report.MetaInput{GoVersion: runtime.Version(), Sysctls: readSysctls(), PlanFile: planFile, Scheduler: scheduler, Start: start, Dir: dir}
	if bi, ok := debug.ReadBuildInfo(); ok {
		in.Build = bi
	}
	if rel, err := os.ReadFile(filepath.Join(procSys, "kernel/osrelease")); err == nil {
		in.Kernel = string(rel)
	}
	if r, err := kcheck.Load(); err == nil && r.VethGbps > 0 {
		in.VethGbps, in.DoctorAt = r.VethGbps, r.When
	}
	if data, err := os.ReadFile(filepath.Join(dir, "plan.json")); err == nil {
		in.Plan = data
	} else if !os.IsNotExist(err) {
		return fmt.Errorf("run.json: %w", err)
	}
	if s.Scheduler.Slot > 0 {
		in.Slot = s.Scheduler.Slot.String()
	}
	return writeJSONFile(filepath.Join(dir, report.MetaFile), report.BuildMeta(in))
}
