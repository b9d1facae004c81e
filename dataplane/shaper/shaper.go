// Package shaper holds the rule for a shaped port's tbf: its bucket and its
// queue, in bytes, from the rate and the MTU. The fabric applies it and the
// flow model reads it, so both use one rule.
package shaper

// EthernetHeader is what a frame adds to the MTU in the length tbf
// counts on a veth (qdisc_pkt_len: the skb from the MAC header on).
const EthernetHeader = 14

// FloorFrames is the fewest full-size frames a port's bucket holds.
const FloorFrames = 2

// Burst is the bucket of a port's tbf, in bytes, at rate bytes/s:
// what passes at once after the port was idle. It is 1 ms of line rate,
// and at least two full-size frames: tbf sends a frame only when the
// bucket holds its length, and the second frame's worth absorbs the
// watchdog timer waking late. It scales with the rate so that a small
// transfer over a slow port takes its bytes over the rate rather than
// passing in one burst (a fixed 64 KiB floor was half a second of a
// 1 Mbit/s port). From 524 Mbit/s up, 1 ms of line rate is 64 KiB or more,
// so a GSO packet passes whole; below, tbf splits a GSO packet larger than
// the bucket into frames (tbf_segment) and queues them.
func Burst(rate uint64, mtu int) uint64 {
	return max(rate/1000, FloorFrames*uint64(mtu+EthernetHeader))
}

// Limit is the most a port's tbf queues, in bytes, at rate bytes/s:
// 10 ms at line rate, and at least three buckets and three 64 KiB GSO
// packets. A sender's own port must not drop what TCP Small Queues lets it
// queue there (two GSO packets, or a first flight, on a veth whose RTT is
// tiny): tbf_segment queues a GSO packet larger than the bucket frame by
// frame and drops the frames that find the queue full.
func Limit(rate uint64, mtu int) uint64 {
	return max(rate/100, 3*Burst(rate, mtu), 3*GSOMaxSize)
}

// GSOMaxSize is the largest GSO packet a veth takes by default
// (GSO_LEGACY_MAX_SIZE).
const GSOMaxSize = 64 << 10
