package fidelity

import "fmt"

// DiagnosisSet gathers the attribution's diagnoses over runs: per phase
// and busiest link, the median of each share and queue, measured and in
// the model; per INC push, the medians of its round trip's parts. A
// phase counts in the runs it was attributed in.
type DiagnosisSet struct {
	order []string
	links map[string]*linkAcc
	incs  map[string]*incAcc
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
		d.links, d.incs = map[string]*linkAcc{}, map[string]*incAcc{}
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

func runsOf(n int) string {
	if n == 1 {
		return "1 run"
	}
	return fmt.Sprintf("medians of %d runs", n)
}
