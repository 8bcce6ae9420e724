//go:build amd64 && !purego

package kernels

import "math"

//go:noescape
func siluRowAVX2(dst, x, up *float32, n int)

// siluRow runs the whole groups of 8 through the assembly (up nil: no
// product) and the rest through the pure-Go twin, as ggml splits a row.
func siluRow(dst, x, up []float32) {
	n8 := len(x) &^ 7
	if !useAVX2 || n8 == 0 {
		siluRowGo(dst, x, up)
		return
	}
	dst = dst[:len(x)]
	var u *float32
	if up != nil {
		up = up[:len(x)]
		u = &up[0]
	}
	siluRowAVX2(&dst[0], &x[0], u, n8)
	if up != nil {
		up = up[n8:]
	}
	siluRowGo(dst[n8:], x[n8:], up)
}

//go:noescape
func expSubSumRowAVX2(dst, x *float32, m float32, n int) float64

// expSubSumRow runs x through the assembly, the last, partial group of 8
// padded with −Inf, whose lanes give 0 and add nothing, as the masked cells
// of llama.cpp's padded rows do.
func expSubSumRow(dst, x []float32, m float32) float64 {
	if !useAVX2 || len(x) == 0 {
		return expSubSumRowGo(dst, x, m)
	}
	dst = dst[:len(x)]
	n8 := len(x) &^ 7
	var sum float64
	if n8 > 0 {
		sum = expSubSumRowAVX2(&dst[0], &x[0], m, n8)
	}
	if n8 < len(x) {
		var pad [8]float32
		for i := range pad {
			pad[i] = float32(math.Inf(-1))
		}
		copy(pad[:], x[n8:])
		sum += expSubSumRowAVX2(&pad[0], &pad[0], m, 8)
		copy(dst[n8:], pad[:])
	}
	return sum
}
