package scheduler

import (
	"encoding/binary"
	"fmt"
	"slices"
	"sort"

	"github.com/ocsemu/ocsemu/dataplane/names"
	"github.com/ocsemu/ocsemu/emu/flowmodel"
	"github.com/ocsemu/ocsemu/emu/plan"
	"github.com/ocsemu/ocsemu/emu/scenario"
	"github.com/ocsemu/ocsemu/ocsfabric/circuit"
)

// TDM plans papers 001/002's time-division multiplexing (tdm) or its
// baseline without it (notdm).
//
// Jobs are split into two groups; while one group communicates, the other
// trains. A round is two stages on a full-duplex OXC (paper 001: A
// communicates while B trains, then the reverse) and four on a half-duplex
// one (paper 002, fabric.ocs.duplex: half: stage (k, t) has group k
// communicate its t-th exchange while the other group trains; a PS job
// pushes at t = 0 and pulls at t = 1, the stage between being its
// aggregation; ring, hd and all-to-all jobs run one iteration per
// exchange). A full-duplex plan with PS jobs uses the four-stage round too,
// since a PS job's push and pull are two stages. Each stage's circuits are
// Algorithm 2's topology for the communicating group (one simplex circuit
// per link in half duplex, and no port in two circuits: strict half
// duplex); ring jobs' orders come from Algorithm 3. tdm chooses the groups
// by Algorithm 1 (hill climbing from all jobs in one group, which is
// notdm, so tdm is never predicted worse); notdm keeps every job in one
// group.
//
// Choices where the papers are silent: placement is the scenario's (paper
// 002 takes it as given); INC is not used (PS jobs use their CPU PS); a
// stage lasts max(communication + reconfiguration, compute of the jobs
// that compute in it), the reconfiguration delay counted only when the
// stage's circuits differ from the previous stage's; jobs are a batch
// (arrivals only delay a job's first stage). The plan runs in barrier
// mode: each stage starts when the previous one's activities are done.
func TDM(s *scenario.Scenario, hillClimb bool) (*plan.Plan, error) {
	name := "notdm"
	if hillClimb {
		name = "tdm"
	}
	t, err := newTDM(s)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	groupB := make([]bool, len(t.jobs))
	base, err := t.round(groupB)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	if hillClimb {
		groupB, _ = t.hillClimb(groupB, base)
	}
	p, err := t.plan(name, groupB)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	run, err := flowmodel.Simulate(p, s)
	if err != nil {
		return nil, fmt.Errorf("%s: predict: %w", name, err)
	}
	p.Predicted = &plan.Predicted{MakespanNs: run.MakespanNs, JobsNs: map[string]int64{}}
	for _, jr := range run.Jobs {
		p.Predicted.JobsNs[jr.Job] = jr.JCTNs
	}
	return p, nil
}

// TDMRound returns the round time (ns) Algorithm 1 predicts for the
// scenario's jobs with and without TDM, and how many jobs tdm puts in the
// second group.
func TDMRound(s *scenario.Scenario) (tdm, notdm int64, inB int, err error) {
	t, err := newTDM(s)
	if err != nil {
		return 0, 0, 0, err
	}
	groupB := make([]bool, len(t.jobs))
	base, err := t.round(groupB)
	if err != nil {
		return 0, 0, 0, err
	}
	g, best := t.hillClimb(groupB, base)
	for _, b := range g {
		if b {
			inB++
		}
	}
	return best, base, inB, nil
}

type tdmPlanner struct {
	s         *scenario.Scenario
	jobs      []plan.Job
	par       oxcParams
	four      bool // four stages per round
	delay     float64
	fixed     []map[string]sparseDemand // per job, per comm phase (non-ring jobs)
	rings     map[string]sparseDemand   // ring job + order -> its all-reduce
	ringPods  [][]int                   // per ring job: its pods, in first-worker order
	ringByPod []map[int][]string        // per ring job: its workers by pod
	nicIdx    map[string]int            // "tx:r0s1" -> index into podDemand.nic
	layout    circuit.Layout
	// scratch, one per round stage
	scratch []podDemand
}

func newTDM(s *scenario.Scenario) (*tdmPlanner, error) {
	f := s.Fabric
	if len(s.Jobs) == 0 {
		return nil, fmt.Errorf("scenario %q has no jobs to plan", s.Name)
	}
	if f.Kind != scenario.KindOCS {
		return nil, fmt.Errorf("needs an ocs fabric (the scenario's is %s)", f.Kind)
	}
	if f.Rates.Server == scenario.Unlimited || f.Rates.Uplink == scenario.Unlimited {
		return nil, fmt.Errorf("needs fabric.rates.server and fabric.rates.uplink: Algorithm 2 sizes links by time")
	}
	if f.OCS.Switches > 1 {
		return nil, fmt.Errorf("plans one OXC (the papers' model); the scenario has %d", f.OCS.Switches)
	}
	t := &tdmPlanner{s: s, jobs: plan.JobsFromScenario(s), layout: circuit.LayoutOf(s.Spec()),
		par: oxcParams{Pods: f.Racks, Ports: f.UplinksPerToR, LinkBps: float64(f.Rates.Uplink) / 8,
			ServerBps: float64(f.Rates.Server) / 8, HalfDuplex: f.OCS.HalfDuplex()},
		delay: float64(f.OCS.ReconfigDelay), rings: map[string]sparseDemand{}, nicIdx: map[string]int{}}
	t.four = t.par.HalfDuplex
	for i := range t.jobs {
		j := &t.jobs[i]
		if j.Pattern == scenario.PatternPS {
			t.four = true
			if j.INC {
				j.INC, j.Aggregator, j.PS = false, "", s.Jobs[i].PSServer()
			}
		}
		var pods []int
		byPod := map[int][]string{}
		if j.Pattern == scenario.PatternRing {
			// groupDemand rewrites the order in place: give the job its own
			// slice, not the scenario's workers.
			j.Ring = slices.Clone(j.Workers)
			for _, w := range j.Workers {
				r := plan.Rack(w)
				if _, ok := byPod[r]; !ok {
					pods = append(pods, r)
				}
				byPod[r] = append(byPod[r], w)
			}
		}
		t.ringPods = append(t.ringPods, pods)
		t.ringByPod = append(t.ringByPod, byPod)
		m := map[string]sparseDemand{}
		if j.Pattern != scenario.PatternRing {
			for _, ph := range scenario.Phases(j.Pattern) {
				if ph != scenario.PhaseCompute {
					m[ph] = t.demandOf(j, ph)
				}
			}
		}
		t.fixed = append(t.fixed, m)
	}
	for _, j := range t.jobs { // every server link a job can load
		for _, w := range j.Workers {
			t.nic("tx:" + w)
			t.nic("rx:" + w)
		}
		if j.PS != "" {
			t.nic("tx:" + j.PS)
			t.nic("rx:" + j.PS)
		}
	}
	for m := 0; m < t.perRound(); m++ {
		t.scratch = append(t.scratch, newPodDemand(f.Racks, len(t.nicIdx)))
	}
	return t, nil
}

func (t *tdmPlanner) nic(key string) int {
	i, ok := t.nicIdx[key]
	if !ok {
		i = len(t.nicIdx)
		t.nicIdx[key] = i
	}
	return i
}

// demandOf is one phase's traffic.
func (t *tdmPlanner) demandOf(j *plan.Job, phase string) sparseDemand {
	oxc, nic := map[int]float64{}, map[int]float64{}
	for _, fl := range j.Flows(phase) {
		a, b := plan.Rack(fl.Src), plan.Rack(fl.Dst)
		if a != b {
			oxc[a*t.par.Pods+b] += fl.Bytes
		}
		if _, _, ok := names.ParseServer(fl.Src); ok {
			nic[t.nic("tx:"+fl.Src)] += fl.Bytes
		}
		if _, _, ok := names.ParseServer(fl.Dst); ok {
			nic[t.nic("rx:"+fl.Dst)] += fl.Bytes
		}
	}
	var d sparseDemand
	for i, b := range oxc {
		d.oxc = append(d.oxc, idxBytes{i, b})
	}
	for i, b := range nic {
		d.nic = append(d.nic, idxBytes{i, b})
	}
	return d
}

// commPhase is the phase a job communicates at exchange t (0 or 1).
func commPhase(j *plan.Job, t int) string {
	ph := scenario.Phases(j.Pattern)
	if j.Pattern == scenario.PatternPS {
		return ph[1+t] // push, pull
	}
	return ph[1]
}

// stageShape says, for stage m of a round, which group communicates and
// which exchange it is.
func (t *tdmPlanner) stageShape(m int) (commB bool, exch int) {
	if t.four {
		return m%2 == 1, m / 2
	}
	return m == 1, 0
}

func (t *tdmPlanner) perRound() int {
	if t.four {
		return 4
	}
	return 2
}

// groupDemand builds the communicating group's demand at exchange x into
// round stage m's scratch, choosing ring orders by Algorithm 3 over the
// links the group's other jobs already need. It sets Ring on the ring
// jobs of the group.
func (t *tdmPlanner) groupDemand(groupB []bool, m int) podDemand {
	commB, x := t.stageShape(m)
	d := t.scratch[m]
	d.reset()
	for i := range t.jobs {
		j := &t.jobs[i]
		if groupB[i] != commB || j.Pattern == scenario.PatternRing {
			continue
		}
		d.add(t.fixed[i][commPhase(j, x)])
	}
	P := t.par.Pods
	for i := range t.jobs {
		j := &t.jobs[i]
		if groupB[i] != commB || j.Pattern != scenario.PatternRing {
			continue
		}
		pods, byPod := t.ringPods[i], t.ringByPod[i]
		existing := map[[2]int]bool{}
		for _, a := range pods {
			for _, b := range pods {
				if a != b && d.oxc[a*P+b] > 0 {
					existing[pair(a, b)] = true
				}
			}
		}
		order := ringOrder(pods, existing)
		j.Ring = j.Ring[:0]
		for _, r := range order {
			j.Ring = append(j.Ring, byPod[r]...)
		}
		key := binary.AppendUvarint(nil, uint64(i))
		for _, r := range order {
			key = binary.AppendUvarint(key, uint64(r))
		}
		k := string(key)
		rd, ok := t.rings[k]
		if !ok {
			rd = t.demandOf(j, scenario.PhaseAllReduce)
			t.rings[k] = rd
		}
		d.add(rd)
	}
	return d
}

// stageTimes predicts each stage of a round: Algorithm 2's communication
// time, plus the reconfiguration delay if the circuits differ from the
// previous stage's, or the longest compute among the jobs that compute in
// it, whichever is longer. A stage whose group has nothing to send keeps
// the previous stage's circuits. It returns the times (ns) and topologies.
func (t *tdmPlanner) stageTimes(groupB []bool) ([]float64, []map[[2]int]int, float64, error) {
	n := t.perRound()
	times := make([]float64, n)
	comm := make([]float64, n)
	tops := make([]map[[2]int]int, n)
	var spread float64
	for m := 0; m < n; m++ {
		commB, _ := t.stageShape(m)
		d := t.groupDemand(groupB, m)
		links, tc, err := oxcTopology(d, t.par)
		if err != nil {
			return nil, nil, 0, fmt.Errorf("stage %d of the round: %w", m, err)
		}
		tops[m], comm[m] = links, tc
		for i, b := range d.oxc {
			if b == 0 {
				continue
			}
			k := [2]int{i / d.pods, i % d.pods}
			if !t.par.HalfDuplex {
				k = pair(k[0], k[1])
			}
			if l := links[k]; l > 0 {
				x := b / (t.par.LinkBps * float64(l))
				spread += x * x
			}
		}
		for i := range t.jobs {
			if groupB[i] != commB && t.computesIn(i, m) {
				times[m] = max(times[m], float64(t.jobs[i].ComputeNs))
			}
		}
	}
	// Stages without traffic inherit the circuits before them.
	for pass := 0; pass < 2; pass++ {
		for m := 0; m < n; m++ {
			if len(tops[m]) == 0 {
				tops[m] = tops[(m+n-1)%n]
			}
		}
	}
	for m := 0; m < n; m++ {
		tc := comm[m]
		if tc > 0 && n > 1 && !sameLinks(tops[m], tops[(m+n-1)%n]) {
			tc += t.delay
		}
		times[m] = max(times[m], tc)
	}
	return times, tops, spread, nil
}

// computesIn reports whether job i computes in round stage m (which is a
// training stage of its group): PS jobs only right before their push.
func (t *tdmPlanner) computesIn(i, m int) bool {
	if t.jobs[i].Pattern != scenario.PatternPS {
		return true
	}
	// Stages alternate groups, so the next stage is the job's group's
	// exchange; a PS job computes only before its push (exchange 0).
	_, x := t.stageShape((m + 1) % t.perRound())
	return x == 0
}

// round is the round time (ns) of a grouping.
func (t *tdmPlanner) round(groupB []bool) (int64, error) {
	r, _, err := t.score(groupB)
	return r, err
}

// score is the round time (ns) and the tie-break: the sum over the
// round's stages and pod pairs of the squared time each pair's bytes take
// on its links, which falls when a job moves off a busy pair even while
// another pair, as busy, still sets the stage's time.
func (t *tdmPlanner) score(groupB []bool) (int64, float64, error) {
	times, _, spread, err := t.stageTimes(groupB)
	if err != nil {
		return 0, 0, err
	}
	var sum float64
	for _, x := range times {
		sum += x
	}
	return int64(sum), spread, nil
}

// hillClimb is Algorithm 1: from a grouping, move to the best neighbour
// (one job switched to the other group) while it shortens the round.
// Where the paper is silent: a neighbour with the same round time but a
// smaller tie-break (score) also counts as better, so the climb crosses
// the plateaus that max() makes (moving one job off a pod pair rarely
// changes a stage's maximum by itself); every move lowers (round,
// tie-break) lexicographically, so the climb ends.
func (t *tdmPlanner) hillClimb(groupB []bool, cur int64) ([]bool, int64) {
	g := append([]bool(nil), groupB...)
	_, curS, err := t.score(g)
	if err != nil {
		return g, cur
	}
	for {
		bestI, bestT, bestS := -1, cur, curS
		for i := range g {
			g[i] = !g[i]
			if rt, sp, err := t.score(g); err == nil && (rt < bestT || rt == bestT && sp < bestS*(1-1e-9)) {
				bestI, bestT, bestS = i, rt, sp
			}
			g[i] = !g[i]
		}
		if bestI < 0 {
			return g, cur
		}
		g[bestI] = !g[bestI]
		cur, curS = bestT, bestS
	}
}

func sameLinks(a, b map[[2]int]int) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

// circuits lays Algorithm 2's links on ports: each link takes the next
// free port of both pods, so no port is in two circuits (strict half
// duplex); half-duplex links are simplex circuits from the first pod.
func (t *tdmPlanner) circuits(links map[[2]int]int) []circuit.Circuit {
	next := make([]int, t.par.Pods)
	keys := make([][2]int, 0, len(links))
	for k := range links {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		return keys[i][0] < keys[j][0] || keys[i][0] == keys[j][0] && keys[i][1] < keys[j][1]
	})
	var out []circuit.Circuit
	for _, k := range keys {
		for n := 0; n < links[k]; n++ {
			out = append(out, circuit.Circuit{A: circuit.Uplink{Rack: k[0], Port: next[k[0]]},
				B: circuit.Uplink{Rack: k[1], Port: next[k[1]]}, Simplex: t.par.HalfDuplex})
			next[k[0]]++
			next[k[1]]++
		}
	}
	return out
}

// strictPorts refuses circuits that use one port twice, in any direction:
// paper 002's eq. (6), each port in at most one circuit per stage (strict
// half duplex). circuit.Validate allows a port to send on one simplex
// circuit and receive on another; plan v2 is to make this a duplex mode
// plan.Check enforces, until then tdm checks its own stages.
func strictPorts(cs []circuit.Circuit) error {
	used := map[circuit.Uplink]circuit.Circuit{}
	for _, c := range cs {
		for _, u := range []circuit.Uplink{c.A, c.B} {
			if prev, ok := used[u]; ok {
				return fmt.Errorf("port %s is in circuits %s and %s: each port may be in one circuit per stage", u, prev, c)
			}
			used[u] = c
		}
	}
	return nil
}

// plan lays the rounds out as barrier stages: each job's phases go, in
// order, into the next stage of the right kind for its group (compute in
// a stage where its group trains, exchange x where it communicates x).
func (t *tdmPlanner) plan(name string, groupB []bool) (*plan.Plan, error) {
	times, tops, _, err := t.stageTimes(groupB)
	if err != nil {
		return nil, err
	}
	n := t.perRound()
	p := &plan.Plan{Version: plan.Version, Scenario: t.s.Name, Scheduler: name, Mode: plan.ModeBarrier,
		Jobs: t.jobs, Predicted: &plan.Predicted{}}
	next := make([]int, len(t.jobs))
	keys := make([][]plan.Key, len(t.jobs))
	left := 0
	for i := range t.jobs {
		keys[i] = t.jobs[i].Phases()
		left += len(keys[i])
	}
	for si := 0; left > 0; si++ {
		if si > 4*plan.MaxIterations+8 {
			return nil, fmt.Errorf("phases left after %d stages (a bug)", si)
		}
		m := si % n
		commB, x := t.stageShape(m)
		st := plan.Stage{Circuits: t.circuits(tops[m]), PredictedNs: int64(times[m])}
		if err := strictPorts(st.Circuits); err != nil {
			return nil, fmt.Errorf("stage %d: %w (a bug)", len(p.Stages), err)
		}
		for i := range t.jobs {
			if next[i] >= len(keys[i]) {
				continue
			}
			k := keys[i][next[i]]
			j := &t.jobs[i]
			ok := false
			if k.Phase == scenario.PhaseCompute {
				ok = groupB[i] != commB && t.computesIn(i, m)
			} else {
				ok = groupB[i] == commB && k.Phase == commPhase(j, x)
			}
			if ok {
				st.Activities = append(st.Activities, plan.Activity{Job: k.Job, Iteration: k.Iteration, Phase: k.Phase})
				next[i]++
				left--
			}
		}
		if len(st.Activities) == 0 {
			// Nothing to do in this stage (an empty group, or the
			// prologue): skip it, keeping the round's position.
			continue
		}
		p.Stages = append(p.Stages, st)
	}
	return p, nil
}
