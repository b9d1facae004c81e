package dlrm

import (
	"fmt"
	"slices"
	"testing"

	"github.com/ocsemu/ocsemu/workers/job"
	"github.com/ocsemu/ocsemu/workers/taskgraph"
)

func servers(n int) []string {
	var out []string
	for i := 0; i < n; i++ {
		out = append(out, fmt.Sprintf("r%ds0", i))
	}
	return out
}

func TestStrides(t *testing.T) {
	for _, tc := range []struct {
		n, count int
		want     []int
		bad      bool
	}{
		{16, 1, []int{1}, false},
		{16, 2, []int{1, 3}, false},
		{16, 4, []int{1, 3, 5, 7}, false},
		{16, 5, nil, true}, // stride 9 is stride 7 backwards
		{128, 3, []int{1, 3, 5}, false},
		{15, 2, []int{1, 7}, false}, // 3 and 5 share a factor with 15
		{15, 3, nil, true},
		{4, 2, nil, true},
		{2, 1, []int{1}, false},
	} {
		got, err := Strides(tc.n, tc.count)
		if (err != nil) != tc.bad || !tc.bad && !slices.Equal(got, tc.want) {
			t.Errorf("Strides(%d, %d) = %v, %v; want %v (error %v)", tc.n, tc.count, got, err, tc.want, tc.bad)
		}
	}
}

// The graph runs on the workers (taskgraph accepts it), has the tasks
// the doc comment lists, and moves the bytes Table II gives: per server
// pair 1 MiB each way per all-to-all (DLRM 2 on 16 servers: one table per
// server), and 2(n-1)/n of the MLP gradients out of every server in the
// all-reduce.
func TestTasks(t *testing.T) {
	for _, ch := range []int{1, 2, 4} {
		ts, err := Tasks(DLRM2, Options{Workers: servers(16), ComputeNs: 10e6, Channels: ch})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := taskgraph.New(ts, servers(16)); err != nil {
			t.Fatalf("channels %d: %v", ch, err)
		}
		out := map[string]int64{}
		count := map[string]int{}
		var compute int64
		for _, tk := range ts {
			kind := tk.Name[:3]
			count[kind]++
			if tk.Kind == job.TaskTransfer && tk.Src == "r0s0" {
				out[kind] += tk.Bytes
			}
			if tk.Kind == job.TaskCompute && tk.Server == "r0s0" {
				compute += tk.ComputeNs
			}
		}
		if count["a2f"] != 240 || count["a2b"] != 240 || count["ar-"] != 16*2*ch {
			t.Errorf("channels %d: %d a2f, %d a2b, %d ar, want 240, 240, %d", ch, count["a2f"], count["a2b"], count["ar-"], 32*ch)
		}
		if out["a2f"] != 15<<20 || out["a2b"] != 15<<20 {
			t.Errorf("channels %d: r0s0 sends %d and %d B in the all-to-alls, want 15 MiB each", ch, out["a2f"], out["a2b"])
		}
		grad := 2 * 15.0 / 16 * 4 * float64(DLRM2.MLPParams())
		if d := float64(out["ar-"]) - grad; d < -float64(2*ch) || d > float64(2*ch) {
			t.Errorf("channels %d: r0s0 sends %d B in the all-reduce, want %.0f", ch, out["ar-"], grad)
		}
		if compute != 10e6 {
			t.Errorf("channels %d: r0s0 computes %d ns, want 10 ms", ch, compute)
		}
	}
	ts, _ := Tasks(DLRM2, Options{Workers: servers(16), ComputeNs: 10e6, ScaleDown: 100})
	if ts[32].Name != "a2f-0-1" || ts[32].Bytes != 10486 {
		t.Errorf("scaled down 100x, %s carries %d B, want a2f-0-1 with 10486 B", ts[32].Name, ts[32].Bytes)
	}
	if _, err := Tasks(DLRM2, Options{Workers: servers(4), Channels: 3}); err == nil {
		t.Error("3 rings over 4 servers accepted")
	}
}

// maxTasks bounds what Tasks makes, so a graph too large for the plan is
// refused before it is built.
func TestTaskBound(t *testing.T) {
	for _, tc := range []struct {
		c       Config
		n, ch   int
		refused bool
	}{
		{DLRM2, 16, 1, false},
		{DLRM2, 16, 4, false},
		{DLRM2, 128, 3, false},
		{DLRM2, 3, 1, false},
		{DLRM2, 4096, 64, true},
	} {
		ts, err := Tasks(tc.c, Options{Workers: servers(tc.n), ComputeNs: 1e6, Channels: tc.ch})
		if (err != nil) != tc.refused {
			t.Fatalf("%d servers, %d channels: error %v, want refused %v", tc.n, tc.ch, err, tc.refused)
		}
		if err == nil {
			st, _ := Strides(tc.n, tc.ch)
			if m := maxTasks(tc.c, tc.n, len(st)); len(ts) > m || len(ts) > job.MaxTasks {
				t.Errorf("%d servers, %d channels: %d tasks, bound %d (limit %d)", tc.n, tc.ch, len(ts), m, job.MaxTasks)
			}
		}
	}
}
