package kernels

import "math"

// RMSNorm sets dst = x / sqrt(mean(x²) + eps) ⊙ w, the normalisation of
// Llama-family blocks; w nil leaves out the weight. dst may be x.
//
// It rounds as ggml's rms_norm followed by its multiply by the weight: each
// square rounded to float32 and summed in float64 from the first element to
// the last, the mean rounded to float32, the scale 1/sqrtf(mean + eps) in
// float32, then (x·s)·w with a rounding after each multiply.
func RMSNorm(dst, x, w []float32, eps float32) {
	sameLen("RMSNorm", len(dst), len(x))
	if len(x) == 0 {
		return
	}
	s := rmsScale(x, eps)
	if w == nil {
		copy(dst, x)
		scale(s, dst)
		return
	}
	sameLen("RMSNorm", len(w), len(x))
	mulScale(dst, x, w, s)
}

// rmsScale is 1/sqrt(mean(x²) + eps) as ggml computes it. The float64 sum
// runs in order, one element at a time, as the C loop does (its compiler may
// not reorder a floating-point sum).
func rmsScale(x []float32, eps float32) float32 {
	var sum float64
	for _, v := range x {
		sum += float64(v * v)
	}
	mean := float32(sum / float64(len(x)))
	return 1 / float32(math.Sqrt(float64(mean+eps)))
}

// rmsNormGo is RMSNorm with only the pure-Go twins, for tests and benchmarks.
func rmsNormGo(dst, x, w []float32, eps float32) {
	s := rmsScale(x, eps)
	if w == nil {
		copy(dst, x)
		scaleGo(s, dst)
		return
	}
	mulScaleGo(dst, x, w, s)
}
