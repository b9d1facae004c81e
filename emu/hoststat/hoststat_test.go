package hoststat

import (
	"context"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

func TestParseProcStat(t *testing.T) {
	tests := []struct {
		name, in string
		want     CPUTimes
		bad      bool
	}{
		{"kernel 6", "cpu  100 2 30 400 5 6 7 8 0 0\ncpu0 50 1 15 200 2 3 3 4 0 0\nintr 1\n",
			CPUTimes{User: 100, Nice: 2, System: 30, Idle: 400, IOWait: 5, IRQ: 6, SoftIRQ: 7, Steal: 8}, false},
		{"no aggregate line", "cpu0 1 2 3 4 5 6 7 8\n", CPUTimes{}, true},
		{"garbage", "cpu  1 2 x 4 5 6 7 8\n", CPUTimes{}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseProcStat([]byte(tt.in))
			if (err != nil) != tt.bad || got != tt.want {
				t.Errorf("got %+v, %v; want %+v (error %v)", got, err, tt.want, tt.bad)
			}
		})
	}
}

func TestParseProcPIDStat(t *testing.T) {
	tests := []struct {
		name, in string
		want     ProcStat
		bad      bool
	}{
		{"plain", "42 (emu) S 1 42 42 0 -1 4194304 100 0 0 0 17 5 0 0 20 0 8 0 100 0 0", ProcStat{PID: 42, PPID: 1, UTime: 17, STime: 5}, false},
		{"name with spaces and parens", "7 (a b) (c)) R 3 7 7 0 -1 0 0 0 0 0 9 1 0 0 20 0 1 0 5 0 0", ProcStat{PID: 7, PPID: 3, UTime: 9, STime: 1}, false},
		{"truncated", "7 (x) R 3 7", ProcStat{}, true},
		{"no name", "7 x R 3", ProcStat{}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseProcPIDStat([]byte(tt.in))
			if (err != nil) != tt.bad || got != tt.want {
				t.Errorf("got %+v, %v; want %+v (error %v)", got, err, tt.want, tt.bad)
			}
		})
	}
}

func TestDescendants(t *testing.T) {
	procs := []ProcStat{{PID: 1}, {PID: 10, PPID: 1}, {PID: 11, PPID: 10}, {PID: 12, PPID: 11}, {PID: 20, PPID: 1}, {PID: 13, PPID: 10}}
	got := Descendants(procs, 10)
	want := map[int]bool{10: true, 11: true, 12: true, 13: true}
	if len(got) != len(want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	for p := range want {
		if !got[p] {
			t.Errorf("%d missing from %v", p, got)
		}
	}
}

func TestInterval(t *testing.T) {
	a := CPUTimes{User: 100, System: 100, Idle: 800}
	tests := []struct {
		name       string
		b          CPUTimes
		oa, ob     uint64
		busy, ours float64
		soft, frgn float64
	}{
		// 200 ticks pass: 100 idle, 60 user+system of ours, 20 softirq, 20 someone else's.
		{"mixed", CPUTimes{User: 170, System: 110, Idle: 900, SoftIRQ: 20}, 50, 110, 0.5, 0.3, 0.1, 0.1},
		{"idle", CPUTimes{User: 100, System: 100, Idle: 1000}, 0, 0, 0, 0, 0, 0},
		// Ours can exceed busy by tick rounding: it is clamped, foreign stays >= 0.
		{"rounding", CPUTimes{User: 150, System: 100, Idle: 950}, 0, 60, 0.25, 0.25, 0, 0},
		{"no time passed", a, 0, 0, 0, 0, 0, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := Interval(a, tt.b, tt.oa, tt.ob, 5)
			for _, c := range []struct {
				what      string
				got, want float64
			}{{"busy", s.Busy, tt.busy}, {"ours", s.Ours, tt.ours}, {"softirq", s.SoftIRQ, tt.soft}, {"foreign", s.Foreign, tt.frgn}} {
				if math.Abs(c.got-c.want) > 1e-9 {
					t.Errorf("%s = %v, want %v (%+v)", c.what, c.got, c.want, s)
				}
			}
		})
	}
}

// A fake /proc: the machine's ticks move, one of our processes exits
// between readings, and its time still counts as ours.
func TestSamplerFakeProc(t *testing.T) {
	dir := t.TempDir()
	write := func(path, s string) {
		t.Helper()
		if err := os.MkdirAll(filepath.Dir(filepath.Join(dir, path)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, path), []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("stat", "cpu  0 0 0 1000 0 0 0 0\n")
	write("loadavg", "0.5 0.4 0.3 1/3 200\n")
	write("100/stat", "100 (emu) S 1 0 0 0 0 0 0 0 0 0 10 0 0 0")
	write("101/stat", "101 (emu worker) S 100 0 0 0 0 0 0 0 0 0 10 0 0 0")
	write("200/stat", "200 (hog) R 1 0 0 0 0 0 0 0 0 0 0 0 0 0")
	s := &Sampler{Proc: dir, Root: 100}
	s.ours = map[int]uint64{}
	c0, o0, err := s.read()
	if err != nil {
		t.Fatal(err)
	}
	// 100 ticks: ours +40 (the worker used 30 and exited), the hog 50, 10 idle.
	write("stat", "cpu  90 0 0 1010 0 0 0 0\n")
	write("100/stat", "100 (emu) S 1 0 0 0 0 0 0 0 0 0 20 0 0 0")
	write("101/stat", "101 (emu worker) S 100 0 0 0 0 0 0 0 0 0 40 0 0 0")
	if _, _, err := s.read(); err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(filepath.Join(dir, "101")); err != nil {
		t.Fatal(err)
	}
	c1, o1, err := s.read()
	if err != nil {
		t.Fatal(err)
	}
	got := Interval(c0, c1, o0, o1, 0)
	if math.Abs(got.Busy-0.9) > 1e-9 || math.Abs(got.Ours-0.4) > 1e-9 || math.Abs(got.Foreign-0.5) > 1e-9 {
		t.Errorf("got %+v, want busy 0.9, ours 0.4, foreign 0.5", got)
	}
}

// On the real /proc, a busy loop of this process is ours, not foreign.
func TestSamplerSeesOwnLoad(t *testing.T) {
	if _, err := os.Stat("/proc/stat"); err != nil {
		t.Skip("no /proc/stat")
	}
	ctx, cancel := context.WithCancel(context.Background())
	s := &Sampler{Every: 50 * time.Millisecond}
	done := make(chan struct{})
	go func() { s.Run(ctx); close(done) }()
	end := time.Now().Add(400 * time.Millisecond)
	x := 0
	for time.Now().Before(end) {
		x++
	}
	cancel()
	<-done
	if err := s.Err(); err != nil {
		t.Fatal(err)
	}
	smp := s.Samples()
	if len(smp) < 3 {
		t.Fatalf("%d samples in 400 ms at 50 ms", len(smp))
	}
	var ours float64
	for _, v := range smp {
		ours += v.Ours
	}
	if ours/float64(len(smp)) <= 0 {
		t.Errorf("a busy loop of this process is not counted as ours: %+v (%d)", smp, x)
	}
}

// BenchmarkRead is one reading of the real /proc: a walk of every process
// (every RescanEvery-th reading) and the readings of ours in between.
func BenchmarkRead(b *testing.B) {
	if _, err := os.Stat("/proc/stat"); err != nil {
		b.Skip("no /proc/stat")
	}
	for _, tc := range []struct {
		name  string
		reads int
	}{{"walk", 0}, {"ours", 1}} {
		b.Run(tc.name, func(b *testing.B) {
			s := &Sampler{Proc: "/proc", Root: os.Getpid(), ours: map[int]uint64{}}
			if _, _, err := s.read(); err != nil {
				b.Fatal(err)
			}
			for b.Loop() {
				s.reads = tc.reads
				if _, _, err := s.read(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// A process of ours that appears between walks is found at the next
// reading, because the machine's thread count changed: its time is never
// foreign.
func TestSamplerFindsNewChildAtOnce(t *testing.T) {
	dir := t.TempDir()
	write := func(path, s string) {
		t.Helper()
		if err := os.MkdirAll(filepath.Dir(filepath.Join(dir, path)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, path), []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("stat", "cpu  0 0 0 1000 0 0 0 0\n")
	write("loadavg", "0.5 0.4 0.3 1/2 200\n")
	write("100/stat", "100 (emu) S 1 0 0 0 0 0 0 0 0 0 0 0 0 0")
	s := &Sampler{Proc: dir, Root: 100, ours: map[int]uint64{}}
	c0, o0, err := s.read()
	if err != nil {
		t.Fatal(err)
	}
	// A rank starts and uses 50 of 100 ticks; the walk is 9 readings away.
	write("stat", "cpu  50 0 0 1050 0 0 0 0\n")
	write("loadavg", "0.5 0.4 0.3 1/3 201\n")
	write("101/stat", "101 (emu worker) S 100 0 0 0 0 0 0 0 0 0 50 0 0 0")
	c1, o1, err := s.read()
	if err != nil {
		t.Fatal(err)
	}
	if got := Interval(c0, c1, o0, o1, 0); math.Abs(got.Ours-0.5) > 1e-9 || got.Foreign != 0 {
		t.Errorf("a new child's time: %+v, want ours 0.5, foreign 0", got)
	}
}

// On the real /proc, a busy child started after sampling began is ours:
// not one sample counts it as foreign for long.
func TestSamplerCountsLateChildAsOurs(t *testing.T) {
	if _, err := os.Stat("/proc/loadavg"); err != nil {
		t.Skip("no /proc/loadavg")
	}
	ctx, cancel := context.WithCancel(context.Background())
	s := &Sampler{Every: 50 * time.Millisecond}
	done := make(chan struct{})
	go func() { s.Run(ctx); close(done) }()
	time.Sleep(120 * time.Millisecond)
	child := exec.Command("sh", "-c", "while :; do :; done")
	if err := child.Start(); err != nil {
		t.Skipf("cannot start a shell: %v", err)
	}
	time.Sleep(600 * time.Millisecond)
	_ = child.Process.Kill()
	_ = child.Wait()
	cancel()
	<-done
	var ours float64
	n := 0
	for _, v := range s.Samples()[3:] { // the samples after the child started
		ours += v.Ours
		n++
	}
	if n == 0 || ours/float64(n) < 0.05 {
		t.Errorf("a busy child of ours: mean ours share %.3f over %d samples, want clearly above 0 (%+v)", ours/float64(max(n, 1)), n, s.Samples())
	}
}
