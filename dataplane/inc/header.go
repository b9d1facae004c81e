// Package inc is the in-network aggregation (INC) protocol the emulated
// ToRs speak: the wire header as a gopacket layer over UDP, the fixed-point
// conversion of float32 gradients, and the aggregator engine, a pure state
// machine in the style of SwitchML's switch pipeline (slots, a shadow set,
// contributor bitmaps, loss recovery) with ATP's multi-tenant, multi-rack
// twist (a slot pool partitioned among jobs, hierarchical aggregation
// rooted at one ToR). docs/inc.md describes the format and the rules.
package inc

import (
	"encoding/binary"
	"fmt"
	"slices"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
)

// Port is the UDP port aggregators listen on and workers send from, as
// SwitchML reserves one UDP port for its packets.
const Port = 48864

// Version is the header version this package speaks.
const Version = 2 // 2: elements little endian

// HeaderLen is the size of the INC header in bytes.
const HeaderLen = 20

// MaxElems is the most int32 elements one packet carries: what fits a
// 1500-byte MTU after the IPv4 (20), UDP (8) and INC headers, rounded down
// to a multiple of 8.
const MaxElems = (1500 - 20 - 8 - HeaderLen) / 4 / 8 * 8

// MaxContributors is the most contributors one slot can count (the width
// of its bitmap).
const MaxContributors = 64

// Type is what a packet is.
type Type uint8

// Packet types.
const (
	// TypeData carries a worker's block to its ToR.
	TypeData Type = 1
	// TypeResult carries a completed sum down: aggregator to worker, or
	// root ToR to the ToR below it.
	TypeResult Type = 2
	// TypePartial carries a ToR's partial sum up to the job's root ToR.
	TypePartial Type = 3
	// TypeRefused answers a packet of a job the aggregator has not admitted.
	TypeRefused Type = 4
)

func (t Type) String() string {
	switch t {
	case TypeData:
		return "data"
	case TypeResult:
		return "result"
	case TypePartial:
		return "partial"
	case TypeRefused:
		return "refused"
	}
	return fmt.Sprintf("type(%d)", uint8(t))
}

// setBit marks the slot field's shadow set (SwitchML's "ver" bit).
const setBit = 1 << 15

// MaxSlots is the most slots a job's partition can address (15 bits).
const MaxSlots = setBit

// LayerTypeINC is the gopacket layer type of the INC header, registered
// once with a high number no gopacket layer uses, and bound to UDP Port.
var LayerTypeINC = gopacket.RegisterLayerType(14864, gopacket.LayerTypeMetadata{
	Name: "INC", Decoder: gopacket.DecodeFunc(decodeINC)})

func init() {
	layers.RegisterUDPPortLayerType(layers.UDPPort(Port), LayerTypeINC)
}

// Header is the INC header, followed on the wire by Count little-endian
// int32 elements (the layer's Payload).
type Header struct {
	layers.BaseLayer
	Type Type
	// Job is the job's number, as the orchestrator admitted it.
	Job uint16
	// Worker is the contributor's index at the level the packet goes to:
	// a worker's index among its ToR's workers, or a ToR's index among
	// the job's ToRs.
	Worker uint16
	// Workers is how many contributors complete a slot at that level.
	Workers uint16
	// Slot is the slot index in the job's partition; Set is its shadow
	// copy (SwitchML alternates the two sets of a slot).
	Slot uint16
	Set  uint8
	// Count is how many elements follow (at most MaxElems).
	Count uint16
	// Packet numbers the block: which part of the tensor this slot holds.
	Packet uint32
	// Exp is the block's fixed-point exponent: element = value * 2^Exp.
	Exp int8
	// Flags carry the congestion signal (FlagRetransmit, FlagCongestion).
	Flags Flags
}

// Flags are the header's congestion bits.
type Flags uint8

const (
	// FlagRetransmit marks a worker's block sent again after a timeout.
	FlagRetransmit Flags = 1 << 0
	// FlagCongestion (ATP's ECN mark, carried in the aggregated result)
	// tells every worker of a job that some worker of it timed out since
	// the last mark: all of them cut their congestion windows on the
	// same result, so that the windows stay alike (workers/inc).
	FlagCongestion Flags = 1 << 1
	knownFlags           = FlagRetransmit | FlagCongestion
)

// LayerType returns LayerTypeINC.
func (h *Header) LayerType() gopacket.LayerType { return LayerTypeINC }

// CanDecode returns LayerTypeINC (gopacket.DecodingLayer).
func (h *Header) CanDecode() gopacket.LayerClass { return LayerTypeINC }

// NextLayerType returns the payload layer: the elements are no layer.
func (h *Header) NextLayerType() gopacket.LayerType { return gopacket.LayerTypePayload }

// DecodeFromBytes reads the header from data without copying: Payload
// aliases data. It checks the length, version, type, slot and count.
//
// Layout (header fields big endian; the elements after it little endian): 0 version, 1 type, 2 job, 4 worker, 6 workers,
// 8 slot (bit 15: set), 10 count, 12 packet, 16 exponent, 17 flags,
// 18..19 zero.
func (h *Header) DecodeFromBytes(data []byte, df gopacket.DecodeFeedback) error {
	if len(data) < HeaderLen {
		df.SetTruncated()
		return fmt.Errorf("inc: %d bytes, shorter than the %d-byte header", len(data), HeaderLen)
	}
	if data[0] != Version {
		return fmt.Errorf("inc: version %d, want %d", data[0], Version)
	}
	h.Type = Type(data[1])
	if h.Type < TypeData || h.Type > TypeRefused {
		return fmt.Errorf("inc: unknown packet type %d", data[1])
	}
	h.Job = binary.BigEndian.Uint16(data[2:])
	h.Worker = binary.BigEndian.Uint16(data[4:])
	h.Workers = binary.BigEndian.Uint16(data[6:])
	slot := binary.BigEndian.Uint16(data[8:])
	h.Slot, h.Set = slot&^setBit, uint8(slot>>15)
	h.Count = binary.BigEndian.Uint16(data[10:])
	h.Packet = binary.BigEndian.Uint32(data[12:])
	h.Exp = int8(data[16])
	h.Flags = Flags(data[17])
	if h.Flags&^knownFlags != 0 {
		return fmt.Errorf("inc: unknown flags %#x", data[17])
	}
	if h.Count > MaxElems {
		return fmt.Errorf("inc: %d elements, over the %d a packet holds", h.Count, MaxElems)
	}
	if h.Worker >= MaxContributors || h.Workers > MaxContributors {
		return fmt.Errorf("inc: contributor %d of %d, over the %d a slot counts", h.Worker, h.Workers, MaxContributors)
	}
	need := HeaderLen + 4*int(h.Count)
	if h.Type == TypeRefused {
		need = HeaderLen
	}
	if len(data) < need {
		df.SetTruncated()
		return fmt.Errorf("inc: %d bytes for %d elements, want %d", len(data), h.Count, need)
	}
	h.BaseLayer = layers.BaseLayer{Contents: data[:HeaderLen], Payload: data[HeaderLen:need]}
	return nil
}

// SerializeTo prepends the header to the buffer, which holds the
// elements. With FixLengths, Count is set from the payload's length.
func (h *Header) SerializeTo(b gopacket.SerializeBuffer, opts gopacket.SerializeOptions) error {
	if opts.FixLengths && h.Type != TypeRefused {
		n := len(b.Bytes())
		if n%4 != 0 || n/4 > MaxElems {
			return fmt.Errorf("inc: payload of %d bytes is not 0..%d int32 elements", n, MaxElems)
		}
		h.Count = uint16(n / 4)
	}
	bytes, err := b.PrependBytes(HeaderLen)
	if err != nil {
		return err
	}
	h.put(bytes)
	return nil
}

// put writes the header into the first HeaderLen bytes of b.
func (h *Header) put(b []byte) {
	b[0], b[1] = Version, byte(h.Type)
	binary.BigEndian.PutUint16(b[2:], h.Job)
	binary.BigEndian.PutUint16(b[4:], h.Worker)
	binary.BigEndian.PutUint16(b[6:], h.Workers)
	binary.BigEndian.PutUint16(b[8:], h.Slot&^setBit|uint16(h.Set&1)<<15)
	binary.BigEndian.PutUint16(b[10:], h.Count)
	binary.BigEndian.PutUint32(b[12:], h.Packet)
	b[16], b[17], b[18], b[19] = byte(h.Exp), byte(h.Flags), 0, 0
}

// Elems decodes the payload's elements into dst (len(dst) >= Count) and
// returns dst[:Count].
func (h *Header) Elems(dst []int32) []int32 {
	dst = dst[:h.Count]
	getElems(dst, h.Payload)
	return dst
}

// Append encodes a packet, header then elements, onto b: the hot path's
// allocation-free form of SerializeTo. Count is taken from len(elems).
func Append(b []byte, h *Header, elems []int32) []byte {
	h.Count = uint16(len(elems))
	n := len(b)
	b = slices.Grow(b, HeaderLen+4*len(elems))[:n+HeaderLen+4*len(elems)]
	h.put(b[n:])
	putElems(b[n+HeaderLen:], elems)
	return b
}

// AppendWire is Append with the elements already in wire order
// (4·Count bytes): a copy, no conversion. Count is taken from
// len(payload)/4.
func AppendWire(b []byte, h *Header, payload []byte) []byte {
	h.Count = uint16(len(payload) / 4)
	n := len(b)
	b = slices.Grow(b, HeaderLen+len(payload))[:n+HeaderLen]
	h.put(b[n:])
	return append(b, payload...)
}

func decodeINC(data []byte, p gopacket.PacketBuilder) error {
	h := &Header{}
	if err := h.DecodeFromBytes(data, p); err != nil {
		return err
	}
	p.AddLayer(h)
	return p.NextDecoder(h.NextLayerType())
}

var (
	_ gopacket.DecodingLayer     = (*Header)(nil)
	_ gopacket.SerializableLayer = (*Header)(nil)
)
