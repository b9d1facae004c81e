package scheduler

import (
	"fmt"
	"math/rand"
	"time"

	"github.com/ocsemu/ocsemu/dataplane/names"
	"github.com/ocsemu/ocsemu/emu/scenario"
)

// TDMBench builds a papers 001/002-style case (their evaluations give no
// setup, so every figure here is ours): n jobs on `pods` pods of 32
// servers, one OXC with pods-1 ports of 100 Gbit/s per pod in full duplex
// and 2*(pods-1) in half duplex (so Algorithm 2 can always give every
// demanded pod pair its link, and jobs contend for them), 100 Gbit/s
// servers, a 500 us
// reconfiguration delay. Jobs are 50% ring all-reduce, 25% all-to-all and
// 25% PS (the papers' three types), 2 to 8 workers (PS: 2 to 4) over 2 or 3 pods,
// 1 GB per worker per iteration, 4 iterations. ratio is communication over
// computation: compute = (1 GB at 100 Gbit/s) / ratio.
func TDMBench(n, pods int, seed int64, ratio float64, duplex string) *scenario.Scenario {
	rng := rand.New(rand.NewSource(seed))
	const perPod = 32
	uplinks := pods - 1
	if duplex != "full" {
		uplinks *= 2
	}
	s := &scenario.Scenario{Name: fmt.Sprintf("tdm-%d-%d", n, pods),
		Fabric: scenario.Fabric{Kind: scenario.KindOCS, Racks: pods, ServersPerRack: perPod, UplinksPerToR: uplinks,
			OCS:   scenario.OCS{Switches: 1, ReconfigDelay: scenario.Duration(500 * time.Microsecond), Duplex: duplex},
			Rates: scenario.Rates{Server: 100e9, Uplink: 100e9}},
		Scheduler: scenario.Scheduler{Name: "tdm"},
	}
	const bytes = 1e9
	compute := time.Duration(bytes * 8 / 100e9 / ratio * 1e9)
	next := make([]int, pods) // next free server per pod (wraps when full)
	for i := 0; i < n; i++ {
		pattern := scenario.PatternRing
		switch x := rng.Float64(); {
		case x < 0.25:
			pattern = scenario.PatternAllToAll
		case x < 0.5:
			pattern = scenario.PatternPS
		}
		w := 2 + rng.Intn(7)
		if pattern == scenario.PatternPS {
			w = 2 + rng.Intn(3) // a CPU PS's incast would set every stage's time alone
		}
		span := min(2+rng.Intn(2), pods, w)
		first := rng.Intn(pods)
		var workers []string
		for k := 0; k < w; k++ {
			r := (first + k%span) % pods
			workers = append(workers, names.ServerName(r, next[r]%perPod))
			next[r]++
		}
		s.Jobs = append(s.Jobs, scenario.Job{Name: fmt.Sprintf("j%d", i), Pattern: pattern, Workers: workers,
			Bytes: bytes, Compute: scenario.Duration(compute), Iterations: 4})
	}
	s.ApplyDefaults()
	return s
}
