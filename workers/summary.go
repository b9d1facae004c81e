package workers

import (
	"cmp"
	"fmt"
	"io"
	"slices"
	"sort"
	"strings"
	"text/tabwriter"

	"github.com/ocsemu/ocsemu/workers/job"
	"github.com/ocsemu/ocsemu/workers/record"
)

// BusFactor is nccl-tests' bus bandwidth factor for a phase on n ranks:
// all-reduce 2(n-1)/n; all-to-all, all-gather and reduce-scatter (n-1)/n.
// nccl-tests has no parameter server; here PS push and pull count the n
// buffers that cross the server's link, so their factor is n, and busbw
// is again comparable with that link's rate.
func BusFactor(phase string, n int) float64 {
	switch phase {
	case job.PhaseAllReduce:
		return 2 * float64(n-1) / float64(n)
	case job.PhaseAllToAll:
		return float64(n-1) / float64(n)
	case job.PhasePush, job.PhasePull:
		return float64(n)
	}
	return 1
}

// PhaseBusFactor is BusFactor for one phase of job j, where the bytes
// that cross links are not n buffers: a push through the ToR aggregators
// (INC) moves each worker's buffer over its own link once each way, so
// its factor is 1, and its pull moves nothing (the sums came back with
// the push), 0; a CPU parameter server's link carries the buffers of the
// workers on other servers only, not one on its own server.
func PhaseBusFactor(j *job.Job, k job.Key) float64 {
	if k.Phase != job.PhasePush && k.Phase != job.PhasePull {
		return BusFactor(k.Phase, len(j.Workers))
	}
	if j.INCAt(k.Iteration) {
		if k.Phase == job.PhasePull {
			return 0
		}
		return 1
	}
	remote := 0
	for _, w := range j.Workers {
		if w != j.PS {
			remote++
		}
	}
	return float64(remote)
}

// PhaseStat is one (job, iteration, phase) over all worker ranks.
type PhaseStat struct {
	Job       string `json:"job"`
	Iteration int    `json:"iteration"`
	Phase     string `json:"phase"`
	Ranks     int    `json:"ranks"`
	StartNs   int64  `json:"start_ns"` // first rank's start, from time zero
	EndNs     int64  `json:"end_ns"`   // last rank's end
	// DurationNs is the longest time one rank spent in the phase (as
	// nccl-tests reports the slowest rank); for PS push and pull it is the
	// span from the first start (a pull: its data) to the last end, for a
	// ring or halving-doubling all-reduce from when its last rank could
	// start to the last end. algbw and busbw use it.
	DurationNs int64   `json:"duration_ns"`
	Bytes      int64   `json:"size_bytes"` // per-rank buffer, as nccl-tests counts it
	AlgBwBps   float64 `json:"algbw_bps,omitempty"`
	BusBwBps   float64 `json:"busbw_bps,omitempty"`
	Verified   bool    `json:"verified"`
	// FirstStartNs is the first rank's start; StartNs differs from it for
	// a pull, which is timed from when its data exist (the server's
	// push-complete), and for a ring or halving-doubling all-reduce, timed
	// from when its last rank could start.
	FirstStartNs int64 `json:"first_start_ns"`
	record.Measured
}

// JobStat is one job's completion.
type JobStat struct {
	Job   string `json:"job"`
	JCTNs int64  `json:"jct_ns"` // end of the last phase minus arrival
}

// Summarize aggregates rank records per phase (first start to last end
// over the worker ranks, the PS not a rank; a pull from when its data
// exist, a ring or halving-doubling all-reduce from when its last rank
// could start) and computes nccl-tests' algbw = size / time and busbw =
// algbw x BusFactor.
func Summarize(jobs []job.Job, o *Outcome) ([]PhaseStat, []JobStat, *record.Run) {
	byJob := map[string]*job.Job{}
	for i := range jobs {
		byJob[jobs[i].Name] = &jobs[i]
	}
	type acc struct {
		PhaseStat
		verified  int
		lastStart int64
		lastGate  int64      // the latest a rank could start (its start where no gate was recorded)
		starts    [][2]int64 // per rank: start, gate
	}
	m := map[job.Key]*acc{}
	// The parameter server's records: when each push completed (the sum
	// exists) and how long it checked the sum.
	psPush := map[job.Key]PhaseRecord{}
	// The server's own record of each phase: its collector counts too.
	psOwn := map[job.Key]PhaseRecord{}
	for _, r := range o.Phases {
		if r.Rank == PSRank && r.Phase == job.PhasePush {
			psPush[job.Key{Job: r.Job, Iteration: r.Iteration, Phase: job.PhasePull}] = r
		}
		if r.Rank == PSRank {
			psOwn[job.Key{Job: r.Job, Iteration: r.Iteration, Phase: r.Phase}] = r
		}
	}
	for _, r := range o.Phases {
		if r.Rank == PSRank {
			continue
		}
		k := job.Key{Job: r.Job, Iteration: r.Iteration, Phase: r.Phase}
		a := m[k]
		// A task-graph transfer runs from its sender's start to its
		// receiver's last byte (the sender's end is the acknowledgement).
		sender := r.Bytes > 0 && byJob[r.Job] != nil && byJob[r.Job].Pattern == job.PatternDAG
		end := r.EndNs
		if sender {
			end = r.StartNs
		}
		if a == nil {
			a = &acc{PhaseStat: PhaseStat{Job: r.Job, Iteration: r.Iteration, Phase: r.Phase, StartNs: r.StartNs, EndNs: end}}
			m[k] = a
		}
		a.Ranks++
		a.DurationNs = max(a.DurationNs, r.EndNs-r.StartNs)
		a.StartNs = min(a.StartNs, r.StartNs)
		a.lastStart = max(a.lastStart, r.StartNs)
		a.EndNs = max(a.EndNs, end)
		if r.GateNs > 0 {
			a.LatenessNs = max(a.LatenessNs, r.StartNs-r.GateNs)
			a.starts = append(a.starts, [2]int64{r.StartNs, r.GateNs})
			a.lastGate = max(a.lastGate, r.GateNs)
		} else {
			a.lastGate = max(a.lastGate, r.StartNs)
		}
		a.VerifyNs = max(a.VerifyNs, r.VerifyNs)
		a.INCRTTNs = max(a.INCRTTNs, r.INCRTTNs)
		a.INCStallNs = max(a.INCStallNs, r.INCStallNs)
		a.INCWaitNs = max(a.INCWaitNs, r.INCWaitNs)
		a.GCNs = max(a.GCNs, r.GCNs)
		a.GCCycles = max(a.GCCycles, r.GCCycles)
		if r.Verified {
			a.verified++
		}
	}
	// lateIn is the largest time a rank started after it could, counted
	// only from the instant the phase is timed from.
	lateIn := func(starts [][2]int64, from int64) int64 {
		var l int64
		for _, sg := range starts {
			l = max(l, sg[0]-max(sg[1], from))
		}
		return l
	}
	var stats []PhaseStat
	run := &record.Run{Source: "emulation"}
	jct := map[string]int64{}
	for k, a := range m {
		j := byJob[k.Job]
		st := a.PhaseStat
		st.SkewNs = a.lastStart - st.StartNs
		if ps, ok := psPush[k]; ok && ps.EndNs > st.StartNs {
			// A pull's data exist once the server has every push: time it
			// from then, and count the wait before as waiting for data.
			st.WaitDataNs = ps.EndNs - st.StartNs
			st.StartNs = ps.EndNs
			st.SkewNs = max(0, a.lastStart-st.StartNs) // only starts after the data count
		}
		if k.Phase == job.PhaseAllReduce && j != nil && (j.Pattern == job.PatternRing || j.Pattern == job.PatternHD) {
			// Every rank of a ring or halving-doubling all-reduce needs
			// every other rank's data: it can end only once the last rank
			// has joined. Time it from when the last rank could start (its
			// gate open and its previous phase done), as the lockstep
			// models do: a rank whose previous phase ended late was late
			// in that phase's time already. The early ranks' wait is
			// waiting for data; a rank that started after it could is
			// lateness, inside the phase.
			from := max(st.StartNs, a.lastGate)
			st.WaitDataNs = from - st.StartNs
			st.StartNs = from
			st.SkewNs = max(0, a.lastStart-from)
			st.DurationNs = st.EndNs - st.StartNs
		}
		st.LateInNs = lateIn(a.starts, st.StartNs)
		if ps, ok := psOwn[k]; ok {
			st.GCNs, st.GCCycles = max(st.GCNs, ps.GCNs), max(st.GCCycles, ps.GCCycles)
		}
		if k.Phase == job.PhasePush {
			if ps, ok := psPush[job.Key{Job: k.Job, Iteration: k.Iteration, Phase: job.PhasePull}]; ok {
				st.VerifyNs = max(st.VerifyNs, ps.VerifyNs)
			}
		}
		st.FirstStartNs = a.StartNs
		st.FirstStartNs -= o.T0
		st.StartNs -= o.T0
		st.EndNs -= o.T0
		st.Verified = a.verified == a.Ranks && a.verified > 0
		if k.Phase == job.PhasePush || k.Phase == job.PhasePull || j != nil && j.Pattern == job.PatternDAG {
			// An incast: the server's link carries every worker's buffer
			// over the whole span, which single ranks' times understate.
			st.DurationNs = st.EndNs - st.StartNs
		}
		if j != nil && j.Pattern == job.PatternDAG {
			st.Bytes = taskBytes(j, k.Phase)
			if d := float64(st.DurationNs); d > 0 && st.Bytes > 0 {
				st.AlgBwBps = float64(st.Bytes) * 8 / (d / 1e9)
				st.BusBwBps = st.AlgBwBps
			}
		} else if j != nil && k.Phase != job.PhaseCompute {
			st.Bytes = j.Bytes
			// An INC pull moves nothing over the network (the sums came
			// back with the push): it has no bandwidth to report.
			incPull := k.Phase == job.PhasePull && j.INCAt(k.Iteration)
			if d := float64(st.DurationNs); d > 0 && !incPull {
				st.AlgBwBps = float64(j.Bytes) * 8 / (d / 1e9)
				st.BusBwBps = st.AlgBwBps * PhaseBusFactor(j, k)
			}
		}
		stats = append(stats, st)
		run.Phases = append(run.Phases, record.Phase{Job: k.Job, Iteration: k.Iteration, Phase: k.Phase, Rank: -1,
			StartNs: st.StartNs, EndNs: st.EndNs, DurationNs: st.DurationNs,
			Measured: st.Measured})
		if j != nil {
			jct[k.Job] = max(jct[k.Job], st.EndNs-j.ArrivalNs)
		}
	}
	slices.SortFunc(stats, func(x, y PhaseStat) int {
		return cmp.Or(strings.Compare(x.Job, y.Job), cmp.Compare(x.Iteration, y.Iteration), cmp.Compare(x.StartNs, y.StartNs))
	})
	sort.Slice(run.Phases, func(a, b int) bool { return run.Phases[a].StartNs < run.Phases[b].StartNs })
	var js []JobStat
	for _, j := range jobs {
		js = append(js, JobStat{Job: j.Name, JCTNs: jct[j.Name]})
		run.Jobs = append(run.Jobs, record.Job{Job: j.Name, ArrivalNs: j.ArrivalNs, EndNs: jct[j.Name] + j.ArrivalNs, JCTNs: jct[j.Name]})
		run.MakespanNs = max(run.MakespanNs, jct[j.Name]+j.ArrivalNs)
	}
	for i := range o.StageStarts {
		run.Stages = append(run.Stages, record.Stage{Index: i, StartNs: o.StageStarts[i] - o.T0, EndNs: o.StageEnds[i] - o.T0})
	}
	return stats, js, run
}

// PrintStats writes an nccl-tests-like table.
func PrintStats(w io.Writer, stats []PhaseStat, jobs []JobStat) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "job\titer\tphase\tranks\tsize\ttime ms (slowest rank)\talgbw Gb/s\tbusbw Gb/s\tverified\t")
	for _, s := range stats {
		size, alg, bus := "-", "-", "-"
		if s.Bytes > 0 {
			size = fmt.Sprintf("%.1fMiB", float64(s.Bytes)/(1<<20))
		}
		if s.AlgBwBps > 0 {
			alg = fmt.Sprintf("%.3f", s.AlgBwBps/1e9)
			bus = fmt.Sprintf("%.3f", s.BusBwBps/1e9)
		}
		ver := "-"
		if s.Phase != job.PhaseCompute && s.Phase != job.PhasePush {
			ver = fmt.Sprint(s.Verified)
		}
		fmt.Fprintf(tw, "%s\t%d\t%s\t%d\t%s\t%.2f\t%s\t%s\t%s\t\n", s.Job, s.Iteration, s.Phase, s.Ranks, size,
			float64(s.DurationNs)/1e6, alg, bus, ver)
	}
	tw.Flush()
	for _, j := range jobs {
		fmt.Fprintf(w, "job %s: completion time %.3f s\n", j.Job, float64(j.JCTNs)/1e9)
	}
}

// taskBytes is a task-graph task's transfer size (0 for compute).
func taskBytes(j *job.Job, phase string) int64 {
	for i := range j.Tasks {
		if j.Tasks[i].Name == phase {
			return j.Tasks[i].Bytes
		}
	}
	return 0
}
