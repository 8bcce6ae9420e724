//go:build amd64 && !purego

package kernels

import "golang.org/x/sys/cpu"

// useAVX2 says the AVX2+FMA kernels of float_amd64.s and float_exp_amd64.s
// may run; useF16C adds the half-precision conversions. x/sys/cpu sets HasAVX2
// only when the OS saves the YMM registers.
var (
	useAVX2 = cpu.X86.HasAVX2 && cpu.X86.HasFMA
	useF16C = useAVX2 && cpu.X86.HasF16C
)

// The assembly kernels take lengths that are multiples of 8 (pairs for
// ropeNormAVX2: multiples of 4) and non-nil pointers; the wrappers below pass
// them the whole 8-element part of their slices and finish the tail with the
// pure-Go twin.

//go:noescape
func dotF32AVX2(x, y *float32, n int) float32

//go:noescape
func dotF16AVX2(x, y *uint16, n int) float32

//go:noescape
func sumSquaresAVX2(x *float32, n int) float32

//go:noescape
func maxAVX2(x *float32, n int) float32

//go:noescape
func axpyAVX2(a float32, x, y *float32, n int)

//go:noescape
func axpyF16AVX2(a float32, x *uint16, y *float32, n int)

//go:noescape
func scaleAVX2(a float32, x *float32, n int)

//go:noescape
func addAVX2(dst, x, y *float32, n int)

//go:noescape
func mulAVX2(dst, x, y *float32, n int)

//go:noescape
func mulScaleAVX2(dst, x, w *float32, s float32, n int)

//go:noescape
func fp16ToFP32AVX2(src *uint16, dst *float32, n int)

//go:noescape
func fp32ToFP16AVX2(src *float32, dst *uint16, n int)

//go:noescape
func ropeNormAVX2(x, cos, sin *float32, pairs int)

//go:noescape
func ropeNeoxAVX2(x0, x1, cos, sin *float32, n int)

//go:noescape
func expSubSumAVX2(dst, x *float32, m float32, n int) float32

//go:noescape
func geluAVX2(dst, x *float32, n int)

func dotF32(x, y []float32) float32 {
	n8 := len(x) &^ 7
	if !useAVX2 || n8 == 0 {
		return dotF32Go(x, y)
	}
	return dotF32AVX2(&x[0], &y[0], n8) + dotF32Go(x[n8:], y[n8:])
}

func dotF16(x, y []uint16) float32 {
	n8 := len(x) &^ 7
	if !useF16C || n8 == 0 {
		return dotF16Go(x, y)
	}
	return dotF16AVX2(&x[0], &y[0], n8) + dotF16Go(x[n8:], y[n8:])
}

func sumSquares(x []float32) float32 {
	n8 := len(x) &^ 7
	if !useAVX2 || n8 == 0 {
		return sumSquaresGo(x)
	}
	return sumSquaresAVX2(&x[0], n8) + sumSquaresGo(x[n8:])
}

func maxF32(x []float32) float32 {
	n8 := len(x) &^ 7
	if !useAVX2 || n8 == 0 {
		return maxGo(x)
	}
	m := maxAVX2(&x[0], n8)
	for _, v := range x[n8:] {
		if v > m {
			m = v
		}
	}
	return m
}

func axpy(a float32, x, y []float32) {
	n8 := len(x) &^ 7
	if !useAVX2 || n8 == 0 {
		axpyGo(a, x, y)
		return
	}
	axpyAVX2(a, &x[0], &y[0], n8)
	axpyGo(a, x[n8:], y[n8:])
}

func axpyF16(a float32, x []uint16, y []float32) {
	n8 := len(x) &^ 7
	if !useF16C || n8 == 0 {
		axpyF16Go(a, x, y)
		return
	}
	axpyF16AVX2(a, &x[0], &y[0], n8)
	axpyF16Go(a, x[n8:], y[n8:])
}

func scale(a float32, x []float32) {
	n8 := len(x) &^ 7
	if !useAVX2 || n8 == 0 {
		scaleGo(a, x)
		return
	}
	scaleAVX2(a, &x[0], n8)
	scaleGo(a, x[n8:])
}

func add(dst, x, y []float32) {
	n8 := len(x) &^ 7
	if !useAVX2 || n8 == 0 {
		addGo(dst, x, y)
		return
	}
	addAVX2(&dst[0], &x[0], &y[0], n8)
	addGo(dst[n8:], x[n8:], y[n8:])
}

func mul(dst, x, y []float32) {
	n8 := len(x) &^ 7
	if !useAVX2 || n8 == 0 {
		mulGo(dst, x, y)
		return
	}
	mulAVX2(&dst[0], &x[0], &y[0], n8)
	mulGo(dst[n8:], x[n8:], y[n8:])
}

func mulScale(dst, x, w []float32, s float32) {
	n8 := len(x) &^ 7
	if !useAVX2 || n8 == 0 {
		mulScaleGo(dst, x, w, s)
		return
	}
	mulScaleAVX2(&dst[0], &x[0], &w[0], s, n8)
	mulScaleGo(dst[n8:], x[n8:], w[n8:], s)
}

func fp16ToFP32Row(src []uint16, dst []float32) {
	n8 := len(src) &^ 7
	if !useF16C || n8 == 0 {
		fp16ToFP32RowGo(src, dst)
		return
	}
	fp16ToFP32AVX2(&src[0], &dst[0], n8)
	fp16ToFP32RowGo(src[n8:], dst[n8:])
}

func fp32ToFP16Row(src []float32, dst []uint16) {
	n8 := len(src) &^ 7
	if !useF16C || n8 == 0 {
		fp32ToFP16RowGo(src, dst)
		return
	}
	fp32ToFP16AVX2(&src[0], &dst[0], n8)
	fp32ToFP16RowGo(src[n8:], dst[n8:])
}

func ropeNorm(x, cos, sin []float32) {
	p4 := len(cos) &^ 3
	if !useAVX2 || p4 == 0 {
		ropeNormGo(x, cos, sin)
		return
	}
	ropeNormAVX2(&x[0], &cos[0], &sin[0], p4)
	ropeNormGo(x[2*p4:], cos[p4:], sin[p4:])
}

func ropeNeox(x0, x1, cos, sin []float32) {
	n8 := len(cos) &^ 7
	if !useAVX2 || n8 == 0 {
		ropeNeoxGo(x0, x1, cos, sin)
		return
	}
	ropeNeoxAVX2(&x0[0], &x1[0], &cos[0], &sin[0], n8)
	ropeNeoxGo(x0[n8:], x1[n8:], cos[n8:], sin[n8:])
}

func expSubSum(dst, x []float32, m float32) float32 {
	n8 := len(x) &^ 7
	if !useAVX2 || n8 == 0 {
		return expSubSumGo(dst, x, m)
	}
	return expSubSumAVX2(&dst[0], &x[0], m, n8) + expSubSumGo(dst[n8:], x[n8:], m)
}

func gelu(dst, x []float32) {
	n8 := len(x) &^ 7
	if !useAVX2 || n8 == 0 {
		geluGo(dst, x)
		return
	}
	geluAVX2(&dst[0], &x[0], n8)
	geluGo(dst[n8:], x[n8:])
}
