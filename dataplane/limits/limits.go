// Package limits is the one home of the emulator's size limits. Each
// limit says where it comes from; the scenario and plan checks, the
// kernel side and the workers all read them from here, and
// docs/scenario.md lists them in a table that a test compares with this
// file. Pure Go: no kernel, no netlink.
package limits

import "github.com/ocsemu/ocsemu/dataplane/names"

const (
	// MaxRacks: rack r owns 10.(r>>8).(r&255).0/24 and 10.255.x.y router
	// addresses, which leave room for 4096 racks.
	MaxRacks = 4096
	// MaxServersPerRack: server s of a rack is host s+1 of its /24, and the
	// ToR answers as .254.
	MaxServersPerRack = 250
	// MaxUplinks per ToR: one byte of the uplink MACs, and interface names
	// up<u> / tor<r>u<u> within 15 bytes.
	MaxUplinks = 64
	// MaxOCS switches the uplinks spread over.
	MaxOCS = 64
	// MaxIfindex bounds the interface index of an OCS port: the BPF fast
	// path indexes its circuit map by ingress ifindex in an array of this
	// size. Ports per OCS namespace must stay below it.
	MaxIfindex = 16384
	// MaxPortsPerOCS is the most ports one OCS switch may carry (racks ×
	// uplinks cabled to it). The fabric numbers an OCS namespace's ports
	// from 16 (below: lo and the kernel's fallback tunnel devices), so
	// this keeps every port inside the fast path's array.
	MaxPortsPerOCS = MaxIfindex - 16
	// MaxLabName is the longest lab or job name.
	MaxLabName = names.MaxLabLen
	// MaxIterations of a job: records and predictions grow with it.
	MaxIterations = 100_000
	// MaxWorkers of one job in a plan or scenario.
	MaxWorkers = 4096
	// MaxBytes per worker per iteration (1 TiB): keeps byte and time
	// arithmetic in int64 nanoseconds far from overflow.
	MaxBytes = int64(1) << 40
	// MaxFlows bounds the flows of all the iterations of all the jobs of
	// a scenario or plan together (workers/job.Flows counts them). The
	// flow model holds each all-to-all flow of each iteration: 512 ranks
	// over 10 iterations (2.6 million) took 86 s and 3.3 GB, and 4,096
	// ranks make 16.8 million an iteration.
	MaxFlows = 1_000_000
	// MaxArrivalNs bounds a job's arrival, a week: its ranks wait for it,
	// and instants stay far from int64's end.
	MaxArrivalNs = int64(7 * 24 * 3600e9)
	// MaxFileBytes bounds a file emu reads whole (a plan, a rank spec, a
	// run directory's JSON, a run's data uncompressed): the largest
	// recorded, a 20 s paper004 run's data, is 10.3 MiB; paper004's plan,
	// 4,000 stages, 0.3 MB.
	MaxFileBytes = 64 << 20
	// MaxScenarioFileBytes bounds a scenario file (the papers' are under
	// 4 KiB).
	MaxScenarioFileBytes = 4 << 20
	// MinReconfigDelay and MaxReconfigDelay bound a dark period.
	MinReconfigDelayNs = int64(0)
	MaxReconfigDelayNs = int64(10e9)
	// MaxLossPPM is 100% loss on a port: the loss program draws a random
	// number below a million per frame (dataplane/loss).
	MaxLossPPM = 1_000_000
)

const (
	// MaxRanks is the most worker ranks one job may have in the emulator:
	// the scenario's bound on workers per job. Nothing in the workers is
	// sized by it (ports are handed out per server); the rank logic is
	// tested up to it.
	MaxRanks = MaxWorkers
	// ByteAlign: ranks exchange int32 elements, so a job's bytes per rank
	// per iteration must be a multiple of ByteAlign, and at least ByteAlign
	// per rank.
	ByteAlign = 4
)
