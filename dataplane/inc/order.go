package inc

import (
	"encoding/binary"
	"unsafe"
)

// Elements travel little endian, the order of the hosts the emulator
// runs on (amd64, arm64): a switch ASIC converts a header field's order
// for free, a user-space aggregator pays for it per element, and it was a
// third of the user-space work of an all-reduce (docs/inc.md, "CPU per
// GiB"). So on a little-endian machine encoding and decoding are a copy
// and adding reads the payload as a slice of uint32 (no bounds check per
// element); elsewhere the loops fall back to encoding/binary. Header
// fields stay in network order. A payload needs no alignment: amd64 and
// arm64 load unaligned words.

// nativeWire: this machine's byte order is the wire's.
var nativeWire = binary.NativeEndian.Uint16([]byte{1, 0}) == 1

// words views the first 4n bytes of b as n uint32 (n > 0, len(b) >= 4n).
func words(b []byte, n int) []uint32 {
	_ = b[4*n-1]
	return unsafe.Slice((*uint32)(unsafe.Pointer(&b[0])), n)
}

// elemBytes views v as its bytes (len(v) > 0).
func elemBytes(v []int32) []byte {
	return unsafe.Slice((*byte)(unsafe.Pointer(&v[0])), 4*len(v))
}

// putElems writes src into dst (len(dst) >= 4·len(src)) in wire order.
func putElems(dst []byte, src []int32) {
	if len(src) == 0 {
		return
	}
	if !nativeWire {
		for i, v := range src {
			binary.LittleEndian.PutUint32(dst[4*i:], uint32(v))
		}
		return
	}
	copy(dst[:4*len(src)], elemBytes(src))
}

// getElems reads len(dst) wire-order elements from src.
func getElems(dst []int32, src []byte) {
	if len(dst) == 0 {
		return
	}
	if !nativeWire {
		for i := range dst {
			dst[i] = int32(binary.LittleEndian.Uint32(src[4*i:]))
		}
		return
	}
	copy(elemBytes(dst), src[:4*len(dst)])
}

// addElems adds len(dst) wire-order elements from src into dst.
func addElems(dst []int32, src []byte) {
	if len(dst) == 0 {
		return
	}
	if !nativeWire {
		for i := range dst {
			dst[i] += int32(binary.LittleEndian.Uint32(src[4*i:]))
		}
		return
	}
	w := words(src, len(dst))
	for i, v := range w {
		dst[i] += int32(v)
	}
}

// sumElems sets dst to the sum of len(dst) wire-order elements of a and
// b.
func sumElems(dst []int32, a, b []byte) {
	if len(dst) == 0 {
		return
	}
	if !nativeWire {
		for i := range dst {
			dst[i] = int32(binary.LittleEndian.Uint32(a[4*i:])) + int32(binary.LittleEndian.Uint32(b[4*i:]))
		}
		return
	}
	wa, wb := words(a, len(dst)), words(b, len(dst))
	wb = wb[:len(wa)]
	for i, v := range wa {
		dst[i] = int32(v) + int32(wb[i])
	}
}
