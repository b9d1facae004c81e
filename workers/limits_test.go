package workers_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/ocsemu/ocsemu/dataplane/fabric"
	"github.com/ocsemu/ocsemu/dataplane/fabric/fabrictest"
	"github.com/ocsemu/ocsemu/dataplane/limits"
	"github.com/ocsemu/ocsemu/dataplane/topo"
	"github.com/ocsemu/ocsemu/workers"
	"github.com/ocsemu/ocsemu/workers/job"
)

// TestSpecsAtMaxRanks: jobs of MaxRanks ranks (the old port layout of 64
// ports per job stopped at 62) get a port per rank process that is unique
// in its server's namespace, below the ephemeral range, even when jobs
// share servers; a job of one rank more is refused with the limit.
func TestSpecsAtMaxRanks(t *testing.T) {
	// 17 racks x 250 servers: more servers than MaxRanks. Nothing is
	// deployed: Specs needs the topology only.
	sp := fabrictest.Fabric(t, fabrictest.UniqueLab("mr"), "{kind: eps, racks: 17, servers_per_rack: 250, rates: {server: 1Gbit}}")
	lab := &fabric.Lab{Topo: topo.Build(sp)}
	var all []string
	for _, n := range lab.Topo.Servers() {
		all = append(all, n.Name)
	}
	if len(all) <= workers.MaxRanks {
		t.Fatalf("only %d servers", len(all))
	}
	n := workers.MaxRanks
	jobs := []job.Job{
		{Name: "ring", Pattern: "ring", Workers: all[:n], Bytes: int64(4 * n), Iterations: 1},
		// Shares every server with the ring, and its server is one of them.
		{Name: "ps", Pattern: "ps", Workers: all[len(all)-n:], PS: all[0], Bytes: int64(4 * n), Iterations: 1},
		{Name: "hd", Pattern: "hd", Workers: all[1 : n+1], Bytes: int64(4 * n), Iterations: 1},
	}
	specs, err := workers.Specs(&workers.Options{Lab: lab, Jobs: jobs, Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	if want := 3*n + 1; len(specs) != want {
		t.Fatalf("%d specs, want %d", len(specs), want)
	}
	used := map[string]bool{} // server:port
	maxPort := 0
	for i, sp := range specs {
		// Each rank process validates its own spec; a sample does here.
		if i%997 == 0 || sp.Rank == workers.PSRank {
			sp.Coordinator = "/run/c.sock" // Launch sets it
			if err := sp.Validate(); err != nil {
				t.Fatalf("%s: %v", sp.Name(), err)
			}
		}
		port := sp.Ports[len(sp.Ports)-1]
		if sp.Rank != workers.PSRank {
			port = sp.Ports[sp.Rank]
		}
		key := fmt.Sprintf("%s:%d", sp.Server(), port)
		if used[key] {
			t.Fatalf("%s listens on %s, which another rank process uses", sp.Name(), key)
		}
		used[key] = true
		maxPort = max(maxPort, port)
		if len(sp.Addrs) != len(sp.Ports) {
			t.Fatalf("%s carries %d addresses for %d rank processes", sp.Name(), len(sp.Addrs), len(sp.Ports))
		}
	}
	if maxPort > workers.LastPort || maxPort < workers.BasePort {
		t.Errorf("port %d outside %d-%d", maxPort, workers.BasePort, workers.LastPort)
	}
	t.Logf("%d rank processes of 3 jobs of %d ranks: ports %d-%d", len(specs), n, workers.BasePort, maxPort)

	big := job.Job{Name: "big", Pattern: "ring", Workers: all[:n+1], Bytes: int64(4 * (n + 1)), Iterations: 1}
	_, err = workers.Specs(&workers.Options{Lab: lab, Jobs: []job.Job{big}, Dir: t.TempDir()})
	if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("%d ranks, at most %d per job", n+1, workers.MaxRanks)) {
		t.Errorf("a job of MaxRanks+1 ranks: want a refusal naming the limit, got %v", err)
	}
	for _, it := range []int{-1, 0, limits.MaxIterations + 1, 9999999999} {
		j := job.Job{Name: "it", Pattern: "ring", Workers: all[:2], Bytes: 8, Iterations: it}
		if _, err = workers.Specs(&workers.Options{Lab: lab, Jobs: []job.Job{j}, Dir: t.TempDir()}); err == nil || !strings.Contains(err.Error(), fmt.Sprintf("iterations %d, want 1 to %d", it, limits.MaxIterations)) {
			t.Errorf("iterations %d: want a refusal, got %v", it, err)
		}
	}
	odd := job.Job{Name: "odd", Pattern: "ring", Workers: all[:2], Bytes: 6, Iterations: 1}
	if _, err = workers.Specs(&workers.Options{Lab: lab, Jobs: []job.Job{odd}, Dir: t.TempDir()}); err == nil || !strings.Contains(err.Error(), "multiple of 4") {
		t.Errorf("bytes not a multiple of ByteAlign: want a refusal, got %v", err)
	}
}
