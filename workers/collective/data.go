package collective

import (
	"bytes"
	"fmt"
)

// Verification data. A rank's gradient is a base pattern fixed per rank
// plus an iteration stamp in every StampEvery-th element, so that a stale
// result from an earlier iteration cannot pass, yet preparing an
// iteration costs one copy, not a recomputation.
const StampEvery = 1024

// BaseGradient fills the iteration-independent part of rank's gradient.
// Small values, so sums over thousands of ranks never overflow.
func BaseGradient(data []int32, rank int) {
	for i := range data {
		data[i] = int32(rank+1) + int32(i%13)
	}
}

// Stamp adds the iteration stamp to a copy of the base gradient.
func Stamp(data []int32, iter int) {
	for i := 0; i < len(data); i += StampEvery {
		data[i] += int32(iter * 7)
	}
}

// Gradient fills rank's full gradient for an iteration.
func Gradient(data []int32, rank, iter int) {
	BaseGradient(data, rank)
	Stamp(data, iter)
}

// CheckSum verifies that data is the exact sum of n ranks' gradients.
// It runs over every element after every reduction, outside the phase's
// time but on the same CPUs, so it compares memory against one period of
// the expected pattern (13 x StampEvery elements) instead of computing
// each element.
func CheckSum(data []int32, n, iter int) error {
	base := int32(n * (n + 1) / 2)
	want := func(i int) int32 {
		w := base + int32(n*(i%13))
		if i%StampEvery == 0 {
			w += int32(n * iter * 7)
		}
		return w
	}
	if i, ok := matchPeriodic(data, 13*StampEvery, want); !ok {
		return fmt.Errorf("element %d is %d, want %d (the sum of %d ranks)", i, data[i], want(i), n)
	}
	return nil
}

// matchPeriodic checks data[i] == want(i) for every i, where want has the
// given period; it returns the first element that differs.
func matchPeriodic(data []int32, period int, want func(int) int32) (int, bool) {
	ref := make([]int32, min(period, len(data)))
	for i := range ref {
		ref[i] = want(i)
	}
	rb := asBytes(ref)
	for off := 0; off < len(data); off += period {
		end := min(off+period, len(data))
		if bytes.Equal(asBytes(data[off:end]), rb[:4*(end-off)]) {
			continue
		}
		for i := off; i < end; i++ {
			if data[i] != ref[i-off] {
				return i, false
			}
		}
	}
	return 0, true
}

// Tokens fills the all-to-all chunk that rank src sends to rank dst.
func Tokens(data []int32, src, dst, iter int) {
	for i := range data {
		data[i] = int32(src*31+dst*7) + int32(i%11)
	}
	for i := 0; i < len(data); i += StampEvery {
		data[i] += int32(iter * 3)
	}
}

// CheckTokens verifies a chunk received by dst from src.
func CheckTokens(data []int32, src, dst, iter int) error {
	want := func(i int) int32 {
		w := int32(src*31+dst*7) + int32(i%11)
		if i%StampEvery == 0 {
			w += int32(iter * 3)
		}
		return w
	}
	if i, ok := matchPeriodic(data, 11*StampEvery, want); !ok {
		return fmt.Errorf("element %d from rank %d is %d, want %d", i, src, data[i], want(i))
	}
	return nil
}
