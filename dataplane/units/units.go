// Package units reads and writes the quantities of scenario and OCS files
// with their units: link rates ("1Gbit"), durations ("50ms") and byte
// sizes ("64MiB"). It is the one home of these representations; a bare
// number without a unit is refused, because "1000" could mean anything.
package units

import (
	"fmt"
	"math"
	"regexp"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/ocsemu/ocsemu/dataplane/limits"
)

// Rate is a link rate in bits per second. Zero means "unlimited": the link
// is not shaped. In YAML a rate always carries a unit ("1Gbit", "400Mbps",
// "40G") or is the word "unlimited"; a bare number is refused because
// "1000" could mean bits, bytes or megabits.
type Rate uint64

// Unlimited is the Rate of an unshaped link.
const Unlimited Rate = 0

var rateUnits = []struct {
	suffix string
	mult   float64
}{
	// Longest suffixes first so that "Gbit" is not read as "bit".
	{"tbit", 1e12}, {"gbit", 1e9}, {"mbit", 1e6}, {"kbit", 1e3},
	{"tbps", 1e12}, {"gbps", 1e9}, {"mbps", 1e6}, {"kbps", 1e3},
	{"bit", 1}, {"bps", 1},
	{"t", 1e12}, {"g", 1e9}, {"m", 1e6}, {"k", 1e3},
}

// ParseRate reads a rate such as "1Gbit", "400Mbps", "2.5G" or "unlimited".
func ParseRate(s string) (Rate, error) {
	t := strings.ToLower(strings.TrimSpace(s))
	if t == "unlimited" {
		return Unlimited, nil
	}
	for _, u := range rateUnits {
		if !strings.HasSuffix(t, u.suffix) {
			continue
		}
		num := strings.TrimSpace(strings.TrimSuffix(t, u.suffix))
		v, err := strconv.ParseFloat(num, 64)
		if err != nil || math.IsNaN(v) || math.IsInf(v, 0) {
			return 0, fmt.Errorf("rate %q: %q is not a number", s, num)
		}
		if v <= 0 {
			return 0, fmt.Errorf("rate %q: must be positive (use \"unlimited\" for no shaping)", s)
		}
		bps := v * u.mult
		if bps < 8000 || bps > 1e15 {
			return 0, fmt.Errorf("rate %q: out of range (8kbit to 1000Tbit)", s)
		}
		return Rate(math.Round(bps)), nil
	}
	if isNumber(t) {
		return 0, fmt.Errorf("rate %q has no unit: write e.g. %q or %q", s, s+"Mbit", s+"Gbit")
	}
	return 0, fmt.Errorf("rate %q: unknown unit (use bit, kbit, Mbit, Gbit, Tbit or \"unlimited\")", s)
}

// BytesPerSec is the rate in bytes per second (0 for unlimited).
func (r Rate) BytesPerSec() uint64 { return uint64(r) / 8 }

// Bps is the rate in bits per second as a float.
func (r Rate) Bps() float64 { return float64(r) }

func (r Rate) String() string {
	switch {
	case r == Unlimited:
		return "unlimited"
	case r%1e9 == 0:
		return fmt.Sprintf("%dGbit", r/1e9)
	case r%1e6 == 0:
		return fmt.Sprintf("%dMbit", r/1e6)
	case r%1e3 == 0:
		return fmt.Sprintf("%dkbit", r/1e3)
	}
	return fmt.Sprintf("%dbit", uint64(r))
}

// scalar decodes a YAML scalar with parse and puts the line in errors.
func scalar[T any](n *yaml.Node, what, example string, parse func(string) (T, error)) (T, error) {
	var zero T
	if n.Kind != yaml.ScalarNode {
		return zero, fmt.Errorf("line %d: a %s must be a string like %q", n.Line, what, example)
	}
	v, err := parse(n.Value)
	if err != nil {
		return zero, fmt.Errorf("line %d: %w", n.Line, err)
	}
	return v, nil
}

// UnmarshalYAML implements yaml.Unmarshaler.
func (r *Rate) UnmarshalYAML(n *yaml.Node) (err error) {
	*r, err = scalar(n, "rate", "1Gbit", ParseRate)
	return err
}

// MarshalYAML implements yaml.Marshaler.
func (r Rate) MarshalYAML() (any, error) { return r.String(), nil }

// MarshalText lets a Rate print as "1Gbit" in JSON.
func (r Rate) MarshalText() ([]byte, error) { return []byte(r.String()), nil }

// UnmarshalText reads a Rate from JSON.
func (r *Rate) UnmarshalText(b []byte) error {
	v, err := ParseRate(string(b))
	*r = v
	return err
}

// Duration is a time.Duration written as "50ms", "10us" or "1.5s" in YAML.
type Duration time.Duration

// D returns the time.Duration.
func (d Duration) D() time.Duration { return time.Duration(d) }

func (d Duration) String() string { return time.Duration(d).String() }

// ParseDuration reads "50ms", "10us" (or "10µs") or "1.5s"; a bare
// number other than 0 is refused for lack of a unit.
func ParseDuration(s string) (Duration, error) {
	if isNumber(s) && s != "0" {
		return 0, fmt.Errorf("duration %q has no unit: write e.g. %q", s, s+"ms")
	}
	v, err := time.ParseDuration(strings.ReplaceAll(s, "µ", "u"))
	switch {
	case err != nil && durationRE.MatchString(s):
		return 0, fmt.Errorf("duration %q: want a plain number and a unit, at most %v (e.g. 1.5s)", s, time.Duration(math.MaxInt64).Truncate(time.Hour))
	case err != nil:
		return 0, fmt.Errorf("duration %q: use a unit such as ns, us, ms or s", s)
	}
	if v < 0 {
		return 0, fmt.Errorf("duration %q must not be negative", s)
	}
	return Duration(v), nil
}

// UnmarshalYAML implements yaml.Unmarshaler.
func (d *Duration) UnmarshalYAML(n *yaml.Node) (err error) {
	*d, err = scalar(n, "duration", "50ms", ParseDuration)
	return err
}

// MarshalText lets a Duration print as "50ms" in JSON and YAML.
func (d Duration) MarshalText() ([]byte, error) { return []byte(d.String()), nil }

// UnmarshalText reads a Duration from JSON.
func (d *Duration) UnmarshalText(b []byte) error {
	v, err := time.ParseDuration(string(b))
	*d = Duration(v)
	return err
}

// durationRE is a number with a duration's unit, which time.ParseDuration
// refused: an exponent, or too long for int64 nanoseconds.
var durationRE = regexp.MustCompile(`^[-+]?[0-9.]+(?:[eE][-+]?[0-9]+)?(?:ns|us|µs|ms|s|m|h)$`)

// isNumber is a finite number written alone (NaN and Inf are words here).
func isNumber(s string) bool {
	v, err := strconv.ParseFloat(strings.TrimSpace(s), 64)
	return err == nil && !math.IsNaN(v) && !math.IsInf(v, 0)
}

// ByteSize is a byte count written with a unit: "552MB", "64MiB", "4GB".
type ByteSize int64

var byteRE = regexp.MustCompile(`^([0-9]*\.?[0-9]+(?:[eE][+-]?[0-9]+)?)\s*([KMGT]i?B|B)$`)

// ParseByteSize reads "552MB" (decimal), "64MiB" (binary) or "1000B".
func ParseByteSize(s string) (ByteSize, error) {
	m := byteRE.FindStringSubmatch(strings.TrimSpace(s))
	if m == nil {
		if isNumber(s) {
			if v, _ := strconv.ParseFloat(strings.TrimSpace(s), 64); v <= 0 {
				return 0, fmt.Errorf("size %q: must be at least 1B", s)
			}
			return 0, fmt.Errorf("size %q has no unit: write e.g. %q or %q", s, s+"MB", s+"MiB")
		}
		return 0, fmt.Errorf("size %q: want a number and a unit (B, KB, MB, GB, TB, KiB, MiB, GiB, TiB)", s)
	}
	v, _ := strconv.ParseFloat(m[1], 64)
	mult := map[string]float64{"B": 1, "KB": 1e3, "MB": 1e6, "GB": 1e9, "TB": 1e12,
		"KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30, "TiB": 1 << 40}[m[2]]
	b := v * mult
	if b < 1 || b > float64(limits.MaxBytes) || math.IsNaN(b) {
		return 0, fmt.Errorf("size %q out of range (1B to %dTiB)", s, limits.MaxBytes>>40)
	}
	return ByteSize(math.Round(b)), nil
}

func (b ByteSize) String() string {
	switch {
	case b%(1<<20) == 0 && b >= 1<<20:
		return fmt.Sprintf("%dMiB", b>>20)
	case b%1e9 == 0:
		return fmt.Sprintf("%dGB", b/1e9)
	case b%1e6 == 0:
		return fmt.Sprintf("%dMB", b/1e6)
	}
	return fmt.Sprintf("%dB", int64(b))
}

// MarshalYAML writes the size with its unit, so a written file reads back.
func (b ByteSize) MarshalYAML() (any, error) { return b.String(), nil }

// UnmarshalYAML implements yaml.Unmarshaler.
func (b *ByteSize) UnmarshalYAML(n *yaml.Node) (err error) {
	*b, err = scalar(n, "size", "64MiB", ParseByteSize)
	return err
}
