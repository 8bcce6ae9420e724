package kernels

import "math"

// Pure-Go twins of the float vector kernels. They serve every build without
// the assembly and the tails the assembly leaves, and the tests hold the
// assembly to them. Sums keep four partial sums, so that they round much as
// the vector lanes do and the loop does not wait on one add chain.

func dotF32Go(x, y []float32) float32 {
	y = y[:len(x)]
	var s0, s1, s2, s3 float32
	i := 0
	for ; i+4 <= len(x); i += 4 {
		xs, ys := x[i:i+4:i+4], y[i:i+4:i+4]
		s0 += xs[0] * ys[0]
		s1 += xs[1] * ys[1]
		s2 += xs[2] * ys[2]
		s3 += xs[3] * ys[3]
	}
	for ; i < len(x); i++ {
		s0 += x[i] * y[i]
	}
	return (s0 + s1) + (s2 + s3)
}

func dotF16Go(x, y []uint16) float32 {
	y = y[:len(x)]
	var s0, s1, s2, s3 float32
	i := 0
	for ; i+4 <= len(x); i += 4 {
		xs, ys := x[i:i+4:i+4], y[i:i+4:i+4]
		s0 += FP16ToFP32(xs[0]) * FP16ToFP32(ys[0])
		s1 += FP16ToFP32(xs[1]) * FP16ToFP32(ys[1])
		s2 += FP16ToFP32(xs[2]) * FP16ToFP32(ys[2])
		s3 += FP16ToFP32(xs[3]) * FP16ToFP32(ys[3])
	}
	for ; i < len(x); i++ {
		s0 += FP16ToFP32(x[i]) * FP16ToFP32(y[i])
	}
	return (s0 + s1) + (s2 + s3)
}

func sumSquaresGo(x []float32) float32 {
	var s0, s1, s2, s3 float32
	i := 0
	for ; i+4 <= len(x); i += 4 {
		xs := x[i : i+4 : i+4]
		s0 += xs[0] * xs[0]
		s1 += xs[1] * xs[1]
		s2 += xs[2] * xs[2]
		s3 += xs[3] * xs[3]
	}
	for ; i < len(x); i++ {
		s0 += x[i] * x[i]
	}
	return (s0 + s1) + (s2 + s3)
}

func maxGo(x []float32) float32 {
	m := float32(math.Inf(-1))
	for _, v := range x {
		if v > m {
			m = v
		}
	}
	return m
}

func axpyGo(a float32, x, y []float32) {
	y = y[:len(x)]
	for i, v := range x {
		y[i] += a * v
	}
}

func axpyF16Go(a float32, x []uint16, y []float32) {
	y = y[:len(x)]
	for i, h := range x {
		y[i] += a * FP16ToFP32(h)
	}
}

func scaleGo(a float32, x []float32) {
	for i := range x {
		x[i] *= a
	}
}

func addGo(dst, x, y []float32) {
	y, dst = y[:len(x)], dst[:len(x)]
	for i, v := range x {
		dst[i] = v + y[i]
	}
}

func mulGo(dst, x, y []float32) {
	y, dst = y[:len(x)], dst[:len(x)]
	for i, v := range x {
		dst[i] = v * y[i]
	}
}

// mulScaleGo sets dst = (x·s)·w, rounding after each multiply.
func mulScaleGo(dst, x, w []float32, s float32) {
	w, dst = w[:len(x)], dst[:len(x)]
	for i, v := range x {
		dst[i] = (v * s) * w[i]
	}
}

func fp16ToFP32RowGo(src []uint16, dst []float32) {
	dst = dst[:len(src)]
	for i, h := range src {
		dst[i] = FP16ToFP32(h)
	}
}

func fp32ToFP16RowGo(src []float32, dst []uint16) {
	dst = dst[:len(src)]
	for i, f := range src {
		dst[i] = FP32ToFP16(f)
	}
}
