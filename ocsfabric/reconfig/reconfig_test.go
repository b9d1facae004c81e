package reconfig

import (
	"strings"
	"testing"
	"time"
)

func TestParseDelay(t *testing.T) {
	tests := []struct {
		in     string
		want   time.Duration
		errHas string
	}{
		{"50ms", 50 * time.Millisecond, ""},
		{"20us", 20 * time.Microsecond, ""},
		{"20µs", 20 * time.Microsecond, ""},
		{"0", 0, ""},
		{"0s", 0, ""},
		{"10s", 10 * time.Second, ""},
		{"-5ms", 0, "must be between 0s and 10s, got -5ms"},
		{"100h", 0, "must be between 0s and 10s, got 100h0m0s"},
		{"10.001s", 0, "must be between 0s and 10s, got 10.001s"},
		{"50", 0, `"50" has no unit: write e.g. "50ms"`},
		{"fast", 0, `duration "fast": use a unit such as ns, us, ms or s`},
		{"", 0, `duration "": use a unit`},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := ParseDelay(tt.in)
			if tt.errHas == "" {
				if err != nil || got != tt.want {
					t.Errorf("ParseDelay(%q) = %v, %v; want %v", tt.in, got, err, tt.want)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.errHas) {
				t.Errorf("ParseDelay(%q) error %v, want it to contain %q", tt.in, err, tt.errHas)
			}
		})
	}
}

func TestCheckAt(t *testing.T) {
	const now = int64(1_590_112_871_786)
	tests := []struct {
		name   string
		at     int64
		errHas string
	}{
		{"zero is as soon as possible", 0, ""},
		{"just ahead", now + 1, ""},
		{"an hour ahead", now + int64(MaxAhead), ""},
		{"one", 1, "1 is 26m30.113s in the past (the OCS clock reads 1590112871786)"},
		{"now", now, "is 0s in the past"},
		{"negative", -5, "-5 is negative"},
		{"too far", now + int64(MaxAhead) + 1, "at most 1h0m0s ahead is allowed"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := CheckAt(tt.at, now)
			switch {
			case tt.errHas == "" && err != nil:
				t.Errorf("unexpected error: %v", err)
			case tt.errHas != "" && (err == nil || !strings.Contains(err.Error(), tt.errHas)):
				t.Errorf("error %v, want it to contain %q", err, tt.errHas)
			}
		})
	}
}
