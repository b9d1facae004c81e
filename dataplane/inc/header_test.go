package inc

import (
	"net"
	"slices"
	"strings"
	"testing"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
)

// TestLayerRoundTrip serializes a whole frame with gopacket (Ethernet,
// IPv4, UDP to Port, INC) and decodes it back through the UDP port
// registration.
func TestLayerRoundTrip(t *testing.T) {
	for _, h := range []Header{
		{Type: TypeData, Job: 7, Worker: 2, Workers: 3, Slot: 100, Set: 1, Packet: 1 << 30, Exp: -12, Flags: FlagRetransmit},
		{Type: TypeResult, Job: 65535, Worker: 63, Workers: 64, Slot: MaxSlots - 1, Set: 0, Packet: 0, Exp: NoExp, Flags: FlagCongestion},
		{Type: TypePartial, Job: 1, Worker: 0, Workers: 1, Slot: 0, Set: 1, Packet: 42, Exp: 0},
	} {
		elems := []int32{1, -1, 1 << 30, -(1 << 31), 0}
		payload := Append(nil, &Header{}, elems)[HeaderLen:]
		buf := gopacket.NewSerializeBuffer()
		ip := &layers.IPv4{Version: 4, TTL: 64, Protocol: layers.IPProtocolUDP, SrcIP: net.IP{10, 0, 0, 1}, DstIP: net.IP{10, 0, 0, 254}}
		udp := &layers.UDP{SrcPort: 40000, DstPort: Port}
		_ = udp.SetNetworkLayerForChecksum(ip)
		want := h
		err := gopacket.SerializeLayers(buf, gopacket.SerializeOptions{FixLengths: true, ComputeChecksums: true},
			&layers.Ethernet{SrcMAC: net.HardwareAddr{2, 0, 0, 0, 0, 1}, DstMAC: net.HardwareAddr{2, 0, 0, 0, 0, 2}, EthernetType: layers.EthernetTypeIPv4},
			ip, udp, &h, gopacket.Payload(payload))
		if err != nil {
			t.Fatal(err)
		}
		pkt := gopacket.NewPacket(buf.Bytes(), layers.LayerTypeEthernet, gopacket.Default)
		l := pkt.Layer(LayerTypeINC)
		if l == nil {
			t.Fatalf("no INC layer in %v", pkt)
		}
		got := l.(*Header)
		want.Count = uint16(len(elems))
		if got.Type != want.Type || got.Job != want.Job || got.Worker != want.Worker || got.Workers != want.Workers || got.Slot != want.Slot ||
			got.Set != want.Set || got.Count != want.Count || got.Packet != want.Packet || got.Exp != want.Exp || got.Flags != want.Flags {
			t.Errorf("decoded %+v, want %+v", got, want)
		}
		if e := got.Elems(make([]int32, MaxElems)); !slices.Equal(e, elems) {
			t.Errorf("elements %v, want %v", e, elems)
		}
	}
}

// TestAppendMatchesSerialize: the hot path's Append (and AppendWire, from
// wire-order elements) writes the same bytes as the gopacket layer.
func TestAppendMatchesSerialize(t *testing.T) {
	elems := []int32{5, 6, 7}
	h := Header{Type: TypeData, Job: 3, Worker: 1, Workers: 2, Slot: 9, Set: 1, Packet: 77, Exp: 3}
	a := Append(nil, &h, elems)
	buf := gopacket.NewSerializeBuffer()
	h2 := h
	if err := gopacket.SerializeLayers(buf, gopacket.SerializeOptions{FixLengths: true}, &h2, gopacket.Payload(a[HeaderLen:])); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(a, buf.Bytes()) {
		t.Errorf("Append %x\nSerialize %x", a, buf.Bytes())
	}
	h3 := h
	if w := AppendWire([]byte{9}, &h3, a[HeaderLen:]); !slices.Equal(w[1:], a) || w[0] != 9 || h3.Count != 3 {
		t.Errorf("AppendWire %x, want %x after the prefix", w, a)
	}
}

func TestDecodeRejects(t *testing.T) {
	good := Append(nil, &Header{Type: TypeData, Workers: 2, Worker: 1}, []int32{1, 2})
	mod := func(f func(b []byte) []byte) []byte { return f(slices.Clone(good)) }
	for _, c := range []struct {
		name, want string
		b          []byte
	}{
		{"short", "shorter than", good[:HeaderLen-1]},
		{"version 1 (big-endian elements)", "version", mod(func(b []byte) []byte { b[0] = 1; return b })},
		{"type", "unknown packet type", mod(func(b []byte) []byte { b[1] = 9; return b })},
		{"truncated elements", "for 2 elements", good[:len(good)-1]},
		{"count over k", "over the", mod(func(b []byte) []byte { b[10], b[11] = 0xff, 0xff; return b })},
		{"contributor", "contributor", mod(func(b []byte) []byte { b[4], b[5] = 0, 64; return b })},
		{"flags", "unknown flags", mod(func(b []byte) []byte { b[17] = 0x80; return b })},
	} {
		var h Header
		err := h.DecodeFromBytes(c.b, gopacket.NilDecodeFeedback)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an error with %q", c.name, err, c.want)
		}
	}
}

func TestSerializeRejectsBadPayload(t *testing.T) {
	buf := gopacket.NewSerializeBuffer()
	if err := gopacket.SerializeLayers(buf, gopacket.SerializeOptions{FixLengths: true}, &Header{Type: TypeData}, gopacket.Payload([]byte{1, 2, 3})); err == nil {
		t.Error("a 3-byte payload was accepted as int32 elements")
	}
}

// FuzzDecode: any bytes decode or fail, never panic, and what decodes
// re-encodes to the same bytes.
func FuzzDecode(f *testing.F) {
	f.Add(Append(nil, &Header{Type: TypeData, Workers: 2, Worker: 1, Slot: 3, Set: 1}, []int32{1, 2}))
	f.Add(Append(nil, &Header{Type: TypeRefused, Workers: 1}, nil))
	f.Fuzz(func(t *testing.T, b []byte) {
		var h Header
		if h.DecodeFromBytes(b, gopacket.NilDecodeFeedback) != nil {
			return
		}
		if h.Type == TypeRefused {
			return
		}
		elems := h.Elems(make([]int32, MaxElems))
		var h2 Header
		if err := h2.DecodeFromBytes(Append(nil, &h, elems), gopacket.NilDecodeFeedback); err != nil {
			t.Fatalf("re-encoded packet does not decode: %v", err)
		}
		if fields(&h2) != fields(&h) || !slices.Equal(h2.Elems(make([]int32, MaxElems)), elems) {
			t.Errorf("re-decoded %+v, first decoded %+v", h2, h)
		}
	})
}

func TestFixedPoint(t *testing.T) {
	for _, c := range []struct {
		max  float32
		n    int
		want int8
	}{
		{1, 1, 29},    // 1 < 2^1: 30-1-0
		{1, 4, 27},    // 2 more bits for 4 workers
		{0.75, 3, 28}, // 0.75 < 2^0
		{0, 8, NoExp},
		{1e30, 2, -71},
	} {
		if got := Exponent(c.max, c.n); got != c.want {
			t.Errorf("Exponent(%g, %d) = %d, want %d", c.max, c.n, got, c.want)
		}
	}
	// n blocks at their largest magnitude sum without overflow.
	for _, n := range []int{1, 2, 3, 64} {
		x := []float32{-3.75, 3.75}
		e := Exponent(MaxAbs(x), n)
		q := make([]int32, 2)
		ToFixed(q, x, e)
		var sum int64
		for range n {
			sum += int64(q[1])
		}
		if sum >= 1<<31 {
			t.Errorf("%d workers: sum %d overflows int32", n, sum)
		}
		back := make([]float32, 2)
		FromFixed(back, q, e)
		if back[0] != x[0] || back[1] != x[1] {
			t.Errorf("3.75 round trip: %v", back)
		}
	}
	if shift(5, 1) != 3 || shift(-5, 1) != -2 || shift(7, 40) != 0 || shift(7, 0) != 7 {
		t.Error("shift does not round to nearest")
	}
}

func fields(h *Header) [10]int64 {
	return [10]int64{int64(h.Flags), int64(h.Type), int64(h.Job), int64(h.Worker), int64(h.Workers), int64(h.Slot), int64(h.Set), int64(h.Count), int64(h.Packet), int64(h.Exp)}
}
