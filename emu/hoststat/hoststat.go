// Package hoststat samples what the host's CPUs did while a run worked:
// busy, softirq, steal, the share our own processes (emu and every process
// it started) used, and the rest, which other processes took (foreign
// load). It reads /proc/stat and /proc/<pid>/stat only; the fidelity
// verdict reads its samples.
package hoststat

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/ocsemu/ocsemu/dataplane/monoclock"
)

// Sample is one interval's CPU use, each a fraction of all CPUs' time
// over the interval (0..1): Busy is everything but idle and iowait; Ours
// the user and system time of our processes; SoftIRQ and IRQ the kernel's
// interrupt work (packet processing of the veths lands here); Steal what
// the hypervisor took; Foreign = Busy - Ours - SoftIRQ - IRQ - Steal, the
// other processes of the machine (never below 0).
type Sample struct {
	TNs     int64   `json:"t_ns"` // CLOCK_MONOTONIC at the interval's end
	Busy    float64 `json:"busy"`
	Ours    float64 `json:"ours"`
	SoftIRQ float64 `json:"softirq"`
	IRQ     float64 `json:"irq"`
	Steal   float64 `json:"steal"`
	Foreign float64 `json:"foreign"`
}

// CPUTimes is the aggregate "cpu" line of /proc/stat, in clock ticks.
type CPUTimes struct {
	User, Nice, System, Idle, IOWait, IRQ, SoftIRQ, Steal uint64
}

// Total is every tick counted (guest time is inside user already).
func (c CPUTimes) Total() uint64 {
	return c.User + c.Nice + c.System + c.Idle + c.IOWait + c.IRQ + c.SoftIRQ + c.Steal
}

// ParseProcStat reads the aggregate cpu line of /proc/stat.
func ParseProcStat(data []byte) (CPUTimes, error) {
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 9 || f[0] != "cpu" {
			continue
		}
		var v [8]uint64
		for i := range v {
			n, err := strconv.ParseUint(f[i+1], 10, 64)
			if err != nil {
				return CPUTimes{}, fmt.Errorf("/proc/stat: cpu field %d: %w", i+1, err)
			}
			v[i] = n
		}
		return CPUTimes{User: v[0], Nice: v[1], System: v[2], Idle: v[3], IOWait: v[4], IRQ: v[5], SoftIRQ: v[6], Steal: v[7]}, nil
	}
	return CPUTimes{}, fmt.Errorf("/proc/stat: no aggregate cpu line")
}

// ProcStat is what one /proc/<pid>/stat line says about a process.
type ProcStat struct {
	PID, PPID    int
	UTime, STime uint64 // clock ticks
}

// ParseProcPIDStat reads /proc/<pid>/stat. The command name may hold
// spaces and parentheses, so fields are counted after its last ')'.
func ParseProcPIDStat(data []byte) (ProcStat, error) {
	s := string(data)
	open, close := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
	if open < 0 || close < open {
		return ProcStat{}, fmt.Errorf("stat line without a command name: %.40q", s)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(s[:open]))
	if err != nil {
		return ProcStat{}, fmt.Errorf("stat line: pid: %w", err)
	}
	f := strings.Fields(s[close+1:])
	// f[0] is the state (field 3); ppid is field 4, utime 14, stime 15.
	if len(f) < 13 {
		return ProcStat{}, fmt.Errorf("stat line of %d: %d fields after the name, want at least 13", pid, len(f))
	}
	ppid, err1 := strconv.Atoi(f[1])
	ut, err2 := strconv.ParseUint(f[11], 10, 64)
	st, err3 := strconv.ParseUint(f[12], 10, 64)
	if err1 != nil || err2 != nil || err3 != nil {
		return ProcStat{}, fmt.Errorf("stat line of %d: bad ppid/utime/stime", pid)
	}
	return ProcStat{PID: pid, PPID: ppid, UTime: ut, STime: st}, nil
}

// Descendants returns root and every process below it in procs.
func Descendants(procs []ProcStat, root int) map[int]bool {
	kids := map[int][]int{}
	for _, p := range procs {
		kids[p.PPID] = append(kids[p.PPID], p.PID)
	}
	out := map[int]bool{root: true}
	for todo := []int{root}; len(todo) > 0; {
		p := todo[len(todo)-1]
		todo = todo[:len(todo)-1]
		for _, k := range kids[p] {
			if !out[k] {
				out[k] = true
				todo = append(todo, k)
			}
		}
	}
	return out
}

// Interval turns two readings into a Sample: the machine's ticks a and b,
// and our processes' ticks (summed utime+stime) at each.
func Interval(a, b CPUTimes, oursA, oursB uint64, tNs int64) Sample {
	total := float64(b.Total() - a.Total())
	if total <= 0 {
		return Sample{TNs: tNs}
	}
	frac := func(x, y uint64) float64 {
		if y < x {
			return 0
		}
		return float64(y-x) / total
	}
	s := Sample{TNs: tNs,
		Busy:    1 - frac(a.Idle+a.IOWait, b.Idle+b.IOWait),
		SoftIRQ: frac(a.SoftIRQ, b.SoftIRQ),
		IRQ:     frac(a.IRQ, b.IRQ),
		Steal:   frac(a.Steal, b.Steal),
		Ours:    frac(oursA, oursB),
	}
	s.Ours = min(s.Ours, s.Busy)
	s.Foreign = max(0, s.Busy-s.Ours-s.SoftIRQ-s.IRQ-s.Steal)
	return s
}

// Sampler reads the host every Every (default 100 ms) until stopped.
type Sampler struct {
	Proc  string        // /proc (a variable for tests)
	Root  int           // our processes: this pid and its descendants; 0: this process
	Every time.Duration // default 100 ms

	mu      sync.Mutex
	samples []Sample
	err     error
	// ours holds the last ticks of each of our processes, so that one
	// that exits between readings keeps what it used until then.
	ours map[int]uint64
	// reads counts readings: every RescanEvery-th walks all of /proc for
	// new processes of ours, and so does any reading after the machine's
	// count of threads changed (/proc/loadavg), so a process we start is
	// never counted as foreign; the others read only the ones known.
	reads   int
	threads string
}

// RescanEvery is how many readings pass between walks of all of /proc
// (BenchmarkRead: a walk costs milliseconds on a machine with a hundred
// processes; reading only ours, a fraction of that).
const RescanEvery = 10

// Run samples until ctx ends. The first error stops sampling and is kept
// (Err); a host without /proc gives no samples, not a failed run.
func (s *Sampler) Run(ctx context.Context) {
	if s.Proc == "" {
		s.Proc = "/proc"
	}
	if s.Root == 0 {
		s.Root = os.Getpid()
	}
	if s.Every <= 0 {
		s.Every = 100 * time.Millisecond
	}
	s.ours = map[int]uint64{}
	prev, prevOurs, err := s.read()
	if err != nil {
		s.setErr(err)
		return
	}
	t := time.NewTicker(s.Every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		cur, ours, err := s.read()
		if err != nil {
			s.setErr(err)
			return
		}
		smp := Interval(prev, cur, prevOurs, ours, monoclock.Now())
		s.mu.Lock()
		s.samples = append(s.samples, smp)
		s.mu.Unlock()
		prev, prevOurs = cur, ours
	}
}

func (s *Sampler) setErr(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err == nil {
		s.err = err
	}
}

// Samples returns what was sampled so far.
func (s *Sampler) Samples() []Sample {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Sample(nil), s.samples...)
}

// Err is why sampling stopped early, if it did.
func (s *Sampler) Err() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.err
}

// readPID reads one process's stat line; false when it is gone.
func (s *Sampler) readPID(pid string) (ProcStat, bool) {
	d, err := os.ReadFile(filepath.Join(s.Proc, pid, "stat"))
	if err != nil {
		return ProcStat{}, false
	}
	p, err := ParseProcPIDStat(d)
	return p, err == nil
}

// read takes the machine's ticks and our processes' summed ticks. Exited
// processes keep their last reading: their time was spent.
func (s *Sampler) read() (CPUTimes, uint64, error) {
	data, err := os.ReadFile(filepath.Join(s.Proc, "stat"))
	if err != nil {
		return CPUTimes{}, 0, fmt.Errorf("host CPU: %w", err)
	}
	ct, err := ParseProcStat(data)
	if err != nil {
		return CPUTimes{}, 0, err
	}
	rescan := s.reads%RescanEvery == 0
	s.reads++
	if la, err := os.ReadFile(filepath.Join(s.Proc, "loadavg")); err == nil {
		if f := strings.Fields(string(la)); len(f) >= 4 {
			if _, total, ok := strings.Cut(f[3], "/"); ok && total != s.threads {
				rescan, s.threads = true, total
			}
		}
	} else {
		rescan = true
	}
	if rescan {
		ents, err := os.ReadDir(s.Proc)
		if err != nil {
			return CPUTimes{}, 0, fmt.Errorf("host CPU: %w", err)
		}
		var procs []ProcStat
		for _, e := range ents {
			if _, err := strconv.Atoi(e.Name()); err != nil {
				continue
			}
			if p, ok := s.readPID(e.Name()); ok {
				procs = append(procs, p)
			}
		}
		mine := Descendants(procs, s.Root)
		for _, p := range procs {
			if mine[p.PID] {
				s.ours[p.PID] = p.UTime + p.STime
			}
		}
	} else {
		for pid := range s.ours {
			if p, ok := s.readPID(strconv.Itoa(pid)); ok && p.PID == pid {
				s.ours[pid] = max(s.ours[pid], p.UTime+p.STime) // a reused pid never lowers what was spent
			}
		}
	}
	var sum uint64
	for _, v := range s.ours {
		sum += v
	}
	return ct, sum, nil
}
