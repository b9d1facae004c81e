package job

import (
	"fmt"
	"strings"
	"testing"
)

func TestPhases(t *testing.T) {
	for _, tc := range []struct {
		pattern string
		want    string
	}{
		{PatternPS, "compute push pull"},
		{PatternRing, "compute allreduce"},
		{PatternHD, "compute allreduce"},
		{PatternAllToAll, "compute alltoall"},
		{"nccl", ""},
	} {
		if got := strings.Join(Phases(tc.pattern), " "); got != tc.want {
			t.Errorf("Phases(%q) = %q, want %q", tc.pattern, got, tc.want)
		}
	}
	j := Job{Name: "j", Pattern: PatternPS, Iterations: 2}
	ks := j.Phases()
	if len(ks) != 6 || ks[3] != (Key{Job: "j", Iteration: 1, Phase: PhaseCompute}) || ks[5].String() != "j iteration 1 phase pull" {
		t.Errorf("Job.Phases = %v", ks)
	}
}

func TestCheckWorkers(t *testing.T) {
	for _, tc := range []struct {
		pattern string
		n       int
		ok      bool
	}{
		{PatternHD, 1, true}, {PatternHD, 2, true}, {PatternHD, 8, true}, {PatternHD, 6, false}, {PatternHD, 0, false},
		{PatternRing, 6, true}, {PatternPS, 3, true}, {PatternAllToAll, 5, true},
	} {
		if err := CheckWorkers(tc.pattern, tc.n); (err == nil) != tc.ok {
			t.Errorf("CheckWorkers(%q, %d) = %v, want ok=%v", tc.pattern, tc.n, err, tc.ok)
		}
	}
}

// A job with no (or a negative number of) iterations has no phases; it
// must not panic (a fuzzed plan once did).
func TestPhasesOfNoIterations(t *testing.T) {
	for _, n := range []int{0, -1, -1 << 40} {
		j := Job{Name: "j", Pattern: PatternRing, Iterations: n}
		if ks := j.Phases(); len(ks) != 0 {
			t.Errorf("%d iterations: %d phases", n, len(ks))
		}
	}
}

func TestSameMembers(t *testing.T) {
	for _, tc := range []struct {
		a, b []string
		want bool
	}{
		{[]string{"a", "b"}, []string{"b", "a"}, true},
		{nil, nil, true},
		{[]string{"a", "a"}, []string{"a", "b"}, false},
		{[]string{"a"}, []string{"a", "a"}, false},
		{[]string{"a", "b"}, []string{"a", "c"}, false},
	} {
		if got := SameMembers(tc.a, tc.b); got != tc.want {
			t.Errorf("SameMembers(%v, %v) = %v", tc.a, tc.b, got)
		}
	}
}

func TestSteps(t *testing.T) {
	for _, tt := range []struct {
		pattern string
		n, want int
	}{{PatternHD, 2, 2}, {PatternHD, 4, 4}, {PatternHD, 8, 6}, {PatternRing, 3, 4}, {PatternRing, 2, 2}, {PatternPS, 4, 0}, {PatternHD, 1, 0}} {
		if got := AllReduceSteps(tt.pattern, tt.n); got != tt.want {
			t.Errorf("AllReduceSteps(%s, %d) = %d, want %d", tt.pattern, tt.n, got, tt.want)
		}
	}
	j := Job{Name: "j", Pattern: PatternHD, Workers: []string{"a", "b", "c", "d"}, Iterations: 2, Steps: true}
	ph := j.Phases()
	if len(ph) != 10 || ph[1].Phase != "allreduce.0" || ph[9].Phase != "allreduce.3" || ph[5].Iteration != 1 {
		t.Errorf("phases of a per-step hd job: %v", ph)
	}
	for _, tt := range []struct {
		phase string
		k     int
		ok    bool
	}{{"allreduce.0", 0, true}, {"allreduce.12", 12, true}, {"allreduce", 0, false}, {"allreduce.-1", 0, false}, {"allreduce.01", 0, false}, {"push.1", 0, false}} {
		if k, ok := ParseStep(tt.phase); k != tt.k || ok != tt.ok {
			t.Errorf("ParseStep(%q) = %d, %v; want %d, %v", tt.phase, k, ok, tt.k, tt.ok)
		}
	}
}

func TestFlows(t *testing.T) {
	type j struct {
		pattern        string
		workers, iters int
	}
	for _, tt := range []struct {
		name string
		jobs []j
		want string // "" fits
	}{
		{"the papers' sizes", []j{{PatternAllToAll, 16, 100}, {PatternRing, 64, 1000}, {PatternPS, 32, 500}}, ""},
		{"all-to-all at the limit", []j{{PatternAllToAll, 1000, 1}}, ""}, // 999,000
		{"all-to-all past it", []j{{PatternAllToAll, 1001, 1}}, "the jobs make 1001000 flows over their iterations (j1: 1001000), more than the 1000000"},
		{"iterations add up", []j{{PatternAllToAll, 256, 30}}, "the jobs make 1958400 flows"},
		{"jobs add up, the largest named", []j{{PatternRing, 4096, 100}, {PatternHD, 1024, 50}}, "(j2: 1024000)"},
		{"a ring of the most workers", []j{{PatternRing, 4096, 1}}, ""},
		{"dag flows are its tasks'", []j{{PatternDAG, 4096, 100000}}, ""},
		{"counts past the limits are clamped", []j{{PatternPS, 1 << 40, 1 << 40}}, "(j1: 819200000)"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var f Flows
			for i, jb := range tt.jobs {
				f.Add(fmt.Sprintf("j%d", i+1), jb.pattern, jb.workers, jb.iters)
			}
			err := f.Check()
			if tt.want == "" && err != nil || tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)) {
				t.Errorf("Check() = %v, want %q", err, tt.want)
			}
		})
	}
}
