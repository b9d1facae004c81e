package main

// What a run records for the fidelity verdict and the attribution, besides
// the ranks' records: host CPU per 100 ms, every shaper's counters per
// 100 ms (tc -s qdisc over netlink), and, on OCS fabrics, the OCS port
// counters and events, fetched before the lab is torn down. recorder.finish
// judges the run and writes fidelity.json, attribution.csv,
// comparison_models.csv and the run's data file (rundata.go).

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/ocsemu/ocsemu/dataplane/fabric"
	"github.com/ocsemu/ocsemu/dataplane/inc"
	"github.com/ocsemu/ocsemu/dataplane/monoclock"
	"github.com/ocsemu/ocsemu/dataplane/names"
	"github.com/ocsemu/ocsemu/emu/fidelity"
	"github.com/ocsemu/ocsemu/emu/flowmodel"
	"github.com/ocsemu/ocsemu/emu/hoststat"
	"github.com/ocsemu/ocsemu/emu/orchestrate"
	"github.com/ocsemu/ocsemu/emu/plan"
	"github.com/ocsemu/ocsemu/emu/scenario"
	"github.com/ocsemu/ocsemu/ocsfabric/ocs"
	"github.com/ocsemu/ocsemu/workers"
	"github.com/ocsemu/ocsemu/workers/job"
	"github.com/ocsemu/ocsemu/workers/record"
)

// sampleEvery is how often the host and the aggregators are read;
// shapersEvery how often the shapers are: finely enough to take a link's
// bytes at a phase's start and end (the attribution's busiest link) for
// 0.6 ms of CPU a pass on plan-demo's 40 ports (BenchmarkQdiscStats).
const (
	sampleEvery  = 100 * time.Millisecond
	shapersEvery = 20 * time.Millisecond
)

// qdiscReading is every shaper's counters at one instant.
type qdiscReading struct {
	TNs   int64              `json:"t_ns"`
	Stats []fabric.QdiscStat `json:"qdiscs"`
}

// recorder samples while the workers run.
type recorder struct {
	lab    *fabric.Lab
	s      *scenario.Scenario
	others []string // other emu labs up when the recording started
	host   *hoststat.Sampler
	ctx    context.Context // the sampling's, ended by cancel
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu      sync.Mutex
	qdiscs  []qdiscReading
	qdErr   error
	ocs     *ocs.Client
	ocsPre  []ocs.PortCounters
	ocsErr  error
	started int64

	// aggs are the ToR aggregators' control clients (plans with INC),
	// aggReads their hold counters every sampleEvery, plan the INC jobs'.
	aggs     map[string]*inc.Client
	aggReads []aggReading
	plan     *plan.Plan
	// incWindow is the slots each INC worker kept in flight; incAdaptive
	// says the workers adapted it (emu run --inc-cc), so their push's time
	// is no longer a fixed window per round trip.
	incWindow   int
	incAdaptive bool
}

// aggReading is one aggregator's hold counters at one instant.
type aggReading struct {
	ToR string
	TNs int64
	St  inc.Stats
}

// startRecording begins sampling; stop it with finish.
func (a *app) startRecording(ctx context.Context, lab *fabric.Lab, s *scenario.Scenario) *recorder {
	r := &recorder{lab: lab, s: s, host: &hoststat.Sampler{Every: sampleEvery}, others: otherLabs(s.Name, nil)}
	if s.Fabric.HasOCS() {
		r.ocs = ocs.NewClient(fabric.LabFile(s.Name, "ocs.sock"))
		r.ocsPre, r.ocsErr = r.ocs.Counters(ctx)
	}
	sctx, cancel := context.WithCancel(ctx)
	r.ctx, r.cancel = sctx, cancel
	r.wg.Add(2)
	go func() { defer r.wg.Done(); r.host.Run(sctx) }()
	go func() { defer r.wg.Done(); r.sampleQdiscs(sctx) }()
	return r
}

// watchAggregators samples the ToR aggregators' hold counters (once they
// run) for the INC jobs of plan p, until the recording stops.
func (r *recorder) watchAggregators(p *plan.Plan, windowSlots int, adaptive bool) {
	r.plan, r.incWindow, r.incAdaptive = p, windowSlots, adaptive
	r.aggs = map[string]*inc.Client{}
	for rack := 0; rack < r.s.Fabric.Racks; rack++ {
		tor := names.ToRName(rack)
		r.aggs[tor] = inc.NewClient(aggSocket(r.s.Name, tor))
	}
	r.wg.Add(1)
	go func() { defer r.wg.Done(); r.sampleAggregators(r.ctx) }()
}

// sampleAggregators reads every aggregator's hold counters every
// sampleEvery (the attribution's INC round trip); a failed read is left
// out: the attribution then has fewer samples.
func (r *recorder) sampleAggregators(ctx context.Context) {
	t := time.NewTicker(sampleEvery)
	defer t.Stop()
	for {
		r.readAggregators(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// readAggregators reads every aggregator's counters once, each stamped
// half-way through its request.
func (r *recorder) readAggregators(ctx context.Context) {
	for tor, cl := range r.aggs {
		rctx, cancel := context.WithTimeout(ctx, sampleEvery)
		before := monoclock.Now()
		st, err := cl.Stats(rctx)
		after := monoclock.Now()
		cancel()
		if err == nil {
			r.mu.Lock()
			r.aggReads = append(r.aggReads, aggReading{ToR: tor, TNs: before + (after-before)/2, St: st})
			r.mu.Unlock()
		}
	}
}

// shaperPassPerNode is what a pass over the shapers costs per namespace
// (BenchmarkQdiscStats: 0.59 ms for plan-demo's 13).
const shaperPassPerNode = 45 * time.Microsecond

// sampleQdiscs reads the shapers every shapersEvery, or on a lab big
// enough that a pass costs more than a tenth of that, every ten passes'
// cost: the reads take at most a tenth of a core.
func (r *recorder) sampleQdiscs(ctx context.Context) {
	t := time.NewTicker(max(shapersEvery, 10*shaperPassPerNode*time.Duration(len(r.lab.Topo.Nodes))))
	defer t.Stop()
	for {
		r.readQdiscs()
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// readQdiscs reads every shaper once.
func (r *recorder) readQdiscs() {
	st, err := r.lab.QdiscStats()
	now := monoclock.Now()
	r.mu.Lock()
	defer r.mu.Unlock()
	if err != nil {
		if r.qdErr == nil {
			r.qdErr = err
		}
	} else {
		r.qdiscs = append(r.qdiscs, qdiscReading{TNs: now, Stats: st})
	}
}

// fidelityResult is what fidelity.json holds.
type fidelityResult struct {
	Verdict     fidelity.Verdict       `json:"verdict"`
	Attribution []fidelity.Attribution `json:"attribution"`
	// Problems are what could not be recorded (the verdict says so too).
	Problems []string `json:"problems,omitempty"`
}

// stop ends sampling without judging (the run failed).
func (r *recorder) stop() {
	r.cancel()
	r.wg.Wait()
	// A last reading, so that the last phase has one after its end.
	r.readQdiscs()
	if len(r.aggs) > 0 {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		r.readAggregators(ctx)
		cancel()
	}
}

// finish stops sampling, reads the OCS, judges the run and writes
// fidelity.json, attribution.csv and the data file into dir.
func (r *recorder) finish(ctx context.Context, res *orchestrate.Result, dir string) (*fidelityResult, error) {
	r.stop()
	fr := &fidelityResult{}
	t0 := res.Outcome.T0
	end := t0 + res.Measurement.MakespanNs
	in := &fidelity.Inputs{Measurement: res.Measurement, Ideal: res.Compare, Calibrated: res.CompareCalibrated, TCPAware: res.CompareTCPAware, Replay: res.CompareReplay,
		CalibratedLockstep: res.CompareCalibratedLockstep}
	in.OtherLabs = otherLabs(r.s.Name, r.others)
	in.TCP = tcpSamples(res.Outcome.TCP)
	in.Flows = flowsOf(res.Outcome.Phases)
	modelInputs(in, res.Prediction, res.TCPAware, res.Replay)
	framingInputs(in, r.s.Fabric)
	r.incInputs(in, res)
	for _, p := range res.Outcome.Phases {
		in.BytesSent += p.Bytes
	}
	for _, smp := range r.host.Samples() {
		if smp.TNs > t0 && smp.TNs-sampleEvery.Nanoseconds() < end {
			in.Host = append(in.Host, smp)
		}
	}
	if err := r.host.Err(); err != nil {
		in.HostErr = err.Error()
		fr.Problems = append(fr.Problems, err.Error())
	}
	r.mu.Lock()
	qd, qdErr := r.qdiscs, r.qdErr
	r.mu.Unlock()
	if qdErr != nil {
		fr.Problems = append(fr.Problems, "shaper counters: "+qdErr.Error())
	}
	in.Links, in.ShaperDrops = linksOf(qd, t0, end)
	var events []ocs.Event
	if r.ocs != nil {
		o, evs, err := r.readOCS(ctx, t0, end)
		if err != nil {
			fr.Problems = append(fr.Problems, err.Error())
		}
		in.OCS, events = o, evs
		if err == nil { // without the events, 0 would read as measured
			countReconfigurations(res.Measurement, evs)
		}
	}
	fr.Verdict = fidelity.Judge(in)
	fr.Attribution = fidelity.Attribute(in, t0)
	fr.Verdict.ExplainWorst(fr.Attribution)
	if dir == "" {
		return fr, nil
	}
	return fr, errors.Join(
		writeJSONFile(filepath.Join(dir, "fidelity.json"), fr),
		writeAttributionCSV(filepath.Join(dir, "attribution.csv"), fr.Attribution),
		writeModelsCSV(filepath.Join(dir, "comparison_models.csv"), res),
		writeRunData(dir, res, in, qd, events, fr),
	)
}

// flowsOf times every flow of the phases whose ranks mark each peer's
// last byte (all-to-all): from when both of its ranks had started the
// phase to its last byte in at the receiver.
func flowsOf(recs []workers.PhaseRecord) []fidelity.Flow {
	type key struct {
		job   string
		iter  int
		phase string
		rank  int
	}
	start := map[key]int64{}
	for _, r := range recs {
		start[key{r.Job, r.Iteration, r.Phase, r.Rank}] = r.StartNs
	}
	var out []fidelity.Flow
	for _, r := range recs {
		for src, end := range r.PeerRecvNs {
			s, ok := start[key{r.Job, r.Iteration, r.Phase, src}]
			if end == 0 || !ok {
				continue
			}
			out = append(out, fidelity.Flow{Job: r.Job, Iteration: r.Iteration, Phase: r.Phase, Src: src, Dst: r.Rank,
				StartNs: max(s, r.StartNs), EndNs: end})
		}
	}
	return out
}

// incInputs adds what the INC round trip's split needs: the aggregators'
// readings, the INC jobs' trees and the model's hop cost and window.
func (r *recorder) incInputs(in *fidelity.Inputs, res *orchestrate.Result) {
	if r.plan == nil || len(r.aggs) == 0 {
		return
	}
	r.mu.Lock()
	reads := r.aggReads
	r.mu.Unlock()
	idx := map[string]int{}
	for _, rd := range reads {
		i, ok := idx[rd.ToR]
		if !ok {
			i = len(in.Aggs)
			idx[rd.ToR] = i
			in.Aggs = append(in.Aggs, fidelity.Agg{ToR: rd.ToR})
		}
		in.Aggs[i].Samples = append(in.Aggs[i].Samples, fidelity.AggSample{TNs: rd.TNs, Holds: rd.St.Holds, HoldNs: rd.St.HoldNs})
	}
	in.INCTrees = incTrees(r.plan)
	if !r.incAdaptive { // an adapted window has no one size: no round trip by Little's law
		in.INCWindowBytes = float64(r.incWindow * flowmodel.INCSlotBytes)
	}
	in.ModelINCHopsNs = modelINCHops(res.Replay)
}

// tcpSamples are the ranks' TCP_INFO samples as the attribution reads
// them.
func tcpSamples(ts []workers.TCPSample) []fidelity.TCPSample {
	out := make([]fidelity.TCPSample, 0, len(ts))
	for _, t := range ts {
		out = append(out, fidelity.TCPSample{Job: t.Job, Rank: t.Rank, Peer: t.Peer, TNs: t.TNs, Retrans: t.Retrans,
			BytesRetrans: t.BytesRetrans, TotalRTO: t.TotalRTO, RTOTimeMs: t.RTOTimeMs, Ssthresh: t.SsthreshSegs, RTTUs: t.RTTUs, BytesAcked: t.BytesAcked})
	}
	return out
}

// modelInputs gives the verdict and the attribution what they read from
// the models: the TCP-aware model's phases and paths (the ideal
// prediction's paths without it) and what its replay put on each link.
func modelInputs(in *fidelity.Inputs, ideal, tcp, replay *record.Run) {
	if tcp != nil {
		in.ModelUplinkBytes = tcp.UplinkBytes
		in.ModelPhases = map[job.Key]record.Phase{}
		for _, ph := range tcp.Phases {
			in.ModelPhases[job.Key{Job: ph.Job, Iteration: ph.Iteration, Phase: ph.Phase}] = ph
		}
	} else if ideal != nil {
		in.ModelUplinkBytes = ideal.UplinkBytes
	}
	if replay != nil {
		in.ModelLinks = replay.PhaseLinks
	}
}

// framingInputs gives the attribution the fabric's framing: payload per
// wire byte, a segment's payload and a server link's payload rate.
func framingInputs(in *fidelity.Inputs, f scenario.Fabric) {
	if f.Rates.Server == scenario.Unlimited {
		return
	}
	fr := flowmodel.Framing(f.MTU)
	in.Goodput, in.MSS = fr.Goodput(), fr.PayloadBytes
	in.LinkPayloadBps = float64(f.Rates.Server) / 8 * in.Goodput
}

// incTrees are the INC jobs' aggregation trees (nil: none).
func incTrees(p *plan.Plan) map[string]fidelity.INCTree {
	var trees map[string]fidelity.INCTree
	for i := range p.Jobs {
		j := &p.Jobs[i]
		if !j.INC || j.Aggregator == "" {
			continue
		}
		if trees == nil {
			trees = map[string]fidelity.INCTree{}
		}
		trees[j.Name] = fidelity.INCTree{Root: j.Aggregator, Leaves: j.ToRs(), Bytes: float64(j.Bytes)}
	}
	return trees
}

// modelINCHops is what the replay put in each INC push's round trip for
// the aggregators' hops (nil without a replay).
func modelINCHops(replay *record.Run) map[job.Key]int64 {
	if replay == nil {
		return nil
	}
	hops := map[job.Key]int64{}
	for _, ph := range replay.Phases {
		if ph.INCHopsNs > 0 {
			hops[job.Key{Job: ph.Job, Iteration: ph.Iteration, Phase: ph.Phase}] = ph.INCHopsNs
		}
	}
	return hops
}

// linksOf turns the shaper readings within a second of [t0, end] into per-link
// series (tbf only: the shaped links), and sums the drops over the run.
func linksOf(qd []qdiscReading, t0, end int64) ([]fidelity.Link, uint64) {
	idx := map[string]int{}
	var links []fidelity.Link
	first, last := map[string]uint32{}, map[string]uint32{}
	for _, rd := range qd {
		if rd.TNs < t0-time.Second.Nanoseconds() || rd.TNs > end+time.Second.Nanoseconds() { // the readings around the run too: they may be far apart on a big lab
			continue
		}
		for _, q := range rd.Stats {
			if q.Kind != "tbf" {
				continue
			}
			name := q.Node + ":" + q.Iface
			i, ok := idx[name]
			if !ok {
				i = len(links)
				idx[name] = i
				links = append(links, fidelity.Link{Name: name, RateBps: q.RateBps})
				first[name] = q.Drops
			}
			last[name] = q.Drops
			at := rd.TNs
			if q.TNs > 0 {
				at = q.TNs // when this counter was read, not when the pass ended
			}
			links[i].Samples = append(links[i].Samples, fidelity.LinkSample{TNs: at, Bytes: q.Bytes, BacklogBytes: q.Backlog})
		}
	}
	var drops uint64
	for n, d := range last {
		drops += uint64(d - first[n])
	}
	return links, drops
}

// since is a counter's growth from pre to post; a counter that went
// back (the OCS process restarted with new maps) counts from zero.
func since(post, pre uint64) uint64 {
	if post < pre {
		return post
	}
	return post - pre
}

// readOCS fetches the port counters (the difference since the workers
// started) and the events of the run from the lab's event log.
func (r *recorder) readOCS(ctx context.Context, t0, end int64) (*fidelity.OCS, []ocs.Event, error) {
	post, err := r.ocs.Counters(ctx)
	if err != nil || r.ocsErr != nil {
		return nil, nil, fmt.Errorf("OCS counters: %w", errors.Join(err, r.ocsErr))
	}
	o := &fidelity.OCS{}
	pre := map[string]ocs.PortCounters{}
	for _, c := range r.ocsPre {
		pre[c.Iface] = c
	}
	o.UplinkBytes = map[string]uint64{}
	for _, c := range post {
		b := pre[c.Iface]
		o.UplinkBytes[c.Uplink.String()] += since(c.FwdBytes, b.FwdBytes)
		o.DarkBytes += since(c.DarkBytes, b.DarkBytes)
		o.DarkPackets += since(c.DarkPackets, b.DarkPackets)
		o.UnpatchedBytes += since(c.UnpatchedBytes, b.UnpatchedBytes)
		o.UnpatchedPackets += since(c.UnpatchedPackets, b.UnpatchedPackets)
	}
	data, err := os.ReadFile(fabric.LabFile(r.s.Name, "ocs-events.jsonl"))
	if err != nil {
		return o, nil, fmt.Errorf("OCS events: %w", err)
	}
	var evs []ocs.Event
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		var ev ocs.Event
		if json.Unmarshal(sc.Bytes(), &ev) != nil {
			continue
		}
		if ev.Effective < t0 || ev.Effective > end {
			continue
		}
		evs = append(evs, ev)
		switch {
		case ev.PathsNs > 0:
			// The ToRs' BPF paths carry the servers' traffic: they switch
			// in the circuits' instant, off by PathSkewNs.
			o.RouteLagNs = append(o.RouteLagNs, max(0, ev.PathSkewNs))
		case ev.RoutesChanged > 0 && ev.RoutesDoneNs > 0:
			o.RouteLagNs = append(o.RouteLagNs, max(0, ev.RoutesDoneNs-ev.Effective))
		}
	}
	return o, evs, nil
}

// verdictLine is the summary's fidelity line: the verdict and the checks
// that did not pass.
func verdictLine(v fidelity.Verdict) string {
	var bad []string
	for _, l := range v.Lines {
		if l.Status == fidelity.Warn || l.Status == fidelity.Fail {
			bad = append(bad, fmt.Sprintf("%s %s", l.Check, l.Status))
		}
	}
	line := "   fidelity    " + strings.ToUpper(string(v.Status))
	if len(bad) > 0 {
		line += ": " + strings.Join(bad, ", ")
	}
	return line
}

// countReconfigurations puts the OCS's reconfigurations during the run
// into the measurement, as the flow model counts them: each change that
// darkened ports (a reconfiguration, or a schedule's slot), and the ports
// it darkened, summed.
func countReconfigurations(m *record.Run, evs []ocs.Event) {
	if m == nil {
		return
	}
	m.Reconfigurations, m.PortsReconfigured = 0, 0
	for _, ev := range evs {
		if (ev.Kind == "reconfigure" || ev.Kind == "slot") && len(ev.Dark) > 0 && ev.Error == "" {
			m.Reconfigurations++
			m.PortsReconfigured += len(ev.Dark)
		}
	}
}

// otherLabs adds the emu labs deployed now, but lab, to seen (sorted, no
// repeats): their processes load the CPUs this run shares.
func otherLabs(lab string, seen []string) []string {
	now, _ := fabric.Labs()
	out := slices.Clone(seen)
	for _, l := range now {
		if l != lab && !slices.Contains(out, l) {
			out = append(out, l)
		}
	}
	slices.Sort(out)
	return out
}
