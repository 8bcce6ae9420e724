package kernels

// Softmax replaces x by e^(x[i]−max x) / Σ e^(x[j]−max x). Subtracting the
// maximum keeps every exponent ≤ 0, so nothing overflows; elements of −Inf
// (masked positions) become exactly 0.
//
// It computes as ggml's soft_max does on a row of attention scores, which
// llama.cpp pads with masked entries to a multiple of 32: every exponential
// by ggml's vectorised expf, their sum taken per group of 8 lanes and the
// group sums added in float64, then x scaled by float32(1/sum).
func Softmax(x []float32) {
	if len(x) == 0 {
		return
	}
	m := maxF32(x)
	sum := expSubSumRow(x, x, m)
	scale(float32(1/sum), x)
}

// expSubSumRowGo sets dst[i] = e^(x[i]−m) and returns their sum, both as
// ggml_vec_soft_max_f32 computes them over x padded with −Inf to a multiple
// of 8 (the padding lanes are 0).
func expSubSumRowGo(dst, x []float32, m float32) float64 {
	dst = dst[:len(x)]
	var sum float64
	for g := 0; g < len(x); g += 8 {
		var lanes [8]float32
		for l := range min(8, len(x)-g) {
			lanes[l] = expfLane(x[g+l] - m)
			dst[g+l] = lanes[l]
		}
		sum += float64(hsum8(&lanes))
	}
	return sum
}

// softmaxGo is Softmax with only the pure-Go twins, for tests and benchmarks.
func softmaxGo(x []float32) {
	if len(x) == 0 {
		return
	}
	m := maxGo(x)
	sum := expSubSumRowGo(x, x, m)
	scaleGo(float32(1/sum), x)
}

// expSubSumGo sets dst[i] = e^(x[i]−m) with expf and returns their float32
// sum: the twin of the older expSubSumAVX2 kernel (float_exp_amd64.s), which
// Softmax no longer uses.
func expSubSumGo(dst, x []float32, m float32) float32 {
	dst = dst[:len(x)]
	var s float32
	for i, v := range x {
		e := expf(v - m)
		dst[i] = e
		s += e
	}
	return s
}
