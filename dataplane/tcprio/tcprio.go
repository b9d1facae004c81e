// Package tcprio is the one home of the tc filter priorities of emu's BPF
// programs on a clsact hook. tc runs filters in ascending priority, and a
// direct-action program that returns TC_ACT_UNSPEC hands the frame to the
// next one, so the order is: loss injection first (it may drop a frame
// before anything forwards it), then the forwarding fast paths.
package tcprio

const (
	// Loss is dataplane/loss/inject's random drop.
	Loss = 1
	// FairQueue is dataplane/fairq's classifier on a server port's egress:
	// it only picks the frame's class and hands every frame on.
	FairQueue = 5
	// FastPath is the OCS port program (ocsfabric/fastpath) and the ToR
	// path program (ocsfabric/torpath); they never share a port.
	FastPath = 10
)
