package orchestrate

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ocsemu/ocsemu/dataplane/monoclock"
	"github.com/ocsemu/ocsemu/emu/plan"
	"github.com/ocsemu/ocsemu/emu/scenario"
	"github.com/ocsemu/ocsemu/emu/scheduler"
	"github.com/ocsemu/ocsemu/ocsfabric/ocs"
	"github.com/ocsemu/ocsemu/workers"
)

// fakeT0 is the fake workers' time zero: an hour ahead, so that every
// barrier stage's planned instant is far enough ahead to be armed for it.
var fakeT0 = monoclock.Now() + int64(time.Hour)

// fakeOCS records what orchestration asks of the OCS process; an apply's
// event takes effect at effective (0: its instant).
type fakeOCS struct {
	applied   []ocs.ConfigRequest
	schedules []ocs.Schedule
	stopped   int
	err       error
	effective int64
}

func (f *fakeOCS) Apply(_ context.Context, r ocs.ConfigRequest) (ocs.Event, error) {
	f.applied = append(f.applied, r)
	eff := r.AtNs
	if f.effective > 0 {
		eff = f.effective
	}
	return ocs.Event{Scheduled: r.AtNs, Effective: eff}, f.err
}

func (f *fakeOCS) Schedule(_ context.Context, s ocs.Schedule) error {
	f.schedules = append(f.schedules, s)
	return f.err
}

func (f *fakeOCS) StopSchedule(context.Context) error { f.stopped++; return nil }

// fakeLaunch plays the workers: every phase of every rank runs exactly
// as long as the prediction says, scaled by slow, from time zero t0. It
// calls the circuit hooks the way the coordinator does.
func fakeLaunch(t *testing.T, pred func() map[plan.Key][2]int64, slow float64, got **workers.Options) Launcher {
	return func(ctx context.Context, o *workers.Options) (*workers.Outcome, error) {
		*got = o
		t0 := fakeT0
		if o.OnStart != nil {
			if err := o.OnStart(t0); err != nil {
				return nil, err
			}
		}
		if o.Schedule != nil && o.OnStage != nil {
			for k := 1; k < len(o.Schedule.Stages); k++ {
				if _, err := o.OnStage(ctx, k, t0+o.Schedule.Stages[k].StartNs); err != nil {
					return nil, err
				}
			}
		}
		out := &workers.Outcome{T0: t0}
		p := pred()
		for _, j := range o.Jobs {
			for _, k := range j.Phases() {
				se := p[k]
				for r := range j.Workers {
					out.Phases = append(out.Phases, workers.PhaseRecord{Type: "phase", Job: j.Name, Iteration: k.Iteration,
						Phase: k.Phase, Rank: r, StartNs: t0 + se[0], EndNs: t0 + se[0] + int64(float64(se[1]-se[0])*slow), Verified: true})
				}
			}
		}
		return out, nil
	}
}

func setup(t *testing.T, yaml string) (*scenario.Scenario, *plan.Plan) {
	t.Helper()
	s, err := scenario.Parse([]byte(yaml), "test")
	if err != nil {
		t.Fatal(err)
	}
	p, err := scheduler.Plan(s)
	if err != nil {
		t.Fatal(err)
	}
	if err := plan.Check(p, s); err != nil {
		t.Fatal(err)
	}
	return s, p
}

const ocsYAML = `name: orc
fabric: {kind: ocs, racks: 4, servers_per_rack: 1, uplinks_per_tor: 3, ocs: {reconfig_delay: 1ms}, rates: {server: 1Gbit, uplink: 1Gbit}}
jobs:
  - {name: ring, pattern: ring, workers: [r0s0, r1s0, r2s0, r3s0], bytes: 4MiB, compute: 20ms, iterations: 1}
  - {name: a2a, pattern: alltoall, workers: [r0s0, r2s0], bytes: 8MiB, compute: 10ms, iterations: 2, arrival: 30ms}
scheduler: {name: fcfs, slot: 40ms}
`

const epsYAML = `name: orceps
fabric: {kind: eps, racks: 2, servers_per_rack: 2, rates: {server: 1Gbit}}
jobs:
  - {name: ps, pattern: ps, workers: [r0s0, r0s1, r1s0], ps: r1s1, bytes: 4MiB, compute: 5ms, iterations: 2}
`

// predicted returns the model's phase times (from time zero) of a plan.
func predicted(t *testing.T, s *scenario.Scenario, p *plan.Plan) func() map[plan.Key][2]int64 {
	return func() map[plan.Key][2]int64 {
		r, err := Run(context.Background(), &Options{Scenario: s, Plan: p, Launch: func(context.Context, *workers.Options) (*workers.Outcome, error) {
			return nil, errors.New("predict only")
		}, OCS: &fakeOCS{}})
		if r == nil || r.Prediction == nil {
			t.Fatalf("no prediction: %v", err)
		}
		m := map[plan.Key][2]int64{}
		for _, ph := range r.Prediction.Phases {
			m[plan.Key{Job: ph.Job, Iteration: ph.Iteration, Phase: ph.Phase}] = [2]int64{ph.StartNs, ph.EndNs}
		}
		return m
	}
}

func TestRunComparesMeasuredWithPredicted(t *testing.T) {
	for _, tc := range []struct {
		name string
		yaml string
		slow float64
	}{
		{"eps exact", epsYAML, 1},
		{"eps 10% slow", epsYAML, 1.1},
		{"ocs exact", ocsYAML, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, p := setup(t, tc.yaml)
			var wo *workers.Options
			fo := &fakeOCS{}
			o := &Options{Scenario: s, Plan: p, Dir: t.TempDir(), Launch: fakeLaunch(t, predicted(t, s, p), tc.slow, &wo)}
			if s.Fabric.HasOCS() {
				o.OCS = fo
			}
			r, err := Run(context.Background(), o)
			if err != nil {
				t.Fatal(err)
			}
			if len(r.Compare) == 0 {
				t.Fatal("no comparison rows")
			}
			for _, c := range r.Compare {
				if c.PredictedNs == 0 {
					continue
				}
				if want := tc.slow - 1; c.Phase != "push" && c.Phase != "pull" && (c.RelErr < want-0.01 || c.RelErr > want+0.01) {
					t.Errorf("%s/%d/%s: error %+.3f, want %+.3f", c.Job, c.Iteration, c.Phase, c.RelErr, want)
				}
			}
			// The calibrated model predicts every phase too, communication
			// longer than the ideal model by the framing, compute the same.
			if r.Calibrated == nil || len(r.CompareCalibrated) != len(r.Compare) {
				t.Fatalf("calibrated prediction %v, %d rows against %d", r.Calibrated != nil, len(r.CompareCalibrated), len(r.Compare))
			}
			for i, c := range r.CompareCalibrated {
				id := r.Compare[i]
				if c.Job != id.Job || c.Iteration != id.Iteration || c.Phase != id.Phase || c.MeasuredNs != id.MeasuredNs {
					t.Errorf("row %d: calibrated %+v against ideal %+v", i, c, id)
				}
				if c.Phase != "compute" && c.PredictedNs <= id.PredictedNs {
					t.Errorf("%s/%d/%s: calibrated %d ns not longer than ideal %d ns", c.Job, c.Iteration, c.Phase, c.PredictedNs, id.PredictedNs)
				}
			}
			if len(wo.Jobs) != len(p.Jobs) || wo.Schedule == nil || len(wo.Schedule.Stages) != len(p.Stages) {
				t.Errorf("workers got %d jobs and %v, want %d jobs and %d stages", len(wo.Jobs), wo.Schedule, len(p.Jobs), len(p.Stages))
			}
			if !strings.HasSuffix(wo.Dir, "/records") {
				t.Errorf("records dir %q", wo.Dir)
			}
		})
	}
}

// On an OCS fabric, stage 0's circuits are in place before time zero
// (no dark period), and later stages follow the mode: applied at the
// coordinator's instant (barrier) or loaded as one kernel-timed schedule
// against time zero (clock).
func TestRunDrivesTheOCS(t *testing.T) {
	s, p := setup(t, ocsYAML)
	if len(p.Stages) < 2 {
		t.Fatalf("want a plan with several stages, got %d", len(p.Stages))
	}
	delay := int64(3e6)
	for _, mode := range []string{plan.ModeClock, plan.ModeBarrier} {
		t.Run(mode, func(t *testing.T) {
			q := *p
			q.Mode = mode
			q.ReconfigDelayNs = &delay
			fo := &fakeOCS{}
			var wo *workers.Options
			_, err := Run(context.Background(), &Options{Scenario: s, Plan: &q, OCS: fo, Launch: fakeLaunch(t, predicted(t, s, &q), 1, &wo)})
			if err != nil {
				t.Fatal(err)
			}
			if len(fo.applied) == 0 || fo.applied[0].Delay == nil || *fo.applied[0].Delay != 0 || fo.applied[0].AtNs != 0 {
				t.Fatalf("stage 0: want an immediate apply without dark period, got %+v", fo.applied)
			}
			if fo.stopped != 1 {
				t.Errorf("StopSchedule called %d times, want 1", fo.stopped)
			}
			switch mode {
			case plan.ModeClock:
				if len(fo.schedules) != 1 || len(fo.applied) != 1 {
					t.Fatalf("clock: want one schedule and only stage 0 applied, got %d schedules, %d applies", len(fo.schedules), len(fo.applied))
				}
				sc := fo.schedules[0]
				if len(sc.Slots) != len(q.Stages)-1 || sc.StartNs != fakeT0+q.Stages[1].StartNs || sc.Delay == nil || int64(*sc.Delay) != delay {
					t.Errorf("clock schedule: %d slots starting %d with delay %v; want %d slots at %d with %d ns",
						len(sc.Slots), sc.StartNs, sc.Delay, len(q.Stages)-1, fakeT0+q.Stages[1].StartNs, delay)
				}
				for k, sl := range sc.Slots[:len(sc.Slots)-1] {
					if want := q.Stages[k+2].StartNs - q.Stages[k+1].StartNs; int64(sl.Duration) != want {
						t.Errorf("slot %d lasts %d ns, want %d", k, int64(sl.Duration), want)
					}
				}
			case plan.ModeBarrier:
				// One apply for stage 0 and for every stage whose map
				// differs from the one before; an unchanged map is not sent.
				changed := []int{0}
				for k := 1; k < len(q.Stages); k++ {
					if !slices.Equal(q.Stages[k].Circuits, q.Stages[k-1].Circuits) {
						changed = append(changed, k)
					}
				}
				if len(changed) < 2 {
					t.Fatalf("the plan's circuits never change: the case tests nothing")
				}
				if len(fo.schedules) != 0 || len(fo.applied) != len(changed) {
					t.Fatalf("barrier: want %d applies (stages %v) and no schedule, got %d applies, %d schedules", len(changed), changed, len(fo.applied), len(fo.schedules))
				}
				for i, k := range changed[1:] {
					a := fo.applied[i+1]
					if a.AtNs != fakeT0+q.Stages[k].StartNs || a.Delay == nil || int64(*a.Delay) != delay || len(a.Circuits) != len(q.Stages[k].Circuits) {
						t.Errorf("stage %d apply %+v", k, a)
					}
				}
			}
		})
	}
}

func TestRunFailures(t *testing.T) {
	s, p := setup(t, ocsYAML)
	t.Run("stage 0 circuits fail", func(t *testing.T) {
		fo := &fakeOCS{err: errors.New("port dead")}
		_, err := Run(context.Background(), &Options{Scenario: s, Plan: p, OCS: fo, Launch: func(context.Context, *workers.Options) (*workers.Outcome, error) {
			t.Fatal("launched")
			return nil, nil
		}})
		if err == nil || !strings.Contains(err.Error(), "stage 0 circuits: port dead") {
			t.Errorf("err = %v", err)
		}
	})
	t.Run("workers fail", func(t *testing.T) {
		fo := &fakeOCS{}
		r, err := Run(context.Background(), &Options{Scenario: s, Plan: p, OCS: fo, Launch: func(context.Context, *workers.Options) (*workers.Outcome, error) {
			return &workers.Outcome{}, errors.New("rank 2 went away")
		}})
		if err == nil || r == nil || r.Prediction == nil || fo.stopped != 1 {
			t.Errorf("err %v, result %+v, stopped %d: want the error, the prediction kept and the schedule stopped", err, r, fo.stopped)
		}
	})
}

func TestWorkerJobsAndSchedule(t *testing.T) {
	start := int64(7)
	p := &plan.Plan{Mode: plan.ModeClock, Jobs: []plan.Job{{Name: "j", Pattern: "ring", Workers: []string{"r0s0", "r1s0"}, Bytes: 8, ComputeNs: 3, Iterations: 2, Ring: []string{"r1s0", "r0s0"}, CongestionControl: "reno", ArrivalNs: 5}},
		Stages: []plan.Stage{{StartNs: 0, Activities: []plan.Activity{{Job: "j", Phase: "compute"}}}, {StartNs: 9, Activities: []plan.Activity{{Job: "j", Phase: "allreduce", StartNs: &start}}}}}
	js, err := WorkerJobs(p)
	if err != nil {
		t.Fatal(err)
	}
	j := js[0]
	if j.Name != "j" || j.Pattern != "ring" || j.Bytes != 8 || j.ComputeNs != 3 || j.Iterations != 2 || j.Ring[0] != "r1s0" || j.CongestionControl != "reno" || j.ArrivalNs != 5 {
		t.Errorf("WorkerJobs = %+v", j)
	}
	sc := Schedule(p)
	if sc.Mode != plan.ModeClock || len(sc.Stages) != 2 || sc.Stages[1].StartNs != 9 || sc.Stages[1].Activities[0].Phase != "allreduce" || *sc.Stages[1].Activities[0].StartNs != 7 {
		t.Errorf("Schedule = %+v", sc)
	}
}

// A barrier stage whose circuits change is armed for its instant when
// that lies TimedStageLead or more ahead; a nearer one is switched as soon
// as the OCS has it and starts when its circuits took effect; an
// unchanged map asks nothing of the OCS and starts at once.
func TestBarrierStageInstants(t *testing.T) {
	_, p := setup(t, ocsYAML)
	q := *p
	q.Mode = plan.ModeBarrier
	k := 1
	for k < len(q.Stages) && slices.Equal(q.Stages[k].Circuits, q.Stages[k-1].Circuits) {
		k++
	}
	if k == len(q.Stages) {
		t.Fatal("the plan's circuits never change: the case tests nothing")
	}
	now := monoclock.Now()
	for _, tc := range []struct {
		name      string
		at, eff   int64
		wantAt    int64 // the request's AtNs
		wantStart int64
	}{
		{"far ahead: armed for its instant", now + int64(time.Hour), 0, now + int64(time.Hour), now + int64(time.Hour)},
		{"near: as soon as possible, started when in", now + int64(time.Millisecond), now + int64(3*time.Millisecond), 0, now + int64(3*time.Millisecond)},
		{"past: as soon as possible", now - int64(time.Second), now + int64(time.Millisecond), 0, now + int64(time.Millisecond)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fo := &fakeOCS{effective: tc.eff}
			_, onStage := circuitHooks(context.Background(), fo, &q)
			start, err := onStage(context.Background(), k, tc.at)
			if err != nil || len(fo.applied) != 1 || fo.applied[0].AtNs != tc.wantAt || start != tc.wantStart {
				t.Errorf("stage %d at %d: start %d, err %v, requests %+v; want one request at %d and the start %d", k, tc.at, start, err, fo.applied, tc.wantAt, tc.wantStart)
			}
		})
	}
	q.Stages = slices.Clone(q.Stages)
	q.Stages[k].Circuits = q.Stages[k-1].Circuits
	fo := &fakeOCS{}
	_, onStage := circuitHooks(context.Background(), fo, &q)
	if start, err := onStage(context.Background(), k, now); err != nil || start != now || len(fo.applied) != 0 {
		t.Errorf("unchanged map: start %d, err %v, %d requests; want the stage at once and none", start, err, len(fo.applied))
	}
}
