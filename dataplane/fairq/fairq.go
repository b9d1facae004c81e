// Package fairq gives a server's port the per-flow fairness of a Linux
// host's default qdisc (fq_codel): flows that leave a server together share
// its port round-robin instead of queueing behind each other in the
// shaper's single FIFO. A switch port stays a FIFO, as a switch's is.
//
// This kernel has no sfq, fq, fq_codel or drr, so the fair queue is built
// from what it has: the port's tbf (the rate, the bucket, GSO split) keeps
// its place at the root, and its child is an htb whose leaf classes, all
// far faster than the port, are served round-robin one frame's quantum at a
// time (htb's deficit round robin among ready classes of one priority);
// frames under SparseBytes (pure ACKs) have a class of their own, served
// first. Each leaf queues up to the port's txqueuelen frames (htb's
// default leaf). A tc BPF program on the port's clsact egress sets each
// frame's skb->priority to its class, which htb takes before any filter.
//
// The class is the frame's destination, not its 5-tuple: a server's
// flows at once (a ring's next hop, a PS's pulls, an all-to-all's peers,
// a time-slotted plan's transfers over several circuits) go to distinct
// servers, and a destination's class is fixed, so runs differ only by TCP,
// not by hash collisions. Flows to one destination share a FIFO.
package fairq

import (
	"net/netip"

	"github.com/ocsemu/ocsemu/dataplane/topo"
)

// Modes of a server port's queue (the scenario's fabric.server_queue).
const (
	FIFO = topo.QueueFIFO // the tbf's one FIFO (the default)
	Fair = topo.QueueFair // per destination, round-robin
)

// MaxClasses bounds the classes of one port: the fabric's recorder dumps
// every qdisc of a server's namespace 50 times a second. Servers beyond
// MaxClasses-1 share classes, deterministically.
const MaxClasses = 32

// Major is the htb's handle major under the port's tbf (handle 1:).
const Major = 2

// Classes is the number of leaf classes of a server port in a fabric of
// racks x perRack servers: one per server up to MaxClasses-1, and one for
// every other destination (a ToR's aggregator, the packet core).
func Classes(racks, perRack int) int {
	return min(racks*perRack, MaxClasses-1) + 1
}

// SparseBytes: a frame shorter than this (a pure TCP ACK is 66 bytes)
// takes the sparse class, served before any data class, as fq_codel
// serves a new or sparse flow first: a server's ACKs do not wait behind
// its own data to the same peer.
const SparseBytes = 128

// Sparse is the class of short frames on a port with classes data
// classes: one beyond them.
func Sparse(classes int) uint32 { return uint32(classes + 1) }

// Class is the leaf (the class minor, 1..classes) that a data frame of
// frameLen bytes to dst takes on a port with classes data leaves in a fabric of perRack servers per
// rack: server s of rack r (10.(r>>8).(r&255).(s+1)) takes
// 1 + (r*perRack+s) mod (classes-1); anything else takes the last class.
// The kernel program computes the same.
func Class(dst netip.Addr, frameLen, perRack, classes int) uint32 {
	if frameLen < SparseBytes {
		return Sparse(classes)
	}
	if !dst.Is4() || classes < 2 {
		return uint32(max(classes, 1))
	}
	b := dst.As4()
	host := int(b[3]) - 1
	if b[0] != 10 || b[1] == 255 || host < 0 || host >= perRack {
		return uint32(classes)
	}
	rack := int(b[1])<<8 | int(b[2])
	return uint32(1 + (rack*perRack+host)%(classes-1))
}

// ServerClass is the class of a full-size frame to server s of rack r.
func ServerClass(r, s, perRack, classes int) uint32 {
	return Class(topo.ServerAddr(r, s), SparseBytes, perRack, classes)
}
