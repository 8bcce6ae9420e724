package kernels

import (
	"math"
	"sync"
)

// GeGLU sets dst[i] = gelu(gate[i])·up[i], the gated unit of the Gemma FFN,
// as ggml's geglu computes it on the CPU: gelu is the tanh approximation
// 0.5·x·(1 + tanh(sqrt(2/π)·x·(1 + 0.044715·x²))) looked up in a table of
// every half-precision input (x rounded to F16, the result rounded to F16),
// 0 for x ≤ −10 and x itself for x ≥ 10; the product is rounded once. dst
// may be gate or up.
//
// The conversion to F16 is the vector one (F16C on amd64, the pure-Go
// twin otherwise, bit for bit the same); the lookup itself is scalar.
func GeGLU(dst, gate, up []float32) {
	sameLen("GeGLU", len(gate), len(up))
	sameLen("GeGLU", len(dst), len(gate))
	geluOnce.Do(makeGeluTable)
	var h [256]uint16
	for c := 0; c < len(gate); c += len(h) {
		g := gate[c:min(c+len(h), len(gate))]
		hs := h[:len(g)]
		FP32ToFP16Row(g, hs)
		u, d := up[c:c+len(g)], dst[c:c+len(g)]
		for i, x := range g {
			switch {
			case x <= -10:
				d[i] = 0
			case x >= 10:
				d[i] = x * u[i]
			default:
				d[i] = geluTable[hs[i]] * u[i]
			}
		}
	}
}

var (
	geluOnce sync.Once
	// geluTable holds ggml's ggml_table_gelu_f16 widened to float32: for
	// every half-precision bit pattern h, gelu(h) rounded to F16.
	geluTable []float32
)

// Constants of ggml's ggml_gelu_f32.
const (
	geluCoefA      = float32(0.044715)
	geluSqrt2OverP = float32(0.79788456080286535587989211986876)
)

// geluF32 is ggml's ggml_gelu_f32 as its compiled code evaluates it in
// float32: left to right, 1 + 0.044715·x·x contracted to one fused
// multiply-add (the compiler does so where FMA is on), tanhf being the
// correctly rounded tanh. That reproduces ggml's table exactly; without
// the contraction one entry of 65536 differs.
func geluF32(x float32) float32 {
	inner := geluSqrt2OverP * x * fmaf(geluCoefA*x, x, 1)
	return 0.5 * x * (1 + float32(math.Tanh(float64(inner))))
}

func makeGeluTable() {
	geluTable = make([]float32, 1<<16)
	for i := range geluTable {
		geluTable[i] = FP16ToFP32(FP32ToFP16(geluF32(FP16ToFP32(uint16(i)))))
	}
}

// SoftCap replaces every x[i] by c·tanh(x[i]/c), which bounds it to (−c, c)
// smoothly, as Gemma 2 caps its attention scores and output logits. It
// rounds as llama.cpp's graph does: x·(1/c) by ggml_scale, tanhf, then ·c.
func SoftCap(x []float32, c float32) {
	inv := 1 / c
	for i, v := range x {
		x[i] = float32(math.Tanh(float64(v*inv))) * c
	}
}
