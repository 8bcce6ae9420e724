package kernels

import "math"

// RMSNorm sets dst = x / sqrt(mean(x²) + eps) ⊙ w, the normalisation of
// Llama-family blocks; w nil leaves out the weight. dst may be x.
//
// The scale is applied before the weight, (x·s)·w, rounding as ggml's
// rms_norm followed by its multiply by the weight does; the mean is taken in
// float64 from a float32 sum of squares.
func RMSNorm(dst, x, w []float32, eps float32) {
	sameLen("RMSNorm", len(dst), len(x))
	if len(x) == 0 {
		return
	}
	s := rmsScale(sumSquares(x), len(x), eps)
	if w == nil {
		copy(dst, x)
		scale(s, dst)
		return
	}
	sameLen("RMSNorm", len(w), len(x))
	mulScale(dst, x, w, s)
}

// rmsScale is 1/sqrt(sum/n + eps), in float32 as ggml computes it.
func rmsScale(sum float32, n int, eps float32) float32 {
	mean := float32(float64(sum) / float64(n))
	return 1 / float32(math.Sqrt(float64(mean+eps)))
}

// rmsNormGo is RMSNorm with only the pure-Go twins, for tests and benchmarks.
func rmsNormGo(dst, x, w []float32, eps float32) {
	s := rmsScale(sumSquaresGo(x), len(x), eps)
	if w == nil {
		copy(dst, x)
		scaleGo(s, dst)
		return
	}
	mulScaleGo(dst, x, w, s)
}
