package main

import (
	"strings"
	"testing"
	"time"
)

// TestCollectiveFlags: every flag of `emu collective` is checked before
// anything is allocated (iterations -1 once panicked in makeslice, and
// 9999999999 ran out of memory), and each refusal names the flag, the
// value and the allowed range.
func TestCollectiveFlags(t *testing.T) {
	type flags struct {
		pattern, ranks, bytes, ps string
		iters                     int
		compute                   time.Duration
	}
	ok := flags{"ring", "r0s0,r1s0", "1MiB", "", 3, 0}
	with := func(f func(*flags)) flags { x := ok; f(&x); return x }
	tests := []struct {
		name string
		f    flags
		want []string // substrings of the error; none: accepted
	}{
		{"valid ring", ok, nil},
		{"valid ps", with(func(f *flags) { f.pattern, f.ps = "ps", "r3s0" }), nil},
		{"valid hd at 4", with(func(f *flags) { f.pattern, f.ranks = "hd", "r0s0,r1s0,r2s0,r3s0" }), nil},
		{"iterations negative", with(func(f *flags) { f.iters = -1 }), []string{"--iterations -1", "between 1 and 100000"}},
		{"iterations zero", with(func(f *flags) { f.iters = 0 }), []string{"--iterations 0", "between 1 and 100000"}},
		{"iterations huge", with(func(f *flags) { f.iters = 9999999999 }), []string{"--iterations 9999999999", "between 1 and 100000"}},
		{"bytes not aligned", with(func(f *flags) { f.bytes = "6B" }), []string{"--bytes 6B", "multiple of 4"}},
		{"bytes below one element per rank", with(func(f *flags) { f.bytes = "4B" }), []string{"--bytes 4B", "at least 4 per rank (8 for 2 ranks)"}},
		{"bytes without unit", with(func(f *flags) { f.bytes = "12" }), []string{`--bytes "12"`, "no unit"}},
		{"bytes beyond the parser's range", with(func(f *flags) { f.bytes = "2000TiB" }), []string{`--bytes "2000TiB"`, "1B to 1TiB"}},
		{"bytes beyond memory", with(func(f *flags) { f.bytes = "1000GiB" }), []string{"--bytes 1000GiB", "available"}},
		{"one rank", with(func(f *flags) { f.ranks = "r0s0" }), []string{"--ranks (1 server)", "between 2 and 4096"}},
		{"empty rank", with(func(f *flags) { f.ranks = "r0s0,,r1s0" }), []string{`--ranks "r0s0,,r1s0"`, "empty server name"}},
		{"bad rank", with(func(f *flags) { f.ranks = "r0s0,host1" }), []string{`"host1" is not a server name`}},
		{"duplicate rank", with(func(f *flags) { f.ranks = "r0s0,r1s0,r0s0" }), []string{"r0s0 is listed twice"}},
		{"hd not a power of two", with(func(f *flags) { f.pattern, f.ranks = "hd", "r0s0,r1s0,r2s0" }), []string{"--ranks (3 servers)", "power-of-two"}},
		{"compute negative", with(func(f *flags) { f.compute = -time.Second }), []string{"--compute -1s", "must not be negative"}},
		{"ps without --ps", with(func(f *flags) { f.pattern = "ps" }), []string{"--ps", "needs --ps <server>"}},
		{"--ps for a ring", with(func(f *flags) { f.ps = "r3s0" }), []string{"--ps r3s0", "only for the ps pattern"}},
		{"--ps not a server", with(func(f *flags) { f.pattern, f.ps = "ps", "nas" }), []string{"--ps nas", "not a server name"}},
		{"unknown pattern", with(func(f *flags) { f.pattern = "tree" }), []string{`pattern "tree"`, "ring, hd, alltoall or ps"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			j, err := collectiveJob(tt.f.pattern, tt.f.ranks, tt.f.bytes, tt.f.ps, tt.f.iters, tt.f.compute)
			if tt.want == nil {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				if len(j.Workers) < 2 || j.Bytes != 1<<20 || j.Iterations != tt.f.iters || j.PS != tt.f.ps || len(j.Phases()) != tt.f.iters*2+tt.f.iters*btoi(j.Pattern == "ps") {
					t.Errorf("job %+v does not follow the flags", j)
				}
				return
			}
			if err == nil {
				t.Fatalf("accepted; want an error with %q", tt.want)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
		})
	}
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}
