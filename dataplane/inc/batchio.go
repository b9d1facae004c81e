package inc

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"time"
	"unsafe"

	"golang.org/x/net/ipv4"
	"golang.org/x/sys/unix"
)

// Batch I/O for INC sockets: many datagrams per system call (recvmmsg,
// sendmmsg), and, with GSO, many datagrams per kernel buffer. UDP GSO
// (UDP_SEGMENT) lets one buffer of up to maxSegs equal-size datagrams to
// one destination cross the stack, the veths and the ToR's forwarding as
// one skb; UDP_GRO on the receiving socket hands it over whole, with its
// segment size. On the wire model they are still separate packets of at
// most the MTU (the kernel splits them wherever a hop needs it, and the
// shaping counts every byte); the aggregator still handles each datagram
// by itself. The per-packet cost of the kernel's stack, not the
// aggregation, is what limits a userspace aggregator on a small machine.

// maxSegs is the most datagrams one GSO buffer carries (the kernel's
// UDP_MAX_SEGMENTS is 64; 44 full INC packets fill 64 KiB).
const maxSegs = 44

// gsoBuf is the size of one batch buffer: a full GSO buffer.
const gsoBuf = 64 << 10

// EnableGRO asks the kernel to deliver coalesced datagrams whole
// (UDP_GRO); a Reader splits them.
func EnableGRO(conn *net.UDPConn) error { return setFlag(conn, unix.SOL_UDP, unix.UDP_GRO, "UDP_GRO") }

// setFlag sets an integer socket option to 1.
func setFlag(conn *net.UDPConn, level, opt int, name string) error {
	rc, err := conn.SyscallConn()
	if err != nil {
		return err
	}
	var serr error
	if err := rc.Control(func(fd uintptr) { serr = unix.SetsockoptInt(int(fd), level, opt, 1) }); err != nil {
		return err
	}
	if serr != nil {
		return fmt.Errorf("%s: %w", name, serr)
	}
	return nil
}

// Reader reads batches of datagrams from a UDP socket.
type Reader struct {
	pc    *ipv4.PacketConn
	msgs  []ipv4.Message
	flags int // of recvmmsg

	// With Timestamps: the time the last batch's datagrams waited in the
	// socket until the read returned at readAt (CLOCK_REALTIME ns), summed
	// (lastWaitNs, lastN), and the same over every read (waitNs, waitN).
	stamps             bool
	lastWaitNs, readAt int64
	lastN              int
	waitNs             int64
	waitN              uint64
}

// Timestamps asks the kernel to stamp every datagram's arrival
// (SO_TIMESTAMPNS): the reader then adds up how long datagrams waited in
// the socket before a read returned them (Waited), and keeps the last
// batch's for a caller that times what it did with them (LastBatch).
// That wait is a user-space hop's cost the network does not see: a
// process waking up, or busy with the batch before.
func (r *Reader) Timestamps(conn *net.UDPConn) error {
	if err := setFlag(conn, unix.SOL_SOCKET, unix.SO_TIMESTAMPNS, "SO_TIMESTAMPNS"); err != nil {
		return err
	}
	r.stamps = true
	return nil
}

// Waited is the time datagrams waited in the socket until a read returned
// them, summed, and how many datagrams (coalesced ones each count), since
// Timestamps.
func (r *Reader) Waited() (time.Duration, uint64) { return time.Duration(r.waitNs), r.waitN }

// LastBatch is the time the last batch's stamped datagrams waited in the
// socket, summed, their number, and when the read returned them
// (time.Now().UnixNano()'s clock): a caller that finished with them at t
// held them waitNs + n x (t - readAt) in all.
func (r *Reader) LastBatch() (waitNs int64, n int, readAt int64) {
	return r.lastWaitNs, r.lastN, r.readAt
}

// BlockingReads makes the reader's socket block in the kernel for up to
// wait per read instead of parking in Go's poller: a thread that serves one
// socket and nothing else (an aggregator) then sleeps in recvmmsg and the
// kernel wakes it when a datagram arrives, with no hand-off between the
// poller's thread and the reader's (futex wake-ups were 12 % of the
// benchmark's CPU, docs/inc.md). recvmmsg returns as soon as one datagram
// is in (MSG_WAITFORONE); after wait without one it falls back to the
// poller. Closing the socket takes effect within wait. Deadlines no longer
// apply to reads. Signals interrupt a blocking read (EINTR); Read retries.
func (r *Reader) BlockingReads(conn *net.UDPConn, wait time.Duration) error {
	rc, err := conn.SyscallConn()
	if err != nil {
		return err
	}
	var serr error
	if err := rc.Control(func(fd uintptr) {
		tv := unix.NsecToTimeval(wait.Nanoseconds())
		if serr = unix.SetsockoptTimeval(int(fd), unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv); serr == nil {
			serr = unix.SetNonblock(int(fd), false)
		}
	}); err != nil {
		return err
	}
	if serr != nil {
		return fmt.Errorf("blocking reads: %w", serr)
	}
	r.flags = unix.MSG_WAITFORONE
	return nil
}

// NewReader returns a reader of up to batch messages per call.
func NewReader(conn *net.UDPConn, batch int) *Reader {
	r := &Reader{pc: ipv4.NewPacketConn(conn), msgs: make([]ipv4.Message, batch)}
	for i := range r.msgs {
		r.msgs[i].Buffers = [][]byte{make([]byte, gsoBuf)}
		r.msgs[i].OOB = make([]byte, unix.CmsgSpace(4)*2+unix.CmsgSpace(16))
	}
	return r
}

// Read blocks for one batch and calls fn for every datagram in it
// (coalesced ones split at their segment size). b is valid during fn only.
func (r *Reader) Read(fn func(from netip.AddrPort, b []byte)) error {
	n, err := r.pc.ReadBatch(r.msgs, r.flags)
	for err != nil && errors.Is(err, unix.EINTR) {
		// A signal (the Go runtime's preemption) ended a blocking read
		// that SO_RCVTIMEO keeps from being restarted.
		n, err = r.pc.ReadBatch(r.msgs, r.flags)
	}
	if err != nil {
		return err
	}
	var now int64
	if r.stamps {
		now = time.Now().UnixNano()
		r.lastWaitNs, r.lastN, r.readAt = 0, 0, now
	}
	for _, m := range r.msgs[:n] {
		ua, ok := m.Addr.(*net.UDPAddr)
		if !ok {
			continue
		}
		from := unmap(ua.AddrPort())
		b := m.Buffers[0][:m.N]
		seg, at := controls(m.OOB[:m.NN])
		if seg <= 0 {
			seg = len(b)
		}
		if r.stamps && at > 0 && len(b) > 0 {
			k := (len(b) + seg - 1) / seg
			w := int64(k) * max(0, now-at)
			r.lastWaitNs += w
			r.lastN += k
			r.waitNs += w
			r.waitN += uint64(k)
		}
		for len(b) > 0 {
			k := min(seg, len(b))
			fn(from, b[:k])
			b = b[k:]
		}
	}
	return nil
}

// controls returns the segment size of a coalesced read (0: none) and the
// kernel's arrival time (CLOCK_REALTIME ns; 0: not stamped). It walks the
// control messages in place: unix.ParseSocketControlMessage allocates on
// every datagram of the hot path.
func controls(oob []byte) (seg int, atNs int64) {
	hdr := unix.CmsgLen(0)
	for len(oob) >= hdr {
		h := (*unix.Cmsghdr)(unsafe.Pointer(&oob[0]))
		n := int(h.Len)
		if n < hdr || n > len(oob) {
			return seg, atNs
		}
		data := oob[hdr:n]
		switch {
		case h.Level == unix.SOL_UDP && h.Type == unix.UDP_GRO && len(data) >= 4:
			seg = int(int32(binary.NativeEndian.Uint32(data)))
		case h.Level == unix.SOL_SOCKET && h.Type == unix.SCM_TIMESTAMPNS && len(data) >= 16:
			atNs = int64(binary.NativeEndian.Uint64(data))*1e9 + int64(binary.NativeEndian.Uint64(data[8:]))
		}
		oob = oob[min(unix.CmsgSpace(n-hdr), len(oob)):]
	}
	return seg, atNs
}

// Writer batches INC packets: Add queues one, Flush sends them all. With
// GSO, consecutive packets of one size to one destination share a buffer.
type Writer struct {
	pc    *ipv4.PacketConn
	gso   bool
	src   []byte // IP_PKTINFO control message, or nil
	msgs  []ipv4.Message
	bufs  [][]byte
	segs  []int // segment size of each message's packets
	count []int
	open  []bool // more packets may join
	dst   []netip.AddrPort
	addrs []net.UDPAddr
	oobs  [][]byte
	// Drop, if set, drops a packet Add is given when it returns true.
	Drop func() bool
}

// NewWriter returns a writer of up to batch messages per call; src, if
// valid, is the source address of every packet; gso coalesces.
func NewWriter(conn *net.UDPConn, batch int, src netip.Addr, gso bool) *Writer {
	w := &Writer{pc: ipv4.NewPacketConn(conn), gso: gso, msgs: make([]ipv4.Message, 0, batch), bufs: make([][]byte, batch),
		segs: make([]int, batch), count: make([]int, batch), open: make([]bool, batch), dst: make([]netip.AddrPort, batch),
		addrs: make([]net.UDPAddr, batch), oobs: make([][]byte, batch)}
	if src.IsValid() {
		w.src = (&ipv4.ControlMessage{Src: src.AsSlice()}).Marshal()
	}
	for i := range w.bufs {
		size := 2048
		if gso {
			size = gsoBuf
		}
		w.bufs[i] = make([]byte, 0, size)
		w.oobs[i] = make([]byte, 0, len(w.src)+unix.CmsgSpace(2))
	}
	return w
}

// Len is the number of packets queued.
func (w *Writer) Len() int { return len(w.msgs) }

// Add queues one packet; it may flush.
func (w *Writer) Add(to netip.AddrPort, h *Header, elems []int32) error {
	return w.add(to, h, elems, nil, 4*len(elems))
}

// AddWire queues one packet whose elements are already in wire order
// (an aggregator's results and partial sums); it may flush.
func (w *Writer) AddWire(to netip.AddrPort, h *Header, payload []byte) error {
	return w.add(to, h, nil, payload, len(payload))
}

// encode appends the packet: from elems, or from payload when elems is
// nil.
func encode(b []byte, h *Header, elems []int32, payload []byte) []byte {
	if elems != nil {
		return Append(b, h, elems)
	}
	return AppendWire(b, h, payload)
}

func (w *Writer) add(to netip.AddrPort, h *Header, elems []int32, payload []byte, n int) error {
	if w.Drop != nil && w.Drop() {
		return nil
	}
	size := HeaderLen + n
	if w.gso {
		// Join the newest open message to the same destination.
		for i := len(w.msgs) - 1; i >= 0 && i >= len(w.msgs)-4; i-- {
			if w.open[i] && w.dst[i] == to && size <= w.segs[i] && len(w.bufs[i])+size <= gsoBuf-64 {
				w.bufs[i] = encode(w.bufs[i], h, elems, payload)
				w.count[i]++
				// A shorter packet can only be the last of its buffer.
				w.open[i] = size == w.segs[i] && w.count[i] < maxSegs
				return nil
			}
		}
	}
	if len(w.msgs) == cap(w.msgs) {
		if err := w.Flush(); err != nil {
			return err
		}
	}
	i := len(w.msgs)
	w.bufs[i] = encode(w.bufs[i][:0], h, elems, payload)
	w.segs[i], w.count[i], w.open[i], w.dst[i] = size, 1, w.gso, to
	w.addrs[i] = net.UDPAddr{IP: to.Addr().AsSlice(), Port: int(to.Port())}
	w.msgs = append(w.msgs, ipv4.Message{Addr: &w.addrs[i]})
	return nil
}

// Flush sends everything queued. A destination the kernel refuses (no
// route, ICMP reported on the socket) loses its packets, as a lossy
// network would; other errors are returned.
func (w *Writer) Flush() error {
	for i := range w.msgs {
		w.msgs[i].Buffers = [][]byte{w.bufs[i]}
		oob := append(w.oobs[i][:0], w.src...)
		if w.count[i] > 1 {
			oob = append(oob, segment(w.segs[i])...)
		}
		w.msgs[i].OOB = oob
	}
	for done := 0; done < len(w.msgs); {
		n, err := w.pc.WriteBatch(w.msgs[done:], 0)
		if err != nil {
			var op *net.OpError
			if !errors.As(err, &op) || errors.Is(err, net.ErrClosed) {
				w.msgs = w.msgs[:0]
				return err
			}
			n = max(n, 1) // skip the message the kernel refused: its packets are lost
		}
		done += n
	}
	w.msgs = w.msgs[:0]
	return nil
}

// segment is a UDP_SEGMENT control message for datagrams of size bytes.
func segment(size int) []byte {
	b := make([]byte, unix.CmsgSpace(2))
	h := (*unix.Cmsghdr)(unsafe.Pointer(&b[0]))
	h.Level, h.Type = unix.SOL_UDP, unix.UDP_SEGMENT
	h.SetLen(unix.CmsgLen(2))
	binary.NativeEndian.PutUint16(b[unix.CmsgLen(0):], uint16(size))
	return b
}
