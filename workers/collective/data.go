package collective

import "fmt"

// Gradient fills data with rank's integer-valued gradient of an iteration.
// Small values, so sums over up to thousands of ranks never overflow.
func Gradient(data []int32, rank, iter int) {
	for i := range data {
		data[i] = int32(rank+1+iter*7) + int32(i%13)
	}
}

// CheckSum verifies that data is the exact sum of n ranks' gradients.
func CheckSum(data []int32, n, iter int) error {
	base := int32(n*(n+1)/2 + n*iter*7)
	for i, v := range data {
		if want := base + int32(n*(i%13)); v != want {
			return fmt.Errorf("element %d is %d, want %d (the sum of %d ranks)", i, v, want, n)
		}
	}
	return nil
}

// Tokens fills the all-to-all chunk that rank src sends to rank dst.
func Tokens(data []int32, src, dst, iter int) {
	for i := range data {
		data[i] = int32(src*31+dst*7+iter*3) + int32(i%11)
	}
}

// CheckTokens verifies a chunk received by dst from src.
func CheckTokens(data []int32, src, dst, iter int) error {
	for i, v := range data {
		if want := int32(src*31+dst*7+iter*3) + int32(i%11); v != want {
			return fmt.Errorf("element %d from rank %d is %d, want %d", i, src, v, want)
		}
	}
	return nil
}
