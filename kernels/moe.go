package kernels

import "fmt"

// The element-wise operations of mixtures of experts' blocks, as ggml's CPU
// backend computes them, so that routing and expert outputs agree with
// llama.cpp's to the bit.

// SoftmaxRow is Softmax of a row of any length, as ggml's soft_max computes
// a row it does not pad (a router's logits, the few chosen experts'):
// groups of 8 through ggml's vectorised expf, the last len(x)%8 through C's
// expf, their sum in float64, then x scaled by float32(1/sum). On a length
// that is a multiple of 8 it is Softmax.
func SoftmaxRow(x []float32) {
	if len(x) == 0 {
		return
	}
	m := maxF32(x)
	body := len(x) &^ 7
	var sum float64
	if body > 0 {
		sum = expSubSumRow(x[:body], x[:body], m)
	}
	for i := body; i < len(x); i++ {
		e := expfLibm(x[i] - m)
		x[i] = e
		sum += float64(e)
	}
	scale(float32(1/sum), x)
}

// SwiGLUOAI sets dst to gpt-oss's clamped SwiGLU of gate and up, as ggml's
// swiglu_oai: with g = min(gate, limit) and u = clamp(up, −limit, limit),
// dst = g/(1 + e^(−alpha·g)) · (u + 1), e^ by C's expf. dst may be gate or
// up. It is scalar in ggml too.
func SwiGLUOAI(dst, gate, up []float32, alpha, limit float32) {
	if len(gate) != len(up) || len(dst) != len(gate) {
		panic(fmt.Sprintf("kernels: SwiGLUOAI of %d gates, %d ups into %d", len(gate), len(up), len(dst)))
	}
	for i, g := range gate {
		g = min(g, limit)
		u := max(-limit, min(up[i], limit))
		glu := g / (1 + expfLibm(float32(alpha*-g)))
		dst[i] = glu * (u + 1)
	}
}

// AddWeighted adds w·x to dst element-wise, the product rounded before the
// sum (ggml_mul, then ggml_add: no fused multiply-add), as a mixture's
// weighted expert outputs are summed.
func AddWeighted(dst []float32, w float32, x []float32) {
	x = x[:len(dst)]
	for i, v := range x {
		dst[i] += float32(w * v)
	}
}

// SoftmaxSink is Softmax with a sink: a logit that takes part in the
// normalisation as one more position whose weight is dropped (gpt-oss's
// learned attention sinks), as ggml's soft_max with sinks computes it: the
// maximum over x and the sink, the sink's e^(sink−max) by C's expf added
// to the float64 sum.
func SoftmaxSink(x []float32, sink float32) {
	if len(x) == 0 {
		return
	}
	m := max(maxF32(x), sink)
	sum := expSubSumRow(x, x, m) + float64(expfLibm(sink-m))
	scale(float32(1/sum), x)
}
