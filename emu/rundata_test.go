package main

import (
	"path/filepath"
	"reflect"
	"testing"

	"github.com/ocsemu/ocsemu/emu/fidelity"
	"github.com/ocsemu/ocsemu/emu/orchestrate"
	"github.com/ocsemu/ocsemu/workers"
	"github.com/ocsemu/ocsemu/workers/record"
)

func TestAttributionAndModelsCSV(t *testing.T) {
	dir := t.TempDir()
	a := fidelity.Attribution{Job: "ring", Iteration: 1, Phase: "allreduce", IdealNs: 200e6, CalibratedNs: 209e6, TCPAwareNs: 220e6, MeasuredNs: 240e6, RelErr: 0.125,
		RelErrTCP: 0.25, Parts: map[string]int64{fidelity.PartFraming: 7e6, fidelity.PartRanks: 2e6, fidelity.PartTCP: 11e6, fidelity.PartDrift: -2e6, fidelity.PartINCRound: -5e6, fidelity.PartSkew: 3e6, fidelity.PartINCStall: 4e6, fidelity.PartCPU: 15e6}, DataWaitNs: 0, VerifyNs: 6e6}
	// A second phase with its busiest link's use; the first has none.
	b := a
	b.Iteration = 2
	b.Link = &fidelity.LinkUse{Link: "tor1:up0", OwnNs: 100e6, OthersNs: 120e6, IdleNs: 20e6, ModelOwnNs: 95e6, ModelOthersNs: 110e6, ModelIdleNs: 15e6,
		QueueNs: 3e6, QueueSamples: 12, ModelQueueNs: 2.5e6}
	// A third phase, an all-to-all, with its flows' slow-start exits.
	c := a
	c.Iteration = 3
	c.SlowStart = &fidelity.SlowStarts{Flows: 6, Cut: []fidelity.FlowExit{{Src: 1, Dst: 2, Segs: 27, Ns: 105e6}}, Others: 5, OthersNs: 48e6}
	// A fourth: every flow below its share, none at HyStart's first chance.
	d := a
	d.Iteration = 4
	d.SlowStart = &fidelity.SlowStarts{Flows: 6, Others: 6, OthersNs: 80e6, ByHyStart: true}
	// A fifth, a ring: its connections, two below HyStart's first chance.
	e := a
	e.Iteration = 5
	e.Conns = &fidelity.ConnStarts{Conns: 4, FirstChance: []fidelity.ConnExit{{Src: 2, Dst: 1, Segs: 30}, {Src: -1, Dst: 0, Segs: 27}}}
	// A sixth, a ring whose connections are marked: the last byte came
	// over 2->1, 40 ms after the connection before it.
	f := e
	f.Iteration = 6
	f.Conns = &fidelity.ConnStarts{Conns: 4, FirstChance: e.Conns.FirstChance, Last: &fidelity.ConnLast{Src: 2, Dst: 1, AfterNs: 40e6, FirstChance: true}}
	if err := writeAttributionCSV(filepath.Join(dir, "attribution.csv"), []fidelity.Attribution{a, b, c, d, e, f}); err != nil {
		t.Fatal(err)
	}
	rows := readCSV(t, filepath.Join(dir, "attribution.csv"))
	phase := func(it string) []string {
		return []string{"ring", it, "allreduce", "200.000000", "209.000000", "220.000000", "240.000000", "0.125", "0.25", "7.000000", "2.000000", "11.000000", "-2.000000", "-5.000000", "0.000000", "3.000000", "0.000000", "4.000000", "0.000000", "0.000000", "0.000000", "15.000000", "0.000000", "0.000000", "0.000000", "6.000000"}
	}
	want := [][]string{attributionHeader(),
		append(phase("1"), "", "", "", "", "", "", "", "", "", "", "", "", "", "", "", "", "", ""),
		append(phase("2"), "tor1:up0", "100.000000", "120.000000", "20.000000", "95.000000", "110.000000", "15.000000", "3.000000", "2.500000", "", "", "", "", "", "", "", "", ""),
		append(phase("3"), "", "", "", "", "", "", "", "", "", "6", "1", "105.000000", "48.000000", "false", "", "", "", ""),
		append(phase("4"), "", "", "", "", "", "", "", "", "", "6", "0", "", "80.000000", "true", "", "", "", ""),
		append(phase("5"), "", "", "", "", "", "", "", "", "", "", "", "", "", "", "4", "2->1:30 ps->0:27", "", ""),
		append(phase("6"), "", "", "", "", "", "", "", "", "", "", "", "", "", "", "4", "2->1:30 ps->0:27", "2->1", "40.000000")}
	if !reflect.DeepEqual(rows, want) {
		t.Errorf("attribution.csv:\n got %q\nwant %q", rows, want)
	}
	row := func(pred int64, err float64) record.Comparison {
		return record.Comparison{Job: "ps", Iteration: 0, Phase: "pull", PredictedNs: pred, MeasuredNs: 210e6, RelErr: err}
	}
	res := &orchestrate.Result{Compare: []record.Comparison{row(200e6, 0.05)}, CompareCalibrated: []record.Comparison{row(209e6, 0.5/209)},
		CompareTCPAware: []record.Comparison{row(250e6, -0.16)}}
	if err := writeModelsCSV(filepath.Join(dir, "m.csv"), res); err != nil {
		t.Fatal(err)
	}
	rows = readCSV(t, filepath.Join(dir, "m.csv"))
	if len(rows) != 2 || !reflect.DeepEqual(rows[0], modelsHeader) ||
		!reflect.DeepEqual(rows[1][:7], []string{"ps", "0", "pull", "200.000000", "209.000000", "250.000000", "210.000000"}) || rows[1][9] != "-0.16" {
		t.Errorf("comparison_models.csv: %q", rows)
	}
}

// Every flow of an all-to-all is timed from when both of its ranks had
// started to its last byte at the receiver; phases without per-peer
// marks give none.
func TestFlowsOf(t *testing.T) {
	recs := []workers.PhaseRecord{
		{Job: "moe", Phase: "alltoall", Rank: 0, StartNs: 100, PeerRecvNs: []int64{0, 180, 150}},
		{Job: "moe", Phase: "alltoall", Rank: 1, StartNs: 120, PeerRecvNs: []int64{170, 0, 0}},
		{Job: "moe", Phase: "alltoall", Rank: 2, StartNs: 110, PeerRecvNs: []int64{190, 160, 0}},
		{Job: "gpt", Phase: "allreduce", Rank: 0, StartNs: 100},
	}
	got := flowsOf(recs)
	want := []fidelity.Flow{
		{Job: "moe", Phase: "alltoall", Src: 1, Dst: 0, StartNs: 120, EndNs: 180},
		{Job: "moe", Phase: "alltoall", Src: 2, Dst: 0, StartNs: 110, EndNs: 150},
		{Job: "moe", Phase: "alltoall", Src: 0, Dst: 1, StartNs: 120, EndNs: 170},
		{Job: "moe", Phase: "alltoall", Src: 0, Dst: 2, StartNs: 110, EndNs: 190},
		{Job: "moe", Phase: "alltoall", Src: 1, Dst: 2, StartNs: 120, EndNs: 160},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("flows\n got %+v\nwant %+v", got, want)
	}
}
