package main

import (
	"encoding/json"
	"fmt"

	"github.com/ocsemu/ocsemu/emu/fidelity"
	"github.com/ocsemu/ocsemu/emu/flowmodel"
	"github.com/ocsemu/ocsemu/emu/orchestrate"
	"github.com/ocsemu/ocsemu/emu/report"
	"github.com/ocsemu/ocsemu/workers"
)

// repredict runs the calibrated model (per rank and in lockstep), the
// TCP-aware model, its replay at the measured phase starts and the
// attribution of a recorded run again with this emu's models; the
// measurements stay as recorded. It replaces the run's figures of those
// models and its attribution in r.Data (not on disk), so that a change of
// a model reads on runs made before it. The ideal model is the plan's,
// as recorded. The verdict stays as
// recorded: it also judges what only the live run saw (the OCS counters).
// The models take the INC window from the fabric (flowmodel.INCWindow):
// runs made before 27 Nov 16:20 on fabrics slower than 368.64 Mbit/s
// kept 256 slots and are predicted again with today's smaller window.
func repredict(r *report.Run) error {
	d := r.Data
	switch {
	case d == nil:
		return fmt.Errorf("repredict %s: no %s (runs before 25 Nov 2026 have none)", r.Dir, report.DataFile)
	case d.Measurement == nil:
		return fmt.Errorf("repredict %s: %s holds no measurement", r.Dir, report.DataFile)
	case r.Plan == nil || r.Scenario == nil:
		return fmt.Errorf("repredict %s: the run has no plan or scenario", r.Dir)
	}
	p, s, meas := r.Plan, r.Scenario, d.Measurement
	cal, err := flowmodel.SimulateModel(p, s, flowmodel.Calibrated)
	if err != nil {
		return fmt.Errorf("repredict %s: calibrated model: %w", r.Dir, err)
	}
	tcp, err := flowmodel.SimulateModel(p, s, flowmodel.TCPAware)
	if err != nil {
		return fmt.Errorf("repredict %s: TCP-aware model: %w", r.Dir, err)
	}
	d.Calibrated, d.ComparisonCalibrated = cal, orchestrate.Compare(cal, meas)
	// As in the live run, the run stands without the lockstep model (no
	// framing or ranks part).
	d.CalibratedLockstep, d.ComparisonCalibratedLockstep = nil, nil
	if lock, err := flowmodel.SimulateRanks(p, s, flowmodel.Calibrated, false); err == nil {
		d.CalibratedLockstep, d.ComparisonCalibratedLockstep = lock, orchestrate.Compare(lock, meas)
	}
	// Nil on error or for a barrier plan: as in the live run, the run
	// stands without the replay (no drift, no busiest link).
	replay, _ := flowmodel.Replay(p, s, flowmodel.TCPAware, orchestrate.MeasuredStarts(meas))
	in, err := recordedInputs(r)
	if err != nil {
		return fmt.Errorf("repredict %s: %w", r.Dir, err)
	}
	in.TCPAware = orchestrate.Compare(tcp, meas)
	if replay != nil {
		in.Replay = orchestrate.Compare(replay, meas)
	}
	modelInputs(in, d.Prediction, tcp, replay)
	if planUsesINC(p) {
		in.ModelINCHopsNs = modelINCHops(replay)
	}
	d.TCPAware, d.ComparisonTCPAware, d.Replay, d.ComparisonReplay = tcp, in.TCPAware, replay, in.Replay
	d.Attribution = fidelity.Attribute(in, 0) // the data file's times are from time zero
	return nil
}

// recordedInputs rebuilds, from a run's data file, the attribution's
// inputs that do not come from the TCP-aware model.
func recordedInputs(r *report.Run) (*fidelity.Inputs, error) {
	d := r.Data
	in := &fidelity.Inputs{Measurement: d.Measurement, Ideal: d.Comparison, Calibrated: d.ComparisonCalibrated,
		CalibratedLockstep: d.ComparisonCalibratedLockstep, Host: d.Series.HostCPU}
	ts := make([]workers.TCPSample, len(d.Series.TCP))
	for i, raw := range d.Series.TCP {
		if err := json.Unmarshal(raw, &ts[i]); err != nil {
			return nil, fmt.Errorf("%s: a TCP sample: %w", report.DataFile, err)
		}
	}
	in.TCP = tcpSamples(ts)
	recs := make([]workers.PhaseRecord, len(d.Series.RankPhases))
	for i, raw := range d.Series.RankPhases {
		if err := json.Unmarshal(raw, &recs[i]); err != nil {
			return nil, fmt.Errorf("%s: a rank's phase: %w", report.DataFile, err)
		}
		in.BytesSent += recs[i].Bytes
		if d.Format == report.DataFormatV1 { // its peer_recv_ns were left on CLOCK_MONOTONIC
			toAxis(recs[i].PeerRecvNs, d.TimeZeroNs)
		}
	}
	in.Flows = flowsOf(recs)
	framingInputs(in, r.Scenario.Fabric)
	for _, sh := range d.Series.Shapers {
		if len(sh.Bytes) != len(sh.TNs) || len(sh.Backlog) != len(sh.TNs) {
			return nil, fmt.Errorf("%s: shaper %s: %d times, %d counts, %d backlogs", report.DataFile, sh.Link, len(sh.TNs), len(sh.Bytes), len(sh.Backlog))
		}
		l := fidelity.Link{Name: sh.Link, RateBps: sh.RateBps}
		for i, t := range sh.TNs {
			l.Samples = append(l.Samples, fidelity.LinkSample{TNs: t, Bytes: sh.Bytes[i], BacklogBytes: sh.Backlog[i]})
		}
		in.Links = append(in.Links, l)
	}
	for _, a := range d.Series.Aggregators {
		if len(a.Holds) != len(a.TNs) || len(a.HoldNs) != len(a.TNs) {
			return nil, fmt.Errorf("%s: aggregator %s: %d times, %d hold counts, %d hold times", report.DataFile, a.ToR, len(a.TNs), len(a.Holds), len(a.HoldNs))
		}
		ag := fidelity.Agg{ToR: a.ToR}
		for i, t := range a.TNs {
			ag.Samples = append(ag.Samples, fidelity.AggSample{TNs: t, Holds: a.Holds[i], HoldNs: a.HoldNs[i]})
		}
		in.Aggs = append(in.Aggs, ag)
	}
	if planUsesINC(r.Plan) { // the live run watched the aggregators: INC's inputs, read or not
		in.INCTrees = incTrees(r.Plan)
		if w := d.INCWindowBytes; w != nil {
			in.INCWindowBytes = *w
		} else { // format 1 did not record it: the fabric's window, what a run without --inc-cc kept
			in.INCWindowBytes = float64(flowmodel.INCWindow(r.Scenario.Fabric) * flowmodel.INCSlotBytes)
		}
	}
	return in, nil
}
