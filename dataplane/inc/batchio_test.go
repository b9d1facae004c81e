package inc

import (
	"encoding/binary"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"
)

// cmsg builds one control message as the kernel lays it out.
func cmsg(level, typ int32, data []byte) []byte {
	b := make([]byte, unix.CmsgSpace(len(data)))
	h := (*unix.Cmsghdr)(unsafe.Pointer(&b[0]))
	h.Level, h.Type = level, typ
	h.SetLen(unix.CmsgLen(len(data)))
	copy(b[unix.CmsgLen(0):], data)
	return b
}

func TestControls(t *testing.T) {
	gro := make([]byte, 4)
	binary.NativeEndian.PutUint32(gro, 1460)
	ts := make([]byte, 16)
	binary.NativeEndian.PutUint64(ts, 1_700_000_000)
	binary.NativeEndian.PutUint64(ts[8:], 123_456_789)
	const at = 1_700_000_000*1e9 + 123_456_789
	both := append(cmsg(unix.SOL_UDP, unix.UDP_GRO, gro), cmsg(unix.SOL_SOCKET, unix.SCM_TIMESTAMPNS, ts)...)
	for _, tc := range []struct {
		name string
		oob  []byte
		seg  int
		at   int64
	}{
		{"none", nil, 0, 0},
		{"GRO", cmsg(unix.SOL_UDP, unix.UDP_GRO, gro), 1460, 0},
		{"timestamp", cmsg(unix.SOL_SOCKET, unix.SCM_TIMESTAMPNS, ts), 0, at},
		{"both", both, 1460, at},
		{"a stamp too short is ignored", cmsg(unix.SOL_SOCKET, unix.SCM_TIMESTAMPNS, ts[:8]), 0, 0},
		{"a length past the buffer stops the walk", both[:len(both)-4], 1460, 0},
		{"an unknown message is skipped", append(cmsg(unix.SOL_IP, unix.IP_TTL, gro), cmsg(unix.SOL_SOCKET, unix.SCM_TIMESTAMPNS, ts)...), 0, at},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if seg, got := controls(tc.oob); seg != tc.seg || got != tc.at {
				t.Errorf("controls = %d, %d; want %d, %d", seg, got, tc.seg, tc.at)
			}
		})
	}
}
