package reproduce

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/ocsemu/ocsemu/dataplane/names"
	"github.com/ocsemu/ocsemu/emu/dlrm"
	"github.com/ocsemu/ocsemu/emu/flowmodel"
	"github.com/ocsemu/ocsemu/emu/plan"
	"github.com/ocsemu/ocsemu/emu/scenario"
	"github.com/ocsemu/ocsemu/emu/scheduler"
)

func init() { Register(Study{Paper: "004", Name: "paper004", Run: runPaper004}) }

// DLRMJob synthesises one DLRM iteration (emu/dlrm) on n servers r<i>s0,
// its all-reduce over channels rings, as a plan job.
func DLRMJob(c dlrm.Config, n, iterations int, computeNs int64, channels int) (plan.Job, error) {
	var workers []string
	for i := 0; i < n; i++ {
		workers = append(workers, names.ServerName(i, 0))
	}
	ts, err := dlrm.Tasks(c, dlrm.Options{Workers: workers, ComputeNs: computeNs, Channels: channels})
	if err != nil {
		return plan.Job{}, err
	}
	return plan.Job{Name: "dlrm", Pattern: plan.PatternDAG, Workers: workers, Iterations: iterations, Tasks: ts}, nil
}

// Paper004Fabric is Table III's network: N_S racks of one server (the
// ToR is the server's NIC switch), d_S uplinks of B each, N_OCS switches
// with one port per server each (d_OCS = N_S), server links d_S x B so
// that only the NICs' ports limit. The reconfiguration delay is 0: the
// paper's MIP charges nothing for a change of circuits within its 1 ms
// slots (the slot is its "reconfiguration latency").
func Paper004Fabric(ns, nocs, ds int, bGbps float64) *scenario.Scenario {
	s := &scenario.Scenario{Name: "paper004",
		Fabric: scenario.Fabric{Kind: scenario.KindOCS, Racks: ns, ServersPerRack: 1, UplinksPerToR: ds,
			OCS:   scenario.OCS{Switches: nocs},
			Rates: scenario.Rates{Server: scenario.Rate(float64(ds) * bGbps * 1e9), Uplink: scenario.Rate(bGbps * 1e9)}},
		Scheduler: scenario.Scheduler{Name: "topox", Slot: scenario.Duration(scheduler.TopoXSlot)},
	}
	s.ApplyDefaults()
	return s
}

// p004CoalesceNs: on the 128-server rows, flow completions within 0.1 ms
// are handled together, so that the all-to-alls (16,256 transfers) over
// static's multi-hop topology simulate in about a minute instead of
// several; each completion is late by under 0.1 ms. The 16-server rows are
// exact.
const p004CoalesceNs = 100_000

func (r p004Row) coalesce() int64 {
	if r.ns > 16 {
		return p004CoalesceNs
	}
	return 0
}

type p004Row struct {
	ns, nocs, ds, docs int
	b                  float64
	batch              int
	topoOpt, topoX     float64 // ms
	speedUp            float64 // as Table III prints it (row 10's 3.60 is not 83.417 / 23.226 rounded)
}

// Table III.
var p004Rows = []p004Row{
	{128, 4, 4, 128, 40, 128, 303.020, 150.864, 2.01},
	{128, 6, 6, 128, 40, 128, 177.487, 108.617, 1.63},
	{128, 4, 4, 128, 100, 128, 126.908, 66.093, 1.92},
	{128, 6, 6, 128, 100, 128, 75.131, 52.533, 1.43},
	{16, 4, 4, 16, 10, 256, 195.958, 32.226, 6.08},
	{16, 4, 4, 16, 25, 256, 89.299, 23.278, 3.84},
	{16, 4, 4, 16, 40, 256, 61.517, 21.236, 2.90},
	{16, 4, 4, 16, 100, 256, 27.974, 20.227, 1.38},
	{16, 4, 4, 16, 200, 256, 16.623, 16.623, 1.00},
	{16, 8, 8, 16, 10, 256, 83.417, 23.226, 3.60},
	{16, 8, 8, 16, 25, 256, 37.610, 18.796, 2.00},
	{16, 8, 8, 16, 40, 256, 24.504, 18.364, 1.33},
	{16, 8, 8, 16, 100, 256, 15.832, 15.832, 1.00},
	{16, 8, 8, 16, 200, 256, 14.667, 14.667, 1.00},
}

func (r p004Row) config() dlrm.Config {
	if r.batch == 128 {
		return dlrm.DLRM1
	}
	return dlrm.DLRM2
}

// p004Iter plans one DLRM iteration with topox and static on a row's
// network and returns both iteration times.
func p004Iter(ctx context.Context, r p004Row, computeNs int64, tm *[]Timing) (topox, static int64, err error) {
	if err := ctx.Err(); err != nil {
		return 0, 0, err
	}
	s := Paper004Fabric(r.ns, r.nocs, r.ds, r.b)
	if err := s.Validate(); err != nil {
		return 0, 0, fmt.Errorf("paper 004 fabric: %w", err)
	}
	job, err := DLRMJob(r.config(), r.ns, 1, computeNs, max(1, r.ds/2))
	if err != nil {
		return 0, 0, fmt.Errorf("paper 004 DLRM: %w", err)
	}
	where := fmt.Sprintf("N_S %d, d_S %d, B %g", r.ns, r.ds, r.b)
	for _, sched := range []string{"topox", "static"} {
		t0 := time.Now()
		var p *plan.Plan
		if sched == "topox" {
			p, err = scheduler.TopoXJobs(s, []plan.Job{job}, scheduler.TopoXSlot, r.coalesce())
		} else {
			p, err = scheduler.StaticJobs(s, []plan.Job{job}, r.coalesce())
		}
		if err != nil {
			return 0, 0, fmt.Errorf("paper 004 %s, %s: %w", where, sched, err)
		}
		planned := time.Since(t0)
		if err := plan.Check(p, s); err != nil {
			return 0, 0, fmt.Errorf("paper 004 %s, %s: the plan does not check: %w", where, sched, err)
		}
		t1 := time.Now()
		run, err := flowmodel.SimulateWith(p, s, flowmodel.Options{CoalesceNs: r.coalesce()})
		if err != nil {
			return 0, 0, fmt.Errorf("paper 004 %s, %s: %w", where, sched, err)
		}
		if tm != nil {
			*tm = append(*tm, Timing{Scheduler: sched, Case: fmt.Sprintf("%s, %d tasks", where, len(job.Tasks)), Plan: planned, Simulate: time.Since(t1)})
		}
		if sched == "topox" {
			topox = run.MakespanNs
		} else {
			static = run.MakespanNs
		}
	}
	return topox, static, nil
}

// runPaper004 reproduces Table III: one DLRM iteration per row, topox
// against static (TopoOpt), with the compute time calibrated once per
// DLRM configuration (see the notes).
func runPaper004(ctx context.Context, o Options) ([]Table, error) {
	rows := p004Rows
	if o.Quick {
		rows = []p004Row{p004Rows[4], p004Rows[13]}
	}
	// Calibration on row 14 (16 servers, the most bandwidth, where the
	// paper's two designs are equal: communication hidden): the compute
	// per iteration that makes topox take the paper's 14.667 ms.
	cal := p004Rows[13]
	zero, _, err := p004Iter(ctx, cal, 0, nil)
	if err != nil {
		return nil, err
	}
	path := dlrm.CriticalShare()
	c2 := max(int64(0), int64((cal.topoX*1e6-float64(zero))/path))
	// One secant step more: slots make the time a step function of compute.
	if got, _, err := p004Iter(ctx, cal, c2, nil); err != nil {
		return nil, err
	} else if got > zero {
		c2 = max(0, int64(float64(c2)*(cal.topoX*1e6-float64(zero))/float64(got-zero)))
	}
	// 128 servers, DLRM 1: scaled by the dense FLOPs per server.
	ratio := float64(dlrm.DLRM1.MLPParams()*int64(dlrm.DLRM1.BatchPerGPU)) / float64(dlrm.DLRM2.MLPParams()*int64(dlrm.DLRM2.BatchPerGPU))
	c1 := int64(float64(c2) * ratio)
	t := Table{
		Title: "Paper 004 (TOPO-X): DLRM iteration time (ms), topox against static (TopoOpt), Table III",
		Header: []string{"No.", "N_S", "N_OCS = d_S", "B (Gbit/s)", "DLRM", "static (ms)", "topox (ms)", "speed-up",
			"paper TopoOpt", "paper Topo-X", "paper speed-up", "topox / paper Topo-X", "static / paper TopoOpt"},
	}
	var tm []Timing
	var sum, paperSum, bestSum float64
	var txRatio, stRatio []float64
	txBySize := map[int][]float64{} // topox / paper Topo-X, by N_S
	staticRow14 := math.NaN()       // the calibration row's static time (ms)
	for _, r := range rows {
		i := 0
		for k, pr := range p004Rows {
			if pr == r {
				i = k + 1
			}
		}
		compute := c2
		if r.batch == 128 {
			compute = c1
		}
		tx, st, err := p004Iter(ctx, r, compute, &tm)
		if err != nil {
			return nil, err
		}
		if r == p004Rows[13] {
			staticRow14 = float64(st) / 1e6
		}
		sp, psp := float64(st)/float64(tx), r.speedUp
		sum += sp
		bestSum += max(sp, 1)
		paperSum += psp
		cfg := 2
		if r.batch == 128 {
			cfg = 1
		}
		xr, sr := float64(tx)/1e6/r.topoX, float64(st)/1e6/r.topoOpt
		txRatio, stRatio = append(txRatio, xr), append(stRatio, sr)
		txBySize[r.ns] = append(txBySize[r.ns], xr)
		t.Rows = append(t.Rows, []string{fmt.Sprint(i), fmt.Sprint(r.ns), fmt.Sprint(r.ds), fmt.Sprint(r.b), fmt.Sprint(cfg),
			fmt.Sprintf("%.3f", float64(st)/1e6), fmt.Sprintf("%.3f", float64(tx)/1e6), fmt.Sprintf("%.2f", sp),
			fmt.Sprintf("%.3f", r.topoOpt), fmt.Sprintf("%.3f", r.topoX), fmt.Sprintf("%.2f", psp),
			fmt.Sprintf("%.2f", xr), fmt.Sprintf("%.2f", sr)})
	}
	n := float64(len(rows))
	t.Rows = append(t.Rows, []string{"mean", "", "", "", "", "", "", fmt.Sprintf("%.2f", sum/n), "", "", fmt.Sprintf("%.2f", paperSum/n),
		fmt.Sprintf("%.2f", mean(txRatio)), fmt.Sprintf("%.2f", mean(stRatio))})
	// What one server sends per iteration in our graph (row 5's), against
	// what the paper's times imply its links carried.
	row5 := p004Rows[4]
	j5, err := DLRMJob(row5.config(), row5.ns, 1, c2, row5.ds/2)
	if err != nil {
		return nil, err
	}
	var sent float64
	for _, tk := range j5.Tasks {
		if tk.Kind == plan.TaskTransfer && tk.Src == j5.Workers[0] {
			sent += float64(tk.Bytes)
		}
	}
	port := float64(row5.ds) * row5.b * 1e9 / 8 // bytes/s out of one server
	tail := p004Rows[13].topoOpt                // row 14: both designs compute-bound
	t.Notes = []string{
		"topox is a list-scheduling heuristic (critical path first, 1 ms slots, d_S and d_OCS port limits), not the paper's Gurobi MIP; static is TopoOpt's idea as emu's static scheduler has it: one topology from the traffic heatmap (a base ring, then circuits greedily to the most bytes per circuit), held for the iteration, everything else multi-hop, shared max-min fairly by the flow model.",
		"The DLRM task graph is synthesised from Table II by emu/dlrm (the paper's FlexFlow graphs are not published): embedding tables model-parallel (table t on server t mod N_S), MLPs data-parallel; forward and backward all-to-alls of tables x 4 GPUs x batch x vector length x 4 B per server pair; a ring all-reduce of the MLP gradients (13-Dense-Dense-EmbDim bottom, interactions-Feature-Feature-1 top: " +
			fmt.Sprintf("%.1f M and %.1f M parameters) over d_S/2 rings of strides 1, 3, 5 (TopoOpt's TotientPerms lays rings over a server's ports this way), each in both directions, so the all-reduce keeps every port busy in both designs. An earlier synthesis sent the all-reduce as one transfer per server to the next: one port's rate whatever d_S, which capped both designs (row 10's topox took 52 ms against the paper's 23) and was a mistake of ours.", float64(dlrm.DLRM1.MLPParams())/1e6, float64(dlrm.DLRM2.MLPParams())/1e6),
		fmt.Sprintf("Compute is calibrated, not derived: one server's compute per iteration is split over the compute tasks (emb 20%%, bottom 10%%, top 15%%, top backward 30%%, bottom backward 15%%, updates 5%% + 5%%); for DLRM 2 it is %.2f ms, set so that topox takes row 14's 14.667 ms (where the paper's designs tie: communication hidden); for DLRM 1 it is scaled by the dense FLOPs per server (x%.2f): %.2f ms. The calibration is on topox, so its row 14 matches by construction and its ratios to the paper's Topo-X lean towards 1; static takes %.3f ms on that row, where the paper's TopoOpt ties with Topo-X.", float64(c2)/1e6, ratio, float64(c1)/1e6, staticRow14),
		fmt.Sprintf("Where the gap comes from: the baseline. Our topox tracks the paper's TOPO-X (topox / paper Topo-X: mean %.2f; %s), but our static is far faster than the paper's TopoOpt (static / paper TopoOpt: mean %.2f, from %.2f to %.2f, fastest against it where bandwidth is scarce). The paper's TopoOpt times imply far more traffic than its TOPO-X times: at row 5, TopoOpt's %.1f ms beyond row 14's compute-bound %.3f ms at %g x %g Gbit/s per server is %.0f MB out of each server, TOPO-X's %.1f ms is %.0f MB, and one server of our graph sends %.0f MB. So the paper's TopoOpt moved some 10x the bytes of the same iteration, or its simulation (FlexFlow's, with TopoOpt's forwarding) got a tenth of the links' rate; the paper does not say which, and a fluid max-min baseline cannot reproduce it.",
			mean(txRatio), rangeBySize(txBySize), mean(stRatio), slices.Min(stRatio), slices.Max(stRatio),
			row5.topoOpt-tail, tail, float64(row5.ds), row5.b, (row5.topoOpt-tail)/1e3*port/1e6, row5.topoX-tail, (row5.topoX-tail)/1e3*port/1e6, sent/1e6),
		fmt.Sprintf("Where topox loses (high bandwidth): transfers start on 1 ms slot boundaries (the MIP's eq. 4) and need a direct circuit (eq. 6), so each all-to-all of N_S - 1 peers per server takes at least ceil((N_S - 1) / d_S) slots however fast the links are (4 at 16 servers and d_S 4; 32 and 22 at 128 servers and d_S 4 and 6, which is why rows 3 and 4 gain so little from B = 100), while static starts every transfer at once over multi-hop paths. The MIP has the same constraints (with directed connections counted against d_S at both ends, eq. 8, it needs twice the slots), so the paper's exact ties at rows 9, 13 and 14 (TOPO-X = TopoOpt to the microsecond) read as TOPO-X keeping TopoOpt's schedule where its own is not better; counting topox as static wherever static is faster gives a mean speed-up of %.2f.", bestSum/n),
		"Rows 1-4 (128 servers): the flow model rounds flow completions up to the next 0.1 ms (flowmodel.Options.CoalesceNs) for both designs, so that static's thousands of concurrent multi-hop transfers simulate in minutes rather than many; each completion is late by under 0.1 ms. Rows 5-14 are exact.",
		"Network: N_S racks of one server, d_S uplinks of B per server, N_OCS = d_S switches with one port per server (d_OCS = N_S), full-duplex circuits, no dark period on a change (as in the MIP).",
	}
	if o.Quick {
		t.Notes = append(t.Notes, "Quick run: rows 5 and 14 only.")
	}
	t.Timings = tm
	return []Table{t}, nil
}

func mean(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	var s float64
	for _, x := range xs {
		s += x
	}
	return s / float64(len(xs))
}

// rangeBySize says the range of a ratio over the rows of each server
// count: "16 servers: 0.91 to 1.12; 128 servers (DLRM 1, compute
// extrapolated): ...".
func rangeBySize(by map[int][]float64) string {
	var parts []string
	for _, ns := range []int{16, 128} {
		xs := by[ns]
		if len(xs) == 0 {
			continue
		}
		what := fmt.Sprintf("%d servers", ns)
		if ns == 128 {
			what += " (DLRM 1, whose compute is extrapolated from DLRM 2's calibration)"
		}
		parts = append(parts, fmt.Sprintf("%s: %.2f to %.2f", what, slices.Min(xs), slices.Max(xs)))
	}
	return strings.Join(parts, "; ")
}
