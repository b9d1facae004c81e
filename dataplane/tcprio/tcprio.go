// Package tcprio is the one home of the tc filter priorities of emu's BPF
// programs on a clsact hook. tc runs filters in ascending priority, and a
// direct-action program that returns TC_ACT_UNSPEC hands the frame to the
// next one, so the order is: loss injection first (it may drop a frame
// before anything forwards it), then the forwarding fast paths.
package tcprio

import "encoding/binary"

const (
	// Loss is dataplane/loss/inject's random drop.
	Loss = 1
	// FairQueue is dataplane/fairq's classifier on a fair port's egress:
	// it only picks the frame's class and hands every frame on.
	FairQueue = 5
	// FastPath is the OCS port program (ocsfabric/fastpath) and the ToR
	// path program (ocsfabric/torpath); they never share a port.
	FastPath = 10
)

// NetOrder16 is v, a 16-bit field in network order (an EtherType in the
// frame, __sk_buff.protocol), as a program's 16-bit load of it reads in a
// host-order register: what to compare that load with.
func NetOrder16(v uint16) int32 {
	return int32(binary.NativeEndian.Uint16(binary.BigEndian.AppendUint16(nil, v)))
}
