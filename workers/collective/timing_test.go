package collective

import (
	"fmt"
	"net"
	"reflect"
	"strings"
	"testing"
	"time"
)

// The block compare must find every wrong element, wherever it falls in
// the pattern's period, and name it; and accept every right sum, also for
// lengths that end mid-period and a stale iteration's stamp.
func TestCheckSumEveryPosition(t *testing.T) {
	const n, iter = 3, 2
	size := 2*13*StampEvery + 77
	sum := make([]int32, size)
	for r := 0; r < n; r++ {
		g := make([]int32, size)
		Gradient(g, r, iter)
		add(sum, g)
	}
	if err := CheckSum(sum, n, iter); err != nil {
		t.Fatalf("the right sum fails: %v", err)
	}
	if err := CheckSum(sum, n, iter+1); err == nil || !strings.Contains(err.Error(), "element 0 ") {
		t.Errorf("a stale iteration passes or is misnamed: %v", err)
	}
	for _, at := range []int{0, 1, 12, 13, StampEvery, 13*StampEvery - 1, 13 * StampEvery, size - 1} {
		t.Run(fmt.Sprint(at), func(t *testing.T) {
			bad := append([]int32(nil), sum...)
			bad[at]--
			err := CheckSum(bad, n, iter)
			if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("element %d ", at)) {
				t.Errorf("corruption at %d: %v", at, err)
			}
		})
	}
}

func TestCheckTokensEveryPosition(t *testing.T) {
	data := make([]int32, 11*StampEvery+5)
	Tokens(data, 2, 1, 4)
	if err := CheckTokens(data, 2, 1, 4); err != nil {
		t.Fatalf("right tokens fail: %v", err)
	}
	for _, at := range []int{0, 10, 11 * StampEvery, len(data) - 1} {
		bad := append([]int32(nil), data...)
		bad[at] ^= 1
		if err := CheckTokens(bad, 2, 1, 4); err == nil || !strings.Contains(err.Error(), fmt.Sprintf("element %d ", at)) {
			t.Errorf("corruption at %d: %v", at, err)
		}
	}
}

// Over real TCP on loopback, a transfer's marks are ordered as they must
// be: first byte in <= last byte in, the last write handed over, and every
// byte acknowledged at or after the last write.
func TestTimingMarks(t *testing.T) {
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Skipf("no loopback TCP: %v", err)
	}
	defer ln.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		c, _ := ln.Accept()
		accepted <- c
	}()
	a, err := net.Dial("tcp4", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b := <-accepted
	defer b.Close()
	ca := &Comm{Rank: 0, N: 2, Conns: []net.Conn{nil, a}, Timeout: 5 * time.Second}
	cb := &Comm{Rank: 1, N: 2, Conns: []net.Conn{b, nil}, Timeout: 5 * time.Second}
	if tm := ca.Timing(); !reflect.DeepEqual(tm, Timing{}) {
		t.Fatalf("marks before any transfer: %+v", tm)
	}
	before := clock()
	out, in := make([]byte, 4<<20), make([]byte, 4<<20)
	errc := make(chan error, 1)
	go func() { errc <- ca.Send(1, out) }()
	if err := cb.Recv(0, in); err != nil {
		t.Fatal(err)
	}
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	acked := ca.WaitAcked([]int{1}, time.Second)
	sa, sb := ca.Timing(), cb.Timing()
	if sb.FirstRecvNs < before || sb.LastRecvNs < sb.FirstRecvNs || sb.LastSendNs != 0 {
		t.Errorf("receiver marks %+v (transfer began at %d)", sb, before)
	}
	if sa.LastSendNs < before || sa.FirstRecvNs != 0 || acked < sa.LastSendNs {
		t.Errorf("sender marks %+v, acknowledged at %d", sa, acked)
	}
	cb.ResetTiming()
	if tm := cb.Timing(); !reflect.DeepEqual(tm, Timing{}) {
		t.Errorf("marks after ResetTiming: %+v", tm)
	}
}

// BenchmarkCheckSum is verification's cost per byte: it runs after every
// reduction on the CPUs the emulation shares (docs/fidelity.md).
func BenchmarkCheckSum(b *testing.B) {
	const n = 4
	sum := make([]int32, 4<<20) // 16 MiB, the quickstart ring's buffer
	for r := 0; r < n; r++ {
		g := make([]int32, len(sum))
		Gradient(g, r, 2)
		add(sum, g)
	}
	b.SetBytes(int64(4 * len(sum)))
	for b.Loop() {
		if err := CheckSum(sum, n, 2); err != nil {
			b.Fatal(err)
		}
	}
}

// unsent reads a TCP socket's unsent bytes and says when it cannot.
func TestUnsent(t *testing.T) {
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	c, err := net.Dial("tcp4", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if n, ok := unsent(c); !ok || n != 0 {
		t.Errorf("fresh TCP connection: unsent %d, ok %v; want 0, true", n, ok)
	}
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	if _, ok := unsent(a); ok {
		t.Error("unsent of a pipe says ok")
	}
}
