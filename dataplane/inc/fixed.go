package inc

import (
	"math"
	"math/bits"
)

// Fixed point, as in SwitchML: a block of float32 values travels as int32
// elements q = round(x · 2^e) with one exponent e per block (the header's
// Exp), so that the aggregator only adds integers.
//
// Exponent picks e so that the sum of n blocks cannot overflow int32. When
// contributors of one slot chose different exponents, the aggregator
// rescales to the smallest (the coarsest scale) by an arithmetic shift with
// rounding, something a switch ALU cannot do but a userspace aggregator
// can; int32 data use e = 0 everywhere and are never shifted, so their sums
// are exact.
//
// Error bound (docs/inc.md, tested): with r the result's elements and e
// its exponent, every element of FromFixed(r, e) is within ErrorBound(n, e)
// = 2n · 2^−e of the exact sum of the n float32 inputs. Each of the n
// roundings to fixed point costs at most half a unit 2^−e, and so does
// each rescaling shift, of which a sum sees at most one per arrival at each
// level of the hierarchy (n workers, then at most n ToRs).

// NoExp is the exponent of an all-zero block: any scale represents it, so
// it never makes the slot's scale coarser.
const NoExp = math.MaxInt8

// Exponent returns the largest exponent e for which n blocks whose
// elements are at most maxAbs in magnitude sum without overflow:
// n · maxAbs · 2^e < 2^30.
func Exponent(maxAbs float32, n int) int8 {
	if maxAbs == 0 || math.IsNaN(float64(maxAbs)) {
		return NoExp
	}
	_, k := math.Frexp(float64(maxAbs)) // maxAbs < 2^k
	c := bits.Len(uint(max(n, 1) - 1))  // n <= 2^c
	return int8(min(max(30-k-c, math.MinInt8), math.MaxInt8))
}

// MaxAbs returns the largest magnitude in v.
func MaxAbs(v []float32) float32 {
	var m float32
	for _, x := range v {
		m = max(m, float32(math.Abs(float64(x))))
	}
	return m
}

// ToFixed converts src to fixed point with exponent e into dst.
func ToFixed(dst []int32, src []float32, e int8) {
	for i, x := range src {
		dst[i] = int32(math.RoundToEven(math.Ldexp(float64(x), int(e))))
	}
}

// FromFixed converts fixed-point src with exponent e back to float32.
func FromFixed(dst []float32, src []int32, e int8) {
	for i, q := range src {
		dst[i] = float32(math.Ldexp(float64(q), -int(e)))
	}
}

// ErrorBound is the largest error of one element of a sum of n float32
// blocks that came back with exponent e.
func ErrorBound(n int, e int8) float64 { return 2 * float64(n) * math.Ldexp(1, -int(e)) }

// shift returns q · 2^−s rounded to nearest (s >= 0).
func shift(q int32, s int) int32 {
	if s <= 0 {
		return q
	}
	if s > 32 {
		return 0
	}
	return int32((int64(q) + int64(1)<<(s-1)) >> s)
}
