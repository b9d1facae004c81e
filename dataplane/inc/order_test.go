package inc

import (
	"encoding/binary"
	"math"
	"slices"
	"testing"
)

// TestElementOrder checks the fast conversions against encoding/binary,
// at odd lengths and unaligned offsets, and on the portable path.
func TestElementOrder(t *testing.T) {
	for _, native := range []bool{true, false} {
		saved := nativeWire
		nativeWire = nativeWire && native
		for _, n := range []int{0, 1, 7, 360} {
			for _, off := range []int{0, 1, 3} {
				a, b := make([]int32, n), make([]int32, n)
				for i := range a {
					a[i] = int32(uint32(i)*2654435761) ^ math.MinInt32>>uint(i%5)
					b[i] = -a[i]/3 + int32(i)
				}
				wa, wb := make([]byte, off+4*n), make([]byte, off+4*n)
				putElems(wa[off:], a)
				putElems(wb[off:], b)
				for i := range a {
					if got := int32(binary.LittleEndian.Uint32(wa[off+4*i:])); got != a[i] {
						t.Fatalf("native %v n %d off %d: putElems[%d] = %d, want %d", native, n, off, i, got, a[i])
					}
				}
				got := make([]int32, n)
				getElems(got, wa[off:])
				if !slices.Equal(got, a) {
					t.Fatalf("native %v n %d off %d: getElems differs", native, n, off)
				}
				addElems(got, wb[off:])
				sum := make([]int32, n)
				sumElems(sum, wa[off:], wb[off:])
				for i := range a {
					if want := a[i] + b[i]; got[i] != want || sum[i] != want {
						t.Fatalf("native %v n %d off %d: [%d] addElems %d, sumElems %d, want %d", native, n, off, i, got[i], sum[i], want)
					}
				}
			}
		}
		nativeWire = saved
	}
}
