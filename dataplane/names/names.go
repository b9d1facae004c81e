// Package names owns every name emu gives to things it creates: labs,
// nodes, namespaces and interfaces, and the parsing of node names given by
// users. It is pure Go, so the model side (scenario, plan) and the kernel
// side share one definition. A lab name reaches file paths and namespace
// names, so it is checked here, with one rule, before any use.
package names

import (
	"errors"
	"fmt"
	"regexp"
)

// MaxLabLen bounds a lab name. Namespace names ("emu-<lab>.<node>") and
// unix socket paths under the state directory stay short with it.
const MaxLabLen = 24

var labRE = regexp.MustCompile(`^[a-z][a-z0-9-]*$`)

// ErrBadLab is wrapped by every refusal of ValidLab.
var ErrBadLab = errors.New("invalid lab name")

// ValidLab checks a lab name: it starts with a lower-case letter and holds
// only a-z, 0-9 and '-', at most MaxLabLen bytes. Such a name holds no '/',
// '.', '*' or other glob or path character, so it is safe to join into a
// file name.
func ValidLab(lab string) error { return valid(ErrBadLab, lab) }

// ErrBadJob is wrapped by every refusal of ValidJob.
var ErrBadJob = errors.New("invalid job name")

// ValidJob checks a job name with the lab rule: job names become file
// names of records and results.
func ValidJob(job string) error { return valid(ErrBadJob, job) }

func valid(kind error, s string) error {
	switch {
	case s == "":
		return fmt.Errorf("%w: it is empty", kind)
	case len(s) > MaxLabLen:
		return fmt.Errorf("%w: %q is longer than %d characters", kind, s, MaxLabLen)
	case !labRE.MatchString(s):
		return fmt.Errorf("%w: %q must start with a letter a-z and hold only a-z, 0-9 and '-'", kind, s)
	}
	return nil
}
