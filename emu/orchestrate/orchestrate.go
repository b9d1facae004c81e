// Package orchestrate runs a plan on a deployed lab: it installs each
// stage's circuits through the lab's OCS process (kernel-timed, against
// the same time zero the workers use), starts the workers gated by the
// plan, and puts the flow model's prediction beside what was measured.
package orchestrate

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/ocsemu/ocsemu/dataplane/fabric"
	"github.com/ocsemu/ocsemu/dataplane/monoclock"
	"github.com/ocsemu/ocsemu/dataplane/units"
	"github.com/ocsemu/ocsemu/emu/flowmodel"
	"github.com/ocsemu/ocsemu/emu/plan"
	"github.com/ocsemu/ocsemu/emu/scenario"
	"github.com/ocsemu/ocsemu/ocsfabric/ocs"
	"github.com/ocsemu/ocsemu/workers"
	"github.com/ocsemu/ocsemu/workers/job"
	"github.com/ocsemu/ocsemu/workers/record"
)

// OCS is what orchestration asks of a lab's OCS process: apply one
// configuration (now or at a kernel-timed instant), or load a schedule of
// slots. *ocs.Client is the real one; tests use a fake.
type OCS interface {
	Apply(ctx context.Context, req ocs.ConfigRequest) (ocs.Event, error)
	Schedule(ctx context.Context, s ocs.Schedule) error
	StopSchedule(ctx context.Context) error
}

var _ OCS = (*ocs.Client)(nil)

// Launcher runs the workers of a plan to the end (workers.Launch; tests
// use a fake).
type Launcher func(ctx context.Context, o *workers.Options) (*workers.Outcome, error)

// Options for Run.
type Options struct {
	Lab      *fabric.Lab
	Scenario *scenario.Scenario
	Plan     *plan.Plan
	Dir      string // results/<lab>
	Exe      string // emu binary for the rank processes ("" = in-process)
	Verify   bool
	// Realtime runs the ranks under SCHED_RR (workers.Options.Realtime).
	Realtime bool
	// TCPInfoEvery is how often each rank samples its connections'
	// TCP_INFO (workers.Options.TCPInfoEvery; 0: its default).
	TCPInfoEvery time.Duration
	Log          *slog.Logger
	Progress     func(format string, args ...any)
	// OCS drives the circuits; nil: the lab's OCS process, if the fabric
	// has one.
	OCS OCS
	// Launch runs the workers; nil: workers.Launch.
	Launch Launcher

	// Prediction is the flow model's prediction of Plan, if the caller
	// has made it already (before deploying); nil: Run makes it.
	Prediction *record.Run
	// Calibrated is the calibrated flow model's prediction
	// (flowmodel.Calibrated); nil: Run makes it.
	Calibrated *record.Run

	// Aggregators admit the plan's INC jobs; nil: every INC job falls
	// back to a CPU parameter server. INCWindow is the slots each INC
	// worker keeps in flight (at most a job's partition of the slot
	// pool); zero: the fabric's, flowmodel.INCWindow.
	Aggregators Aggregators
	INCWindow   int
	// INCCongestion turns on the INC workers' congestion control.
	INCCongestion bool
}

// Result is the prediction, the measurement and their comparison.
type Result struct {
	Prediction  *record.Run         `json:"prediction"`
	Measurement *record.Run         `json:"measurement"`
	Stats       []workers.PhaseStat `json:"phases"`
	Jobs        []workers.JobStat   `json:"jobs"`
	Compare     []Comparison        `json:"comparison"`
	// Calibrated is the calibrated model's prediction and
	// CompareCalibrated the measurement against it.
	Calibrated        *record.Run  `json:"calibrated,omitempty"`
	CompareCalibrated []Comparison `json:"comparison_calibrated,omitempty"`
	// TCPAware is the TCP-aware model's prediction (slow start on new and
	// long-idle connections) and CompareTCPAware the measurement against it.
	TCPAware        *record.Run  `json:"tcp_aware,omitempty"`
	CompareTCPAware []Comparison `json:"comparison_tcp_aware,omitempty"`
	// CalibratedLockstep is the calibrated model with every job's ranks
	// in lockstep, as the ideal model runs them (the attribution's framing
	// and ranks parts), and CompareCalibratedLockstep the measurement
	// against it.
	CalibratedLockstep        *record.Run  `json:"calibrated_lockstep,omitempty"`
	CompareCalibratedLockstep []Comparison `json:"comparison_calibrated_lockstep,omitempty"`
	// Replay is the TCP-aware model again, every phase released when the
	// emulation started it (clock plans; flowmodel.Replay), and
	// CompareReplay the measurement against it.
	Replay        *record.Run  `json:"replay,omitempty"`
	CompareReplay []Comparison `json:"comparison_replay,omitempty"`
	// INC is what the ToR aggregators decided for each INC job.
	INC     []Admission      `json:"inc,omitempty"`
	Outcome *workers.Outcome `json:"-"`
}

// Comparison is one phase, predicted against measured.
type Comparison = record.Comparison

// Run executes the plan and compares.
func Run(ctx context.Context, o *Options) (*Result, error) {
	s, p := o.Scenario, o.Plan
	progress := o.Progress
	if progress == nil {
		progress = func(string, ...any) {}
	}
	jobs, err := WorkerJobs(p)
	if err != nil {
		return nil, err
	}
	pred := o.Prediction
	if pred == nil {
		if pred, err = flowmodel.Simulate(p, s); err != nil {
			return nil, fmt.Errorf("predict: %w", err)
		}
	}
	progress("prediction: makespan %.3fs, %d reconfigurations", float64(pred.MakespanNs)/1e9, pred.Reconfigurations)
	cal := o.Calibrated
	if cal == nil {
		if cal, err = flowmodel.SimulateModel(p, s, flowmodel.Calibrated); err != nil {
			return nil, fmt.Errorf("predict (calibrated model): %w", err)
		}
	}
	tcp, err := flowmodel.SimulateModel(p, s, flowmodel.TCPAware)
	if err != nil {
		return nil, fmt.Errorf("predict (TCP-aware model): %w", err)
	}
	window := o.INCWindow
	if window == 0 {
		window = flowmodel.INCWindow(s.Fabric) // the window the model caps the trees with
	}
	adm, release, err := admitINC(ctx, o.Aggregators, p, jobs, window)
	if err != nil {
		return nil, err
	}
	defer release()
	for i := range jobs {
		if jobs[i].INC != nil {
			jobs[i].INC.Congestion = o.INCCongestion
		}
	}
	for _, a := range adm {
		if a.Admitted {
			progress("job %s: in-network aggregation at %v, rooted at %s", a.Job, a.ToRs, a.Aggregator)
		} else {
			progress("job %s: no in-network aggregation (%s): CPU parameter server on %s; the prediction assumed INC", a.Job, a.Reason, a.FallbackPS)
		}
	}

	cl := o.OCS
	if cl == nil && s.Fabric.HasOCS() && len(p.Stages) > 0 {
		cl = ocs.NewClient(fabric.LabFile(s.Name, "ocs.sock"))
	}
	if cl != nil && len(p.Stages) > 0 {
		zero := units.Duration(0)
		// Stage 0's circuits are in place before time zero, as the model assumes.
		if _, err := cl.Apply(ctx, ocs.ConfigRequest{Circuits: p.Stages[0].Circuits, Delay: &zero}); err != nil {
			return nil, fmt.Errorf("stage 0 circuits: %w", err)
		}
	}
	wo := &workers.Options{Lab: o.Lab, Jobs: jobs, Schedule: Schedule(p), Dir: o.Dir + "/records", Exe: o.Exe, Verify: o.Verify, Realtime: o.Realtime,
		TCPInfoEvery: o.TCPInfoEvery, Log: o.Log, Progress: progress}
	if cl != nil {
		wo.OnStart, wo.OnStage = circuitHooks(ctx, cl, p)
	}
	// The stage reporter stops with the workers, however they end.
	repCtx, stopReport := context.WithCancel(ctx)
	defer stopReport()
	every := 500 * time.Millisecond // a rotor plan may switch every millisecond
	if o.Log != nil && o.Log.Enabled(ctx, slog.LevelDebug) {
		every = 0 // emu -v: every stage
	}
	reportStages(repCtx, wo, p, s.Fabric.HasOCS(), every, progress)
	launch := o.Launch
	if launch == nil {
		launch = workers.Launch
	}
	t0 := time.Now()
	out, err := launch(ctx, wo)
	stopReport()
	if cl != nil {
		_ = cl.StopSchedule(context.WithoutCancel(ctx))
	}
	if err != nil {
		return &Result{Prediction: pred, Outcome: out, INC: adm}, err
	}
	progress("workers done in %.2fs", time.Since(t0).Seconds())
	stats, jstats, meas := workers.Summarize(jobs, out)
	if p.Mode == plan.ModeClock {
		meas.Stages = nil
		for k, st := range p.Stages {
			meas.Stages = append(meas.Stages, record.Stage{Index: k, StartNs: st.StartNs, EndNs: st.StartNs + st.DurationNs})
		}
	}
	meas.Scenario, meas.Scheduler, meas.Mode = p.Scenario, p.Scheduler, p.Mode
	// meas.Reconfigurations and PortsReconfigured are the OCS's: the
	// caller counts them from its events (emu's recorder); 0 without one.
	res := &Result{Prediction: pred, Measurement: meas, Stats: stats, Jobs: jstats, Compare: Compare(pred, meas), INC: adm, Outcome: out,
		Calibrated: cal, CompareCalibrated: Compare(cal, meas), TCPAware: tcp, CompareTCPAware: Compare(tcp, meas)}
	// Two more predictions for the attribution; the run stands without them.
	also := func(what string, run *record.Run, err error) (*record.Run, []Comparison) {
		if err != nil && o.Log != nil {
			o.Log.Warn("no "+what, "err", err)
		}
		if err != nil || run == nil {
			return nil, nil
		}
		return run, Compare(run, meas)
	}
	lock, err := flowmodel.SimulateRanks(p, s, flowmodel.Calibrated, false)
	res.CalibratedLockstep, res.CompareCalibratedLockstep = also("lockstep calibrated model", lock, err)
	replay, err := flowmodel.Replay(p, s, flowmodel.TCPAware, MeasuredStarts(meas))
	res.Replay, res.CompareReplay = also("replay of the TCP-aware model at the measured starts", replay, err)
	return res, nil
}

// reportStages makes the run tell the user which stage it is in: barrier
// stages as the coordinator starts them, clock stages at their instants.
func reportStages(ctx context.Context, wo *workers.Options, p *plan.Plan, circuits bool, every time.Duration, progress func(string, ...any)) {
	if len(p.Stages) == 0 {
		return
	}
	rep := newStageReporter(p, circuits, every, progress)
	onStart, onStage := wo.OnStart, wo.OnStage
	var t0 int64
	wo.OnStart = func(zero int64) error {
		t0 = zero
		if p.Mode == plan.ModeClock {
			go rep.follow(ctx, zero)
		} else {
			rep.stage(0, zero+p.Stages[0].StartNs, zero, time.Now())
		}
		if onStart != nil {
			return onStart(zero)
		}
		return nil
	}
	if p.Mode == plan.ModeBarrier {
		wo.OnStage = func(ctx context.Context, k int, at int64) (int64, error) {
			if onStage != nil {
				var err error
				if at, err = onStage(ctx, k, at); err != nil {
					return 0, err
				}
			}
			rep.stage(k, at, t0, time.Now())
			return at, nil
		}
	}
}

// TimedStageLead: a barrier stage whose circuits change is armed for its
// instant when that lies at least this far ahead (the request must reach
// the OCS before it, over HTTP on a busy machine); a nearer one, as a
// stage that starts when the one before has ended, is switched as soon
// as the OCS has it, at an exact kernel-timed instant about 0.2 ms later,
// and the stage starts then. Until 27 Nov the coordinator set every
// barrier stage after the first 10 ms ahead, changed or not, which added
// 10 ms to every stage.
const TimedStageLead = 5 * time.Millisecond

// circuitHooks returns how the circuits of stages 1.. follow the workers'
// time: in clock mode the whole timeline is loaded as one kernel-timed
// schedule against time zero; in barrier mode each stage is applied when
// the coordinator starts it.
func circuitHooks(ctx context.Context, cl OCS, p *plan.Plan) (onStart func(int64) error, onStage func(context.Context, int, int64) (int64, error)) {
	if len(p.Stages) < 2 {
		return nil, nil
	}
	var delay *units.Duration
	if p.ReconfigDelayNs != nil {
		d := units.Duration(*p.ReconfigDelayNs)
		delay = &d
	}
	switch p.Mode {
	case plan.ModeClock:
		onStart = func(t0 int64) error {
			var sched ocs.Schedule
			for k := 1; k < len(p.Stages); k++ {
				d := p.Stages[k].DurationNs
				if k+1 < len(p.Stages) {
					d = p.Stages[k+1].StartNs - p.Stages[k].StartNs
				}
				sched.Slots = append(sched.Slots, ocs.Slot{Circuits: p.Stages[k].Circuits, Duration: units.Duration(d)})
			}
			sched.Cycles, sched.Delay, sched.StartNs = 1, delay, t0+p.Stages[1].StartNs
			return cl.Schedule(ctx, sched)
		}
	case plan.ModeBarrier:
		onStage = func(ctx context.Context, k int, at int64) (int64, error) {
			if k > 0 && slices.Equal(p.Stages[k].Circuits, p.Stages[k-1].Circuits) {
				// The same map: nothing to change, and no timed request
				// that a busy machine could deliver too late.
				return at, nil
			}
			req := ocs.ConfigRequest{Circuits: p.Stages[k].Circuits, Delay: delay}
			if at-monoclock.Now() >= int64(TimedStageLead) {
				req.AtNs = at
			}
			ev, err := cl.Apply(ctx, req)
			if err != nil && req.AtNs != 0 && monoclock.Now() >= at {
				// The lead was used up before the OCS had the request (a
				// loaded host): apply it as soon as possible.
				req.AtNs = 0
				ev, err = cl.Apply(ctx, req)
			}
			if err != nil {
				return 0, err
			}
			return max(at, ev.Effective), nil
		}
	}
	return onStart, onStage
}

// MeasuredStarts is when each measured phase started (ns from time
// zero), what flowmodel.Replay replays the plan at.
func MeasuredStarts(meas *record.Run) map[plan.Key]int64 {
	starts := make(map[plan.Key]int64, len(meas.Phases))
	for _, ph := range meas.Phases {
		starts[plan.Key{Job: ph.Job, Iteration: ph.Iteration, Phase: ph.Phase}] = ph.StartNs
	}
	return starts
}

// Compare pairs every measured phase with its prediction: both times and
// the measurement's error against the prediction.
func Compare(pred, meas *record.Run) []Comparison {
	key := func(p record.Phase) job.Key { return job.Key{Job: p.Job, Iteration: p.Iteration, Phase: p.Phase} }
	pm := map[job.Key]record.Phase{}
	for _, ph := range pred.Phases {
		pm[key(ph)] = ph
	}
	var out []Comparison
	for _, m := range meas.Phases {
		p, ok := pm[key(m)]
		if !ok {
			continue
		}
		md := m.DurationNs
		if md == 0 {
			md = m.EndNs - m.StartNs
		}
		pd := p.DurationNs
		if pd == 0 {
			pd = p.EndNs - p.StartNs
		}
		c := Comparison{Job: m.Job, Iteration: m.Iteration, Phase: m.Phase,
			PredictedNs: pd, MeasuredNs: md, PredEndNs: p.EndNs, MeasEndNs: m.EndNs}
		if c.PredictedNs > 0 {
			c.RelErr = float64(c.MeasuredNs-c.PredictedNs) / float64(c.PredictedNs)
		}
		out = append(out, c)
	}
	// By predicted end, and where two end together (an INC pull, which
	// the model gives no time, ends with its push) by measured end.
	slices.SortFunc(out, func(a, b Comparison) int {
		return cmp.Or(strings.Compare(a.Job, b.Job), cmp.Compare(a.Iteration, b.Iteration), cmp.Compare(a.PredEndNs, b.PredEndNs),
			cmp.Compare(a.MeasEndNs, b.MeasEndNs), strings.Compare(a.Phase, b.Phase))
	})
	return out
}
