package capture

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"sync"
	"time"
	"unsafe"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
	"github.com/gopacket/gopacket/pcapgo"
	"golang.org/x/sys/unix"

	"github.com/ocsemu/ocsemu/dataplane/fastport"
	"github.com/ocsemu/ocsemu/dataplane/netns"
)

// DefaultSnaplen keeps the Ethernet, IP and TCP headers (with options) of
// every packet and little payload, so captures of GB transfers stay small.
const DefaultSnaplen = 256

// Snaplen bounds.
const (
	MinSnaplen = 64
	MaxSnaplen = 262144 // tcpdump's and Wireshark's maximum
)

// pollInterval bounds how long a read blocks before it looks at the context.
const pollInterval = 100 * time.Millisecond

// Options configure a capture.
type Options struct {
	Snaplen int          // bytes kept of each packet; 0: DefaultSnaplen
	Log     *slog.Logger // nil: discard
}

// Stats is what one capture wrote.
type Stats struct {
	Port    Port   `json:"port"`
	Path    string `json:"path"`
	Packets uint64 `json:"packets"` // records written to the file
	// Dropped is the kernel's count of packets the socket's buffer had no
	// room for (PACKET_STATISTICS tp_drops): they are not in the file.
	Dropped uint64 `json:"dropped"`
	Bytes   int64  `json:"file_bytes"`
}

// Capture is one running capture of one port.
type Capture struct {
	port    Port
	path    string
	snaplen int
	fd      int
	f       *os.File
	log     *slog.Logger
	done    chan struct{}
	stats   Stats
	err     error
}

// Start opens an AF_PACKET socket bound to the port's interface inside
// its node's namespace, creates the pcap file at path and captures until
// ctx ends. Call Wait for the result. Timestamps are the kernel's receive
// time of each packet (SO_TIMESTAMPNS), in nanoseconds.
//
// What a port sends is seen only on its egress, which an OCS or ToR port
// that is fast skips (dataplane/fastport): Start turns the port's fast
// flag off before the socket exists and again once it does, and the end
// of the capture lets the port be fast again if nothing else needs its
// egress. A capture that dies leaves the port slow.
func Start(ctx context.Context, p Port, path string, o Options) (*Capture, error) {
	if o.Snaplen == 0 {
		o.Snaplen = DefaultSnaplen
	}
	if o.Snaplen < MinSnaplen || o.Snaplen > MaxSnaplen {
		return nil, fmt.Errorf("snaplen %d: want %d to %d bytes", o.Snaplen, MinSnaplen, MaxSnaplen)
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	if err := fastport.OffNS(p.NS, p.Iface); err != nil {
		return nil, fmt.Errorf("capture %s: %w", p, err)
	}
	fd := -1
	if err := netns.Do(p.NS, func() error {
		ifi, err := net.InterfaceByName(p.Iface)
		if err != nil {
			return fmt.Errorf("interface %s: %w", p.Iface, err)
		}
		// Protocol 0 receives nothing until bind names ETH_P_ALL and the
		// interface, so no packet of another interface slips in (libpcap's way).
		s, err := unix.Socket(unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			return fmt.Errorf("AF_PACKET socket: %w", err)
		}
		err = unix.Bind(s, &unix.SockaddrLinklayer{Protocol: htons(unix.ETH_P_ALL), Ifindex: ifi.Index})
		if err == nil {
			err = unix.SetsockoptInt(s, unix.SOL_SOCKET, unix.SO_TIMESTAMPNS, 1)
		}
		if err == nil {
			// A large buffer rides out bursts while the writer is busy.
			if unix.SetsockoptInt(s, unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, 8<<20) != nil {
				_ = unix.SetsockoptInt(s, unix.SOL_SOCKET, unix.SO_RCVBUF, 8<<20)
			}
			tv := unix.NsecToTimeval(pollInterval.Nanoseconds())
			err = unix.SetsockoptTimeval(s, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv)
		}
		if err != nil {
			unix.Close(s)
			return fmt.Errorf("set up AF_PACKET socket on %s: %w", p.Iface, err)
		}
		fd = s
		return nil
	}); err != nil {
		return nil, fmt.Errorf("capture %s: %w", p, err)
	}
	if err := fastport.OffNS(p.NS, p.Iface); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("capture %s: %w", p, err)
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC|unix.O_NOFOLLOW, 0o644)
	if err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("capture %s: %w", p, errors.Join(err, fastport.RefreshNS(p.NS, p.Iface)))
	}
	c := &Capture{port: p, path: path, snaplen: o.Snaplen, fd: fd, f: f, done: make(chan struct{}),
		log: o.Log.With("port", p.String())}
	c.stats = Stats{Port: p, Path: path}
	go func() {
		defer close(c.done)
		c.err = c.run(ctx)
	}()
	c.log.Debug("capture started", "netns", p.NS, "file", path, "snaplen", o.Snaplen)
	return c, nil
}

// Wait waits for the capture to end (its context ended, or it failed),
// with the file flushed and closed, and returns what it wrote.
func (c *Capture) Wait() (Stats, error) {
	<-c.done
	return c.stats, c.err
}

func (c *Capture) run(ctx context.Context) (err error) {
	bw := bufio.NewWriterSize(c.f, 1<<20)
	defer func() {
		var st unix.TpacketStats
		if s, serr := unix.GetsockoptTpacketStats(c.fd, unix.SOL_PACKET, unix.PACKET_STATISTICS); serr == nil {
			st = *s
		} else {
			err = errors.Join(err, fmt.Errorf("PACKET_STATISTICS: %w", serr))
		}
		c.stats.Dropped = uint64(st.Drops)
		unix.Close(c.fd)
		err = errors.Join(err, fastport.RefreshNS(c.port.NS, c.port.Iface))
		err = errors.Join(err, bw.Flush(), c.f.Sync())
		if fi, serr := c.f.Stat(); serr == nil {
			c.stats.Bytes = fi.Size()
		}
		err = errors.Join(err, c.f.Close())
		if err != nil {
			err = fmt.Errorf("capture %s: %w", c.port, err)
		}
		c.log.Debug("capture stopped", "packets", c.stats.Packets, "dropped", c.stats.Dropped, "bytes", c.stats.Bytes)
	}()
	w := pcapgo.NewWriterNanos(bw)
	if err := w.WriteFileHeader(uint32(c.snaplen), layers.LinkTypeEthernet); err != nil {
		return err
	}
	buf := make([]byte, c.snaplen)
	oob := make([]byte, unix.CmsgSpace(int(unsafe.Sizeof(unix.Timespec{}))))
	draining := false
	var drainUntil time.Time
	for {
		flags := unix.MSG_TRUNC
		if !draining && ctx.Err() != nil {
			// Stop: take what the socket already holds, then end; a link
			// that keeps the socket full cannot keep the capture alive.
			draining = true
			drainUntil = time.Now().Add(200 * time.Millisecond)
		}
		if draining && time.Now().After(drainUntil) {
			return nil
		}
		if draining {
			flags |= unix.MSG_DONTWAIT
		}
		n, oobn, _, _, rerr := unix.Recvmsg(c.fd, buf, oob, flags)
		if rerr != nil {
			if rerr == unix.EINTR {
				continue
			}
			if rerr == unix.EAGAIN {
				if draining {
					return nil
				}
				continue
			}
			return fmt.Errorf("read: %w", rerr)
		}
		ts := packetTime(oob[:oobn])
		ci := gopacket.CaptureInfo{Timestamp: ts, Length: n, CaptureLength: min(n, c.snaplen)}
		if err := w.WritePacket(ci, buf[:ci.CaptureLength]); err != nil {
			return fmt.Errorf("write %s: %w", filepath.Base(c.path), err)
		}
		c.stats.Packets++
	}
}

// packetTime reads the SO_TIMESTAMPNS control message; time.Now if absent.
func packetTime(oob []byte) time.Time {
	msgs, err := unix.ParseSocketControlMessage(oob)
	if err == nil {
		for _, m := range msgs {
			if m.Header.Level == unix.SOL_SOCKET && m.Header.Type == unix.SCM_TIMESTAMPNS &&
				len(m.Data) >= int(unsafe.Sizeof(unix.Timespec{})) {
				ts := *(*unix.Timespec)(unsafe.Pointer(&m.Data[0]))
				return time.Unix(ts.Unix())
			}
		}
	}
	return time.Now()
}

func htons(v uint16) uint16 { return v<<8 | v>>8 }

// Group is a set of captures that start and stop together.
type Group struct {
	cancel context.CancelFunc
	caps   []*Capture
	once   sync.Once
	stats  []Stats
	err    error
}

// StartAll starts one capture per port, writing <dir>/<node>-<iface>.pcap.
// If any fails to start, those started are stopped and their files removed.
// The captures end when ctx ends or Stop is called.
func StartAll(ctx context.Context, ports []Port, dir string, o Options) (*Group, error) {
	if len(ports) == 0 {
		return nil, errors.New("capture: no port")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("capture directory: %w", err)
	}
	cctx, cancel := context.WithCancel(ctx)
	g := &Group{cancel: cancel}
	for _, p := range ports {
		name, err := p.FileName()
		if err == nil {
			var c *Capture
			if c, err = Start(cctx, p, filepath.Join(dir, name), o); err == nil {
				g.caps = append(g.caps, c)
				continue
			}
		}
		st, _ := g.Stop()
		for _, s := range st {
			_ = os.Remove(s.Path)
		}
		return nil, err
	}
	return g, nil
}

// Stop ends every capture and returns their stats in port order. It may
// be called more than once.
func (g *Group) Stop() ([]Stats, error) {
	g.once.Do(func() {
		g.cancel()
		var errs []error
		for _, c := range g.caps {
			st, err := c.Wait()
			g.stats = append(g.stats, st)
			errs = append(errs, err)
		}
		g.err = errors.Join(errs...)
	})
	return g.stats, g.err
}
