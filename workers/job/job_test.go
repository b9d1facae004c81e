package job

import (
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
