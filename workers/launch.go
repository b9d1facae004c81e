package workers

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/ocsemu/ocsemu/dataplane/fabric"
	"github.com/ocsemu/ocsemu/dataplane/limits"
	"github.com/ocsemu/ocsemu/dataplane/names"
	"github.com/ocsemu/ocsemu/dataplane/netns"
	"github.com/ocsemu/ocsemu/dataplane/safefile"
	"github.com/ocsemu/ocsemu/workers/job"
)

// Data ports. Every rank process listens on one port of its server's
// namespace; ports are handed out per server, in job order, from BasePort
// up, so they do not depend on how many ranks a job has, only on how many
// rank processes share one server. LastPort keeps them below Linux's
// default ephemeral range (net.ipv4.ip_local_port_range 32768-60999), so
// a listener never collides with the source port of an outgoing
// connection in the same namespace.
const (
	BasePort = 20000
	LastPort = 32767
)

// Options run the jobs of a plan (or the built-in schedule) on a lab.
type Options struct {
	Lab  *fabric.Lab
	Jobs []job.Job
	// Schedule gates the phases; nil runs the built-in schedule: every job
	// starts at time zero and iterates.
	Schedule *job.Schedule
	Dir      string // records and logs go here
	// Exe is the emu binary to start one process per rank with; empty
	// runs every rank as a goroutine of this process (tests).
	Exe    string
	Verify bool
	// Realtime runs the rank processes under SCHED_RR (priority 1), not
	// at nice RankNice: a loaded machine then delays neither their
	// transfers nor the kernel work their system calls do. Real-time
	// threads may take up to kernel.sched_rt_runtime_us of each second
	// (95%) from everything else.
	Realtime     bool
	Timeout      time.Duration // per transfer; default 60 s
	TCPInfoEvery time.Duration // default DefaultTCPInfoEvery; negative: off
	OnStage      func(ctx context.Context, k int, at int64) (int64, error)
	// StageLead sets every barrier stage after the first this far ahead of
	// when it may start, so that every rank has heard of it before its
	// instant and all start together (`emu collective`, as nccl-tests
	// times after a barrier); 0: a stage starts at once, and each rank when
	// it hears of it (plans, whose makespan the lead would lengthen).
	StageLead time.Duration
	// OnStart is called with time zero before the ranks hear it (clock
	// mode: load the OCS schedule against it).
	OnStart  func(t0 int64) error
	Log      *slog.Logger
	Progress func(format string, args ...any)
}

// Outcome is what a launch measured.
type Outcome struct {
	T0          int64
	Phases      []PhaseRecord
	TCP         []TCPSample
	StageStarts []int64
	StageEnds   []int64
}

// DefaultTCPInfoEvery is how often a rank samples its connections'
// TCP_INFO unless told (Options.TCPInfoEvery, emu run --tcpinfo-every).
const DefaultTCPInfoEvery = 50 * time.Millisecond

// Specs builds the spec of every rank (and PS) of the jobs.
func Specs(o *Options) ([]*Spec, error) {
	addrs := map[string]string{}
	for _, n := range o.Lab.Topo.Servers() {
		addrs[n.Name] = n.Addr.String()
	}
	cc := o.Lab.Topo.Spec.CongestionControl
	timeout := o.Timeout
	if timeout == 0 {
		timeout = 60 * time.Second
	}
	every := o.TCPInfoEvery
	if every == 0 {
		every = DefaultTCPInfoEvery
	}
	var specs []*Spec
	nextPort := map[string]int{} // per server
	for ji := range o.Jobs {
		j := o.Jobs[ji]
		if len(j.Workers) > MaxRanks {
			return nil, fmt.Errorf("job %s: %d ranks, at most %d per job", j.Name, len(j.Workers), MaxRanks)
		}
		if err := CheckBytes(j.Bytes, len(j.Workers)); err != nil && j.Pattern != job.PatternDAG {
			return nil, fmt.Errorf("job %s: %w", j.Name, err)
		}
		if j.Iterations < 1 || j.Iterations > limits.MaxIterations {
			// Checked before gatesFor lists every phase.
			return nil, fmt.Errorf("job %s: iterations %d, want 1 to %d", j.Name, j.Iterations, limits.MaxIterations)
		}
		servers := append([]string{}, j.Workers...)
		if j.UsesPS() {
			if j.PS == "" {
				return nil, fmt.Errorf("job %s: the ps pattern needs a parameter server (ps)", j.Name)
			}
			servers = append(servers, j.PS)
		}
		// The job's ranks need their own servers' addresses only.
		jaddrs := map[string]string{}
		ports := make([]int, len(servers))
		for i, w := range servers {
			a, ok := addrs[w]
			if !ok {
				return nil, fmt.Errorf("job %s: server %q is not in lab %s", j.Name, w, o.Lab.Topo.Lab)
			}
			jaddrs[w] = a
			if ports[i] = BasePort + nextPort[w]; ports[i] > LastPort {
				return nil, fmt.Errorf("job %s: server %s would host more than %d rank processes (ports %d-%d)", j.Name, w, LastPort-BasePort+1, BasePort, LastPort)
			}
			nextPort[w]++
		}
		gates, mode, err := gatesFor(o.Schedule, &j)
		if err != nil {
			return nil, err
		}
		jcc := cc
		if j.CongestionControl != "" {
			jcc = j.CongestionControl
		}
		base := Spec{Job: j, Addrs: jaddrs, Ports: ports, CC: jcc, Mode: mode, Gates: gates,
			Verify: o.Verify, Timeout: timeout, TCPInfoEvery: every}
		if every < 0 {
			base.TCPInfoEvery = 0
		}
		ranks := make([]int, len(j.Workers))
		for i := range ranks {
			ranks[i] = i
		}
		if j.UsesPS() {
			ranks = append(ranks, PSRank)
		}
		for _, r := range ranks {
			s := base
			s.Rank = r
			s.Out = filepath.Join(o.Dir, fmt.Sprintf("%s-%s.jsonl", j.Name, rankName(r)))
			specs = append(specs, &s)
		}
	}
	return specs, nil
}

func rankName(r int) string {
	if r == PSRank {
		return "ps"
	}
	return fmt.Sprintf("rank%d", r)
}

// gatesFor turns a schedule's activities into one gate per phase of a job.
func gatesFor(p *job.Schedule, j *job.Job) ([]Gate, string, error) {
	if p == nil {
		return nil, "", nil
	}
	where := map[job.Key]Gate{}
	for si, st := range p.Stages {
		for _, a := range st.Activities {
			if a.Job != j.Name {
				continue
			}
			g := Gate{Stage: si, NotBeforeNs: -1}
			if p.Mode == job.ModeClock {
				g.NotBeforeNs = st.StartNs
			}
			if a.StartNs != nil {
				g.NotBeforeNs = max(g.NotBeforeNs, *a.StartNs)
			}
			if j.ArrivalNs > 0 {
				// A job does nothing before it arrives, in a barrier
				// stage too (the flow model holds it back the same way).
				g.NotBeforeNs = max(g.NotBeforeNs, j.ArrivalNs)
			}
			where[a.Key] = g
		}
	}
	var gates []Gate
	for _, k := range j.Phases() {
		g, ok := where[k]
		if !ok {
			return nil, "", fmt.Errorf("plan never schedules %s", k)
		}
		gates = append(gates, g)
	}
	return gates, p.Mode, nil
}

// Launch runs the jobs to the end and gathers every rank's records. A
// failed rank makes it return an error naming the job, rank and phase
// (the coordinator's, when the rank reported its failure; the rank's own
// exit otherwise, as one that never connected); the first rank to fail
// stops the others at once, and every process is ended.
func Launch(ctx context.Context, o *Options) (*Outcome, error) {
	log := o.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if err := os.MkdirAll(o.Dir, 0o755); err != nil {
		return nil, err
	}
	specs, err := Specs(o)
	if err != nil {
		return nil, err
	}
	need := 0.0
	for _, j := range o.Jobs {
		need += BufferBytes(j.Pattern, len(j.Workers), j.Bytes)
	}
	if err := CheckMemory(need); err != nil {
		return nil, fmt.Errorf("%d job(s): %w", len(o.Jobs), err)
	}
	sock := fabric.LabFile(o.Lab.Topo.Lab, "coord.sock")
	co := &Coordinator{Socket: sock, Schedule: o.Schedule, Jobs: o.Jobs, OnStage: o.OnStage, OnStart: o.OnStart, StageLead: o.StageLead, Log: log}
	for _, s := range specs {
		s.Coordinator = sock
		co.Ranks = append(co.Ranks, s.Name())
	}
	ln, err := co.Listen()
	if err != nil {
		return nil, err
	}
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	coErr := make(chan error, 1)
	go func() { coErr <- co.Run(cctx, ln) }()

	if o.Progress != nil {
		jobs := fmt.Sprintf("%d jobs", len(o.Jobs))
		if len(o.Jobs) == 1 {
			jobs = "1 job"
		}
		o.Progress("starting %d rank processes for %s", len(specs), jobs)
	}
	rankErrs := make([]error, len(specs))
	stopped := make([]bool, len(specs)) // ended by the launch, not by its own failure
	// A rank that fails on its own ends the launch: the others would
	// wait for it until the coordinator's two-minute deadline.
	var failOnce sync.Once
	failed := -1
	fail := func(i int) {
		failOnce.Do(func() { failed = i })
		cancel()
	}
	var fk *forker
	if o.Exe != "" {
		fk = startForker(log, o.Realtime)
		defer fk.stop() // after every rank process has been waited for
	}
	var wg sync.WaitGroup
	for i, s := range specs {
		wg.Add(1)
		if o.Exe == "" {
			s.NS = names.NSName(o.Lab.Topo.Lab, s.Server())
			go func() {
				defer wg.Done()
				if rankErrs[i] = Run(cctx, s, log); rankErrs[i] != nil {
					if cctx.Err() == nil {
						fail(i)
					} else {
						stopped[i] = true
					}
				}
			}()
			continue
		}
		cmd, err := startProcess(o, s, fk)
		if err != nil {
			wg.Done()
			cancel()
			wg.Wait()
			return nil, err
		}
		go func() {
			defer wg.Done()
			done := make(chan error, 1)
			go func() { done <- cmd.Wait() }()
			select {
			case err := <-done:
				if err != nil {
					rankErrs[i] = fmt.Errorf("%s: %w: %s (log: %s)", s.Name(), err, lastLine(logPath(s)), logPath(s))
					if cctx.Err() == nil {
						fail(i)
					}
				}
			case <-cctx.Done():
				_ = cmd.Process.Signal(syscall.SIGTERM)
				select {
				case <-done:
				case <-time.After(3 * time.Second):
					_ = cmd.Process.Kill()
					<-done
				}
				rankErrs[i] = fmt.Errorf("%s: stopped: %w", s.Name(), cctx.Err())
				stopped[i] = true
			}
		}()
	}
	wg.Wait()
	cancel()
	cerr := <-coErr
	if ctx.Err() == nil {
		// We stopped the coordinator ourselves once every rank had ended:
		// what counts is the failures it heard of, not the cancellation.
		cerr = co.result()
	}
	out := &Outcome{T0: co.T0, StageStarts: co.StageStarts, StageEnds: co.StageEnds}
	// Records that cannot be read back are lost measurements: the run fails.
	var readErrs []error
	for _, s := range specs {
		if err := out.read(s.Out); err != nil {
			readErrs = append(readErrs, fmt.Errorf("%s: records: %w", s.Name(), err))
		}
	}
	if failed >= 0 && ctx.Err() == nil && cerr == nil {
		// A rank failed without telling the coordinator (it never
		// connected): its exit is the cause, and the others' "stopped"
		// would only bury it.
		n := 0
		for _, s := range stopped {
			if s {
				n++
			}
		}
		return out, errors.Join(append([]error{fmt.Errorf("%w; the launch stopped %d other rank(s)", rankErrs[failed], n)}, readErrs...)...)
	}
	if cerr != nil {
		// The ranks' own reports name job, rank and phase.
		return out, errors.Join(append([]error{cerr}, readErrs...)...)
	}
	var errs []error
	for _, e := range rankErrs {
		if e != nil {
			errs = append(errs, e)
		}
	}
	return out, errors.Join(append(errs, readErrs...)...)
}

// lastLine returns the last non-empty line of a file, for error messages.
func lastLine(path string) string {
	data, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	lines := strings.Split(strings.TrimSpace(string(data)), "\n")
	return lines[len(lines)-1]
}

func logPath(s *Spec) string { return s.Out[:len(s.Out)-len(".jsonl")] + ".log" }

// startProcess starts `emu worker --spec` in the rank's server namespace.
// The rank dies with the process that launched it, however that dies
// (SIGKILL included): it would otherwise play its job to the end on an
// abandoned lab.
func startProcess(o *Options, s *Spec, fk *forker) (*exec.Cmd, error) {
	specPath := s.Out[:len(s.Out)-len(".jsonl")] + ".spec.json"
	data, _ := json.MarshalIndent(s, "", " ")
	if err := safefile.Write(specPath, data, 0o644); err != nil {
		return nil, err
	}
	logf, err := safefile.Create(logPath(s))
	if err != nil {
		return nil, err
	}
	defer logf.Close()
	cmd := exec.Command(o.Exe, "worker", "--spec", specPath)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := fk.start(names.NSName(o.Lab.Topo.Lab, s.Server()), cmd); err != nil {
		return nil, fmt.Errorf("start %s in %s: %w", s.Name(), s.Server(), err)
	}
	return cmd, nil
}

// forker starts rank processes from one OS thread that outlives them.
// PR_SET_PDEATHSIG (SysProcAttr.Pdeathsig) fires when the thread that
// forked a child exits, not when its process does: forking from whatever
// thread a goroutine happens to run on would kill a rank whenever the Go
// runtime ended that thread (it ends locked threads, e.g. one that could
// not leave a namespace). So the forker's goroutine holds its thread
// locked from the first fork until stop, which Launch calls once every
// rank process has been waited for. If the launching process dies first,
// the kernel sends every rank SIGKILL.
type forker struct {
	reqs chan forkReq
	log  *slog.Logger
}

type forkReq struct {
	ns   string
	cmd  *exec.Cmd
	done chan error
}

func startForker(log *slog.Logger, realtime bool) *forker {
	f := &forker{reqs: make(chan forkReq), log: log}
	go func() {
		runtime.LockOSThread()
		// Rank processes inherit the forking thread's nice value.
		restore := raisePriority(log, realtime)
		// The thread goes back to its own namespace after every fork: it
		// may be the process's main thread, whose namespace is the one
		// /proc/<pid>/ns/net shows (and destroy ends processes in a lab's
		// namespaces). Only if it cannot go back does it stay locked, so
		// that Go discards it when the goroutine returns.
		orig, err := unix.Open("/proc/thread-self/ns/net", unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			for r := range f.reqs {
				r.done <- fmt.Errorf("open current netns: %w", err)
			}
			return
		}
		defer unix.Close(orig)
		clean := true
		for r := range f.reqs {
			err := forkIn(r.ns, r.cmd)
			if rerr := unix.Setns(orig, unix.CLONE_NEWNET); rerr != nil && clean {
				clean = false
				f.log.Warn("the thread that starts ranks could not leave a lab namespace", "netns", r.ns, "err", rerr)
			}
			r.done <- err
		}
		restore()
		if clean {
			runtime.UnlockOSThread()
		}
	}()
	return f
}

// RankNice is the nice value rank processes run at. A rank plays a host
// whose collectives run on a NIC and a GPU, which the machine's other work
// does not slow down; on a shared machine, ranks at the default priority
// waited for a CPU in the middle of their transfers, and a 16 MiB ring
// measured busbw 0.83-0.95 instead of 0.95 (docs/benchmarks.md). Ranks
// block on their sockets most of the time, so they take little CPU from
// anything else.
const RankNice = -10

// raisePriority gives the calling thread the ranks' scheduling (the
// processes it forks inherit its policy and nice value; on Linux these
// are per thread): nice RankNice, or with realtime the SCHED_RR policy at
// priority 1, above every ordinary process. It returns a function that
// puts the thread's old scheduling back. Without the privilege (not
// root), ranks run at the default priority.
func raisePriority(log *slog.Logger, realtime bool) (restore func()) {
	tid := unix.Gettid()
	old, err := unix.SchedGetAttr(tid, 0)
	if err != nil {
		return func() {}
	}
	attr := &unix.SchedAttr{Policy: unix.SCHED_NORMAL, Nice: RankNice}
	if realtime {
		attr = &unix.SchedAttr{Policy: unix.SCHED_RR, Priority: 1}
	}
	if err := unix.SchedSetAttr(tid, attr, 0); err != nil {
		log.Debug("ranks run at the default priority", "realtime", realtime, "nice", RankNice, "err", err)
		return func() {}
	}
	return func() { _ = unix.SchedSetAttr(tid, old, 0) }
}

// forkIn enters a namespace on the forker's thread and starts cmd there.
func forkIn(ns string, cmd *exec.Cmd) error {
	fd, err := netns.Open(ns)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	if err := unix.Setns(fd, unix.CLONE_NEWNET); err != nil {
		return fmt.Errorf("enter netns %s: %w", ns, err)
	}
	return cmd.Start()
}

func (f *forker) start(ns string, cmd *exec.Cmd) error {
	done := make(chan error, 1)
	f.reqs <- forkReq{ns, cmd, done}
	return <-done
}

func (f *forker) stop() { close(f.reqs) }

func (o *Outcome) read(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	line, bad := 0, 0
	var firstBad error
	for sc.Scan() {
		line++
		var probe struct{ Type string }
		err := json.Unmarshal(sc.Bytes(), &probe)
		if err == nil {
			switch probe.Type {
			case "phase":
				var r PhaseRecord
				if err = json.Unmarshal(sc.Bytes(), &r); err == nil {
					o.Phases = append(o.Phases, r)
				}
			case "tcp":
				var t TCPSample
				if err = json.Unmarshal(sc.Bytes(), &t); err == nil {
					o.TCP = append(o.TCP, t)
				}
			}
		}
		if err != nil {
			if bad++; firstBad == nil {
				firstBad = fmt.Errorf("line %d: %w", line, err)
			}
		}
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("read %s: %w", path, err)
	}
	if bad > 0 {
		return fmt.Errorf("%s: %d unreadable record(s), first at %w", path, bad, firstBad)
	}
	return nil
}
