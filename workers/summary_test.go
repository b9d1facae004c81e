package workers

import (
	"math"
	"testing"

	"github.com/ocsemu/ocsemu/workers/job"
	"github.com/ocsemu/ocsemu/workers/record"
)

// Hand-computed: a PS job of two workers. The server has every push at
// 250 ms (push-complete); the workers asked for the pull at 240 and 245 ms
// and got it by 460 and 470 ms. The pull is timed from 250 ms (its data
// exist then): 220 ms, with 10 ms of waiting for data before, and no skew
// (both asked before the data existed). The push
// spans the first start to the last end, with the server's check of the
// sum (outside the phase) and the ranks' lateness and skew. A phase's
// garbage collection is its worst rank's, the server's included: 5 ms
// in the push (a worker's 2), 1 ms in the pull.
func TestSummarizeTimesWhatWasMeant(t *testing.T) {
	const ms = int64(1e6)
	t0 := 1000 * ms
	j := job.Job{Name: "ps", Pattern: job.PatternPS, Workers: []string{"a", "b"}, PS: "c", Bytes: 8 << 20, Iterations: 1}
	at := func(x int64) int64 { return t0 + x*ms }
	o := &Outcome{T0: t0, Phases: []PhaseRecord{
		{Job: "ps", Phase: job.PhasePush, Rank: 0, GateNs: at(40), StartNs: at(40), EndNs: at(251)},
		{Job: "ps", Phase: job.PhasePush, Rank: 1, GateNs: at(42), StartNs: at(45), EndNs: at(252), GCNs: 2 * ms, GCCycles: 1},
		{Job: "ps", Phase: job.PhasePush, Rank: PSRank, StartNs: at(0), EndNs: at(250), VerifyNs: 3 * ms, GCNs: 5 * ms, GCCycles: 2},
		{Job: "ps", Phase: job.PhasePull, Rank: 0, GateNs: at(240), StartNs: at(240), EndNs: at(460), Verified: true, VerifyNs: 2 * ms, GCNs: 1 * ms, GCCycles: 1},
		{Job: "ps", Phase: job.PhasePull, Rank: 1, GateNs: at(245), StartNs: at(245), EndNs: at(470), Verified: true, VerifyNs: 4 * ms},
		{Job: "ps", Phase: job.PhasePull, Rank: PSRank, GateNs: at(250), StartNs: at(250), EndNs: at(470)},
	}}
	stats, _, run := Summarize([]job.Job{j}, o)
	want := map[string]PhaseStat{
		job.PhasePush: {StartNs: 40 * ms, FirstStartNs: 40 * ms, EndNs: 252 * ms, DurationNs: 212 * ms, Measured: record.Measured{SkewNs: 5 * ms, LatenessNs: 3 * ms, LateInNs: 3 * ms, VerifyNs: 3 * ms, GCNs: 5 * ms, GCCycles: 2}},
		job.PhasePull: {StartNs: 250 * ms, FirstStartNs: 240 * ms, EndNs: 470 * ms, DurationNs: 220 * ms, Measured: record.Measured{WaitDataNs: 10 * ms, VerifyNs: 4 * ms, GCNs: 1 * ms, GCCycles: 1}, Verified: true},
	}
	if len(stats) != 2 {
		t.Fatalf("%d phase stats, want 2", len(stats))
	}
	for _, s := range stats {
		w := want[s.Phase]
		if s.StartNs != w.StartNs || s.FirstStartNs != w.FirstStartNs || s.EndNs != w.EndNs || s.DurationNs != w.DurationNs ||
			s.WaitDataNs != w.WaitDataNs || s.SkewNs != w.SkewNs || s.LatenessNs != w.LatenessNs || s.LateInNs != w.LateInNs || s.VerifyNs != w.VerifyNs || s.Verified != w.Verified ||
			s.GCNs != w.GCNs || s.GCCycles != w.GCCycles {
			t.Errorf("%s:\n got %+v\nwant %+v", s.Phase, s, w)
		}
	}
	for _, p := range run.Phases {
		if p.Phase == job.PhasePull && (p.StartNs != 250*ms || p.WaitDataNs != 10*ms || p.DurationNs != 220*ms) {
			t.Errorf("measurement's pull %+v: want it timed from 250 ms", p)
		}
	}
}

// Hand-computed: a ring of three ranks. They started at 100, 104 (its
// gate opened at 102: 2 ms late) and 110 ms, and ended at 300, 305 and
// 302 ms. No rank can end before the last one has joined, so the phase
// is timed from when the last rank could start, 110 ms: 195 ms, with 10
// ms of waiting for the others before; the 2 ms of lateness fell before,
// outside. When the last rank's gate opened at 107 instead, it started 3
// ms late: the phase is timed from 107 (198 ms), and those 3 ms are skew
// and lateness inside it.
func TestSummarizeTimesRingFromLastRank(t *testing.T) {
	const ms = int64(1e6)
	t0 := 1000 * ms
	at := func(x int64) int64 { return t0 + x*ms }
	for _, tc := range []struct {
		lastGate int64
		want     PhaseStat
	}{
		{110, PhaseStat{StartNs: 110 * ms, FirstStartNs: 100 * ms, EndNs: 305 * ms, DurationNs: 195 * ms, Measured: record.Measured{WaitDataNs: 10 * ms, LatenessNs: 2 * ms}}},
		{107, PhaseStat{StartNs: 107 * ms, FirstStartNs: 100 * ms, EndNs: 305 * ms, DurationNs: 198 * ms, Measured: record.Measured{WaitDataNs: 7 * ms, SkewNs: 3 * ms, LatenessNs: 3 * ms, LateInNs: 3 * ms}}},
	} {
		for _, pattern := range []string{job.PatternRing, job.PatternHD} {
			j := job.Job{Name: "r", Pattern: pattern, Workers: []string{"a", "b", "c"}, Bytes: 8 << 20, Iterations: 1}
			o := &Outcome{T0: t0, Phases: []PhaseRecord{
				{Job: "r", Phase: job.PhaseAllReduce, Rank: 0, GateNs: at(100), StartNs: at(100), EndNs: at(300), Verified: true},
				{Job: "r", Phase: job.PhaseAllReduce, Rank: 1, GateNs: at(102), StartNs: at(104), EndNs: at(305), Verified: true},
				{Job: "r", Phase: job.PhaseAllReduce, Rank: 2, GateNs: at(tc.lastGate), StartNs: at(110), EndNs: at(302), Verified: true},
			}}
			stats, _, run := Summarize([]job.Job{j}, o)
			s, w := stats[0], tc.want
			if s.StartNs != w.StartNs || s.FirstStartNs != w.FirstStartNs || s.EndNs != w.EndNs || s.DurationNs != w.DurationNs ||
				s.WaitDataNs != w.WaitDataNs || s.SkewNs != w.SkewNs || s.LatenessNs != w.LatenessNs || s.LateInNs != w.LateInNs {
				t.Errorf("%s, last gate %d ms:\n got %+v\nwant %+v", pattern, tc.lastGate, s, w)
			}
			if p := run.Phases[0]; p.StartNs != w.StartNs || p.DurationNs != w.DurationNs || p.WaitDataNs != w.WaitDataNs || p.LateInNs != w.LateInNs {
				t.Errorf("%s, last gate %d ms: measurement's all-reduce %+v", pattern, tc.lastGate, p)
			}
		}
	}
}

// busbw counts the buffers that cross links: a CPU parameter server's
// link carries the workers' on other servers, an INC push each worker's
// own once, an INC pull nothing.
func TestPhaseBusFactor(t *testing.T) {
	inc := &job.INC{}
	for _, tc := range []struct {
		name string
		j    job.Job
		k    job.Key
		want float64
	}{
		{"ring all-reduce, 4 ranks", job.Job{Pattern: job.PatternRing, Workers: []string{"a", "b", "c", "d"}}, job.Key{Phase: job.PhaseAllReduce}, 1.5},
		{"all-to-all, 3 ranks", job.Job{Pattern: job.PatternAllToAll, Workers: []string{"a", "b", "c"}}, job.Key{Phase: job.PhaseAllToAll}, 2.0 / 3},
		{"PS push, 3 remote workers", job.Job{Pattern: job.PatternPS, Workers: []string{"a", "b", "c"}, PS: "d"}, job.Key{Phase: job.PhasePush}, 3},
		{"PS pull, the server one of the 2 workers", job.Job{Pattern: job.PatternPS, Workers: []string{"a", "d"}, PS: "d"}, job.Key{Phase: job.PhasePull}, 1},
		{"INC push", job.Job{Pattern: job.PatternPS, Workers: []string{"a", "b", "c"}, INC: inc}, job.Key{Phase: job.PhasePush}, 1},
		{"INC pull", job.Job{Pattern: job.PatternPS, Workers: []string{"a", "b", "c"}, INC: inc}, job.Key{Phase: job.PhasePull}, 0},
		{"INC job, an iteration on the CPU server", job.Job{Pattern: job.PatternPS, Workers: []string{"a", "b"}, PS: "c", INC: inc, INCIterations: []bool{true, false}}, job.Key{Iteration: 1, Phase: job.PhasePull}, 2},
	} {
		if got := PhaseBusFactor(&tc.j, tc.k); math.Abs(got-tc.want) > 1e-12 {
			t.Errorf("%s: factor %v, want %v", tc.name, got, tc.want)
		}
	}
}
