// Package record holds the shapes in which both the flow model (a
// prediction) and the packet emulation (a measurement) report what a plan
// did, so that the report can put them side by side.
package record

// Phase is one (job, iteration, phase), for one rank or, with Rank -1,
// for the whole job (first start to last end over its ranks).
type Phase struct {
	Job       string `json:"job"`
	Iteration int    `json:"iteration"`
	Phase     string `json:"phase"`
	Rank      int    `json:"rank"`
	StartNs   int64  `json:"start_ns"`
	EndNs     int64  `json:"end_ns"`
	// DurationNs, when set, is the phase's time: the longest time one
	// rank spent in it, or the span from start to end (parameter-server
	// phases, all-reduces timed from their last rank's start); start and
	// end span the instant the phase is timed from to the last rank's end.
	DurationNs int64   `json:"duration_ns,omitempty"`
	Bytes      float64 `json:"bytes,omitempty"`
	// Measured is what the time is made of (emulation only).
	Measured
	// INCHopsNs, in a flow model's replay only, is the mean hop cost the
	// model put in an INC push's round trip over the phase (TCPModel's
	// INCHopsNs while TCP queued the tree's links, else 0).
	INCHopsNs int64 `json:"inc_hops_ns,omitempty"`
}

// Measured is what a measured phase's time is made of, ns (emulation
// only; workers.PhaseStat carries the same).
type Measured struct {
	// WaitDataNs is how long the first rank waited for the phase's data to
	// exist (a pull's sum at the server, a ring or halving-doubling
	// all-reduce's last rank; the phase is timed from then), SkewNs the
	// spread of the ranks' starts after that (the models' per-rank
	// all-to-all predicts it too), LatenessNs the largest time a rank
	// started after it could (gate open and previous phase done), LateInNs
	// the part of that inside the timed phase, VerifyNs the longest
	// verification of the result (outside the phase).
	WaitDataNs int64 `json:"wait_data_ns,omitempty"`
	SkewNs     int64 `json:"skew_ns,omitempty"`
	LatenessNs int64 `json:"lateness_ns,omitempty"`
	LateInNs   int64 `json:"late_in_ns,omitempty"`
	VerifyNs   int64 `json:"verify_ns,omitempty"`
	// INCRTTNs is an in-network aggregation push's round trip, a block to
	// its sum, measured: the largest of the workers' means (by Little's
	// law the window over it is the tree's rate).
	INCRTTNs int64 `json:"inc_rtt_ns,omitempty"`
	// INCStallNs is, over the workers, the largest of their summed times
	// without any result while a retransmission timeout was due (a window
	// waiting on a lost block, or a stalled aggregator).
	INCStallNs int64 `json:"inc_stall_ns,omitempty"`
	// INCWaitNs is, over the workers, the largest of their mean times a
	// result waited in the socket until the worker read it.
	INCWaitNs int64 `json:"inc_wait_ns,omitempty"`
	// GCNs is, over the ranks, the longest a rank's garbage collector
	// held it inside the phase (assists and pauses, workers.gcMark), GCCycles the most collections a
	// rank ran in it: a collection stalls a rank on a machine with few
	// CPUs.
	GCNs     int64  `json:"gc_ns,omitempty"`
	GCCycles uint64 `json:"gc_cycles,omitempty"`
}

// Stage is when one plan stage ran.
type Stage struct {
	Index   int   `json:"index"`
	StartNs int64 `json:"start_ns"`
	EndNs   int64 `json:"end_ns"`
}

// Job is one job's whole run.
type Job struct {
	Job       string `json:"job"`
	ArrivalNs int64  `json:"arrival_ns"`
	StartNs   int64  `json:"start_ns"`
	EndNs     int64  `json:"end_ns"`
	// JCTNs is the job completion time: end minus arrival.
	JCTNs int64 `json:"jct_ns"`
}

// Run is everything a prediction or a measurement reports.
type Run struct {
	Source            string  `json:"source"` // "flow-model" or "emulation"
	Scenario          string  `json:"scenario"`
	Scheduler         string  `json:"scheduler"`
	Mode              string  `json:"mode"`
	Phases            []Phase `json:"phases"`
	Stages            []Stage `json:"stages"`
	Jobs              []Job   `json:"jobs"`
	MakespanNs        int64   `json:"makespan_ns"`
	Reconfigurations  int     `json:"reconfigurations"`
	PortsReconfigured int     `json:"ports_reconfigured"`
	OCSBytes          float64 `json:"ocs_bytes"`
	CircuitHopBytes   float64 `json:"circuit_hop_bytes"`
	// UplinkBytes is, per ToR uplink ("tor0:1"), the payload it sent onto
	// its circuit (flow model only): the model's paths, which a run checks
	// against the bytes its shapers counted.
	UplinkBytes map[string]float64 `json:"uplink_bytes,omitempty"`
	// PhaseLinks is, per phase and shaped link its flows crossed, what
	// the link carried while the phase ran (flow model replay only).
	PhaseLinks []PhaseLink `json:"phase_links,omitempty"`
}

// PhaseLink is what one shaped link ("node:iface", the egress of a
// sending interface) carried while a phase ran, in a flow model: the
// phase's own payload over it, and every other phase's payload from the
// phase's start to its end (WindowNs). RateBps is the link's payload
// rate, bytes/s.
// The attribution's busiest-link diagnosis compares it with the link's
// counters.
type PhaseLink struct {
	Job        string  `json:"job"`
	Iteration  int     `json:"iteration"`
	Phase      string  `json:"phase"`
	Link       string  `json:"link"`
	OwnBytes   float64 `json:"own_bytes"`
	OtherBytes float64 `json:"other_bytes"`
	RateBps    float64 `json:"rate_bytes_per_s"`
	WindowNs   int64   `json:"window_ns"`
	// QueueNs is the link's mean standing queue over the window in the
	// TCP-aware model (its delay).
	QueueNs int64 `json:"queue_ns,omitempty"`
}

// Comparison is one phase, predicted against measured (comparison.json).
type Comparison struct {
	Job       string `json:"job"`
	Iteration int    `json:"iteration"`
	Phase     string `json:"phase"`
	// Durations (measured: the slowest rank's) and end times from time
	// zero, ns.
	PredictedNs int64 `json:"predicted_ns"`
	MeasuredNs  int64 `json:"measured_ns"`
	PredEndNs   int64 `json:"predicted_end_ns"`
	MeasEndNs   int64 `json:"measured_end_ns"`
	// RelErr is (measured - predicted) / predicted duration: positive
	// means the emulation was slower than the model said.
	RelErr float64 `json:"rel_err"`
}
