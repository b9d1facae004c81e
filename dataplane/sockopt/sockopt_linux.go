// Package sockopt sets per-socket TCP options on emu's own connections, so
// that the scenario's congestion control applies even where the host does
// not allow it as a namespace default.
package sockopt

import (
	"fmt"
	"syscall"

	"golang.org/x/sys/unix"
)

// Control returns a net.Dialer / net.ListenConfig Control function that
// sets TCP_CONGESTION to cc (no-op when cc is empty).
func Control(cc string) func(network, address string, c syscall.RawConn) error {
	return func(network, address string, c syscall.RawConn) error {
		if cc == "" {
			return nil
		}
		var serr error
		if err := c.Control(func(fd uintptr) {
			serr = unix.SetsockoptString(int(fd), unix.IPPROTO_TCP, unix.TCP_CONGESTION, cc)
		}); err != nil {
			return err
		}
		if serr != nil {
			return fmt.Errorf("set TCP_CONGESTION %q: %w", cc, serr)
		}
		return nil
	}
}

// CongestionControl reads the congestion control a TCP socket uses.
func CongestionControl(c syscall.RawConn) (string, error) {
	var cc string
	var serr error
	if err := c.Control(func(fd uintptr) {
		cc, serr = unix.GetsockoptString(int(fd), unix.IPPROTO_TCP, unix.TCP_CONGESTION)
	}); err != nil {
		return "", err
	}
	return cc, serr
}
