package fidelity

import (
	"fmt"
	"slices"
	"strings"
)

// DiagnosisSet gathers the attribution's diagnoses over runs: per phase
// and busiest link, the median of each share and queue, measured and in
// the model; per INC push, the medians of its round trip's parts; per
// all-to-all, the runs a flow left slow start early in; per other phase,
// the runs one of its connections ran below HyStart's first chance in. A
// phase counts in the runs it was attributed in.
type DiagnosisSet struct {
	order []string
	links map[string]*linkAcc
	incs  map[string]*incAcc
	slow  map[string]*slowAcc
	conns map[string]*connAcc
}

// connAcc is a phase's connections below HyStart's first chance over the
// runs: the runs, those with one, and how often each connection was.
type connAcc struct {
	runs, cut int
	order     []string
	times     map[string]int
	// lastRuns had the connection that delivered last marked, lastCut
	// of them one below HyStart's first chance.
	lastRuns, lastCut int
}

// slowAcc is a phase's slow-start exits over the runs: the runs with a
// flow cut early (SlowStarts.Cut: early_exit's flows), the cut flows'
// longest times and the others' in those runs, and the slowest flow's
// time in the runs with none.
type slowAcc struct {
	runs, cut       int
	cutNs, othersNs []float64 // ms
	noneNs          []float64 // ms
	// firstNs is, per run with a flow cut at HyStart's first chance
	// (below HyStartEarlySegs), the longest such flow's time (ms).
	firstNs []float64
}

type linkAcc struct {
	runs int
	// own, others, idle, their model's, queue (ms) and the model's
	v      [8][]float64
	queues int
}

type incAcc struct {
	runs int
	v    [6][]float64 // rtt, hops, network, and the model's (ms)
}

// Add counts one run's attribution.
func (d *DiagnosisSet) Add(as []Attribution) {
	if d.links == nil {
		d.links, d.incs, d.slow, d.conns = map[string]*linkAcc{}, map[string]*incAcc{}, map[string]*slowAcc{}, map[string]*connAcc{}
	}
	for _, a := range as {
		phase := fmt.Sprintf("%s %d %s", a.Job, a.Iteration, a.Phase)
		if u := a.Link; u != nil {
			acc := entry(d.links, &d.order, phase+" on "+u.Link)
			acc.runs++
			o, x, i, mo, mx, mi := u.Shares()
			for j, v := range []float64{o, x, i, mo, mx, mi} {
				acc.v[j] = append(acc.v[j], v)
			}
			if u.QueueSamples > 0 {
				acc.queues++
				acc.v[6] = append(acc.v[6], ms(u.QueueNs))
				acc.v[7] = append(acc.v[7], ms(u.ModelQueueNs))
			}
		}
		if r := a.INC; r != nil {
			acc := entry(d.incs, &d.order, phase)
			acc.runs++
			for j, v := range []int64{r.RTTNs, r.HopsNs, r.RTTNs - r.HopsNs, r.ModelRTTNs, r.ModelHopsNs, r.ModelRTTNs - r.ModelHopsNs} {
				acc.v[j] = append(acc.v[j], ms(v))
			}
		}
		if cs := a.Conns; cs != nil {
			acc := entry(d.conns, &d.order, phase+" slow start")
			acc.runs++
			if len(cs.FirstChance) > 0 {
				acc.cut++
			}
			if cs.Last != nil {
				acc.lastRuns++
				if cs.Last.FirstChance {
					acc.lastCut++
				}
			}
			for _, x := range cs.FirstChance {
				name := ConnName(x.Src, x.Dst)
				if acc.times == nil {
					acc.times = map[string]int{}
				}
				if acc.times[name] == 0 {
					acc.order = append(acc.order, name)
				}
				acc.times[name]++
			}
		}
		if ss := a.SlowStart; ss != nil {
			acc := entry(d.slow, &d.order, phase+" slow start")
			acc.runs++
			if len(ss.Cut) == 0 {
				acc.noneNs = append(acc.noneNs, ms(ss.OthersNs))
			} else {
				acc.cut++
				acc.cutNs = append(acc.cutNs, ms(ss.CutNs()))
				if n := ss.FirstChanceNs(); n > 0 {
					acc.firstNs = append(acc.firstNs, ms(n))
				}
				if ss.Others > 0 {
					acc.othersNs = append(acc.othersNs, ms(ss.OthersNs))
				}
			}
		}
	}
}

// entry is m's accumulator for k, added (and k to order) when new.
func entry[T any](m map[string]*T, order *[]string, k string) *T {
	acc, ok := m[k]
	if !ok {
		acc = new(T)
		m[k] = acc
		*order = append(*order, k)
	}
	return acc
}

// Lines says each diagnosis over the set in one line, medians, the
// model's in brackets, in the order the runs first had them.
func (d DiagnosisSet) Lines() []string {
	var out []string
	for _, k := range d.order {
		if acc, ok := d.links[k]; ok {
			m := medians(acc.v[:])
			out = append(out, fmt.Sprintf("%s, %s: %s", k, runsOf(acc.runs), sharesText([6]float64(m[:6]), acc.queues > 0, m[6], m[7])))
		}
		if acc, ok := d.incs[k]; ok {
			out = append(out, fmt.Sprintf("%s, %s: %s", k, runsOf(acc.runs), roundText([6]float64(medians(acc.v[:])))))
		}
		if acc, ok := d.slow[k]; ok {
			out = append(out, fmt.Sprintf("%s, %s", k, acc.text()))
		}
		if acc, ok := d.conns[k]; ok {
			out = append(out, fmt.Sprintf("%s, %s", k, acc.text()))
		}
	}
	return out
}

// medians is each series' median (quantile 0.5; 0 for an empty one).
func medians(vs [][]float64) []float64 {
	out := make([]float64, len(vs))
	for i, v := range vs {
		if len(v) > 0 {
			out[i] = quantile(v, 0.5)
		}
	}
	return out
}

// runsOf names the runs a diagnosis's medians come from.
func runsOf(n int) string {
	if n == 1 {
		return "1 run"
	}
	return "medians of " + nRuns(n)
}

// nRuns is "1 run" or "n runs".
func nRuns(n int) string {
	if n == 1 {
		return "1 run"
	}
	return fmt.Sprintf("%d runs", n)
}

// text says in how many runs a flow left slow start early (below its
// share, or at HyStart's first chance where every flow was below it), and
// what the flows took then and otherwise (ranges over the runs, ms).
func (a *slowAcc) text() string {
	out := fmt.Sprintf("%s: a flow cut early in %d", nRuns(a.runs), a.cut)
	if a.cut > 0 {
		out += fmt.Sprintf(" (cut flows %s ms", spanMs(a.cutNs))
		if len(a.othersNs) > 0 {
			out += fmt.Sprintf(", the others at most %s", spanMs(a.othersNs))
		}
		out += ")"
	}
	if n := len(a.noneNs); n > 0 {
		out += fmt.Sprintf(", none in %d (slowest flow %s ms)", n, spanMs(a.noneNs))
	}
	out += fmt.Sprintf("; at HyStart's first chance (below %d segments) in %d", HyStartEarlySegs, len(a.firstNs))
	if len(a.firstNs) > 0 {
		out += fmt.Sprintf(" (those flows %s ms)", spanMs(a.firstNs))
	}
	return out
}

// spanMs is "lo-hi" of xs (ms), or the one value.
func spanMs(xs []float64) string {
	lo, hi := slices.Min(xs), slices.Max(xs)
	if fmt.Sprintf("%.1f", lo) == fmt.Sprintf("%.1f", hi) {
		return fmt.Sprintf("%.1f", lo)
	}
	return fmt.Sprintf("%.1f-%.1f", lo, hi)
}

// text says in how many runs a connection ran below HyStart's first
// chance, and which, how often.
func (a *connAcc) text() string {
	if a.cut == 0 {
		return fmt.Sprintf("%s: no connection below HyStart's first chance (%d segments) in any", nRuns(a.runs), HyStartEarlySegs)
	}
	out := fmt.Sprintf("%s: a connection below HyStart's first chance (%d segments) in %d of them", nRuns(a.runs), HyStartEarlySegs, a.cut)
	if len(a.order) > 0 {
		var cs []string
		for _, name := range a.order {
			cs = append(cs, fmt.Sprintf("%s in %d", name, a.times[name]))
		}
		out += " (" + strings.Join(cs, ", ") + ")"
	}
	if a.lastRuns > 0 && a.cut > 0 {
		out += fmt.Sprintf("; the last byte came over one of those in %d of %d", a.lastCut, a.lastRuns)
	}
	return out
}
