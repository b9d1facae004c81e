package flowmodel

import "fmt"

// Model names a mode of the flow model.
type Model string

// The flow model's modes. Ideal is the papers' fluid model: flows share
// links max-min at the raw line rate. Calibrated is the same fluid model
// with what the emulation's TCP cannot avoid: the payload of a frame is
// less than the frame (Framing), so a link's payload rate is a fixed
// fraction of its rate. Per-rank dependencies need nothing more here: a
// phase starts when its predecessor's last flow ends, so a pull starts
// when its data exist; the emulation times the pull from then too.
const (
	Ideal      Model = "ideal"
	Calibrated Model = "calibrated"
)

// ParseModel reads a model name.
func ParseModel(s string) (Model, error) {
	switch Model(s) {
	case Ideal, Calibrated, TCPAware:
		return Model(s), nil
	}
	return "", fmt.Errorf("flow model %q: want %q, %q or %q", s, Ideal, Calibrated, TCPAware)
}

// Header sizes of a full-sized TCP/IPv4 segment on Ethernet, as the
// emulation sends it (Linux enables TCP timestamps by default).
const (
	EthHeader  = 14 // what tbf counts of a frame besides the IP packet (no preamble, FCS or gap on a veth)
	IPv4Header = 20
	TCPHeader  = 32 // 20 + the 12-byte timestamp option
)

// FramingInfo is the payload and the wire size of a full segment.
type FramingInfo struct {
	MTU          int
	PayloadBytes int // MSS: MTU - IP - TCP headers
	WireBytes    int // what the shaper counts: MTU + Ethernet header
}

// Framing is a full segment at an MTU: 1448 bytes of payload in 1514 on
// the wire at MTU 1500.
func Framing(mtu int) FramingInfo {
	if mtu <= 0 {
		mtu = 1500
	}
	return FramingInfo{MTU: mtu, PayloadBytes: mtu - IPv4Header - TCPHeader, WireBytes: mtu + EthHeader}
}

// Goodput is the payload's share of the wire: 1448/1514 = 95.6% at MTU
// 1500.
func (f FramingInfo) Goodput() float64 {
	if f.WireBytes <= 0 || f.PayloadBytes <= 0 {
		return 1
	}
	return float64(f.PayloadBytes) / float64(f.WireBytes)
}
