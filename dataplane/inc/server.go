package inc

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"time"

	"golang.org/x/net/ipv4"
)

// DefaultBatch is how many datagrams the server reads and writes per
// system call (recvmmsg/sendmmsg). docs/inc.md has the measurement that
// chose batch I/O over one datagram per call.
const DefaultBatch = 64

// ServeOptions tune Serve.
type ServeOptions struct {
	// Batch is how many datagrams one system call reads or writes; 1 is
	// the simple loop. Zero: DefaultBatch.
	Batch int
	// Drop, if set, is asked for every datagram read and every one to be
	// written; true drops it. Tests inject seeded random loss with it.
	Drop func() bool
	// GSO coalesces the datagrams of a batch to one destination into one
	// kernel buffer (UDP_SEGMENT) and reads coalesced ones (UDP_GRO); see
	// batchio.go. Batch mode only.
	GSO bool
	// Src, if set, is the source address of every datagram sent
	// (IP_PKTINFO): a ToR sends from its rack gateway address, which every
	// rack routes, rather than from the uplink address the kernel would
	// pick, which only its circuit neighbours know.
	Src netip.Addr
}

// Listen opens the aggregator's UDP port (Port) in the calling thread's
// network namespace, with socket buffers deep enough for a window of
// every job's slots.
func Listen() (*net.UDPConn, error) {
	conn, err := net.ListenUDP("udp4", &net.UDPAddr{Port: Port})
	if err != nil {
		return nil, fmt.Errorf("aggregator: %w", err)
	}
	_ = conn.SetReadBuffer(8 << 20)
	_ = conn.SetWriteBuffer(8 << 20)
	return conn, nil
}

// Serve runs an engine on a UDP socket until ctx ends. With Batch > 1 it
// reads and writes up to Batch datagrams per system call (x/net/ipv4
// ReadBatch and WriteBatch, recvmmsg and sendmmsg on Linux); with Batch 1
// it reads one datagram and writes each reply at once, the simple loop the
// benchmark compares against.
func Serve(ctx context.Context, conn *net.UDPConn, e *Engine, opt ServeOptions) error {
	stop := context.AfterFunc(ctx, func() { _ = conn.Close() })
	defer stop()
	if opt.Batch == 0 {
		opt.Batch = DefaultBatch
	}
	if opt.Drop == nil {
		opt.Drop = func() bool { return false }
	}
	var oob []byte
	if opt.Src.IsValid() {
		oob = (&ipv4.ControlMessage{Src: opt.Src.AsSlice()}).Marshal()
	}
	var err error
	if opt.Batch == 1 {
		err = serveSimple(conn, e, opt.Drop, oob)
	} else {
		err = serveBatch(conn, e, opt)
	}
	if ctx.Err() != nil {
		return nil
	}
	return fmt.Errorf("inc: serve: %w", err)
}

func serveSimple(conn *net.UDPConn, e *Engine, drop func() bool, oob []byte) error {
	buf := make([]byte, 64<<10)
	out := make([]byte, 0, 2048)
	var h Header
	var werr error
	emit := func(to netip.AddrPort, oh *Header, payload []byte) {
		if drop() {
			return
		}
		out = AppendWire(out[:0], oh, payload)
		if _, _, err := conn.WriteMsgUDPAddrPort(out, oob, to); err != nil && werr == nil {
			werr = err
		}
	}
	for {
		n, from, err := conn.ReadFromUDPAddrPort(buf)
		if err != nil {
			return err
		}
		if drop() {
			continue
		}
		if h.DecodeFromBytes(buf[:n], nilDF{}) != nil {
			e.Malformed()
			continue
		}
		e.Handle(unmap(from), &h, emit)
		if werr != nil && !transient(werr) {
			return werr
		}
		werr = nil
	}
}

// blockingWait bounds one blocking read of the aggregator (BlockingReads):
// how long closing its socket may take to end Serve.
const blockingWait = 20 * time.Millisecond

func serveBatch(conn *net.UDPConn, e *Engine, opt ServeOptions) error {
	if opt.GSO {
		if err := EnableGRO(conn); err != nil {
			return err
		}
	}
	r := NewReader(conn, opt.Batch)
	if err := r.BlockingReads(conn, blockingWait); err != nil {
		return err
	}
	if err := r.Timestamps(conn); err != nil {
		return err
	}
	w := NewWriter(conn, opt.Batch, opt.Src, opt.GSO)
	w.Drop = opt.Drop
	var werr error
	emit := func(to netip.AddrPort, oh *Header, payload []byte) {
		if err := w.AddWire(to, oh, payload); err != nil && werr == nil {
			werr = err
		}
	}
	var h Header
	handle := func(from netip.AddrPort, b []byte) {
		if opt.Drop() {
			return
		}
		if h.DecodeFromBytes(b, nilDF{}) != nil {
			e.Malformed()
			return
		}
		e.Handle(from, &h, emit)
	}
	for {
		if err := r.Read(handle); err != nil {
			return err
		}
		if err := w.Flush(); err != nil {
			return err
		}
		if wait, n, readAt := r.LastBatch(); n > 0 {
			e.Held(wait+int64(n)*(time.Now().UnixNano()-readAt), n)
		}
		if werr != nil {
			return werr
		}
	}
}

// transient reports a send error that concerns one destination (ICMP
// unreachable reported on the socket, a full queue): the aggregator keeps
// serving, and the sender's retransmission recovers.
func transient(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && !errors.Is(err, net.ErrClosed)
}

func unmap(a netip.AddrPort) netip.AddrPort { return netip.AddrPortFrom(a.Addr().Unmap(), a.Port()) }

type nilDF struct{}

func (nilDF) SetTruncated() {}
