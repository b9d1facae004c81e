// Package fairq gives a server's port the per-flow fairness of a Linux
// host's default qdisc (fq_codel): flows that leave a server together share
// its port round-robin instead of queueing behind each other in the
// shaper's single FIFO. A switch port stays a FIFO, as a switch's is.
//
// This kernel has no sfq, fq, fq_codel or drr, so the fair queue is built
// from what it has: the port's tbf (the rate, the bucket, GSO split) keeps
// its place at the root, and its child is an htb whose leaf classes, all
// far faster than the port, are served round-robin (htb's deficit round
// robin among ready classes of one priority, with Quantum: the most a
// frame or GSO packet that reaches the htb can be, so a round is fair in
// bytes); short TCP control segments (ACKs) have a class of their own,
// served first. Each leaf queues up to the port's txqueuelen frames (htb's
// default leaf), not the tbf's byte limit: TCP small queues keep a
// sender's own queue far shorter. A tc BPF program on the port's clsact egress sets each
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

	"github.com/ocsemu/ocsemu/dataplane/shaper"
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

// SparseBytes bounds the frames the sparse class takes, SparsePayload
// their TCP payload: IPv4 TCP segments that are pure ACKs (66 bytes with
// timestamps) or carry a few bytes (a worker's one-byte acknowledgement of
// a transfer), with no SYN, FIN or RST, and not a fragment. They are
// served before any data class, as fq_codel serves a flow that has
// nothing queued first, so a server's ACKs do not wait behind its own data
// to the same peer. Not every short frame: a FIN, a datagram or a segment
// with more payload could overtake its own flow's queued data. (A bulk
// flow's segment of at most SparsePayload bytes, the tail of a write,
// could too; its other segments are full.)
const (
	SparseBytes   = 128
	SparsePayload = 8
)

// SparseSegment reports whether an unfragmented IPv4 TCP segment in a
// frame of frameLen bytes, with payload bytes and the given flags, takes
// the sparse class.
func SparseSegment(frameLen, payload int, flags byte) bool {
	return frameLen < SparseBytes && payload <= SparsePayload && flags&tcpFinSynRst == 0
}

// tcpFinSynRst are the TCP flags that keep a segment out of the sparse
// class.
const tcpFinSynRst = 0x07

// Sparse is the class of short control segments on a port with classes
// data classes: one beyond them.
func Sparse(classes int) uint32 { return uint32(classes + 1) }

// Class is the leaf (the class minor) that a frame to dst takes on a port
// with classes data leaves in a fabric of perRack servers per rack: a
// sparse segment (SparseSegment) takes Sparse; otherwise server s of rack
// r (10.(r>>8).(r&255).(s+1)) takes 1 + (r*perRack+s) mod (classes-1),
// and anything else the last data class. The kernel program computes the
// same.
func Class(dst netip.Addr, sparse bool, perRack, classes int) uint32 {
	if sparse {
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

// Quantum is the htb quantum of a port at rate bytes/s: what one class
// sends per turn. htb serves the class at its round's pointer while the
// class's deficit is not negative, and always sends at least one packet
// per turn, whatever its size; so with a quantum below the largest packet
// the round would go packet by packet and favour classes of GSO packets.
// The largest packet the tbf passes down is its bucket (it splits a GSO
// packet larger than that into frames), at most a 64 KiB GSO packet as
// qdiscs count it: one set of headers per segment.
func Quantum(rate uint64, mtu int) uint32 {
	frame := mtu + shaper.EthernetHeader
	gso := (shaper.GSOMaxSize/(mtu-minTCPHeaders) + 1) * frame
	return uint32(min(shaper.Burst(rate, mtu), uint64(gso)))
}

// minTCPHeaders is IPv4 and TCP with timestamps: a segment's payload is
// at least the MTU less this.
const minTCPHeaders = 20 + 32
