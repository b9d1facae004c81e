package collective

import "fmt"

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
func CheckSum(data []int32, n, iter int) error {
	base := int32(n * (n + 1) / 2)
	for i, v := range data {
		want := base + int32(n*(i%13))
		if i%StampEvery == 0 {
			want += int32(n * iter * 7)
		}
		if v != want {
			return fmt.Errorf("element %d is %d, want %d (the sum of %d ranks)", i, v, want, n)
		}
	}
	return nil
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
	for i, v := range data {
		want := int32(src*31+dst*7) + int32(i%11)
		if i%StampEvery == 0 {
			want += int32(iter * 3)
		}
		if v != want {
			return fmt.Errorf("element %d from rank %d is %d, want %d", i, src, v, want)
		}
	}
	return nil
}
