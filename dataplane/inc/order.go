package inc

import (
	"encoding/binary"
	"math/bits"
	"unsafe"
)

// Elements travel big endian (network order). Converting them is a third
// of the user-space work of an all-reduce (docs/inc.md, "CPU per GiB"), so
// the loops below read and write the payload as a slice of uint32 and swap
// the bytes (one BSWAP or MOVBE per element, no bounds check per element)
// on little-endian machines; elsewhere they fall back to encoding/binary.
// A payload needs no alignment: amd64 and arm64 load unaligned words.

// littleEndian: this machine's byte order is the opposite of the wire's.
var littleEndian = binary.NativeEndian.Uint16([]byte{1, 0}) == 1

// words views the first 4n bytes of b as n uint32 (n > 0, len(b) >= 4n).
func words(b []byte, n int) []uint32 {
	_ = b[4*n-1]
	return unsafe.Slice((*uint32)(unsafe.Pointer(&b[0])), n)
}

// putElems writes src into dst (len(dst) >= 4·len(src)) in wire order.
func putElems(dst []byte, src []int32) {
	if len(src) == 0 {
		return
	}
	if !littleEndian {
		for i, v := range src {
			binary.BigEndian.PutUint32(dst[4*i:], uint32(v))
		}
		return
	}
	w := words(dst, len(src))
	for i, v := range src {
		w[i] = bits.ReverseBytes32(uint32(v))
	}
}

// getElems reads len(dst) wire-order elements of src into dst.
func getElems(dst []int32, src []byte) {
	if len(dst) == 0 {
		return
	}
	if !littleEndian {
		for i := range dst {
			dst[i] = int32(binary.BigEndian.Uint32(src[4*i:]))
		}
		return
	}
	w := words(src, len(dst))
	for i, v := range w {
		dst[i] = int32(bits.ReverseBytes32(v))
	}
}

// addElems adds len(dst) wire-order elements of src into dst.
func addElems(dst []int32, src []byte) {
	if len(dst) == 0 {
		return
	}
	if !littleEndian {
		for i := range dst {
			dst[i] += int32(binary.BigEndian.Uint32(src[4*i:]))
		}
		return
	}
	w := words(src, len(dst))
	for i, v := range w {
		dst[i] += int32(bits.ReverseBytes32(v))
	}
}

// sumElems sets dst to the sum of two wire-order element arrays a and b
// (each at least 4·len(dst) bytes): the second contribution to a slot
// whose first one was kept in wire order.
func sumElems(dst []int32, a, b []byte) {
	if len(dst) == 0 {
		return
	}
	if !littleEndian {
		for i := range dst {
			dst[i] = int32(binary.BigEndian.Uint32(a[4*i:])) + int32(binary.BigEndian.Uint32(b[4*i:]))
		}
		return
	}
	wa, wb := words(a, len(dst)), words(b, len(dst))
	wb = wb[:len(wa)]
	for i, v := range wa {
		dst[i] = int32(bits.ReverseBytes32(v)) + int32(bits.ReverseBytes32(wb[i]))
	}
}
