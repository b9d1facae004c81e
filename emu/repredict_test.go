package main

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/ocsemu/ocsemu/emu/fidelity"
	"github.com/ocsemu/ocsemu/emu/plan"
	"github.com/ocsemu/ocsemu/emu/report"
	"github.com/ocsemu/ocsemu/emu/scenario"
	"github.com/ocsemu/ocsemu/workers"
	"github.com/ocsemu/ocsemu/workers/record"
)

// recordedInputs puts the ranks' per-peer ends on the data file's axis:
// format 1 left them on CLOCK_MONOTONIC (time zero 1,000,000 here),
// format 2 has them there already. Rank 0 started at 100, rank 1 at 120;
// 1 -> 0 ended at 500 and 0 -> 1 at 600 on the axis.
func TestRecordedInputsPeerEnds(t *testing.T) {
	const zero = 1_000_000
	for _, tc := range []struct {
		format string
		shift  int64
	}{{report.DataFormatV1, zero}, {report.DataFormat, 0}} {
		t.Run(tc.format, func(t *testing.T) {
			var phases []json.RawMessage
			for _, p := range []workers.PhaseRecord{
				{Job: "m", Phase: "alltoall", Rank: 0, StartNs: 100, PeerRecvNs: []int64{0, 500 + tc.shift}},
				{Job: "m", Phase: "alltoall", Rank: 1, StartNs: 120, PeerRecvNs: []int64{600 + tc.shift, 0}},
			} {
				raw, err := json.Marshal(p)
				if err != nil {
					t.Fatal(err)
				}
				phases = append(phases, raw)
			}
			r := &report.Run{Dir: "run", Plan: &plan.Plan{}, Scenario: &scenario.Scenario{},
				Data: &report.RunData{Format: tc.format, TimeZeroNs: zero, Measurement: &record.Run{}}}
			r.Data.Series.RankPhases = phases
			in, err := recordedInputs(r)
			if err != nil {
				t.Fatal(err)
			}
			want := []fidelity.Flow{
				{Job: "m", Phase: "alltoall", Src: 1, Dst: 0, StartNs: 120, EndNs: 500},
				{Job: "m", Phase: "alltoall", Src: 0, Dst: 1, StartNs: 120, EndNs: 600},
			}
			if len(in.Flows) != len(want) {
				t.Fatalf("flows %+v, want %+v", in.Flows, want)
			}
			for i := range want {
				if in.Flows[i] != want[i] {
					t.Errorf("flow %d: %+v, want %+v", i, in.Flows[i], want[i])
				}
			}
		})
	}
}

// repredict refuses a run it cannot predict again, naming what is
// missing.
func TestRepredictRefuses(t *testing.T) {
	for _, tc := range []struct {
		name string
		r    *report.Run
		want string
	}{
		{"no data file", &report.Run{Dir: "old"}, "no run-data.json.gz"},
		{"no measurement", &report.Run{Dir: "d", Data: &report.RunData{}}, "holds no measurement"},
		{"no plan", &report.Run{Dir: "d", Data: &report.RunData{Measurement: &record.Run{}}}, "no plan or scenario"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := repredict(tc.r)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("repredict: %v, want an error with %q", err, tc.want)
			}
		})
	}
}
