package kernels

// Softmax replaces x by e^(x[i]−max x) / Σ e^(x[j]−max x). Subtracting the
// maximum keeps every exponent ≤ 0, so nothing overflows; elements of −Inf
// (masked positions) become exactly 0. The sum is kept in float32 lanes.
func Softmax(x []float32) {
	if len(x) == 0 {
		return
	}
	m := maxF32(x)
	sum := expSubSum(x, x, m)
	scale(1/sum, x)
}

// expSubSumGo sets dst[i] = e^(x[i]−m) and returns their sum.
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

// softmaxGo is Softmax with only the pure-Go twins, for tests and benchmarks.
func softmaxGo(x []float32) {
	if len(x) == 0 {
		return
	}
	m := maxGo(x)
	sum := expSubSumGo(x, x, m)
	scaleGo(1/sum, x)
}
