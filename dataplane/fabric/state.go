package fabric

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/ocsemu/ocsemu/dataplane/names"
	"github.com/ocsemu/ocsemu/dataplane/topo"
)

// StateDir holds one JSON state file per lab. It lives on tmpfs, like
// /run/netns, so that a reboot forgets both together.
var StateDir = "/run/emu/labs"

// Lab statuses.
const (
	StatusDeploying = "deploying"
	StatusUp        = "up"
	// StatusInterrupted is never written: ReadState reports it for a lab
	// whose deploy stopped (killed) before the lab came up.
	StatusInterrupted = "interrupted"
)

// State is what a lab records about itself, so that inspect and destroy
// work by lab name alone, without the scenario file.
type State struct {
	Lab    string    `json:"lab"`
	Status string    `json:"status"`
	Source string    `json:"source"` // scenario file it came from
	Spec   topo.Spec `json:"spec"`
	// Scenario is the scenario as deployed, kept for the emu side (which
	// decodes it); the kernel side reads only Spec.
	Scenario  json.RawMessage `json:"scenario,omitempty"`
	Created   time.Time       `json:"created"`
	Namespace []string        `json:"namespaces"`
	// Owner is who deployed the lab (the user behind sudo), for an
	// instructor's overview of a shared machine.
	Owner string `json:"owner,omitempty"`
}

func statePath(lab string) string { return filepath.Join(StateDir, lab+".json") }

// WriteState records a lab's state atomically.
func WriteState(st *State) error {
	if err := names.ValidLab(st.Lab); err != nil {
		return err
	}
	if err := os.MkdirAll(StateDir, 0o755); err != nil {
		return fmt.Errorf("create state dir: %w", err)
	}
	data, err := json.MarshalIndent(st, "", "  ")
	if err != nil {
		return fmt.Errorf("encode state: %w", err)
	}
	tmp := statePath(st.Lab) + ".tmp"
	if err := os.WriteFile(tmp, data, 0o600); err != nil {
		return fmt.Errorf("write state: %w", err)
	}
	if err := os.Rename(tmp, statePath(st.Lab)); err != nil {
		return fmt.Errorf("write state: %w", err)
	}
	return nil
}

// ErrNoLab is returned when a lab has no state file.
var ErrNoLab = errors.New("no such lab")

// ReadState loads a lab's state.
func ReadState(lab string) (*State, error) {
	if err := names.ValidLab(lab); err != nil {
		return nil, err
	}
	data, err := os.ReadFile(statePath(lab))
	if errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("lab %q: %w (see `emu inspect` for deployed labs)", lab, ErrNoLab)
	}
	if err != nil {
		return nil, fmt.Errorf("read state of lab %q: %w", lab, err)
	}
	var st State
	if err := json.Unmarshal(data, &st); err != nil {
		return nil, fmt.Errorf("decode state of lab %q: %w", lab, err)
	}
	if st.Spec.Lab != lab {
		return nil, fmt.Errorf("state of lab %q: it names lab %q (written by another emu version? run `emu destroy %s`)", lab, st.Spec.Lab, lab)
	}
	if st.Status == StatusDeploying {
		if _, held := Held(lab, "deploy"); !held {
			st.Status = StatusInterrupted
		}
	}
	return &st, nil
}

// removeState removes the state file and every other file of the lab in
// StateDir (OCS socket, logs): all are named "<lab>.<something>". It
// compares directory entries with that prefix instead of globbing, and
// refuses names that are not lab names, so no user string ever reaches a
// path outside StateDir or matches another lab's files.
func removeState(lab string) error {
	if err := names.ValidLab(lab); err != nil {
		return err
	}
	entries, err := os.ReadDir(StateDir)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("list state dir: %w", err)
	}
	var errs []error
	for _, e := range entries {
		if !strings.HasPrefix(e.Name(), lab+".") {
			continue
		}
		// A held lock stays, this process's too (a check that removes an
		// earlier copy of its lab holds on); its holder removes it when it
		// lets go of a lab that is gone (Release).
		f := filepath.Join(StateDir, e.Name())
		if strings.HasSuffix(e.Name(), ".lock") {
			if err := removeUnheldLock(f); err != nil {
				errs = append(errs, err)
			}
			continue
		}
		if err := os.Remove(f); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, fmt.Errorf("remove %s: %w", f, err))
		}
	}
	return errors.Join(errs...)
}

// LabFile is the path of a lab's auxiliary file, e.g. LabFile(lab, "ocs.sock").
func LabFile(lab, name string) string { return filepath.Join(StateDir, lab+"."+name) }

// Labs lists the labs that have a state file, sorted.
func Labs() ([]string, error) {
	entries, err := os.ReadDir(StateDir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("list labs: %w", err)
	}
	var labs []string
	for _, e := range entries {
		if name, ok := strings.CutSuffix(e.Name(), ".json"); ok && names.ValidLab(name) == nil {
			labs = append(labs, name)
		}
	}
	sort.Strings(labs)
	return labs, nil
}
