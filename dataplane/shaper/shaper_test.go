package shaper

import "testing"

func TestBurstAndLimit(t *testing.T) {
	const mbit = 1e6 / 8 // bytes/s
	tests := []struct {
		name         string
		rate         uint64 // bytes/s
		mtu          int
		burst, limit uint64
	}{
		{"1 Mbit/s: two frames, not 64 KiB", 1 * mbit, 1500, 3028, 3 << 16},
		{"4 Mbit/s", 4 * mbit, 1500, 3028, 3 << 16},
		{"10 Mbit/s", 10 * mbit, 1500, 3028, 3 << 16},
		{"10 Mbit/s, jumbo frames", 10 * mbit, 9000, 18028, 3 << 16},
		{"100 Mbit/s: 1 ms of line rate", 100 * mbit, 1500, 12500, 3 << 16},
		{"500 Mbit/s", 500 * mbit, 1500, 62500, 625000},
		{"1 Gbit/s", 1000 * mbit, 1500, 125000, 1250000},
		{"10 Gbit/s: the queue holds 10 ms", 10000 * mbit, 9000, 1250000, 12500000},
	}
	for _, tt := range tests {
		if got := Burst(tt.rate, tt.mtu); got != tt.burst {
			t.Errorf("%s: burst %d, want %d", tt.name, got, tt.burst)
		}
		if got := Limit(tt.rate, tt.mtu); got != tt.limit {
			t.Errorf("%s: limit %d, want %d", tt.name, got, tt.limit)
		}
	}
}

// From 524.288 Mbit/s up (1 ms of line rate is 64 KiB or more) the bucket
// and the queue are what they were under the old rule, burst
// max(rate/1000, 64 KiB, 4 MTU): figures measured there still hold. Below,
// the bucket is smaller and the queue the same.
func TestShaperMatchesOldRuleFrom524Mbit(t *testing.T) {
	old := func(rate uint64, mtu int) (uint64, uint64) {
		b := max(rate/1000, 64<<10, 4*uint64(mtu))
		return b, max(rate/100, 3*b)
	}
	for _, mtu := range []int{1500, 9000} {
		for rate := uint64(1e6 / 8); rate <= 400e9/8; rate = rate*9/8 + 1 {
			ob, ol := old(rate, mtu)
			nb, nl := Burst(rate, mtu), Limit(rate, mtu)
			if rate >= 65536000 { // 524.288 Mbit/s
				if nb != ob || nl != ol {
					t.Errorf("%d B/s MTU %d: burst %d limit %d, the old rule gave %d and %d", rate, mtu, nb, nl, ob, ol)
				}
				continue
			}
			if nb > ob || nl != ol {
				t.Errorf("%d B/s MTU %d: burst %d limit %d against the old %d and %d: want a bucket no larger, the same queue", rate, mtu, nb, nl, ob, ol)
			}
			if nb < uint64(mtu+EthernetHeader) {
				t.Errorf("%d B/s MTU %d: burst %d does not hold a full-size frame", rate, mtu, nb)
			}
		}
	}
}
