package orchestrate

import (
	"context"
	"fmt"
	"testing"

	"github.com/ocsemu/ocsemu/dataplane/inc"
	"github.com/ocsemu/ocsemu/emu/flowmodel"
	"github.com/ocsemu/ocsemu/emu/plan"
	"github.com/ocsemu/ocsemu/emu/scenario"
)

// fakeAggs admits up to capacity jobs per ToR, like the engine.
type fakeAggs struct {
	capacity int
	held     map[string]map[uint16]inc.JobConfig
}

func (f *fakeAggs) Admit(_ context.Context, tor string, cfg inc.JobConfig) error {
	if f.held[tor] == nil {
		f.held[tor] = map[uint16]inc.JobConfig{}
	}
	if len(f.held[tor]) >= f.capacity {
		return fmt.Errorf("job %d: %w", cfg.ID, inc.ErrNoRoom)
	}
	f.held[tor][cfg.ID] = cfg
	return nil
}

func (f *fakeAggs) Release(_ context.Context, tor string, id uint16) error {
	delete(f.held[tor], id)
	return nil
}

func TestAdmitINC(t *testing.T) {
	p := &plan.Plan{Jobs: []plan.Job{
		{Name: "a", Pattern: "ps", Workers: []string{"r0s0", "r1s0", "r2s0"}, INC: true, Aggregator: "tor1"},
		{Name: "b", Pattern: "ps", Workers: []string{"r2s1", "r3s0"}, INC: true, Aggregator: "tor3"},
		{Name: "c", Pattern: "ring", Workers: []string{"r0s1", "r1s1"}},
	}}
	jobs, err := WorkerJobs(p)
	if err != nil {
		t.Fatal(err)
	}
	ag := &fakeAggs{capacity: 1, held: map[string]map[uint16]inc.JobConfig{}}
	adm, release, err := admitINC(context.Background(), ag, p, jobs, 32)
	if err != nil {
		t.Fatal(err)
	}
	if len(adm) != 2 || !adm[0].Admitted || adm[1].Admitted {
		t.Fatalf("admissions %+v: want a admitted, b refused (tor2 is full)", adm)
	}
	// a: hierarchical, rooted at tor1 (index 1 of tor0..tor2); the others point at it.
	root := ag.held["tor1"][1]
	if root.Parent.IsValid() || root.Index != 1 || root.ToRs != 3 {
		t.Errorf("root config %+v", root)
	}
	if c := ag.held["tor0"][1]; c.Parent.String() != "10.0.1.254:48864" || c.Index != 0 {
		t.Errorf("tor0 config %+v", c)
	}
	if jobs[0].INC == nil || jobs[0].INC.Window != 32 || jobs[0].PS != "" {
		t.Errorf("admitted job %+v", jobs[0])
	}
	// b falls back to a CPU PS on its first worker, and says why; tor3,
	// admitted before tor2 refused, is released.
	if jobs[1].INC != nil || jobs[1].PS != "r2s1" || adm[1].FallbackPS != "r2s1" || adm[1].Reason == "" {
		t.Errorf("refused job %+v, admission %+v", jobs[1], adm[1])
	}
	if len(ag.held["tor3"]) != 0 {
		t.Errorf("tor3 still holds %v after b fell back", ag.held["tor3"])
	}
	if jobs[2].INC != nil {
		t.Errorf("ring job got INC")
	}
	release()
	for tor, h := range ag.held {
		if len(h) != 0 {
			t.Errorf("%s still holds %v after release", tor, h)
		}
	}
	// Without aggregators every INC job falls back.
	jobs, _ = WorkerJobs(p)
	adm, _, err = admitINC(context.Background(), nil, p, jobs, 32)
	if err != nil || adm[0].Admitted || jobs[0].PS != "r0s0" {
		t.Errorf("no aggregators: %v, %+v", err, adm)
	}
}

// engines are real aggregator engines, one per ToR.
type engines map[string]*inc.Engine

func (e engines) Admit(_ context.Context, tor string, cfg inc.JobConfig) error {
	return e[tor].Admit(cfg)
}
func (e engines) Release(_ context.Context, tor string, id uint16) error {
	e[tor].Release(id)
	return nil
}

// TestAdmissionAgreesWithCapacity: two INC jobs on one ToR of capacity 1,
// one after the other in the plan's stages, are both admitted, as
// plan.Check allows; overlapping, the second falls back.
func TestAdmissionAgreesWithCapacity(t *testing.T) {
	stage := func(jobs ...string) plan.Stage {
		var st plan.Stage
		for _, j := range jobs {
			st.Activities = append(st.Activities, plan.Activity{Job: j, Phase: "push"})
		}
		return st
	}
	for _, c := range []struct {
		name   string
		stages []plan.Stage
		second bool
	}{
		{"one after the other", []plan.Stage{stage("a"), stage("a"), stage("b")}, true},
		{"overlapping", []plan.Stage{stage("a"), stage("a", "b"), stage("b")}, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := &plan.Plan{Stages: c.stages, Jobs: []plan.Job{
				{Name: "a", Pattern: "ps", Workers: []string{"r0s0", "r0s1"}, INC: true, Aggregator: "tor0"},
				{Name: "b", Pattern: "ps", Workers: []string{"r0s2", "r0s3"}, INC: true, Aggregator: "tor0"},
			}}
			e, err := inc.NewEngine(inc.Config{Slots: 64, Capacity: 1})
			if err != nil {
				t.Fatal(err)
			}
			jobs, _ := WorkerJobs(p)
			adm, release, err := admitINC(context.Background(), engines{"tor0": e}, p, jobs, 16)
			if err != nil {
				t.Fatal(err)
			}
			defer release()
			if !adm[0].Admitted || adm[1].Admitted != c.second {
				t.Fatalf("admissions %+v, want the second admitted: %v", adm, c.second)
			}
		})
	}
}

// The TCP-aware model caps an INC tree by the window the workers keep in
// flight; it must be the emulation's.
func TestFlowModelKnowsTheINCWindow(t *testing.T) {
	if flowmodel.INCWindowSlots != DefaultINCWindow {
		t.Errorf("flowmodel.INCWindowSlots = %d, the emulation's window is %d slots", flowmodel.INCWindowSlots, DefaultINCWindow)
	}
	if flowmodel.INCSlotBytes != inc.MaxElems*4 {
		t.Errorf("flowmodel.INCSlotBytes = %d, a slot carries %d bytes", flowmodel.INCSlotBytes, inc.MaxElems*4)
	}
	if flowmodel.INCToRSlots != inc.DefaultSlots || scenario.MaxINCCapacity != inc.DefaultSlots {
		t.Errorf("flowmodel.INCToRSlots = %d and scenario.MaxINCCapacity = %d, a ToR aggregator has %d slots", flowmodel.INCToRSlots, scenario.MaxINCCapacity, inc.DefaultSlots)
	}
	// The window `emu run` gives the workers on a fabric: the ToR's
	// partition per job, at most the default window.
	for _, c := range []int{1, 2, 4, 5, 8, 100, scenario.MaxINCCapacity} {
		want := min(DefaultINCWindow, inc.Config{Slots: inc.DefaultSlots, Capacity: c}.Partition())
		if got := flowmodel.INCWindow(scenario.Fabric{INC: scenario.INC{Capacity: c}}); got != want {
			t.Errorf("capacity %d: flowmodel.INCWindow = %d slots, the ToR's partition gives %d", c, got, want)
		}
	}
}
