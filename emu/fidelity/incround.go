package fidelity

import (
	"fmt"

	"github.com/ocsemu/ocsemu/workers/job"
	"github.com/ocsemu/ocsemu/workers/record"
)

// AggSample is one reading of an aggregator's hold counters
// (inc.Stats.HoldNs and Holds).
type AggSample struct {
	TNs           int64
	Holds, HoldNs uint64
}

// Agg is one ToR aggregator's readings over the run.
type Agg struct {
	ToR     string
	Samples []AggSample
}

// INCTree is an INC job's aggregation tree: the ToRs of its workers and
// the root, and what each worker pushes (bytes of payload).
type INCTree struct {
	Root   string
	Leaves []string
	Bytes  float64
}

// INCRound splits an INC push's round trip, measured and in the replayed
// model, into the user-space hops (the aggregators' and the worker's) and
// the rest (the network: base RTT and queues). Measured: the round trip
// is the workers' (the largest of their means), the hops the largest
// of the workers' mean socket waits plus, on the tree's costliest branch, the
// aggregators' mean hold over the phase (a leaf ToR's twice: up and down).
// In the model the round trip is the window over the push's rate (Little's
// law: the replayed time over the payload), its hops the mean the replay
// put in the tree's round trip over the phase (TCPModel.INCHopsNs while
// TCP queued the tree's links, record.Phase.INCHopsNs).
type INCRound struct {
	RTTNs       int64 `json:"rtt_ns"`
	HopsNs      int64 `json:"hops_ns"`
	ModelRTTNs  int64 `json:"model_rtt_ns"`
	ModelHopsNs int64 `json:"model_hops_ns"`
}

// Text says the split in one line.
func (r INCRound) Text() string {
	return roundText([6]float64{ms(r.RTTNs), ms(r.HopsNs), ms(r.RTTNs - r.HopsNs), ms(r.ModelRTTNs), ms(r.ModelHopsNs), ms(r.ModelRTTNs - r.ModelHopsNs)})
}

// roundText writes a round trip, its hops and network, measured then the
// model's (ms): Text's format, for one run or the medians of a set.
func roundText(v [6]float64) string {
	return fmt.Sprintf("round trip %.2f ms = hops %.2f + network %.2f; model %.2f = hops %.2f + network %.2f", v[0], v[1], v[2], v[3], v[4], v[5])
}

// incRound is an INC push's round trip split, between from and to
// (absolute ns); false for other phases or without the figures.
func (in *Inputs) incRound(k job.Key, m record.Phase, from, to, replayNs int64) (INCRound, bool) {
	tree, ok := in.windowedPush(k, m, replayNs)
	if !ok {
		return INCRound{}, false
	}
	hold := func(tor string) (float64, bool) {
		for _, a := range in.Aggs {
			if a.ToR == tor {
				return meanHold(a.Samples, from, to)
			}
		}
		return 0, false
	}
	root, ok := hold(tree.Root)
	if !ok {
		return INCRound{}, false
	}
	branch := root
	for _, l := range tree.Leaves {
		if l == tree.Root {
			continue
		}
		h, ok := hold(l)
		if !ok {
			return INCRound{}, false
		}
		branch = max(branch, root+2*h)
	}
	r := INCRound{RTTNs: m.INCRTTNs, HopsNs: m.INCWaitNs + int64(branch),
		ModelRTTNs: int64(in.INCWindowBytes / (tree.Bytes / (float64(replayNs) / 1e9)) * 1e9)}
	r.ModelHopsNs = in.ModelINCHopsNs[k]
	return r, true
}

// meanHold is an aggregator's mean hold per datagram between from and to,
// from the readings around them (the last at or before from, the first
// at or after to); false without datagrams between them.
func meanHold(ss []AggSample, from, to int64) (float64, bool) {
	a, b := -1, -1
	for i, s := range ss {
		if s.TNs <= from {
			a = i
		}
		if s.TNs >= to && b < 0 {
			b = i
		}
	}
	if a < 0 || b < 0 || ss[b].Holds <= ss[a].Holds {
		return 0, false
	}
	return float64(ss[b].HoldNs-ss[a].HoldNs) / float64(ss[b].Holds-ss[a].Holds), true
}

// incRoundCost is an INC push's time at its workers' measured round trip
// minus the replay's time for it. A worker keeps its window of slots in
// flight and a slot returns once per round trip, so the push moves its
// payload at window / round trip (Little's law), in the emulation as in
// the model: at the measured round trip it takes payload x RTT / window.
// The replay's own round trip is the same law read backwards
// (INCRound.ModelRTTNs), so the part is the replay's time scaled by the
// two round trips' ratio. Where the round trip went, hops or network, the
// INC round trip diagnosis says. 0 for other phases, without the figures,
// or for a push too short for the law (windowedPush).
func (in *Inputs) incRoundCost(k job.Key, m record.Phase, replayNs int64) int64 {
	tree, ok := in.windowedPush(k, m, replayNs)
	if !ok {
		return 0
	}
	return int64(tree.Bytes*float64(m.INCRTTNs)/in.INCWindowBytes) - replayNs
}

// MinWindows is how many windows of payload an INC push must carry for
// its time to be read as window / round trip: a shorter one spends most
// of it filling and draining the window, and Little's law read backwards
// from its time gives a round trip far too long.
const MinWindows = 2

// windowedPush is the INC tree of an INC push that carries at least
// MinWindows windows per worker, with a measured round trip and a replay
// time; false otherwise.
func (in *Inputs) windowedPush(k job.Key, m record.Phase, replayNs int64) (INCTree, bool) {
	tree, ok := in.INCTrees[k.Job]
	if !ok || k.Phase != job.PhasePush || m.INCRTTNs <= 0 || replayNs <= 0 || in.INCWindowBytes <= 0 || tree.Bytes < MinWindows*in.INCWindowBytes {
		return INCTree{}, false
	}
	return tree, true
}
