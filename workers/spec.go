package workers

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"path/filepath"
	"strings"

	"github.com/ocsemu/ocsemu/dataplane/limits"
	"github.com/ocsemu/ocsemu/dataplane/names"
	"github.com/ocsemu/ocsemu/dataplane/safefile"
	"github.com/ocsemu/ocsemu/workers/job"
	"github.com/ocsemu/ocsemu/workers/taskgraph"
)

// Validate checks a rank spec before anything is allocated or connected,
// with the same bounds as the scenario and plan checks, so that a wrong or
// hostile spec file is refused with the field, the value and the allowed
// range instead of crashing the rank (a huge iteration count once made it
// run out of memory building its gates).
func (s *Spec) Validate() error {
	var errs []error
	bad := func(field, format string, a ...any) {
		errs = append(errs, fmt.Errorf("%s: "+format, append([]any{field}, a...)...))
	}
	j := &s.Job
	if err := names.ValidJob(j.Name); err != nil {
		bad("job.name", "%v", err)
	}
	dag := j.Pattern == job.PatternDAG
	if job.Phases(j.Pattern) == nil && !dag {
		bad("job.pattern", "%q is not a pattern (ps, ring, alltoall, hd, dag)", j.Pattern)
	}
	n := len(j.Workers)
	if n < 1 || n > MaxRanks {
		bad("job.workers", "%d ranks, want 1 to %d", n, MaxRanks)
	}
	if err := job.CheckWorkers(j.Pattern, n); err != nil && n >= 1 {
		bad("job.workers", "%v", err)
	}
	switch {
	case dag:
		if j.Bytes != 0 || j.ComputeNs != 0 {
			bad("job.bytes", "a task-graph job's bytes and compute are its tasks'; leave them 0")
		}
		if len(j.Tasks) < 1 || len(j.Tasks) > MaxTasks {
			bad("job.tasks", "%d tasks, want 1 to %d", len(j.Tasks), MaxTasks)
		} else if j.Iterations*len(j.Tasks) > MaxTaskPhases {
			bad("job.tasks", "%d iterations x %d tasks is more than %d phases", j.Iterations, len(j.Tasks), MaxTaskPhases)
		} else if _, err := taskgraph.New(j.Tasks, j.Workers); err != nil {
			bad("job.tasks", "%v", err)
		}
	case len(j.Tasks) > 0:
		bad("job.tasks", "only a task-graph job (pattern dag) has tasks")
	default:
		if err := CheckBytes(j.Bytes, n); err != nil && n >= 1 {
			bad("job.bytes", "%v", err)
		}
	}
	if j.Iterations < 1 || j.Iterations > limits.MaxIterations {
		bad("job.iterations", "%d, want 1 to %d", j.Iterations, limits.MaxIterations)
	}
	if j.ComputeNs < 0 {
		bad("job.compute_ns", "%d, must not be negative", j.ComputeNs)
	}
	if j.Steps && job.AllReduceSteps(j.Pattern, n) == 0 {
		bad("job.steps", "only hd and ring all-reduces of 2 or more ranks run step by step, not %s", j.Pattern)
	}
	if len(j.Ring) > 0 && !job.SameMembers(j.Ring, j.Workers) {
		bad("job.ring", "must list every worker exactly once")
	}
	ps := j.UsesPS()
	if j.INC != nil && j.Pattern != job.PatternPS {
		bad("job.inc", "in-network aggregation serves the ps pattern, not %s", j.Pattern)
	}
	if j.INC != nil && (j.INC.Window < 1 || j.INC.Window > 1<<15) {
		bad("job.inc.window", "%d slots, want 1 to %d", j.INC.Window, 1<<15)
	}
	if len(j.INCIterations) > 0 && (j.INC == nil || len(j.INCIterations) != j.Iterations) {
		bad("job.inc_iterations", "%d decisions: want one per iteration (%d) of a job with inc", len(j.INCIterations), j.Iterations)
	}
	if ps && j.PS == "" {
		bad("job.ps", "the ps pattern needs a parameter server")
	}
	switch {
	case s.Rank == PSRank && !ps:
		bad("rank", "%d (the parameter server) in a %s job", s.Rank, j.Pattern)
	case s.Rank != PSRank && n >= 1 && (s.Rank < 0 || s.Rank >= n):
		bad("rank", "%d, want 0 to %d (or %d for the parameter server)", s.Rank, n-1, PSRank)
	}
	servers := append([]string{}, j.Workers...)
	if ps {
		servers = append(servers, j.PS)
	}
	for _, w := range servers {
		if a, err := netip.ParseAddr(s.Addrs[w]); err != nil || !a.Is4() {
			bad("addrs", "server %q has no IPv4 address (%q)", w, s.Addrs[w])
			break
		}
	}
	if len(s.Ports) != len(servers) {
		bad("ports", "%d ports for %d rank processes", len(s.Ports), len(servers))
	} else {
		for i, p := range s.Ports {
			if p < 1 || p > 65535 {
				bad(fmt.Sprintf("ports[%d]", i), "%d, want 1 to 65535", p)
				break
			}
		}
	}
	switch s.Mode {
	case "":
	case job.ModeClock, job.ModeBarrier:
		// Iterations are checked above: only then is counting phases cheap.
		if j.Iterations >= 1 && j.Iterations <= limits.MaxIterations {
			per := len(job.Phases(j.Pattern))
			if dag {
				per = len(j.Tasks)
			}
			if j.Steps {
				per = len(job.StepPhases(j.Pattern, len(j.Workers)))
			}
			if want := j.Iterations * per; len(s.Gates) != want {
				bad("gates", "%d gates, want one per phase (%d)", len(s.Gates), want)
			}
		}
		for i, g := range s.Gates {
			if g.Stage < 0 || g.NotBeforeNs < -1 {
				bad(fmt.Sprintf("gates[%d]", i), "stage %d, not_before_ns %d: want stage >= 0 and not_before_ns >= -1", g.Stage, g.NotBeforeNs)
				break
			}
		}
	default:
		bad("mode", "%q, want \"\", %q or %q", s.Mode, job.ModeClock, job.ModeBarrier)
	}
	if s.Timeout < 0 {
		bad("timeout", "%v, must not be negative (0: no deadline)", s.Timeout)
	}
	if s.TCPInfoEvery < 0 {
		bad("tcpinfo_every", "%v, must not be negative (0: off)", s.TCPInfoEvery)
	}
	switch {
	case s.Coordinator == "":
		bad("coordinator", "the coordinator's socket is required")
	case !filepath.IsAbs(s.Coordinator) || strings.ContainsRune(s.Coordinator, 0):
		bad("coordinator", "%q: want the absolute path of a unix socket", s.Coordinator)
	}
	switch {
	case s.Out == "":
		bad("out", "the records file is required")
	case strings.ContainsRune(s.Out, 0) || strings.HasSuffix(s.Out, "/"):
		bad("out", "%q: want a file path", s.Out)
	}
	if s.NS != "" && (strings.ContainsAny(s.NS, "/\x00") || s.NS == "." || s.NS == "..") {
		bad("netns", "%q: want a namespace name, no '/'", s.NS)
	}
	return errors.Join(errs...)
}

// MaxSpecBytes bounds a rank spec file.
const MaxSpecBytes = limits.MaxFileBytes

// ReadSpec reads and validates a rank spec file (`emu worker --spec`).
func ReadSpec(path string) (*Spec, error) {
	data, err := safefile.Read(path, MaxSpecBytes)
	if err != nil {
		return nil, err
	}
	var s Spec
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&s); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if err := s.Validate(); err != nil {
		return nil, fmt.Errorf("%s:\n%w", path, err)
	}
	return &s, nil
}

// RunSpecFile plays the rank a spec file describes: what `emu worker`
// does.
func RunSpecFile(ctx context.Context, path string, log *slog.Logger) error {
	s, err := ReadSpec(path)
	if err != nil {
		return err
	}
	return Run(ctx, s, log)
}
