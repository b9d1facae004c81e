package labs

import (
	"bytes"
	"context"
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strconv"

	"github.com/ocsemu/ocsemu/dataplane/safefile"
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
	return studentFile(e, "fair.yaml", scenario.Parse)
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

// labRun is a run of the lab the student made: its directory, relative
// to their folder, and each job's measured first push (ms).
type labRun struct {
	dir  string
	push map[string]float64
}

// latestRun is the student's latest run of the lab's scenario, in
// results/<lab>/ of their folder (<lab> the scenario's name, or the name
// they gave it with --lab-name on a shared machine), whose switch queue is
// queue: its saved scenario.yaml says which, its comparison.csv what was
// measured.
func latestRun(e *Env, queue string) (labRun, error) {
	return once(e, "run-"+queue, func() (labRun, error) {
		type cand struct{ lab, dir string }
		var runs []cand
		labDirs, err := os.ReadDir(filepath.Join(e.Work, "results"))
		for _, l := range labDirs {
			if !l.IsDir() {
				continue
			}
			entries, _ := os.ReadDir(filepath.Join(e.Work, "results", l.Name()))
			for _, d := range entries {
				if d.IsDir() { // not the "latest" link
					runs = append(runs, cand{l.Name(), d.Name()})
				}
			}
		}
		// Newest first: run directories are named by their start time.
		sort.SliceStable(runs, func(i, j int) bool { return runs[i].dir > runs[j].dir })
		for _, r := range runs {
			rel := filepath.Join("results", r.lab, r.dir)
			run := filepath.Join(e.Work, rel)
			data, err := safefile.ReadNoLink(filepath.Join(run, "scenario.yaml"), scenario.MaxFileBytes)
			if err != nil {
				continue
			}
			s, err := scenario.Parse(data, filepath.Join(rel, "scenario.yaml"))
			if err != nil || s.Fabric.SwitchQueue != queue || !sameJobs(s, e.Scenario) {
				continue
			}
			push, err := measuredPushes(filepath.Join(run, "comparison.csv"))
			if err != nil || len(push) == 0 {
				continue
			}
			return labRun{dir: rel, push: push}, nil
		}
		why := ""
		if err != nil {
			why = " (there is no results folder)"
		}
		return labRun{}, fmt.Errorf("no run of this lab's scenario with switch_queue %s in results/%s: run it in this folder (steps 2 and 4), then answer from its table", queue, why)
	})
}

// sameJobs says whether a run's scenario has the lab's jobs (by name): a
// run of this lab, under whatever lab name it was deployed.
func sameJobs(a, b *scenario.Scenario) bool {
	if len(a.Jobs) != len(b.Jobs) {
		return false
	}
	for i := range a.Jobs {
		if a.Jobs[i].Name != b.Jobs[i].Name {
			return false
		}
	}
	return true
}

// measuredPushes reads every job's measured first push from a run's
// comparison.csv.
func measuredPushes(path string) (map[string]float64, error) {
	data, err := safefile.ReadNoLink(path, MaxStudentFileBytes)
	if err != nil {
		return nil, err
	}
	rows, err := csv.NewReader(bytes.NewReader(data)).ReadAll()
	if err != nil || len(rows) == 0 {
		return nil, fmt.Errorf("%s: %v", path, err)
	}
	col := map[string]int{}
	for i, h := range rows[0] {
		col[h] = i
	}
	for _, h := range []string{"job", "iteration", "phase", "measured_ms"} {
		if _, ok := col[h]; !ok {
			return nil, fmt.Errorf("%s: no column %s", path, h)
		}
	}
	push := map[string]float64{}
	for _, r := range rows[1:] {
		if len(r) != len(rows[0]) || r[col["iteration"]] != "0" || r[col["phase"]] != "push" {
			continue
		}
		if ms, err := strconv.ParseFloat(r[col["measured_ms"]], 64); err == nil {
			push[r[col["job"]]] = ms
		}
	}
	return push, nil
}

// answeredRun checks the answers named by keys (job a's, then job b's
// push) against the latest run with switch queue queue, and returns it.
func answeredRun(e *Env, queue, twoHop, oneHop string) (labRun, float64, float64, error) {
	two, err := e.Number(twoHop)
	if err != nil {
		return labRun{}, 0, 0, err
	}
	one, err := e.Number(oneHop)
	if err != nil {
		return labRun{}, 0, 0, err
	}
	run, err := latestRun(e, queue)
	if err != nil {
		return labRun{}, 0, 0, err
	}
	for _, c := range []struct {
		key, job string
		v        float64
	}{{twoHop, "a", two}, {oneHop, "b", one}} {
		if m, ok := run.push[c.job]; !ok || !near(c.v, m, 0.005) {
			return labRun{}, 0, 0, fmt.Errorf("%s is %v, but your latest run with switch_queue %s (%s) measured %.2f ms for `%s 0 push`: answer from that run's table, the measured ms column", c.key, c.v, queue, run.dir, m, c.job)
		}
	}
	return run, two, one, nil
}

// sameScenario reports how fair.yaml differs from the lab's scenario
// beyond its switch queue ("" if it does not): compared as JSON, so that
// comments, layout, defaults written out and empty lists do not count.
func sameScenario(fair, lab *scenario.Scenario) string {
	if fair.Name != lab.Name {
		return fmt.Sprintf("its name is %s: keep name: %s, the scenario plan.json is for", fair.Name, lab.Name)
	}
	f := fair.Fabric
	f.SwitchQueue = lab.Fabric.SwitchQueue
	a, _ := json.Marshal(f)
	b, _ := json.Marshal(lab.Fabric)
	if string(a) != string(b) {
		return "its fabric differs from scenario.yaml's in more than switch_queue: copy scenario.yaml and change that line only"
	}
	a, _ = json.Marshal(fair.Jobs)
	b, _ = json.Marshal(lab.Jobs)
	if string(a) != string(b) {
		return "its jobs differ from scenario.yaml's: copy scenario.yaml and change switch_queue only"
	}
	return ""
}

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
			if why := sameScenario(s, e.Scenario); why != "" {
				return "", errors.New(why)
			}
			return "switch_queue: fair, fabric and jobs as scenario.yaml", nil
		}},
		{Name: "answer: with FIFO switch ports the 1-hop flow ends well before the 2-hop one", FailsOnStart: true, Run: func(ctx context.Context, e *Env) (string, error) {
			run, two, one, err := answeredRun(e, topo.QueueFIFO, "fifo_two_hop_ms", "fifo_one_hop_ms")
			if err != nil {
				return "", err
			}
			maxmin, err := pushMs(e, e.Scenario, flowmodel.Calibrated, "a")
			if err != nil {
				return "", err
			}
			switch {
			case !near(two, maxmin, 0.15):
				return "", fmt.Errorf("a's push took %v ms in %s; it should end near %.0f ms (once b and c are done it has the circuits to itself): was the machine busy? run scenario.yaml again", two, run.dir, maxmin)
			case one > 0.85*two:
				return "", fmt.Errorf("in %s b's push (%v ms) did not end well before a's (%v ms): TCP's sharing varies from run to run, run scenario.yaml again", run.dir, one, two)
			}
			return fmt.Sprintf("b %v ms, a %v ms: %.0f%% (%s)", one, two, 100*one/two, run.dir), nil
		}},
		{Name: "answer: the model that predicted the FIFO run", FailsOnStart: true, Run: func(ctx context.Context, e *Env) (string, error) {
			m, err := e.Choice("fifo_model", string(flowmodel.Ideal), string(flowmodel.Calibrated), string(flowmodel.TCPAware))
			if err != nil {
				return "", err
			}
			run, _, one, err := answeredRun(e, topo.QueueFIFO, "fifo_two_hop_ms", "fifo_one_hop_ms")
			if err != nil {
				return "", err
			}
			chosen, err := pushMs(e, e.Scenario, flowmodel.Model(m), "b")
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
			if math.Abs(one-tcp) >= math.Abs(one-maxmin) {
				return "", fmt.Errorf("in %s b's push took %v ms, no closer to the TCP-aware model's %.0f than to max-min's %.0f: TCP's sharing varies from run to run, run scenario.yaml again", run.dir, one, tcp, maxmin)
			}
			if m != string(flowmodel.TCPAware) {
				return "", fmt.Errorf("%s says b's push takes %.0f ms; you measured %v: which model gives a flow a share by its RTT?", m, chosen, one)
			}
			return fmt.Sprintf("tcp-aware: %.0f ms for b's push, measured %v (max-min %.0f)", tcp, one, maxmin), nil
		}},
		{Name: "answer: with fair switch ports the three flows share max-min", FailsOnStart: true, Run: func(ctx context.Context, e *Env) (string, error) {
			run, two, one, err := answeredRun(e, topo.QueueFair, "fair_two_hop_ms", "fair_one_hop_ms")
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
				return "", fmt.Errorf("in %s b's push took %v ms and a's %v: fair queues give them equal shares; was the machine busy? run fair.yaml again", run.dir, one, two)
			case !near(one, maxmin, 0.1) || !near(two, maxmin, 0.1):
				return "", fmt.Errorf("the calibrated (max-min) model says %.0f ms for each push; %s measured %v and %v: run fair.yaml again", maxmin, run.dir, one, two)
			}
			return fmt.Sprintf("a %v ms, b %v ms; max-min says %.0f (%s)", two, one, maxmin, run.dir), nil
		}},
	}
}
