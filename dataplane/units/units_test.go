package units

import (
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"
)

func TestParseRate(t *testing.T) {
	tests := []struct {
		in   string
		want Rate
		err  bool
	}{
		{"1Gbit", 1e9, false}, {"400Mbps", 400e6, false}, {"2.5G", 2.5e9, false},
		{"100kbit", 100e3, false}, {"unlimited", Unlimited, false}, {"40gbps", 40e9, false},
		{"1000", 0, true}, {"-1Gbit", 0, true}, {"Gbit", 0, true}, {"1bit", 0, true}, {"NaNGbit", 0, true},
	}
	for _, tt := range tests {
		got, err := ParseRate(tt.in)
		if (err != nil) != tt.err || got != tt.want {
			t.Errorf("ParseRate(%q) = %v, %v; want %v, err=%v", tt.in, got, err, tt.want, tt.err)
		}
	}
}

func TestParseByteSize(t *testing.T) {
	for in, want := range map[string]ByteSize{"552MB": 552e6, "64MiB": 64 << 20, "4GB": 4e9, "1.5KiB": 1536, "10B": 10} {
		if got, err := ParseByteSize(in); err != nil || got != want {
			t.Errorf("ParseByteSize(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for bad, msg := range map[string]string{
		"64": `size "64" has no unit: write e.g. "64MB" or "64MiB"`, "0": `size "0": must be at least 1B`,
		"64mb": "want a number and a unit", "MB": "want a number and a unit", "-1MB": "want a number and a unit", "0B": "out of range",
	} {
		if _, err := ParseByteSize(bad); err == nil || !strings.Contains(err.Error(), msg) {
			t.Errorf("ParseByteSize(%q): %v, want %q", bad, err, msg)
		}
	}
}

func TestParseDuration(t *testing.T) {
	for in, want := range map[string]time.Duration{"50ms": 50 * time.Millisecond, "10us": 10 * time.Microsecond, "10µs": 10 * time.Microsecond, "1.5s": 1500 * time.Millisecond, "0": 0} {
		if got, err := ParseDuration(in); err != nil || got.D() != want {
			t.Errorf("ParseDuration(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, bad := range []string{"50", "-5ms", "fast", "", "1.5"} {
		if _, err := ParseDuration(bad); err == nil {
			t.Errorf("ParseDuration(%q) accepted", bad)
		}
	}
}

// Values print in the form they are read, so files and JSON round-trip.
func TestRoundTrip(t *testing.T) {
	for _, r := range []Rate{Unlimited, 1e9, 400e6, 100e3, 12345} {
		b, _ := r.MarshalText()
		var back Rate
		if err := back.UnmarshalText(b); err != nil || back != r {
			t.Errorf("rate %v -> %s -> %v, %v", uint64(r), b, back, err)
		}
	}
	for _, d := range []Duration{0, Duration(50 * time.Millisecond), Duration(1500 * time.Microsecond)} {
		b, _ := d.MarshalText()
		var back Duration
		if err := back.UnmarshalText(b); err != nil || back != d {
			t.Errorf("duration %v -> %s -> %v, %v", d, b, back, err)
		}
	}
	for b, want := range map[ByteSize]string{64 << 20: "64MiB", 4e9: "4GB", 552e6: "552MB", 10: "10B"} {
		if b.String() != want {
			t.Errorf("%d prints %q, want %q", int64(b), b.String(), want)
		}
	}
	if Rate(1e9).BytesPerSec() != 125e6 || Rate(1e9).Bps() != 1e9 {
		t.Error("rate conversions")
	}
}

// YAML errors name the line and show the expected form.
func TestYAMLErrors(t *testing.T) {
	var v struct {
		R Rate     `yaml:"r"`
		D Duration `yaml:"d"`
		B ByteSize `yaml:"b"`
	}
	if err := yaml.Unmarshal([]byte("r: 1Gbit\nd: 50ms\nb: 64MiB\n"), &v); err != nil || v.R != 1e9 || v.D.D() != 50*time.Millisecond || v.B != 64<<20 {
		t.Fatalf("decode: %+v, %v", v, err)
	}
	for in, want := range map[string]string{
		"r: 1000\n":     "line 1",
		"d: [1]\n":      "a duration must be a string like \"50ms\"",
		"\n\nb: lots\n": "line 3",
	} {
		err := yaml.Unmarshal([]byte(in), &v)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: error %v, want it to contain %q", in, err, want)
		}
	}
	out, _ := yaml.Marshal(struct{ R Rate }{2e9})
	if !strings.Contains(string(out), "2Gbit") {
		t.Errorf("marshal: %s", out)
	}
}

// Errors say what is wrong: NaN and Inf are not numbers missing a unit,
// and a duration too long for int64 is out of range, not unit-less.
func TestParseMessages(t *testing.T) {
	for _, tt := range []struct {
		parse func(string) error
		in    string
		want  string
	}{
		{func(s string) error { _, err := ParseRate(s); return err }, "NaN", `rate "NaN": unknown unit`},
		{func(s string) error { _, err := ParseRate(s); return err }, "Inf", `rate "Inf": unknown unit`},
		{func(s string) error { _, err := ParseRate(s); return err }, "100", `rate "100" has no unit: write e.g. "100Mbit"`},
		{func(s string) error { _, err := ParseDuration(s); return err }, "NaN", `duration "NaN": use a unit such as ns`},
		{func(s string) error { _, err := ParseDuration(s); return err }, "1e300h", `duration "1e300h": want a plain number and a unit, at most 2562047h0m0s`},
		{func(s string) error { _, err := ParseDuration(s); return err }, "3000000h", `at most 2562047h0m0s`},
		{func(s string) error { _, err := ParseDuration(s); return err }, "5", `duration "5" has no unit`},
		{func(s string) error { _, err := ParseByteSize(s); return err }, "NaN", `size "NaN": want a number and a unit`},
	} {
		if err := tt.parse(tt.in); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%q: %v, want %q", tt.in, err, tt.want)
		}
	}
}
