package kernels

import "math"

// The pure-Go dot products of the block formats reproduce the arithmetic of
// ggml's AVX2 kernels bit for bit, because greedy parity with llama.cpp
// depends on every rounding: a block's integer products are summed into the
// 8 int32 lanes of a 256-bit register (lane m holds bytes 4m … 4m+3 of each
// 32-byte run), each lane becomes a float and is added into an 8-lane float
// accumulator with a fused multiply-add, and the lanes are summed at the end
// by hsum8. The assembly kernels do the same instructions in the same order.

// hsum8 sums 8 float lanes as ggml's hsum_float_8 (and llamafile's hsum)
// does: the upper half onto the lower, then lanes 2, 3 onto 0, 1, then 1
// onto 0.
func hsum8(a *[8]float32) float32 {
	t0, t1, t2, t3 := a[0]+a[4], a[1]+a[5], a[2]+a[6], a[3]+a[7]
	return (t0 + t2) + (t1 + t3)
}

// hsum4 sums 4 float lanes as the last two steps of hsum8.
func hsum4(a *[4]float32) float32 {
	return (a[0] + a[2]) + (a[1] + a[3])
}

// fmaf returns a·b + c rounded once to float32, as the FMA instructions do.
//
// a·b is exact in float64. Their sum is rounded to float64 with round-to-odd
// (an inexact result gets its last bit set), which keeps the final rounding
// to float32 correct; a plain float64 sum would round twice.
func fmaf(a, b, c float32) float32 {
	p := float64(a) * float64(b)
	fc := float64(c)
	s := p + fc
	if math.IsInf(s, 0) || math.IsNaN(s) || s == 0 {
		return float32(s)
	}
	// The rounding error of s (Knuth's TwoSum).
	bv := s - p
	e := (p - (s - bv)) + (fc - bv)
	if bits := math.Float64bits(s); e != 0 && bits&1 == 0 {
		if (e > 0) == (s > 0) {
			bits++ // away from zero, towards the exact sum
		} else {
			bits--
		}
		s = math.Float64frombits(bits)
	}
	return float32(s)
}

// lanes8 adds to sum the products of the 32 quants q and int8 activations a
// as the 8 int32 lanes of VPMADDUBSW + VPMADDWD would: lane m gets
// Σ q[b]·a[b] over b = 4m … 4m+3, times s0 for lanes 0-3 (the first 16
// weights) or s1 for lanes 4-7.
func lanes8(sum *[8]int32, q *[32]int8, a []byte, s0, s1 int32) {
	a = a[:32]
	for m := range 8 {
		var s int32
		for b := 4 * m; b < 4*m+4; b++ {
			s += int32(q[b]) * int32(int8(a[b]))
		}
		if m < 4 {
			sum[m] += s0 * s
		} else {
			sum[m] += s1 * s
		}
	}
}

// accumulate8 adds d·float(sum[m]) into acc[m] with one rounding per lane.
func accumulate8(acc *[8]float32, d float32, sum *[8]int32) {
	for m := range acc {
		acc[m] = fmaf(d, float32(sum[m]), acc[m])
	}
}

// q8K is the scale of a Q8_K activation block.
func q8K(y []byte) float32 { return math.Float32frombits(le.Uint32(y)) }

// minLanesK4 returns the four int32 lanes of the min terms of a Q4_K/Q5_K
// block as ggml's AVX2 code forms them: the 16 activation block sums added in
// pairs (one pair per 16 weights), then lane i = m[2i]·(pair 2i) +
// m[2i+1]·(pair 2i+1).
func minLanesK4(scales, y []byte) (l [4]int32) {
	for i := range l {
		_, m0 := scaleMinK4(2*i, scales)
		_, m1 := scaleMinK4(2*i+1, scales)
		l[i] = int32(m0)*(bsum(y, 4*i)+bsum(y, 4*i+1)) + int32(m1)*(bsum(y, 4*i+2)+bsum(y, 4*i+3))
	}
	return l
}
