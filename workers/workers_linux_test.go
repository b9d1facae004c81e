package workers_test

import (
	"context"
	"fmt"
	"maps"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ocsemu/ocsemu/dataplane/fabric"
	"github.com/ocsemu/ocsemu/dataplane/fabric/fabrictest"
	"github.com/ocsemu/ocsemu/dataplane/names"
	"github.com/ocsemu/ocsemu/dataplane/netns"
	"github.com/ocsemu/ocsemu/workers"
	"github.com/ocsemu/ocsemu/workers/job"
)

func lab4x2(t testing.TB) *fabric.Lab {
	fabrictest.SkipUnlessRoot(t)
	return fabrictest.Deploy(t, fabrictest.Fabric(t, fabrictest.UniqueLab("wk"),
		"{kind: eps, racks: 4, servers_per_rack: 2, rates: {server: 1Gbit}}"))
}

// TestEveryPatternVerifies runs each pattern as real TCP between four
// racks, checks every reduction and every byte, and that the records hold
// one entry per rank and phase.
func TestEveryPatternVerifies(t *testing.T) {
	lab := lab4x2(t)
	jobs := []job.Job{
		{Name: "ps", Pattern: "ps", Workers: []string{"r0s0", "r1s0", "r2s0"}, PS: "r3s0", Bytes: 4 << 20, ComputeNs: 5e6, Iterations: 2},
		{Name: "ring", Pattern: "ring", Workers: []string{"r0s1", "r1s1", "r2s1", "r3s1"}, Ring: []string{"r0s1", "r2s1", "r1s1", "r3s1"}, Bytes: 4 << 20, ComputeNs: 5e6, Iterations: 2},
		{Name: "a2a", Pattern: "alltoall", Workers: []string{"r0s0", "r1s1", "r2s0", "r3s1"}, Bytes: 4 << 20, ComputeNs: 5e6, Iterations: 2},
		{Name: "hd", Pattern: "hd", Workers: []string{"r0s1", "r1s0", "r2s1", "r3s0"}, Bytes: 4 << 20, ComputeNs: 5e6, Iterations: 2},
	}
	out, err := workers.Launch(context.Background(), &workers.Options{Lab: lab, Jobs: jobs, Dir: t.TempDir(), Verify: true, Timeout: 30 * time.Second})
	if err != nil {
		t.Fatalf("launch: %v", err)
	}
	stats, js, _ := workers.Summarize(jobs, out)
	for _, j := range jobs {
		n := len(j.Workers)
		want := n * len(j.Phases())
		got := 0
		for _, r := range out.Phases {
			if r.Job == j.Name && r.Rank >= 0 {
				got++
				if r.EndNs < r.StartNs || r.StartNs < out.T0 {
					t.Errorf("%s rank %d %s: bad times %d..%d (t0 %d)", j.Name, r.Rank, r.Phase, r.StartNs, r.EndNs, out.T0)
				}
			}
		}
		if got != want {
			t.Errorf("%s: %d phase records, want %d", j.Name, got, want)
		}
	}
	for _, s := range stats {
		if (s.Phase == job.PhaseAllReduce || s.Phase == job.PhaseAllToAll || s.Phase == job.PhasePull) && !s.Verified {
			t.Errorf("%s iteration %d %s not verified on every rank", s.Job, s.Iteration, s.Phase)
		}
	}
	if len(out.TCP) == 0 {
		t.Error("no TCP_INFO samples")
	}
	// Every all-to-all flow is timed at its receiver, within the phase.
	for _, r := range out.Phases {
		if r.Job != "a2a" || r.Phase != job.PhaseAllToAll {
			continue
		}
		for p, at := range r.PeerRecvNs {
			if (p == r.Rank) != (at == 0) || at != 0 && (at < r.StartNs || at > r.EndNs) {
				t.Errorf("a2a rank %d iteration %d: peer %d's last byte at %d, phase %d..%d", r.Rank, r.Iteration, p, at, r.StartNs, r.EndNs)
			}
		}
		if len(r.PeerRecvNs) != 4 {
			t.Errorf("a2a rank %d iteration %d: per-peer marks %v", r.Rank, r.Iteration, r.PeerRecvNs)
		}
	}
	// A ring rank marks its predecessor's last byte in, a halving-doubling
	// rank each partner's (rank xor 1, rank xor 2), within the phase.
	rank := map[string]int{}
	for i, w := range jobs[1].Workers {
		rank[w] = i
	}
	pred := map[int]int{}
	for i, w := range jobs[1].Ring {
		pred[rank[w]] = rank[jobs[1].Ring[(i+3)%4]]
	}
	for _, r := range out.Phases {
		if r.Phase != job.PhaseAllReduce || r.Rank < 0 {
			continue
		}
		marked := map[int]bool{}
		for p, at := range r.PeerRecvNs {
			if at != 0 {
				marked[p] = true
				if at < r.StartNs || at > r.EndNs {
					t.Errorf("%s rank %d iteration %d: peer %d's last byte at %d, phase %d..%d", r.Job, r.Rank, r.Iteration, p, at, r.StartNs, r.EndNs)
				}
			}
		}
		want := map[int]bool{r.Rank ^ 1: true, r.Rank ^ 2: true}
		if r.Job == "ring" {
			want = map[int]bool{pred[r.Rank]: true}
		}
		if !maps.Equal(marked, want) {
			t.Errorf("%s rank %d iteration %d: peers marked %v, want %v", r.Job, r.Rank, r.Iteration, marked, want)
		}
	}
	// The samples as the ranks end show what limited each sender.
	busy := false
	for _, s := range out.TCP {
		busy = busy || s.BusyUs > 0 && s.SsthreshSegs > 0
	}
	if !busy {
		t.Error("no TCP sample shows busy time and a slow-start threshold")
	}
	for _, j := range js {
		if j.JCTNs <= 0 {
			t.Errorf("job %s has no completion time", j.Job)
		}
	}
	t.Logf("%d phase records, %d TCP samples", len(out.Phases), len(out.TCP))
}

// TestClockAndBarrierGating runs two jobs under a plan: in clock mode a
// phase must not start before its planned time; in barrier mode stage 2
// must not start before every rank finished stage 1.
func TestClockAndBarrierGating(t *testing.T) {
	lab := lab4x2(t)
	j := job.Job{Name: "g", Pattern: "ring", Workers: []string{"r0s0", "r1s0"}, Bytes: 1 << 20, ComputeNs: 2e6, Iterations: 1}
	t0 := int64(0)
	late := int64(300e6)
	for _, mode := range []string{job.ModeClock, job.ModeBarrier} {
		t.Run(mode, func(t *testing.T) {
			sched := &job.Schedule{Mode: mode, Stages: []job.Stage{
				{StartNs: t0, Activities: []job.Activity{{Key: job.Key{Job: "g", Phase: "compute"}}}},
				{StartNs: 100e6, Activities: []job.Activity{{Key: job.Key{Job: "g", Phase: "allreduce"}, StartNs: &late}}},
			}}
			out, err := workers.Launch(context.Background(), &workers.Options{Lab: lab, Jobs: []job.Job{j}, Schedule: sched, Dir: t.TempDir(), Verify: true})
			if err != nil {
				t.Fatal(err)
			}
			n := 0
			for _, r := range out.Phases {
				if r.Phase == "allreduce" {
					n++
					// Never early. How late depends on the machine's load:
					// a figure, not a property (the fidelity report judges it).
					off := r.StartNs - out.T0
					if off < late {
						t.Errorf("rank %d all-reduce started %.3f ms after time zero, planned %.3f ms", r.Rank, float64(off)/1e6, float64(late)/1e6)
					}
					t.Logf("rank %d all-reduce started %.3f ms late", r.Rank, float64(off-late)/1e6)
				}
			}
			if n != len(j.Workers) {
				t.Errorf("%d all-reduce records, want one per rank (%d)", n, len(j.Workers))
			}
			if mode == job.ModeBarrier && (len(out.StageStarts) != 2 || out.StageStarts[1] < out.StageEnds[0]) {
				t.Errorf("barrier: stage starts %v, ends %v", out.StageStarts, out.StageEnds)
			}
		})
	}
}

// TestLostPeerFailsLoudly kills one rank's connections mid-job: the job
// must fail with the job, rank and phase named, and not hang.
func TestLostPeerFailsLoudly(t *testing.T) {
	lab := lab4x2(t)
	// Long enough that it is still running when the link goes down: 2000
	// all-reduces of 2 MiB take about a minute at 1 Gbit/s.
	jobs := []job.Job{{Name: "dead", Pattern: "ring", Workers: []string{"r0s0", "r1s0", "r2s0"}, Bytes: 2 << 20, ComputeNs: 1e6, Iterations: 2000}}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	dir := t.TempDir()
	done := make(chan error, 1)
	go func() {
		// The transfer deadline is what notices the lost link; it is long
		// enough that a slow step on a busy machine (under -race) does not
		// trip it before the link goes down.
		out, err := workers.Launch(ctx, &workers.Options{Lab: lab, Jobs: jobs, Dir: dir, Timeout: 15 * time.Second})
		if out != nil {
			t.Logf("%d phase records before the end", len(out.Phases))
		}
		done <- err
	}()
	// Mid-job: every rank has finished an all-reduce (however long
	// preparing and connecting took on this machine).
	allReduced := func() bool {
		for r := range 3 {
			data, _ := os.ReadFile(filepath.Join(dir, fmt.Sprintf("dead-rank%d.jsonl", r)))
			if !strings.Contains(string(data), `"phase":"allreduce"`) {
				return false
			}
		}
		return true
	}
	for !allReduced() {
		select {
		case err := <-done:
			t.Fatalf("the job ended before its link went down: %v", err)
		case <-time.After(20 * time.Millisecond):
		}
	}
	// Take rank 1's server off the fabric: its link goes down.
	h, err := lab.Handle("r1s0")
	if err != nil {
		t.Fatal(err)
	}
	l, _ := h.LinkByName("eth0")
	if err := h.LinkSetDown(l); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err == nil {
			t.Fatal("the job succeeded without its peer")
		}
		t.Logf("reported: %v", err)
		if !containsAll(err.Error(), "dead", "rank", "phase allreduce") {
			t.Errorf("error does not name job, rank and phase: %v", err)
		}
	case <-time.After(3 * time.Minute): // transfers time out after 15 s
		t.Fatal("the job hung after losing a peer")
	}
}

func containsAll(s string, parts ...string) bool {
	for _, p := range parts {
		if !contains(s, p) {
			return false
		}
	}
	return true
}

func contains(s, sub string) bool {
	for i := 0; i+len(sub) <= len(s); i++ {
		if s[i:i+len(sub)] == sub {
			return true
		}
	}
	return false
}

// TestJobCongestionControl checks that a job's own TCP setting reaches
// its sockets.
func TestJobCongestionControl(t *testing.T) {
	lab := lab4x2(t)
	jobs := []job.Job{{Name: "cc", Pattern: "ring", Workers: []string{"r0s0", "r1s0"}, Bytes: 1 << 20, Iterations: 1, CongestionControl: "reno"}}
	specs, err := workers.Specs(&workers.Options{Lab: lab, Jobs: jobs, Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range specs {
		if s.CC != "reno" {
			t.Errorf("%s uses %q, want the job's reno", s.Name(), s.CC)
		}
	}
	if _, err := workers.Launch(context.Background(), &workers.Options{Lab: lab, Jobs: jobs, Dir: t.TempDir()}); err != nil {
		t.Fatal(err)
	}
}

// TestLaunchBeyond62Ranks runs, on a real lab, jobs bigger than the old
// port layout allowed (64 ports per job: at most 62 ranks): a ring over
// 66 servers, and a parameter server job of 64 workers whose server
// shares a namespace with one of them and with the ring's ranks. Every
// reduction is verified and every phase recorded.
func TestLaunchBeyond62Ranks(t *testing.T) {
	fabrictest.SkipUnlessRoot(t)
	lab := fabrictest.Deploy(t, fabrictest.Fabric(t, fabrictest.UniqueLab("wk"), "{kind: eps, racks: 3, servers_per_rack: 22, rates: {server: 1Gbit}}"))
	var all []string
	for _, n := range lab.Topo.Servers() {
		all = append(all, n.Name)
	}
	jobs := []job.Job{
		{Name: "ring66", Pattern: "ring", Workers: all, Bytes: 66 * 256, Iterations: 2},
		{Name: "ps64", Pattern: "ps", Workers: all[:64], PS: all[0], Bytes: 64 * 64, Iterations: 2},
	}
	out, err := workers.Launch(context.Background(), &workers.Options{Lab: lab, Jobs: jobs, Dir: t.TempDir(), Verify: true,
		Timeout: time.Minute, TCPInfoEvery: -1})
	if err != nil {
		t.Fatalf("launch: %v", err)
	}
	stats, _, _ := workers.Summarize(jobs, out)
	ranks := map[string]int{"ring66": 66, "ps64": 64}
	for _, s := range stats {
		if s.Phase == job.PhaseCompute || s.Phase == job.PhasePush {
			continue
		}
		if s.Ranks != ranks[s.Job] || !s.Verified {
			t.Errorf("%s iteration %d %s: %d ranks, verified %v; want %d, verified", s.Job, s.Iteration, s.Phase, s.Ranks, s.Verified, ranks[s.Job])
		}
	}
	if want := 66*2*2 + 64*3*2 + 2*2; len(out.Phases) != want {
		t.Errorf("%d phase records, want %d", len(out.Phases), want)
	}
}

// TestFailedRankStopsTheLaunch: a rank that cannot start (its port is
// taken) ends the launch at once, named, instead of leaving the others
// to wait two minutes for time zero.
func TestFailedRankStopsTheLaunch(t *testing.T) {
	lab := lab4x2(t)
	var ln net.Listener
	if err := netns.Do(names.NSName(lab.Topo.Lab, "r1s0"), func() (err error) {
		ln, err = net.Listen("tcp", fmt.Sprintf(":%d", workers.BasePort))
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	jobs := []job.Job{{Name: "blocked", Pattern: "ring", Workers: []string{"r0s0", "r1s0", "r2s0"}, Bytes: 1 << 20, ComputeNs: 1e6, Iterations: 1}}
	start := time.Now()
	_, err := workers.Launch(context.Background(), &workers.Options{Lab: lab, Jobs: jobs, Dir: t.TempDir()})
	took := time.Since(start)
	if err == nil || !containsAll(err.Error(), "blocked/1", "address already in use", "the launch stopped 2 other rank(s)") {
		t.Errorf("want the blocked rank named with its cause, got %v", err)
	}
	if took > 30*time.Second {
		t.Errorf("the launch took %v to fail", took.Round(time.Millisecond))
	}
	t.Logf("failed in %v: %v", took.Round(time.Millisecond), err)
}
