// Package inc is the worker side of in-network aggregation: a client that
// all-reduces a tensor through its ToR's aggregator (dataplane/inc) with a
// window of outstanding slots, self-clocked across each slot's two sets
// (SwitchML), and retransmission on timeout with back-off.
package inc

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"time"

	wire "github.com/ocsemu/ocsemu/dataplane/inc"
)

// ErrRefused: the aggregator has not admitted the job.
var ErrRefused = errors.New("the aggregator refused the job (not admitted)")

// Config is one worker's view of an INC job.
type Config struct {
	Job uint16
	// Worker is this worker's index among the workers under its ToR, and
	// Workers their number: what completes a slot at the ToR.
	Worker, Workers int
	// Total is the number of workers of the whole job (the fixed-point
	// exponent leaves room for all of their sums).
	Total int
	// Aggregator is the ToR's aggregator.
	Aggregator netip.AddrPort
	// Window is the number of slots the worker uses, at most the job's
	// partition; zero: DefaultWindow. It bounds the congestion window,
	// the blocks actually in flight (see run).
	Window int
	// Congestion turns on the congestion window (window.go): without it
	// Window blocks are always in flight.
	Congestion bool
	// Elems per packet, at most wire.MaxElems; zero: wire.MaxElems.
	Elems int
	// Stall bounds the time without any progress before an all-reduce
	// fails; zero: 30 s.
	Stall time.Duration
	// Drop, if set, is asked for every packet sent and received; true
	// drops it (tests inject loss with it).
	Drop func() bool
	// GSO sends the blocks of a batch as one kernel buffer (UDP_SEGMENT)
	// and reads coalesced results (UDP_GRO): dataplane/inc batchio.go.
	GSO bool
}

// DefaultWindow is the number of slots a worker keeps in flight unless
// told otherwise: 64 packets of 1.4 KiB, several times the bandwidth-delay
// product of a 1 Gbit/s emulated rack, well below the ToR's queue.
const DefaultWindow = 64

// Stats count a client's packets.
type Stats struct {
	Sent, Retransmits, Received, Ignored uint64
	// Decreases counts the congestion window's multiplicative decreases
	// (marked results, at most one per window).
	Decreases uint64
	// Window is the congestion window now, in blocks.
	Window int
	// Bytes is what the client handed to the socket (INC header and
	// elements; retransmissions included).
	Bytes uint64
	// RTTSum and RTTSamples add up the round trips of the results timed
	// (blocks sent once, Karn): a block to its sum.
	RTTSum     time.Duration
	RTTSamples uint64
	// Stall is the time the client went without any result while a
	// retransmission timeout was due: summed over the gaps between results
	// in which a block timed out (the window waiting on a lost block, or
	// an aggregator that stopped answering), each less one round trip.
	// Gaps without a timeout (a descheduled process) do not count.
	Stall time.Duration
	// Wait and Waited add up how long the datagrams the client received
	// waited in its socket until it read them (its own hop's cost in every
	// round trip: waking up, or busy sending), and how many.
	Wait   time.Duration
	Waited uint64
}

// Client all-reduces through one aggregator. It is not safe for
// concurrent use; all workers of a job must run the same sequence of
// all-reduces of the same sizes (the packet numbers and slot sets follow
// it).
type Client struct {
	cfg    Config
	conn   *net.UDPConn
	r      *wire.Reader
	w      *wire.Writer
	sets   []uint8 // next set of each slot
	packet uint32  // packet number of the next all-reduce's first block
	stats  Stats
	// srtt and rttvar estimate the round trip to a result (RFC 6298).
	srtt, rttvar time.Duration
	cc           window
}

// Dial opens a client's socket (any local port; the aggregator answers
// to it).
func Dial(cfg Config) (*Client, error) {
	if cfg.Window == 0 {
		cfg.Window = DefaultWindow
	}
	if cfg.Elems == 0 {
		cfg.Elems = wire.MaxElems
	}
	if cfg.Stall == 0 {
		cfg.Stall = 30 * time.Second
	}
	if cfg.Drop == nil {
		cfg.Drop = func() bool { return false }
	}
	switch {
	case cfg.Workers < 1 || cfg.Workers > wire.MaxContributors || cfg.Worker < 0 || cfg.Worker >= cfg.Workers:
		return nil, fmt.Errorf("inc client: worker %d of %d, want 0 <= worker < workers <= %d", cfg.Worker, cfg.Workers, wire.MaxContributors)
	case cfg.Total < cfg.Workers:
		return nil, fmt.Errorf("inc client: %d workers in the job, fewer than the %d under this ToR", cfg.Total, cfg.Workers)
	case cfg.Window < 1 || cfg.Window > wire.MaxSlots:
		return nil, fmt.Errorf("inc client: window %d, want 1..%d", cfg.Window, wire.MaxSlots)
	case cfg.Elems < 1 || cfg.Elems > wire.MaxElems:
		return nil, fmt.Errorf("inc client: %d elements per packet, want 1..%d", cfg.Elems, wire.MaxElems)
	case !cfg.Aggregator.IsValid():
		return nil, errors.New("inc client: no aggregator address")
	}
	conn, err := net.ListenUDP("udp4", &net.UDPAddr{})
	if err != nil {
		return nil, fmt.Errorf("inc client: %w", err)
	}
	_ = conn.SetReadBuffer(4 << 20)
	_ = conn.SetWriteBuffer(4 << 20)
	if cfg.GSO {
		if err := wire.EnableGRO(conn); err != nil {
			conn.Close()
			return nil, fmt.Errorf("inc client: %w", err)
		}
	}
	r := wire.NewReader(conn, 16)
	if err := r.Timestamps(conn); err != nil {
		conn.Close()
		return nil, fmt.Errorf("inc client: %w", err)
	}
	return &Client{cfg: cfg, conn: conn, r: r, w: wire.NewWriter(conn, 64, netip.Addr{}, cfg.GSO), sets: make([]uint8, cfg.Window), srtt: time.Millisecond, rttvar: time.Millisecond / 2,
		cc: newWindow(cfg.Window, !cfg.Congestion)}, nil
}

// Close closes the socket.
func (c *Client) Close() error { return c.conn.Close() }

// Stats returns the client's counters.
func (c *Client) Stats() Stats {
	st := c.stats
	st.Window = c.cc.size(c.cfg.Window)
	st.Wait, st.Waited = c.r.Waited()
	return st
}

// AllReduce replaces data by its sum over the job's workers, exactly
// (int32 elements, exponent 0).
func (c *Client) AllReduce(ctx context.Context, data []int32) error {
	k := c.cfg.Elems
	return c.run(ctx, (len(data)+k-1)/k, func(b int, h *wire.Header) []int32 {
		h.Exp = 0
		return data[b*k : min((b+1)*k, len(data))]
	}, func(b int, h *wire.Header) error {
		if h.Exp != 0 || int(h.Count) != min((b+1)*k, len(data))-b*k {
			return fmt.Errorf("block %d: result of %d elements with exponent %d", b, h.Count, h.Exp)
		}
		h.Elems(data[b*k:])
		return nil
	})
}

// AllReduceFloat32 replaces data by its sum over the job's workers in
// fixed point (wire.ErrorBound states the error).
func (c *Client) AllReduceFloat32(ctx context.Context, data []float32) error {
	k := c.cfg.Elems
	q := make([]int32, len(data))
	return c.run(ctx, (len(data)+k-1)/k, func(b int, h *wire.Header) []int32 {
		lo, hi := b*k, min((b+1)*k, len(data))
		h.Exp = wire.Exponent(wire.MaxAbs(data[lo:hi]), c.cfg.Total)
		wire.ToFixed(q[lo:hi], data[lo:hi], h.Exp)
		return q[lo:hi]
	}, func(b int, h *wire.Header) error {
		lo, hi := b*k, min((b+1)*k, len(data))
		if int(h.Count) != hi-lo {
			return fmt.Errorf("block %d: result of %d elements, want %d", b, h.Count, hi-lo)
		}
		wire.FromFixed(data[lo:hi], h.Elems(q[lo:hi]), h.Exp)
		return nil
	})
}

type pending struct {
	block  int
	active bool
	sent   time.Time
	rto    time.Duration
	tries  int
	exp    int8
}

// run moves blocks 0..n-1 through the window: block b goes in slot
// b mod W, in the slot's next set; a slot's result frees it for its next
// block (self-clocking). Of the W slots, at most the congestion window's
// worth of blocks are in flight (window.go). fill returns a block's
// elements and sets its exponent; done takes a block's result.
func (c *Client) run(ctx context.Context, n int, fill func(b int, h *wire.Header) []int32, done func(b int, h *wire.Header) error) error {
	if n == 0 {
		return nil
	}
	base := c.packet
	c.packet += uint32(n)
	w := min(c.cfg.Window, n)
	pend := make([]pending, w)
	var werr, rerr error
	var h wire.Header
	send := func(slot int) {
		p := &pend[slot]
		h = wire.Header{Type: wire.TypeData, Job: c.cfg.Job, Worker: uint16(c.cfg.Worker), Workers: uint16(c.cfg.Workers),
			Slot: uint16(slot), Set: c.sets[slot], Packet: base + uint32(p.block)}
		if p.tries == 1 {
			// The first resend of a block: the aggregators mark the
			// next sum (window.go). Later resends of the same block
			// belong to the same event.
			h.Flags = wire.FlagRetransmit
		}
		elems := fill(p.block, &h)
		p.exp, p.sent = h.Exp, time.Now()
		c.stats.Sent++
		c.stats.Bytes += uint64(wire.HeaderLen + 4*len(elems))
		if c.cfg.Drop() {
			return
		}
		if err := c.w.Add(c.cfg.Aggregator, &h, elems); err != nil && werr == nil {
			werr = fmt.Errorf("inc client: send to %v: %w", c.cfg.Aggregator, err)
		}
	}
	c.cc.recover = 0       // block numbers start again
	next, inflight := 0, 0 // the next new block; blocks sent and not done
	// fillWindow sends new blocks while the congestion window has room
	// and the next block's slot is free (its block next-w is done).
	fillWindow := func() {
		for next < n && inflight < c.cc.size(w) && !pend[next%w].active {
			pend[next%w] = pending{block: next, active: true, rto: c.rto()}
			send(next % w)
			next++
			inflight++
		}
	}
	fillWindow()
	left, progress := n, time.Now()
	retransAt := c.stats.Retransmits // timeouts counted up to the last result
	var res wire.Header
	take := func(_ netip.AddrPort, b []byte) {
		if rerr != nil || c.cfg.Drop() {
			return
		}
		c.stats.Received++
		if res.DecodeFromBytes(b, nilDF{}) != nil || res.Job != c.cfg.Job {
			c.stats.Ignored++
			return
		}
		if res.Type == wire.TypeRefused {
			rerr = fmt.Errorf("inc client: job %d at %v: %w", c.cfg.Job, c.cfg.Aggregator, ErrRefused)
			return
		}
		s := int(res.Slot)
		if res.Type != wire.TypeResult || s >= w || !pend[s].active || res.Set != c.sets[s] || res.Packet != base+uint32(pend[s].block) {
			c.stats.Ignored++ // a late copy of a result already taken
			return
		}
		p := &pend[s]
		if err := done(p.block, &res); err != nil {
			rerr = fmt.Errorf("inc client: %w", err)
			return
		}
		if p.tries == 0 { // Karn: time only what was sent once
			rtt := time.Since(p.sent)
			c.rttvar = (3*c.rttvar + (c.srtt - rtt).Abs()) / 4
			c.srtt = (7*c.srtt + rtt) / 8
			c.stats.RTTSum += rtt
			c.stats.RTTSamples++
		}
		left--
		inflight--
		now := time.Now()
		if c.stats.Retransmits > retransAt {
			c.stats.Stall += max(0, now.Sub(progress)-c.srtt)
		}
		progress, retransAt = now, c.stats.Retransmits
		c.sets[s] ^= 1
		p.active = false
		if res.Flags&wire.FlagCongestion != 0 {
			if c.cc.congestion(p.block, next) {
				c.stats.Decreases++
			}
		} else {
			c.cc.grow()
		}
		fillWindow() // every worker puts block b in slot b mod w
	}
	for left > 0 {
		if err := c.w.Flush(); err != nil && werr == nil {
			werr = fmt.Errorf("inc client: send to %v: %w", c.cfg.Aggregator, err)
		}
		if werr != nil {
			return werr
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		wake := time.Now().Add(time.Second)
		for s := range pend {
			if p := &pend[s]; p.active && p.sent.Add(p.rto).Before(wake) {
				wake = p.sent.Add(p.rto)
			}
		}
		_ = c.conn.SetReadDeadline(wake)
		err := c.r.Read(take)
		if err != nil && !errors.Is(err, os.ErrDeadlineExceeded) {
			return fmt.Errorf("inc client: receive: %w", err)
		}
		if rerr != nil {
			return rerr
		}
		now := time.Now()
		for s := range pend {
			if p := &pend[s]; p.active && now.Sub(p.sent) >= p.rto {
				p.tries++
				// Back off per block, up to MaxRTO: a block that keeps
				// timing out is queued behind other traffic more often
				// than lost (docs/inc.md), and a capped back-off turned
				// that into retransmission storms. Other blocks keep the
				// estimate's timeout, so random loss stays cheap.
				p.rto = min(2*p.rto, MaxRTO)
				c.stats.Retransmits++
				send(s)
			}
		}
		if now.Sub(progress) > c.cfg.Stall {
			return fmt.Errorf("inc client: no result from %v for %v (%d of %d blocks left)", c.cfg.Aggregator, c.cfg.Stall, left, n)
		}
	}
	return nil
}

// rto is the first retransmission timeout of a block, as TCP's (RFC
// 6298: srtt + 4 rttvar), between MinRTO and MaxRTO.
func (c *Client) rto() time.Duration {
	return min(max(c.srtt+4*c.rttvar, MinRTO), MaxRTO)
}

// MaxRTO bounds a block's retransmission timeout, backed off or not.
const MaxRTO = 200 * time.Millisecond

// MinRTO is the shortest retransmission timeout. Emulated round trips
// are tens of microseconds, but a busy machine delays the aggregators'
// and workers' processes by milliseconds: a shorter timeout resends
// blocks that were never lost, and the duplicates cost the aggregator
// the time it lacked.
const MinRTO = 30 * time.Millisecond

type nilDF struct{}

func (nilDF) SetTruncated() {}
