package main

import (
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/ocsemu/ocsemu/emu/fidelity"
	"github.com/ocsemu/ocsemu/emu/orchestrate"
	"github.com/ocsemu/ocsemu/emu/report"
	"github.com/ocsemu/ocsemu/ocsfabric/ocs"
)

// writeRunData writes the run's data file (report.DataFile): every series
// moved onto the axis of time zero, with the run's metadata.
func writeRunData(dir string, res *orchestrate.Result, in *fidelity.Inputs, qd []qdiscReading, events []ocs.Event, fr *fidelityResult) error {
	t0 := res.Outcome.T0
	d := &report.RunData{TimeZeroNs: t0, Prediction: res.Prediction, Calibrated: res.Calibrated, Measurement: res.Measurement,
		Comparison: res.Compare, ComparisonCalibrated: res.CompareCalibrated, TCPAware: res.TCPAware, ComparisonTCPAware: res.CompareTCPAware,
		Replay: res.Replay, ComparisonReplay: res.CompareReplay,
		CalibratedLockstep: res.CalibratedLockstep, ComparisonCalibratedLockstep: res.CompareCalibratedLockstep,
		Verdict: fr.Verdict, Attribution: fr.Attribution}
	if data, err := os.ReadFile(filepath.Join(dir, report.MetaFile)); err == nil {
		var m report.Meta
		if json.Unmarshal(data, &m) == nil {
			d.Meta = &m
		}
	}
	if data, err := os.ReadFile(filepath.Join(dir, "scenario.yaml")); err == nil {
		d.Scenario = string(data)
	}
	if in.OCS != nil {
		d.UplinkBytes = in.OCS.UplinkBytes
	}
	d.INCWindowBytes = &in.INCWindowBytes
	if len(qd) > 0 {
		d.QdiscsBefore, _ = json.Marshal(qd[0].Stats)
		d.QdiscsAfter, _ = json.Marshal(qd[len(qd)-1].Stats)
	}
	for _, s := range in.Host {
		s.TNs -= t0
		d.Series.HostCPU = append(d.Series.HostCPU, s)
	}
	for _, l := range in.Links {
		ss := report.ShaperSeries{Link: l.Name, RateBps: l.RateBps}
		for _, smp := range l.Samples {
			ss.TNs = append(ss.TNs, smp.TNs-t0)
			ss.Bytes = append(ss.Bytes, smp.Bytes)
			ss.Backlog = append(ss.Backlog, smp.BacklogBytes)
		}
		d.Series.Shapers = append(d.Series.Shapers, ss)
	}
	for _, a := range in.Aggs {
		as := report.AggregatorSeries{ToR: a.ToR}
		for _, smp := range a.Samples {
			as.TNs = append(as.TNs, smp.TNs-t0)
			as.Holds = append(as.Holds, smp.Holds)
			as.HoldNs = append(as.HoldNs, smp.HoldNs)
		}
		d.Series.Aggregators = append(d.Series.Aggregators, as)
	}
	for _, t := range res.Outcome.TCP {
		t.TNs -= t0
		raw, _ := json.Marshal(t)
		d.Series.TCP = append(d.Series.TCP, raw)
	}
	for _, p := range res.Outcome.Phases {
		for _, v := range []*int64{&p.StartNs, &p.EndNs, &p.GateNs, &p.FirstRecvNs, &p.LastRecvNs, &p.LastSendNs, &p.LastAckNs} {
			if *v != 0 {
				*v -= t0
			}
		}
		p.PeerRecvNs = slices.Clone(p.PeerRecvNs) // the live records stay on CLOCK_MONOTONIC
		toAxis(p.PeerRecvNs, t0)
		raw, _ := json.Marshal(p)
		d.Series.RankPhases = append(d.Series.RankPhases, raw)
	}
	for _, ev := range events {
		for _, v := range []*int64{&ev.Scheduled, &ev.Effective, &ev.DarkUntil, &ev.RoutesDoneNs} {
			if *v != 0 {
				*v -= t0
			}
		}
		raw, _ := json.Marshal(ev)
		d.Series.OCSEvents = append(d.Series.OCSEvents, raw)
	}
	return report.WriteRunData(dir, d)
}

// attributionHeader is attribution.csv's first row: the phase, the four
// times and the errors against the calibrated and TCP-aware models, each
// part (ms), the two times outside the measured one, and how the
// phase's busiest link spent its window, measured and in the replay, and
// how its flows left slow start (all-to-all: flows, those cut early, the
// longest cut flow's and the longest other's time, empty where there is
// none, and whether HyStart's first chance decided because every flow
// was below its share; another phase: its job's connections that moved
// bytes, those below HyStart's first chance as src->dst:threshold, and
// where the phase marks them, the one that delivered the last byte and
// how long after the one before it).
func attributionHeader() []string {
	h := []string{"job", "iteration", "phase", "ideal_ms", "calibrated_ms", "tcp_aware_ms", "measured_ms", "rel_err_calibrated", "rel_err_tcp_aware"}
	for _, p := range fidelity.Parts {
		h = append(h, p+"_ms")
	}
	return append(h, "data_wait_ms", "verify_ms", "busiest_link", "link_own_ms", "link_others_ms", "link_idle_ms", "model_link_own_ms", "model_link_others_ms", "model_link_idle_ms", "link_queue_ms", "model_link_queue_ms",
		"slow_start_flows", "slow_start_cut", "cut_flow_max_ms", "other_flow_max_ms", "cut_by_hystart_first_chance",
		"connections", "connections_below_first_chance", "last_connection", "last_connection_after_ms")
}

func writeAttributionCSV(path string, as []fidelity.Attribution) error {
	return writeCSVFile(path, func(w io.Writer) error {
		cw := csv.NewWriter(w)
		if err := cw.Write(attributionHeader()); err != nil {
			return err
		}
		for _, a := range as {
			row := []string{a.Job, strconv.Itoa(a.Iteration), a.Phase, nsToMs(a.IdealNs), nsToMs(a.CalibratedNs), nsToMs(a.TCPAwareNs), nsToMs(a.MeasuredNs), fmtFloat(a.RelErr), fmtFloat(a.RelErrTCP)}
			for _, p := range fidelity.Parts {
				row = append(row, nsToMs(a.Parts[p]))
			}
			row = append(row, nsToMs(a.DataWaitNs), nsToMs(a.VerifyNs))
			if u := a.Link; u != nil {
				q := ""
				if u.QueueSamples > 0 {
					q = nsToMs(u.QueueNs)
				}
				row = append(row, u.Link, nsToMs(u.OwnNs), nsToMs(u.OthersNs), nsToMs(u.IdleNs), nsToMs(u.ModelOwnNs), nsToMs(u.ModelOthersNs), nsToMs(u.ModelIdleNs), q, nsToMs(u.ModelQueueNs))
			} else {
				row = append(row, "", "", "", "", "", "", "", "", "")
			}
			if s := a.SlowStart; s != nil {
				cut, others := "", ""
				if len(s.Cut) > 0 {
					cut = nsToMs(s.CutNs())
				}
				if s.Others > 0 {
					others = nsToMs(s.OthersNs)
				}
				row = append(row, strconv.Itoa(s.Flows), strconv.Itoa(len(s.Cut)), cut, others, strconv.FormatBool(s.ByHyStart))
			} else {
				row = append(row, "", "", "", "", "")
			}
			if c := a.Conns; c != nil {
				var below []string
				for _, x := range c.FirstChance {
					below = append(below, fmt.Sprintf("%s:%d", fidelity.ConnName(x.Src, x.Dst), x.Segs))
				}
				row = append(row, strconv.Itoa(c.Conns), strings.Join(below, " "))
				if l := c.Last; l != nil {
					row = append(row, fidelity.ConnName(l.Src, l.Dst), nsToMs(l.AfterNs))
				} else {
					row = append(row, "", "")
				}
			} else {
				row = append(row, "", "", "", "")
			}
			if err := cw.Write(row); err != nil {
				return err
			}
		}
		cw.Flush()
		return cw.Error()
	})
}

// modelsHeader is comparison_models.csv's first row: each phase predicted
// by the three modes of the flow model beside the measurement, errors as
// fractions ((measured - predicted) / predicted).
var modelsHeader = []string{"job", "iteration", "phase", "ideal_ms", "calibrated_ms", "tcp_aware_ms", "measured_ms",
	"rel_err_ideal", "rel_err_calibrated", "rel_err_tcp_aware"}

func writeModelsCSV(path string, res *orchestrate.Result) error {
	type key struct {
		job   string
		it    int
		phase string
	}
	index := func(cs []orchestrate.Comparison) map[key]orchestrate.Comparison {
		m := map[key]orchestrate.Comparison{}
		for _, c := range cs {
			m[key{c.Job, c.Iteration, c.Phase}] = c
		}
		return m
	}
	cal, tcp := index(res.CompareCalibrated), index(res.CompareTCPAware)
	return writeCSVFile(path, func(w io.Writer) error {
		cw := csv.NewWriter(w)
		if err := cw.Write(modelsHeader); err != nil {
			return err
		}
		for _, c := range res.Compare {
			k := key{c.Job, c.Iteration, c.Phase}
			pc, pt := cal[k], tcp[k]
			if err := cw.Write([]string{c.Job, strconv.Itoa(c.Iteration), c.Phase, nsToMs(c.PredictedNs), nsToMs(pc.PredictedNs), nsToMs(pt.PredictedNs),
				nsToMs(c.MeasuredNs), fmtFloat(c.RelErr), fmtFloat(pc.RelErr), fmtFloat(pt.RelErr)}); err != nil {
				return err
			}
		}
		cw.Flush()
		return cw.Error()
	})
}

// toAxis moves the recorded times in ts (0: none) from CLOCK_MONOTONIC
// onto the data file's axis, whose zero is t0.
func toAxis(ts []int64, t0 int64) {
	for i, t := range ts {
		if t != 0 {
			ts[i] = t - t0
		}
	}
}
