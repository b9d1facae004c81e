package workers_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ocsemu/ocsemu/workers"
	"github.com/ocsemu/ocsemu/workers/job"
)

// runLoopback plays a job's ranks as goroutines of the test over TCP on a
// loopback address of the current namespace, with a coordinator, as
// Launch does on a lab: no namespaces, so no root. Every rank process
// gets its own port. mod, if set, changes each spec. It returns each
// rank's error (workers first, then the server) and the coordinator's.
func runLoopback(t *testing.T, j job.Job, mod func(*workers.Spec)) ([]error, error) {
	t.Helper()
	return runLoopbackSchedule(t, j, nil, mod)
}

// runLoopbackSchedule is runLoopback with a schedule for the coordinator
// (barrier mode: it starts the stages).
func runLoopbackSchedule(t *testing.T, j job.Job, sched *job.Schedule, mod func(*workers.Spec)) ([]error, error) {
	t.Helper()
	return runLoopbackCoordinated(t, j, sched, mod, nil)
}

// runLoopbackCoordinated is runLoopbackSchedule with the coordinator set
// up by comod, if given, and read back by the caller after the run.
func runLoopbackCoordinated(t *testing.T, j job.Job, sched *job.Schedule, mod func(*workers.Spec), comod func(*workers.Coordinator)) ([]error, error) {
	t.Helper()
	dir := t.TempDir()
	addr := fmt.Sprintf("127.%d.%d.%d", 1+rand.IntN(250), rand.IntN(256), 1+rand.IntN(250))
	servers := append([]string{}, j.Workers...)
	ranks := make([]int, len(j.Workers))
	for i := range ranks {
		ranks[i] = i
	}
	if j.Pattern == job.PatternPS {
		servers = append(servers, j.PS)
		ranks = append(ranks, workers.PSRank)
	}
	addrs := map[string]string{}
	ports := make([]int, len(servers))
	for i, s := range servers {
		addrs[s] = addr
		ports[i] = workers.BasePort + i
	}
	co := &workers.Coordinator{Socket: filepath.Join(dir, "c.sock"), Jobs: []job.Job{j}, Schedule: sched}
	if comod != nil {
		comod(co)
	}
	var specs []*workers.Spec
	for _, r := range ranks {
		s := &workers.Spec{Job: j, Rank: r, Addrs: addrs, Ports: ports, Verify: true, Timeout: 20 * time.Second,
			Coordinator: co.Socket, Out: filepath.Join(dir, fmt.Sprintf("rank%d.jsonl", r))}
		if mod != nil {
			mod(s)
		}
		specs = append(specs, s)
		co.Ranks = append(co.Ranks, s.Name())
	}
	ln, err := co.Listen()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	coErr := make(chan error, 1)
	go func() { coErr <- co.Run(ctx, ln) }()
	errs := make([]error, len(specs))
	var wg sync.WaitGroup
	for i, s := range specs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = workers.Run(ctx, s, nil)
		}()
	}
	wg.Wait()
	if ctx.Err() != nil {
		t.Fatalf("ranks did not finish: %v", ctx.Err())
	}
	// Every rank ended: the coordinator ends when it has heard them go,
	// or is stopped here when some never said hello.
	select {
	case err = <-coErr:
	case <-time.After(5 * time.Second):
		cancel()
		err = <-coErr
	}
	return errs, err
}

// phaseRecords reads the phase records of a JSONL file.
func phaseRecords(t *testing.T, path string) []workers.PhaseRecord {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []workers.PhaseRecord
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var r workers.PhaseRecord
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		if r.Type == "phase" {
			out = append(out, r)
		}
	}
	return out
}

// TestRecordWriteFailureFailsTheRun: a rank whose records cannot be
// written fails, naming the file and the error, and so does its job; it
// used to drop every record silently and succeed.
func TestRecordWriteFailureFailsTheRun(t *testing.T) {
	for _, every := range []time.Duration{0, time.Millisecond} {
		t.Run(fmt.Sprintf("tcpinfo every %v", every), func(t *testing.T) {
			j := job.Job{Name: "rec", Pattern: "ring", Workers: []string{"a", "b"}, Bytes: 1 << 16, ComputeNs: 2e6, Iterations: 3}
			errs, cerr := runLoopback(t, j, func(s *workers.Spec) {
				s.TCPInfoEvery = every
				if s.Rank == 1 {
					s.Out = "/dev/full" // every write fails with ENOSPC
				}
			})
			want := "records: write /dev/full: write /dev/full: no space left on device"
			if errs[1] == nil || !strings.Contains(errs[1].Error(), want) {
				t.Errorf("rank 1: want an error saying %q, got %v", want, errs[1])
			}
			if errs[0] == nil {
				t.Error("rank 0 finished its job without its peer")
			}
			if cerr == nil || !strings.Contains(cerr.Error(), "rec/1") || !strings.Contains(cerr.Error(), "/dev/full") {
				t.Errorf("coordinator: want the failure of rec/1 naming /dev/full, got %v", cerr)
			}
		})
	}
}

// TestLoopbackJobsBeyond62Ranks: jobs of more ranks than the old port
// layout allowed (62: 64 ports per job) run, verify every reduction and
// record every phase.
func TestLoopbackJobsBeyond62Ranks(t *testing.T) {
	servers := func(n int) []string {
		s := make([]string, n)
		for i := range s {
			s[i] = fmt.Sprintf("r%ds0", i)
		}
		return s
	}
	tests := []job.Job{
		{Name: "ring100", Pattern: "ring", Workers: servers(100), Bytes: 400 * 64, Iterations: 2},
		{Name: "hd128", Pattern: "hd", Workers: servers(128), Bytes: 4 * 128 * 16, Iterations: 2},
		{Name: "ps64", Pattern: "ps", Workers: servers(64), PS: "r64s0", Bytes: 4096, Iterations: 2},
	}
	for _, j := range tests {
		t.Run(j.Name, func(t *testing.T) {
			var outs []string
			var mu sync.Mutex
			errs, cerr := runLoopback(t, j, func(s *workers.Spec) {
				mu.Lock()
				outs = append(outs, s.Out)
				mu.Unlock()
			})
			for r, err := range errs {
				if err != nil {
					t.Errorf("rank %d: %v", r, err)
				}
			}
			if cerr != nil {
				t.Errorf("coordinator: %v", cerr)
			}
			verified, phases, acked := 0, 0, 0
			for _, p := range outs {
				for _, r := range phaseRecords(t, p) {
					phases++
					if r.Verified {
						verified++
					}
					// The acknowledgement is watched in the background
					// while the rank goes on; its mark still lands in the
					// phase's own record, after the phase's last send.
					if r.LastAckNs > 0 {
						acked++
						if r.LastAckNs < r.LastSendNs || r.Bytes == 0 {
							t.Errorf("rank %d %s %d: acknowledged at %d, last send at %d, %d bytes sent", r.Rank, r.Phase, r.Iteration, r.LastAckNs, r.LastSendNs, r.Bytes)
						}
					}
				}
			}
			if acked == 0 {
				t.Error("no record carries the acknowledgement of its last byte")
			}
			perIter := len(j.Workers) // one verified all-reduce or pull per worker
			wantPhases := len(j.Workers) * len(j.Phases())
			if j.Pattern == job.PatternPS {
				wantPhases += 2 * j.Iterations // the server's push and pull
				perIter++                      // and its sum
			}
			if phases != wantPhases || verified != perIter*j.Iterations {
				t.Errorf("%d phase records (%d verified), want %d (%d verified)", phases, verified, wantPhases, perIter*j.Iterations)
			}
		})
	}
}

// TestBarrierStageLead runs a ring of two ranks with a barrier stage per
// phase. Without a lead each stage starts at once and a rank starts it no
// sooner than the stage (its gate is when it heard of it, if later); with
// StageLead (emu collective) every stage starts at least the lead after
// the one before ended, and every rank starts it at its instant or after.
func TestBarrierStageLead(t *testing.T) {
	j := job.Job{Name: "r", Pattern: job.PatternRing, Workers: []string{"a", "b"}, Bytes: 1 << 16, Iterations: 2}
	sched := &job.Schedule{Mode: job.ModeBarrier}
	for _, k := range j.Phases() {
		sched.Stages = append(sched.Stages, job.Stage{Activities: []job.Activity{{Key: k}}})
	}
	for _, lead := range []time.Duration{0, 20 * time.Millisecond} {
		t.Run(lead.String(), func(t *testing.T) {
			var co *workers.Coordinator
			dir := ""
			errs, cerr := runLoopbackCoordinated(t, j, sched, func(s *workers.Spec) {
				dir = filepath.Dir(s.Out)
				s.Mode, s.Gates = job.ModeBarrier, nil
				for i := range j.Phases() {
					s.Gates = append(s.Gates, workers.Gate{Stage: i, NotBeforeNs: -1})
				}
			}, func(c *workers.Coordinator) { c.StageLead, co = lead, c })
			if err := errors.Join(append(errs, cerr)...); err != nil {
				t.Fatal(err)
			}
			if len(co.StageStarts) != len(sched.Stages) {
				t.Fatalf("stage starts %v", co.StageStarts)
			}
			for k := 1; k < len(co.StageStarts); k++ {
				if gap := co.StageStarts[k] - co.StageEnds[k-1]; gap < int64(lead) {
					t.Errorf("stage %d started %d ns after stage %d ended, want at least %v", k, gap, k-1, lead)
				}
			}
			stageOf := map[job.Key]int{}
			for i, k := range j.Phases() {
				stageOf[k] = i
			}
			for r := range j.Workers {
				for _, rec := range phaseRecords(t, filepath.Join(dir, fmt.Sprintf("rank%d.jsonl", r))) {
					st := co.StageStarts[stageOf[job.Key{Job: j.Name, Iteration: rec.Iteration, Phase: rec.Phase}]]
					if rec.StartNs < st || rec.GateNs < st {
						t.Errorf("rank %d %d/%s started %d, gate %d, before its stage's start %d", r, rec.Iteration, rec.Phase, rec.StartNs, rec.GateNs, st)
					}
				}
			}
		})
	}
}
