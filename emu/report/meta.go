package report

import (
	"crypto/sha256"
	"encoding/hex"
	"path/filepath"
	"runtime/debug"
	"strings"
	"time"
)

// MetaFile is the run's metadata file inside the run directory. Runs
// written before it existed lack it; the report then leaves it out.
const MetaFile = "run.json"

// SysctlKeys are the root namespace's sysctls that shape what TCP does in
// a run (the lab's namespaces inherit or copy them).
var SysctlKeys = []string{
	"net.ipv4.tcp_congestion_control",
	"net.ipv4.tcp_allowed_congestion_control",
	"net.core.rmem_max",
	"net.core.wmem_max",
	"net.ipv4.tcp_rmem",
	"net.ipv4.tcp_wmem",
}

// Meta is run.json: what ran, where and on what.
type Meta struct {
	EmuVersion  string `json:"emu_version"`
	VCSRevision string `json:"vcs_revision,omitempty"`
	VCSTime     string `json:"vcs_time,omitempty"`
	VCSModified bool   `json:"vcs_modified,omitempty"`
	GoVersion   string `json:"go_version"`
	Kernel      string `json:"kernel_release"`
	// Sysctls maps each of SysctlKeys that could be read to its value,
	// whitespace collapsed to single spaces ("4096 131072 6291456").
	Sysctls map[string]string `json:"sysctls"`
	// VethGbps is the single-stream veth goodput `emu doctor` measured on
	// this machine (0: never measured), at DoctorWhen.
	VethGbps   float64    `json:"doctor_veth_gbps,omitempty"`
	DoctorWhen *time.Time `json:"doctor_measured_at,omitempty"`
	// PlanSHA256 is the hex SHA-256 of plan.json as written (empty: the
	// run had no plan).
	PlanSHA256 string `json:"plan_sha256,omitempty"`
	// PlanFrom is "scheduler" when the scenario's scheduler made the plan,
	// else the --plan file.
	PlanFrom  string `json:"plan_from,omitempty"`
	Scheduler string `json:"scheduler,omitempty"`
	// SchedulerSlot is the scenario's scheduler slot, if it sets one.
	// Scenarios have no seed: the built-in schedulers are deterministic.
	SchedulerSlot string    `json:"scheduler_slot,omitempty"`
	Start         time.Time `json:"start"`
	RunDir        string    `json:"run_dir"`
}

// MetaInput is what BuildMeta needs, read from the machine by the caller.
type MetaInput struct {
	Build     *debug.BuildInfo // nil: no build information
	GoVersion string           // runtime.Version(), used when Build is nil
	Kernel    string           // uname release
	Sysctls   map[string]string
	VethGbps  float64
	DoctorAt  time.Time // zero: doctor never measured
	Plan      []byte    // plan.json as written; nil: no plan
	PlanFile  string    // --plan, empty when the scheduler planned
	Scheduler string    // the plan's scheduler
	Slot      string    // the scenario scheduler's slot, if set
	Start     time.Time
	Dir       string
}

// BuildMeta builds run.json from its inputs.
func BuildMeta(in MetaInput) Meta {
	m := Meta{
		EmuVersion: "unknown",
		GoVersion:  in.GoVersion,
		Kernel:     strings.TrimSpace(in.Kernel),
		Sysctls:    map[string]string{},
		Scheduler:  in.Scheduler,
		Start:      in.Start,
		RunDir:     filepath.Base(in.Dir),
	}
	if b := in.Build; b != nil {
		m.EmuVersion = b.Main.Version
		if m.EmuVersion == "" {
			m.EmuVersion = "(devel)"
		}
		if b.GoVersion != "" {
			m.GoVersion = b.GoVersion
		}
		for _, s := range b.Settings {
			switch s.Key {
			case "vcs.revision":
				m.VCSRevision = s.Value
			case "vcs.time":
				m.VCSTime = s.Value
			case "vcs.modified":
				m.VCSModified = s.Value == "true"
			}
		}
	}
	for _, k := range SysctlKeys {
		if v, ok := in.Sysctls[k]; ok {
			m.Sysctls[k] = strings.Join(strings.Fields(v), " ")
		}
	}
	if in.VethGbps > 0 {
		m.VethGbps = in.VethGbps
		if !in.DoctorAt.IsZero() {
			t := in.DoctorAt
			m.DoctorWhen = &t
		}
	}
	if in.Plan != nil {
		sum := sha256.Sum256(in.Plan)
		m.PlanSHA256 = hex.EncodeToString(sum[:])
		m.PlanFrom = "scheduler"
		if in.PlanFile != "" {
			m.PlanFrom = in.PlanFile
		}
		if in.PlanFile == "" {
			m.SchedulerSlot = in.Slot
		}
	}
	return m
}
