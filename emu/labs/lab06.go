package labs

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"reflect"

	"github.com/ocsemu/ocsemu/dataplane/topo"
	"github.com/ocsemu/ocsemu/emu/flowmodel"
	"github.com/ocsemu/ocsemu/emu/plan"
	"github.com/ocsemu/ocsemu/emu/scenario"
)

// Lab 06: the student runs a parking lot (a 2-hop flow beside two 1-hop
// flows) with FIFO switch ports and with fair ones, and finds which of
// the flow model's modes predicts each: TCP shares a FIFO by RTT, a fair
// queue max-min.

// studentFair is the student's fair.yaml.
func studentFair(e *Env) (*scenario.Scenario, error) {
	return once(e, "fair", func() (*scenario.Scenario, error) {
		data, err := e.ReadFile("fair.yaml")
		if err != nil {
			return nil, err
		}
		return scenario.Parse(data, "fair.yaml")
	})
}

// labPlan is the lab's plan.json (the student does not edit it).
func labPlan(e *Env) (*plan.Plan, error) {
	return once(e, "plan", func() (*plan.Plan, error) {
		data, err := fs.ReadFile(e.Lab.files, "start/plan.json")
		if err != nil {
			return nil, err
		}
		return plan.Parse(data, "plan.json")
	})
}

// pushMs is the flow model's time (mode m) of job's first push on s.
func pushMs(e *Env, s *scenario.Scenario, m flowmodel.Model, job string) (float64, error) {
	p, err := labPlan(e)
	if err != nil {
		return 0, err
	}
	if err := plan.Check(p, s); err != nil {
		return 0, fmt.Errorf("plan.json on %s: %w", s.Name, err)
	}
	r, err := flowmodel.SimulateModel(p, s, m)
	if err != nil {
		return 0, fmt.Errorf("flow model: %w", err)
	}
	var d int64
	for _, ph := range r.Phases {
		if ph.Job == job && ph.Iteration == 0 && ph.Phase == "push" {
			t := ph.DurationNs
			if t <= 0 {
				t = ph.EndNs - ph.StartNs
			}
			d = max(d, t)
		}
	}
	if d == 0 {
		return 0, fmt.Errorf("the flow model has no push of job %s", job)
	}
	return float64(d) / 1e6, nil
}

// near reports whether got is within frac of want.
func near(got, want, frac float64) bool { return math.Abs(got-want) <= frac*want }

func init() {
	registry["06-queues"] = []Check{
		{Name: "fair.yaml parses as a scenario", Run: func(ctx context.Context, e *Env) (string, error) {
			s, err := studentFair(e)
			if err != nil {
				return "", err
			}
			return fmt.Sprintf("lab %s, switch_queue %s", s.Name, s.Fabric.SwitchQueue), nil
		}},
		{Name: "fair.yaml is the lab's scenario with fair switch queues, nothing else changed", FailsOnStart: true, Run: func(ctx context.Context, e *Env) (string, error) {
			s, err := studentFair(e)
			if err != nil {
				return "", errors.New("fair.yaml did not parse (see above)")
			}
			if s.Fabric.SwitchQueue != topo.QueueFair {
				return "", fmt.Errorf("fabric.switch_queue is %s: set it to %s", s.Fabric.SwitchQueue, topo.QueueFair)
			}
			f, lab := s.Fabric, e.Scenario.Fabric
			f.SwitchQueue = lab.SwitchQueue
			if !reflect.DeepEqual(f, lab) {
				return "", errors.New("its fabric differs from scenario.yaml's in more than switch_queue: copy scenario.yaml and change that line only")
			}
			if !reflect.DeepEqual(s.Jobs, e.Scenario.Jobs) {
				return "", errors.New("its jobs differ from scenario.yaml's: copy scenario.yaml and change switch_queue only")
			}
			return "switch_queue: fair, fabric and jobs as scenario.yaml", nil
		}},
		{Name: "answer: with FIFO switch ports the 1-hop flow ends well before the 2-hop one", FailsOnStart: true, Run: func(ctx context.Context, e *Env) (string, error) {
			two, err := e.Number("fifo_two_hop_ms")
			if err != nil {
				return "", err
			}
			one, err := e.Number("fifo_one_hop_ms")
			if err != nil {
				return "", err
			}
			maxmin, err := pushMs(e, e.Scenario, flowmodel.Calibrated, "a")
			if err != nil {
				return "", err
			}
			switch {
			case !near(two, maxmin, 0.15):
				return "", fmt.Errorf("a's push took %v ms in your run; it should end near %.0f ms, when it has the circuits to itself: read the measured ms of `a 0 push`", two, maxmin)
			case one > 0.85*two:
				return "", fmt.Errorf("b's push (%v ms) did not end well before a's (%v ms): run scenario.yaml (FIFO switch ports) again and read `b 0 push`", one, two)
			}
			return fmt.Sprintf("b %v ms, a %v ms: %.0f%%", one, two, 100*one/two), nil
		}},
		{Name: "answer: the model that predicted the FIFO run", FailsOnStart: true, Run: func(ctx context.Context, e *Env) (string, error) {
			m, err := e.Choice("fifo_model", string(flowmodel.Ideal), string(flowmodel.Calibrated), string(flowmodel.TCPAware))
			if err != nil {
				return "", err
			}
			one, err := e.Number("fifo_one_hop_ms")
			if err != nil {
				return "", err
			}
			tcp, err := pushMs(e, e.Scenario, flowmodel.TCPAware, "b")
			if err != nil {
				return "", err
			}
			maxmin, err := pushMs(e, e.Scenario, flowmodel.Calibrated, "b")
			if err != nil {
				return "", err
			}
			if m != string(flowmodel.TCPAware) {
				return "", fmt.Errorf("%s shares links max-min and says b's push takes %.0f ms; you measured %v: which model gives a flow a share by its RTT?", m, maxmin, one)
			}
			if !near(one, tcp, 0.15) {
				return "", fmt.Errorf("the TCP-aware model says b's push takes %.0f ms, you measured %v: run scenario.yaml again on a quiet machine", tcp, one)
			}
			return fmt.Sprintf("tcp-aware: %.0f ms for b's push, measured %v", tcp, one), nil
		}},
		{Name: "answer: with fair switch ports the three flows share max-min", FailsOnStart: true, Run: func(ctx context.Context, e *Env) (string, error) {
			two, err := e.Number("fair_two_hop_ms")
			if err != nil {
				return "", err
			}
			one, err := e.Number("fair_one_hop_ms")
			if err != nil {
				return "", err
			}
			s, err := studentFair(e)
			if err != nil {
				return "", errors.New("fair.yaml did not parse (see above)")
			}
			maxmin, err := pushMs(e, s, flowmodel.Calibrated, "b")
			if err != nil {
				return "", err
			}
			switch {
			case !near(one, two, 0.1):
				return "", fmt.Errorf("b's push took %v ms and a's %v: fair queues give them equal shares; run fair.yaml, not scenario.yaml", one, two)
			case !near(one, maxmin, 0.1) || !near(two, maxmin, 0.1):
				return "", fmt.Errorf("the calibrated (max-min) model says %.0f ms for each push; you answered %v and %v", maxmin, one, two)
			}
			return fmt.Sprintf("a %v ms, b %v ms; max-min says %.0f", two, one, maxmin), nil
		}},
	}
}
