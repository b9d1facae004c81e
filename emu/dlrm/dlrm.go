// Package dlrm synthesises one training iteration of DLRM (paper 004's
// Table II models) as a task graph of compute and transfer tasks (plan v2
// pattern dag), with the hybrid parallelism DLRM is trained with:
// embedding tables model-parallel, MLPs data-parallel. Paper 004's own
// graphs come from FlexFlow and are not published; every choice below is
// ours and is stated where it is made. The study of paper 004
// (emu/reproduce) and the scenario job kind `pattern: dag` with
// `graph: {model: dlrm}` both use it.
package dlrm

import (
	"fmt"
	"math"

	"github.com/ocsemu/ocsemu/workers/job"
)

// Config is one row of paper 004's Table II.
type Config struct {
	BatchPerGPU int
	Dense       int // dense (bottom MLP) layer width
	Feature     int // feature (top MLP) layer width
	EmbDim      int // embedding vector length (Table II: 128x10^7, 256x10^7)
	Tables      int
}

// Table II.
var (
	DLRM1 = Config{BatchPerGPU: 128, Dense: 2048, Feature: 4096, EmbDim: 128, Tables: 64}
	DLRM2 = Config{BatchPerGPU: 256, Dense: 1024, Feature: 2048, EmbDim: 256, Tables: 16}
)

// ByNumber returns Table II's configuration 1 or 2.
func ByNumber(n int) (Config, error) {
	switch n {
	case 1:
		return DLRM1, nil
	case 2:
		return DLRM2, nil
	}
	return Config{}, fmt.Errorf("DLRM configuration %d: Table II has 1 and 2", n)
}

// GPUsPerServer: "N_S servers, each equipped with four NVIDIA A100 GPUs".
const GPUsPerServer = 4

// MLPParams counts the dense parameters: a bottom MLP of 13 dense
// features -> Dense -> Dense -> EmbDim, and a top MLP over the embedding
// vector and the pairwise interactions of the T+1 vectors ->
// Feature -> Feature -> 1 (the DLRM reference layout, our choice of depth).
func (c Config) MLPParams() int64 {
	bottom := 13*c.Dense + c.Dense*c.Dense + c.Dense*c.EmbDim
	in := c.EmbDim + c.Tables*(c.Tables+1)/2
	top := in*c.Feature + c.Feature*c.Feature + c.Feature
	return int64(bottom + top)
}

// ComputeShare splits one server's compute time per iteration over the
// graph's compute tasks (our choice; the paper's FlexFlow task times are
// not published): embedding lookup 20%, bottom MLP forward 10%, top MLP
// forward 15%, top backward 30%, bottom backward 15%, embedding update
// 5%, dense update 5%.
var ComputeShare = map[string]float64{"emb": 0.20, "bot": 0.10, "top": 0.15, "topb": 0.30, "botb": 0.15, "embu": 0.05, "upd": 0.05}

// CriticalShare is the share of one server's compute on the graph's
// longest compute chain (emb, top, topb, botb, upd).
func CriticalShare() float64 {
	return ComputeShare["emb"] + ComputeShare["top"] + ComputeShare["topb"] + ComputeShare["botb"] + ComputeShare["upd"]
}

// Options shape the synthesised graph.
type Options struct {
	// Workers are the servers, one rank each: server i holds tables
	// t = i mod len(Workers).
	Workers []string
	// ComputeNs is one server's compute per iteration, split by
	// ComputeShare.
	ComputeNs int64
	// Channels is how many rings the all-reduce of the MLP gradients runs
	// over at once, each in both directions (so 2 x Channels transfers per
	// server, each a share of the bytes): ring c joins server i to
	// i + stride_c, stride_c the c-th odd number coprime with the server
	// count (1, 3, 5, ...), as TopoOpt's TotientPerms lays several rings
	// over a server's ports. Channels = d_S / 2 keeps every port busy;
	// 0 means 1.
	Channels int
	// ScaleDown divides every transfer's bytes (scaled-down scenarios:
	// rates and bytes scaled by one factor); 0 means 1. A transfer keeps
	// at least 1 byte.
	ScaleDown float64
}

// Strides returns the all-reduce rings' strides for n servers: the first
// count odd numbers below n/2 (or 1 for n <= 2) that are coprime with n,
// so that every stride makes one ring over all servers.
func Strides(n, count int) ([]int, error) {
	count = max(count, 1)
	if n <= 2 {
		if count > 1 {
			return nil, fmt.Errorf("%d servers have one ring, not %d", n, count)
		}
		return []int{1}, nil
	}
	var out []int
	for p := 1; len(out) < count && 2*p <= n; p += 2 {
		if gcd(p, n) == 1 && (2*p < n || len(out) == 0) {
			out = append(out, p)
		}
	}
	if len(out) < count {
		return nil, fmt.Errorf("%d servers have only %d distinct rings (odd strides coprime with %d), not %d", n, len(out), n, count)
	}
	return out, nil
}

func gcd(a, b int) int {
	for b != 0 {
		a, b = b, a%b
	}
	return a
}

// Tasks synthesises one DLRM iteration on the workers as a task graph, in
// a topological order. Per iteration, for servers s (table owners) and d
// (all), with n servers:
//
//	emb-s, bot-d                      lookups; bottom MLP forward
//	a2f-s-d  (after emb-s)            forward all-to-all: s's tables' vectors for d's samples,
//	                                  tables(s) x 4 GPUs x batch x EmbDim x 4 B
//	top-d    (after bot-d, a2f-*-d)   top MLP forward
//	topb-d   (after top-d)            top MLP backward
//	a2b-d-s  (after topb-d)           backward all-to-all: the vectors' gradients back
//	botb-d   (after topb-d)           bottom MLP backward
//	ar-d-c   (after botb of both)     ring all-reduce of the MLP gradients: 2 x Channels
//	                                  transfers from d (ring c/2, forward for even c, backward
//	                                  for odd), each 2(n-1)/n x 4 x MLPParams / (2 Channels) B
//	embu-s   (after a2b-*-s)          embedding update
//	upd-d    (after ar into and out of d) dense update
func Tasks(c Config, o Options) ([]job.Task, error) {
	n := len(o.Workers)
	if n < 2 {
		return nil, fmt.Errorf("DLRM needs at least 2 servers, got %d", n)
	}
	if o.ComputeNs < 0 {
		return nil, fmt.Errorf("compute %d ns must not be negative", o.ComputeNs)
	}
	scale := o.ScaleDown
	if scale == 0 {
		scale = 1
	}
	if scale < 1 || math.IsInf(scale, 0) || math.IsNaN(scale) {
		return nil, fmt.Errorf("scale_down %g: want 1 or more", scale)
	}
	strides, err := Strides(n, o.Channels)
	if err != nil {
		return nil, err
	}
	if m := maxTasks(c, n, len(strides)); m > job.MaxTasks {
		return nil, fmt.Errorf("%d servers and %d channels make up to %d tasks per iteration, more than the %d a task graph may have", n, max(o.Channels, 1), m, job.MaxTasks)
	}
	srv := func(i int) string { return o.Workers[((i%n)+n)%n] }
	size := func(b float64) int64 { return max(1, int64(math.Round(b/scale))) }
	tables := make([]int, n)
	for t := 0; t < c.Tables; t++ {
		tables[t%n]++
	}
	sampleBytes := float64(GPUsPerServer * c.BatchPerGPU * c.EmbDim * 4)
	ct := func(k string) int64 { return int64(math.Round(ComputeShare[k] * float64(o.ComputeNs))) }
	var ts []job.Task
	comp := func(name, server string, ns int64, after ...string) {
		ts = append(ts, job.Task{Name: name, Kind: job.TaskCompute, Server: server, ComputeNs: ns, After: after})
	}
	xfer := func(name string, src, dst int, bytes int64, after ...string) {
		ts = append(ts, job.Task{Name: name, Kind: job.TaskTransfer, Src: srv(src), Dst: srv(dst), Bytes: bytes, After: after})
	}
	for s := 0; s < n; s++ {
		if tables[s] > 0 {
			comp(fmt.Sprintf("emb-%d", s), srv(s), ct("emb"))
		}
		comp(fmt.Sprintf("bot-%d", s), srv(s), ct("bot"))
	}
	for s := 0; s < n; s++ {
		for d := 0; d < n; d++ {
			if tables[s] > 0 && d != s {
				xfer(fmt.Sprintf("a2f-%d-%d", s, d), s, d, size(float64(tables[s])*sampleBytes), fmt.Sprintf("emb-%d", s))
			}
		}
	}
	for d := 0; d < n; d++ {
		after := []string{fmt.Sprintf("bot-%d", d)}
		if tables[d] > 0 {
			after = append(after, fmt.Sprintf("emb-%d", d))
		}
		for s := 0; s < n; s++ {
			if tables[s] > 0 && s != d {
				after = append(after, fmt.Sprintf("a2f-%d-%d", s, d))
			}
		}
		comp(fmt.Sprintf("top-%d", d), srv(d), ct("top"), after...)
	}
	for d := 0; d < n; d++ {
		comp(fmt.Sprintf("topb-%d", d), srv(d), ct("topb"), fmt.Sprintf("top-%d", d))
	}
	for d := 0; d < n; d++ {
		for s := 0; s < n; s++ {
			if tables[s] > 0 && d != s {
				xfer(fmt.Sprintf("a2b-%d-%d", d, s), d, s, size(float64(tables[s])*sampleBytes), fmt.Sprintf("topb-%d", d))
			}
		}
	}
	for d := 0; d < n; d++ {
		comp(fmt.Sprintf("botb-%d", d), srv(d), ct("botb"), fmt.Sprintf("topb-%d", d))
	}
	grad := 4 * float64(c.MLPParams())
	chunks := 2 * len(strides)
	if n == 2 {
		chunks = 1 // one peer: the two directions are the same ring
	}
	chunk := size(2 * float64(n-1) / float64(n) * grad / float64(chunks))
	peer := func(d, ch int) int {
		if ch%2 == 0 {
			return (d + strides[ch/2]) % n
		}
		return (d - strides[ch/2] + n) % n
	}
	for d := 0; d < n; d++ {
		for ch := 0; ch < chunks; ch++ {
			e := peer(d, ch)
			xfer(fmt.Sprintf("ar-%d-%d", d, ch), d, e, chunk, fmt.Sprintf("botb-%d", d), fmt.Sprintf("botb-%d", e))
		}
	}
	for s := 0; s < n; s++ {
		if tables[s] == 0 {
			continue
		}
		after := []string{fmt.Sprintf("topb-%d", s)}
		for d := 0; d < n; d++ {
			if d != s {
				after = append(after, fmt.Sprintf("a2b-%d-%d", d, s))
			}
		}
		comp(fmt.Sprintf("embu-%d", s), srv(s), ct("embu"), after...)
	}
	for d := 0; d < n; d++ {
		var after []string
		for ch := 0; ch < chunks; ch++ {
			// d's own chunks, and the ones that arrive at d: from the peer
			// on the other side of ring ch/2.
			from := peer(d, ch^1)
			if chunks == 1 {
				from = (d - 1 + n) % n
			}
			after = append(after, fmt.Sprintf("ar-%d-%d", d, ch), fmt.Sprintf("ar-%d-%d", from, ch))
		}
		comp(fmt.Sprintf("upd-%d", d), srv(d), ct("upd"), after...)
	}
	return ts, nil
}

// maxTasks bounds the tasks Tasks makes for n servers and rings rings,
// counted before anything is built: per server emb, bot, top, topb, botb,
// embu, upd and the all-reduce's two transfers per ring, plus both
// all-to-alls between table owners and every other server.
func maxTasks(c Config, n, rings int) int {
	owners := min(c.Tables, n)
	return 7*n + 2*rings*n + 2*owners*(n-1)
}
