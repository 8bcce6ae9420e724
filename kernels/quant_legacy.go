package kernels

import "math"

// The legacy block formats: 32 weights a block, one or two half-precision
// parameters, packed quants. Byte layouts (offsets within a block):
//
//	Q4_0 (18 B): d f16 @0, qs[16] @2: low nibble of qs[j] is weight j, high nibble weight j+16; w = d·(q-8)
//	Q4_1 (20 B): d f16 @0, m f16 @2, qs[16] @4 as Q4_0;                                     w = d·q + m
//	Q5_0 (22 B): d f16 @0, qh u32 @2 (bit j: 5th bit of weight j), qs[16] @6;                w = d·(q-16)
//	Q5_1 (24 B): d f16 @0, m f16 @2, qh u32 @4, qs[16] @8;                                   w = d·q + m
//	Q8_0 (34 B): d f16 @0, qs[32] int8 @2;                                                   w = d·q
//	Q8_1 (36 B): d f16 @0, s f16 @2 (= d·Σq), qs[32] int8 @4;                                w = d·q
//
// The quantizers of Q4_0 .. Q8_0 follow ggml's reference ("_ref") quantizers
// step for step, so that they write the bytes llama-quantize writes. Explicit
// float32 conversions keep the Go compiler from fusing a multiply and an add
// where ggml rounds twice.

const (
	bytesQ4_0 = 2 + QK/2
	bytesQ4_1 = 4 + QK/2
	bytesQ5_0 = 2 + 4 + QK/2
	bytesQ5_1 = 4 + 4 + QK/2
	bytesQ8_0 = 2 + QK
	bytesQ8_1 = 4 + QK
)

// absMaxSigned returns the largest |v| in x and the v that has it (the first
// one on ties), as ggml's symmetric quantizers pick their scale.
func absMaxSigned(x []float32) (amax, max float32) {
	for _, v := range x {
		if a := float32(math.Abs(float64(v))); a > amax {
			amax, max = a, v
		}
	}
	return amax, max
}

func minMax(x []float32) (lo, hi float32) {
	lo, hi = math.MaxFloat32, -math.MaxFloat32
	for _, v := range x {
		if v < lo {
			lo = v
		}
		if v > hi {
			hi = v
		}
	}
	return lo, hi
}

func inverse(d float32) float32 {
	if d == 0 {
		return 0
	}
	return 1 / d
}

// ---- Q4_0

func quantizeRowQ4_0(src []float32, dst []byte) {
	checkRow(Q4_0, len(src), len(dst))
	for b := 0; b < len(src)/QK; b++ {
		x, y := src[b*QK:(b+1)*QK], dst[b*bytesQ4_0:(b+1)*bytesQ4_0]
		_, max := absMaxSigned(x)
		d := max / -8
		id := inverse(d)
		putHalf(y, 0, d)
		for j := 0; j < QK/2; j++ {
			q0 := min(15, int8(float32(x[j]*id)+8.5))
			q1 := min(15, int8(float32(x[j+QK/2]*id)+8.5))
			y[2+j] = uint8(q0) | uint8(q1)<<4
		}
	}
}

func dequantizeRowQ4_0(src []byte, dst []float32) {
	checkRow(Q4_0, len(dst), len(src))
	for b := 0; b < len(dst)/QK; b++ {
		x, y := src[b*bytesQ4_0:(b+1)*bytesQ4_0], dst[b*QK:(b+1)*QK]
		d := halfAt(x, 0)
		for j, q := range x[2:bytesQ4_0] {
			y[j] = float32(int(q&0xf)-8) * d
			y[j+QK/2] = float32(int(q>>4)-8) * d
		}
	}
}

// vecDotQ4_0Generic follows ggml's x86 and ARM CPU backends, which repack
// Q4_0 weights into groups of 8 rows and use their own products: each
// block's exact integer dot becomes a float that is added into one float per
// output with a fused multiply-add by dw·da, block after block (ggml's
// lane-wise vec_dot_q4_0 is then not used for matrices).
func vecDotQ4_0Generic(n int, w, a []byte) float32 {
	checkDot(Q4_0, Q8_0, n, w, a)
	var sum float32
	for b := 0; b < n/QK; b++ {
		x, y := w[b*bytesQ4_0:(b+1)*bytesQ4_0], a[b*bytesQ8_0:(b+1)*bytesQ8_0]
		var isum int32
		for j, q := range x[2:bytesQ4_0] {
			isum += (int32(q&0xf)-8)*int32(int8(y[2+j])) + (int32(q>>4)-8)*int32(int8(y[2+j+QK/2]))
		}
		sum = fmaf(float32(isum), halfAt(x, 0)*halfAt(y, 0), sum)
	}
	return sum
}

// ---- Q4_1

func quantizeRowQ4_1(src []float32, dst []byte) {
	checkRow(Q4_1, len(src), len(dst))
	for b := 0; b < len(src)/QK; b++ {
		x, y := src[b*QK:(b+1)*QK], dst[b*bytesQ4_1:(b+1)*bytesQ4_1]
		lo, hi := minMax(x)
		d := (hi - lo) / 15
		id := inverse(d)
		putHalf(y, 0, d)
		putHalf(y, 2, lo)
		for j := 0; j < QK/2; j++ {
			q0 := min(15, int8(float32((x[j]-lo)*id)+0.5))
			q1 := min(15, int8(float32((x[j+QK/2]-lo)*id)+0.5))
			y[4+j] = uint8(q0) | uint8(q1)<<4
		}
	}
}

func dequantizeRowQ4_1(src []byte, dst []float32) {
	checkRow(Q4_1, len(dst), len(src))
	for b := 0; b < len(dst)/QK; b++ {
		x, y := src[b*bytesQ4_1:(b+1)*bytesQ4_1], dst[b*QK:(b+1)*QK]
		d, m := halfAt(x, 0), halfAt(x, 2)
		for j, q := range x[4:bytesQ4_1] {
			y[j] = float32(float32(q&0xf)*d) + m
			y[j+QK/2] = float32(float32(q>>4)*d) + m
		}
	}
}

// vecDotQ4_1Generic adds the min terms m·s in one float, fused as ggml's
// compiled AVX2 kernel has them, after the lanes.
func vecDotQ4_1Generic(n int, w, a []byte) float32 {
	checkDot(Q4_1, Q8_1, n, w, a)
	var (
		acc   [8]float32
		summs float32
		q     [32]int8
	)
	for b := 0; b < n/QK; b++ {
		x, y := w[b*bytesQ4_1:(b+1)*bytesQ4_1], a[b*bytesQ8_1:(b+1)*bytesQ8_1]
		summs = fmaf(halfAt(x, 2), halfAt(y, 2), summs)
		for j, v := range x[4:bytesQ4_1] {
			q[j], q[j+QK/2] = int8(v&0xf), int8(v>>4)
		}
		var sums [8]int32
		lanes8(&sums, &q, y[4:], 1, 1)
		accumulate8(&acc, halfAt(x, 0)*halfAt(y, 0), &sums)
	}
	return hsum8(&acc) + summs
}

// ---- Q5_0

func quantizeRowQ5_0(src []float32, dst []byte) {
	checkRow(Q5_0, len(src), len(dst))
	for b := 0; b < len(src)/QK; b++ {
		x, y := src[b*QK:(b+1)*QK], dst[b*bytesQ5_0:(b+1)*bytesQ5_0]
		_, max := absMaxSigned(x)
		d := max / -16
		id := inverse(d)
		putHalf(y, 0, d)
		var qh uint32
		for j := 0; j < QK/2; j++ {
			q0 := uint8(min(31, int8(float32(x[j]*id)+16.5)))
			q1 := uint8(min(31, int8(float32(x[j+QK/2]*id)+16.5)))
			y[6+j] = q0&0xf | (q1&0xf)<<4
			qh |= uint32(q0>>4) << j
			qh |= uint32(q1>>4) << (j + QK/2)
		}
		le.PutUint32(y[2:], qh)
	}
}

func dequantizeRowQ5_0(src []byte, dst []float32) {
	checkRow(Q5_0, len(dst), len(src))
	for b := 0; b < len(dst)/QK; b++ {
		x, y := src[b*bytesQ5_0:(b+1)*bytesQ5_0], dst[b*QK:(b+1)*QK]
		d := halfAt(x, 0)
		qh := le.Uint32(x[2:])
		for j, q := range x[6:bytesQ5_0] {
			h0 := int(qh>>j&1) << 4
			h1 := int(qh>>(j+QK/2)&1) << 4
			y[j] = float32(int(q&0xf)|h0-16) * d
			y[j+QK/2] = float32(int(q>>4)|h1-16) * d
		}
	}
}

func vecDotQ5_0Generic(n int, w, a []byte) float32 {
	checkDot(Q5_0, Q8_0, n, w, a)
	var (
		acc [8]float32
		q   [32]int8
	)
	for b := 0; b < n/QK; b++ {
		x, y := w[b*bytesQ5_0:(b+1)*bytesQ5_0], a[b*bytesQ8_0:(b+1)*bytesQ8_0]
		qh := le.Uint32(x[2:])
		for j, v := range x[6:bytesQ5_0] {
			q[j] = int8(v&0xf|uint8(qh>>j&1)<<4) - 16
			q[j+QK/2] = int8(v>>4|uint8(qh>>(j+QK/2)&1)<<4) - 16
		}
		var sums [8]int32
		lanes8(&sums, &q, y[2:], 1, 1)
		accumulate8(&acc, halfAt(x, 0)*halfAt(y, 0), &sums)
	}
	return hsum8(&acc)
}

// ---- Q5_1

func quantizeRowQ5_1(src []float32, dst []byte) {
	checkRow(Q5_1, len(src), len(dst))
	for b := 0; b < len(src)/QK; b++ {
		x, y := src[b*QK:(b+1)*QK], dst[b*bytesQ5_1:(b+1)*bytesQ5_1]
		lo, hi := minMax(x)
		d := (hi - lo) / 31
		id := inverse(d)
		putHalf(y, 0, d)
		putHalf(y, 2, lo)
		var qh uint32
		for j := 0; j < QK/2; j++ {
			q0 := uint8(float32((x[j]-lo)*id) + 0.5)
			q1 := uint8(float32((x[j+QK/2]-lo)*id) + 0.5)
			y[8+j] = q0&0xf | (q1&0xf)<<4
			qh |= uint32(q0>>4&1) << j
			qh |= uint32(q1>>4&1) << (j + QK/2)
		}
		le.PutUint32(y[4:], qh)
	}
}

func dequantizeRowQ5_1(src []byte, dst []float32) {
	checkRow(Q5_1, len(dst), len(src))
	for b := 0; b < len(dst)/QK; b++ {
		x, y := src[b*bytesQ5_1:(b+1)*bytesQ5_1], dst[b*QK:(b+1)*QK]
		d, m := halfAt(x, 0), halfAt(x, 2)
		qh := le.Uint32(x[4:])
		for j, q := range x[8:bytesQ5_1] {
			h0 := uint8(qh>>j&1) << 4
			h1 := uint8(qh>>(j+QK/2)&1) << 4
			y[j] = float32(float32(q&0xf|h0)*d) + m
			y[j+QK/2] = float32(float32(q>>4|h1)*d) + m
		}
	}
}

func vecDotQ5_1Generic(n int, w, a []byte) float32 {
	checkDot(Q5_1, Q8_1, n, w, a)
	var (
		acc   [8]float32
		summs float32
		q     [32]int8
	)
	for b := 0; b < n/QK; b++ {
		x, y := w[b*bytesQ5_1:(b+1)*bytesQ5_1], a[b*bytesQ8_1:(b+1)*bytesQ8_1]
		summs = fmaf(halfAt(x, 2), halfAt(y, 2), summs)
		qh := le.Uint32(x[4:])
		for j, v := range x[8:bytesQ5_1] {
			q[j] = int8(v&0xf | uint8(qh>>j&1)<<4)
			q[j+QK/2] = int8(v>>4 | uint8(qh>>(j+QK/2)&1)<<4)
		}
		var sums [8]int32
		lanes8(&sums, &q, y[4:], 1, 1)
		accumulate8(&acc, halfAt(x, 0)*halfAt(y, 0), &sums)
	}
	return hsum8(&acc) + summs
}

// ---- Q8_0

// quantizeRowQ8_0 is ggml's reference quantizer: scale amax/127, quants
// rounded half away from zero. It writes model files.
func quantizeRowQ8_0(src []float32, dst []byte) {
	checkRow(Q8_0, len(src), len(dst))
	for b := 0; b < len(src)/QK; b++ {
		x, y := src[b*QK:(b+1)*QK], dst[b*bytesQ8_0:(b+1)*bytesQ8_0]
		amax, _ := absMaxSigned(x)
		d := amax / 127
		id := inverse(d)
		putHalf(y, 0, d)
		for j, v := range x {
			y[2+j] = uint8(int8(roundAway(float32(v * id))))
		}
	}
}

// quantizeRowQ8_0Act quantizes activations the way ggml's SIMD CPU
// code does (x86 AVX, ARM NEON alike round half to even; x86 takes 127/amax
// as the multiplier). It differs from quantizeRowQ8_0 only on exact ties.
func quantizeRowQ8_0Act(src []float32, dst []byte) {
	checkRow(Q8_0, len(src), len(dst))
	for b := 0; b < len(src)/QK; b++ {
		x, y := src[b*QK:(b+1)*QK], dst[b*bytesQ8_0:(b+1)*bytesQ8_0]
		amax, _ := absMaxSigned(x)
		putHalf(y, 0, amax/127)
		var id float32
		if amax != 0 {
			id = 127 / amax
		}
		for j, v := range x {
			y[2+j] = uint8(int8(roundEven(float32(v * id))))
		}
	}
}

func dequantizeRowQ8_0(src []byte, dst []float32) {
	checkRow(Q8_0, len(dst), len(src))
	for b := 0; b < len(dst)/QK; b++ {
		x, y := src[b*bytesQ8_0:(b+1)*bytesQ8_0], dst[b*QK:(b+1)*QK]
		d := halfAt(x, 0)
		for j, q := range x[2:bytesQ8_0] {
			y[j] = float32(int8(q)) * d
		}
	}
}

func vecDotQ8_0Generic(n int, w, a []byte) float32 {
	checkDot(Q8_0, Q8_0, n, w, a)
	var (
		acc [8]float32
		q   [32]int8
	)
	for b := 0; b < n/QK; b++ {
		x, y := w[b*bytesQ8_0:(b+1)*bytesQ8_0], a[b*bytesQ8_0:(b+1)*bytesQ8_0]
		for j, v := range x[2:bytesQ8_0] {
			q[j] = int8(v)
		}
		var sums [8]int32
		lanes8(&sums, &q, y[2:], 1, 1)
		accumulate8(&acc, halfAt(x, 0)*halfAt(y, 0), &sums)
	}
	return hsum8(&acc)
}

// ---- Q8_1 (activations only: ggml has no Q8_1 weights)

// quantizeRowQ8_1 quantizes activations as ggml's SIMD CPU code does (see
// quantizeRowQ8_0Act) and stores s = d·Σq for the min terms of Q4_1/Q5_1.
func quantizeRowQ8_1(src []float32, dst []byte) {
	checkRow(Q8_1, len(src), len(dst))
	for b := 0; b < len(src)/QK; b++ {
		x, y := src[b*QK:(b+1)*QK], dst[b*bytesQ8_1:(b+1)*bytesQ8_1]
		amax, _ := absMaxSigned(x)
		d := amax / 127
		var id float32
		if amax != 0 {
			id = 127 / amax
		}
		var isum int32
		for j, v := range x {
			q := int8(roundEven(float32(v * id)))
			y[4+j] = uint8(q)
			isum += int32(q)
		}
		putHalf(y, 0, d)
		putHalf(y, 2, d*float32(isum))
	}
}

func dequantizeRowQ8_1(src []byte, dst []float32) {
	checkRow(Q8_1, len(dst), len(src))
	for b := 0; b < len(dst)/QK; b++ {
		x, y := src[b*bytesQ8_1:(b+1)*bytesQ8_1], dst[b*QK:(b+1)*QK]
		d := halfAt(x, 0)
		for j, q := range x[4:bytesQ8_1] {
			y[j] = float32(int8(q)) * d
		}
	}
}

func vecDotQ8_1Generic(n int, w, a []byte) float32 {
	checkDot(Q8_1, Q8_1, n, w, a)
	var sum float32
	for b := 0; b < n/QK; b++ {
		x, y := w[b*bytesQ8_1:(b+1)*bytesQ8_1], a[b*bytesQ8_1:(b+1)*bytesQ8_1]
		var isum int32
		for j, q := range x[4:bytesQ8_1] {
			isum += int32(int8(q)) * int32(int8(y[4+j]))
		}
		sum += float32(isum) * float32(halfAt(x, 0)*halfAt(y, 0))
	}
	return sum
}
