package flowmodel

import (
	"math"

	"github.com/ocsemu/ocsemu/dataplane/names"
	"github.com/ocsemu/ocsemu/dataplane/topo"
	"github.com/ocsemu/ocsemu/emu/scenario"
)

// In-network aggregation in the TCP-aware model. An INC push is a tree of
// segments (worker -> ToR -> root ToR and back, plan.FlowsINC), but not TCP:
// each worker keeps a fixed window of slots in flight, a slot returns only
// once every worker's block of it has been summed at the root, and the
// segments carry one slot after another in step. So, where TCP flows
// share links with the tree:
//   - a segment shares a link like a TCP flow through one standing queue,
//     whatever its hops (its window, not a loss-driven AIMD, sets its
//     pace, so it is not penalised per queue crossed);
//   - all segments of a tree move at the rate of the slowest;
//   - that rate is at most the window over the tree's round trip: the
//     base RTT, the aggregators' user-space hops (TCPModel.INCHopsNs) and the
//     standing queues TCP keeps on the links of the slowest worker's
//     branch (up to the root and back).
//
// What capacity a segment cannot use goes to the other flows. docs/fidelity.md
// has the runs this follows.

// INCWindowSlots and INCSlotBytes are what each worker of an INC job keeps
// in flight in the emulation at most (orchestrate.DefaultINCWindow slots
// of inc.MaxElems int32 elements), and INCToRSlots a ToR aggregator's
// slot pool (inc.DefaultSlots), which it partitions equally between the
// jobs it may hold at once; a test in emu/orchestrate checks all three.
const (
	INCWindowSlots = 256
	INCSlotBytes   = 1440
	INCToRSlots    = 1024
)

// INCWindow is the slots each INC worker keeps in flight on a fabric:
// its share of a ToR's pool, INCToRSlots over the jobs a ToR may hold at
// once (fabric.inc.capacity), at most INCWindowSlots, and what its
// slowest link carries in INCWindowRTTNs, rounded up to a slot. `emu run` gives the
// workers this window, and the model caps a tree's rate with it.
func INCWindow(f scenario.Fabric) int {
	w := min(INCWindowSlots, INCToRSlots/max(1, f.INC.Capacity))
	if bps := slowestLink(f); bps > 0 {
		w = min(w, int(math.Ceil(bps/8*float64(INCWindowRTTNs)/1e9/INCSlotBytes)))
	}
	return max(1, w)
}

// INCWindowRTTNs is the round trip an INC window need cover: the
// aggregators' user-space hops beside TCP on a busy 2-core machine with
// room to spare (INCHopsNs, docs/inc.md). A window beyond it only queues:
// 256 slots are 75 ms of a 40 Mbit/s circuit, whose round trips then
// passed the workers' 30 ms MinRTO and 83% of the blocks were sent twice
// (paper000 at 1/1,000, 27 Nov). Below 368.64 Mbit/s it is under 256.
const INCWindowRTTNs = 8_000_000

// slowestLink is the lowest configured rate (bit/s) among a fabric's
// server links, circuits and packet core; 0 when none is set.
func slowestLink(f scenario.Fabric) float64 {
	least := 0.0
	note := func(r scenario.Rate) {
		if r != scenario.Unlimited && r > 0 && (least == 0 || float64(r) < least) {
			least = float64(r)
		}
	}
	note(f.Rates.Server)
	if f.HasOCS() {
		note(f.Rates.Uplink)
	}
	if f.HasEPS() {
		note(f.CoreRate())
	}
	return least
}

// INCHopsNs is what the aggregators' user-space hops (worker -> ToR ->
// root ToR and back: three or four socket wake-ups) add to a tree's round
// trip while TCP traffic shares its links and the CPUs. Measured on plan-demo: vgg's
// second push, beside gpt's ring through three standing queues (7.6 ms in
// the model), had round trips of 8.5-8.8 ms (its workers' mean, over the
// part of the push the ring shared; 15 runs); a single block on an idle
// fabric returns in 0.2-0.4 ms (docs/fidelity.md). Beside TCP the
// aggregators wait for a CPU at every hop.
const INCHopsNs = 1_000_000

// incTreeRates returns the common rate of every INC tree in comp (its
// slowest segment's share, capped by its window) for all their segments,
// if any tree cannot move as fast as the shares just computed give one of
// its segments; nil if none. Once one tree is held back, every tree is
// fixed at its rate, so the capacity it frees goes to the other flows only
// and no tree's segments drift apart in the pass that shares it.
func (s *Sim) incTreeRates(comp []*flow, queue map[int32]float64) map[*flow]float64 {
	order, trees := incTrees(comp)
	hold := false
	rates := make([]float64, len(order))
	for i, g := range order {
		segs := trees[g]
		rate := math.Inf(1)
		for _, fl := range segs {
			rate = math.Min(rate, fl.rate)
		}
		rtt, hops := s.incTreeRTT(segs, queue)
		if s.incHops != nil {
			k := [2]int32{int32(segs[0].job), int32(segs[0].phase)}
			s.incHops[k] = traceStep(s.incHops[k], s.now, hops)
		}
		rate = math.Min(rate, s.incWindowBytes/(float64(rtt)/1e9))
		rates[i] = rate
		for _, fl := range segs {
			hold = hold || fl.rate > rate*(1+1e-9)
		}
	}
	if !hold {
		return nil
	}
	fixed := map[*flow]float64{}
	for i, g := range order {
		for _, fl := range trees[g] {
			fixed[fl] = rates[i]
		}
	}
	return fixed
}

// incTrees groups comp's INC segments in progress by tree, the trees in
// the order comp meets them (deterministic).
func incTrees(comp []*flow) (order []int32, trees map[int32][]*flow) {
	for _, fl := range comp {
		if fl.inc && fl.grpRes >= 0 && !fl.done {
			if trees == nil {
				trees = map[int32][]*flow{}
			}
			if trees[fl.grpRes] == nil {
				order = append(order, fl.grpRes)
			}
			trees[fl.grpRes] = append(trees[fl.grpRes], fl)
		}
	}
	return order, trees
}

// incTreeRTT is a tree's round trip, and the hops in it: the base RTT plus, on the branch of
// the slowest ToR, the standing queues that TCP keeps on the links of its
// segments (a link only INC fills holds the window itself, which the rate
// already pays; a port that queues fairly keeps TCP's queue in TCP's own
// classes, which the tree's segments pass) and, where TCP keeps a queue
// standing on its links, the aggregators' hops.
func (s *Sim) incTreeRTT(segs []*flow, queue map[int32]float64) (rtt, hops int64) {
	// A segment's queue delay, and which ToR's branch it belongs to: a
	// worker's segments to its ToR, a ToR's segments to the root.
	tor := map[int]float64{}    // per rack: ToR <-> root segments
	worker := map[int]float64{} // per rack: the slowest worker <-> ToR pair
	perWorker := map[string]float64{}
	besideTCP := false
	for _, fl := range segs {
		q := 0.0
		for _, r := range fl.res {
			if queue[r] > 0 && s.carriesTCP(r) {
				besideTCP = true
				if !s.queuesFairly(r) { // a fair port keeps TCP's queue in TCP's classes
					q += queue[r]
				}
			}
		}
		_, srcToR := names.ParseToR(fl.src)
		_, dstToR := names.ParseToR(fl.dst)
		switch {
		case srcToR && dstToR: // child ToR <-> root
			child := fl.srcRack
			if fl.src == s.jobs[fl.job].j.Aggregator {
				child = fl.dstRack
			}
			tor[child] += q
		case srcToR:
			perWorker[fl.dst] += q
		default:
			perWorker[fl.src] += q
		}
	}
	for w, q := range perWorker {
		if r, _, ok := names.ParseServer(w); ok {
			worker[r] = math.Max(worker[r], q)
		}
	}
	longest := 0.0
	for r, q := range worker {
		longest = math.Max(longest, q+tor[r])
	}
	if besideTCP {
		hops = s.opt.TCP.INCHopsNs // beside TCP the aggregators wait for a CPU
	}
	return max(1, s.opt.TCP.BaseRTTNs) + int64(longest) + hops, hops
}

// carriesTCP reports whether a link carries a flow in progress that is
// not INC: a TCP flow keeps the link's queue standing.
func (s *Sim) carriesTCP(r int32) bool {
	for _, fl := range s.res[r].flows {
		if !fl.done && !fl.inc {
			return true
		}
	}
	return false
}

// queuesFairly reports whether physical link r's port queues per flow
// (fabric.server_queue or switch_queue: fair): a server's own port is a
// server queue, every other shaped port a switch's.
// false for a resource that is not a physical link (a rate cap, slow start).
func (s *Sim) queuesFairly(r int32) bool {
	if _, ok := s.linkRate(r); !ok {
		return false
	}
	if r < int32(s.f.Racks*s.f.ServersPerRack) {
		return s.f.ServerQueue == topo.QueueFair
	}
	return s.f.SwitchQueue == topo.QueueFair
}
