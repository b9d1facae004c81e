package labs

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"sort"
	"strconv"
	"strings"
)

// Lab 03: the student predicts a ring all-reduce and a parameter-server
// push/pull from first principles, measures both with `emu collective`,
// and says which is faster and why. The checker measures both itself on a
// private copy.

const (
	lab03Bytes = 16 << 20 // S, per worker
	lab03Rate  = 1e9      // R, server links
)

// lab03Ring and lab03PS are the ideal times, in ms.
var (
	lab03Ring = 2 * 3.0 / 4 * lab03Bytes * 8 / lab03Rate * 1e3
	lab03PS   = 2 * 3.0 * lab03Bytes * 8 / lab03Rate * 1e3
)

// collectiveTimes runs `emu collective` on the private copy and returns,
// per iteration, the summed time of the given phases in ms.
func collectiveTimes(ctx context.Context, e *Env, phases []string, args ...string) ([]float64, error) {
	lab, err := e.Live(ctx)
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "emu-lab03-") // emu collective writes its records under ./results
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	out, err := e.Emu(ctx, dir, append([]string{"collective", "--lab", lab, "--verify=false"}, args...)...)
	if err != nil {
		return nil, fmt.Errorf("emu collective %s: %v\n%s", strings.Join(args, " "), err, tail(out, 4))
	}
	// job iter phase ranks size time-ms algbw busbw verified
	per := map[int]float64{}
	for _, l := range strings.Split(out, "\n") {
		f := strings.Fields(l)
		if len(f) < 6 {
			continue
		}
		iter, err1 := strconv.Atoi(f[1])
		ms, err2 := strconv.ParseFloat(f[5], 64)
		if err1 != nil || err2 != nil {
			continue
		}
		for _, p := range phases {
			if f[2] == p {
				per[iter] += ms
			}
		}
	}
	if len(per) == 0 {
		return nil, fmt.Errorf("emu collective printed no %s rows:\n%s", strings.Join(phases, "/"), tail(out, 6))
	}
	var ts []float64
	for _, v := range per {
		ts = append(ts, v)
	}
	return ts, nil
}

func median(xs []float64) float64 {
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// within checks a prediction against the formula, to 2%: rounding
// passes, 16 MB for 16 MiB (4.6% less) does not.
func within(e *Env, key string, want float64, how string) (string, error) {
	n, err := e.Number(key)
	if err != nil {
		return "", err
	}
	if math.Abs(n-want) > 0.02*want {
		return "", fmt.Errorf("you predicted %v ms; %s gives %.1f ms (S is 16 MiB, 16 x 2^20 bytes)", n, how, want)
	}
	return fmt.Sprintf("%v ms (the formula: %.1f ms)", n, want), nil
}

// lab03Slack is how far a student's measurement may be from the
// checker's own: both run real TCP on a machine that may be busy (a load
// of 8 on 2 cores moved the ring's median from 220 to 450 ms).
// 2.5: a sum of three iterations (3x) is refused, a loaded machine's
// doubling is not.
const lab03Slack = 2.5

// measuredLike checks a student's measurement: no faster than the links
// allow (ideal, ms), and within lab03Slack of what the checker measures now.
func measuredLike(ctx context.Context, e *Env, key string, ideal float64, phases []string, args ...string) (string, error) {
	n, err := e.Number(key)
	if err != nil {
		return "", err
	}
	rows := fmt.Sprintf("the %s row of one iteration", phases[0])
	if len(phases) > 1 {
		rows = fmt.Sprintf("the %s rows of one iteration, added", strings.Join(phases, " and "))
	}
	if n < 0.95*ideal {
		return "", fmt.Errorf("you measured %v ms, faster than the links allow (%.1f ms at 1 Gbit/s): read the time column of %s", n, ideal, rows)
	}
	ts, err := collectiveTimes(ctx, e, phases, args...)
	if err != nil {
		return "", err
	}
	m := median(ts)
	if n < m/lab03Slack || n > m*lab03Slack {
		return "", fmt.Errorf("you measured %v ms; the checker measures %.0f ms now (within %gx expected): read the time column of %s, not the job's completion time or a sum of iterations, or measure again on a quieter machine", n, m, lab03Slack, rows)
	}
	return fmt.Sprintf("you %v ms, the checker %.0f ms now", n, m), nil
}

func init() {
	registry["03-collectives"] = []Check{
		{Name: "answers.yaml parses", Run: func(ctx context.Context, e *Env) (string, error) {
			m, err := e.Answers()
			if err != nil {
				return "", err
			}
			return fmt.Sprintf("%d answers", len(m)), nil
		}},
		{Name: "prediction: one ring all-reduce, 4 ranks, 16 MiB", FailsOnStart: true, Run: func(ctx context.Context, e *Env) (string, error) {
			return within(e, "ring_predicted_ms", lab03Ring, "2(n-1)/n x S / R")
		}},
		{Name: "prediction: one PS push + pull, 3 workers, 16 MiB", FailsOnStart: true, Run: func(ctx context.Context, e *Env) (string, error) {
			return within(e, "ps_predicted_ms", lab03PS, "2 x 3 x S / R through the PS's link")
		}},
		{Name: "live: your ring measurement matches the checker's", FailsOnStart: true, Root: true, Run: func(ctx context.Context, e *Env) (string, error) {
			return measuredLike(ctx, e, "ring_measured_ms", lab03Ring, []string{"allreduce"}, "ring", "--ranks", "r0s0,r1s0,r2s0,r3s0", "--bytes", "16MiB", "--iterations", "3")
		}},
		{Name: "live: your PS measurement matches the checker's", FailsOnStart: true, Root: true, Run: func(ctx context.Context, e *Env) (string, error) {
			return measuredLike(ctx, e, "ps_measured_ms", lab03PS, []string{"push", "pull"}, "ps", "--ranks", "r0s0,r1s0,r2s0", "--ps", "r3s0", "--bytes", "16MiB", "--iterations", "2")
		}},
		{Name: "answer: which is faster", FailsOnStart: true, Run: func(ctx context.Context, e *Env) (string, error) {
			c, err := e.Choice("faster", "ring", "ps")
			if err != nil {
				return "", err
			}
			if c != "ring" {
				return "", errors.New("compare your own two measurements: the PS moves every gradient through one link twice")
			}
			return "ring: every link carries 2(n-1)/n x S, none carries n x S", nil
		}},
		{Name: "answer: what limits the parameter server", FailsOnStart: true, Run: func(ctx context.Context, e *Env) (string, error) {
			c, err := e.Choice("bottleneck", "ps-link", "worker-links", "core")
			if err != nil {
				return "", err
			}
			if c != "ps-link" {
				return "", fmt.Errorf("%s carries only S each way per worker; which link carries 3 x S? (`emu ui` on a lab with circuits, or `ss -ti` on r3s0)", c)
			}
			return "incast: three workers into the PS's one link", nil
		}},
	}
}
