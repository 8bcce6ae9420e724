package kernels

import (
	"fmt"
	"math"
)

// Rope is a rotary position embedding as a GGUF model describes it. The pair
// i of a head (0 ≤ i < Dims/2) turns by θ_i = FreqScale · pos · Base^(−2i/Dims)
// / FreqFactors[i]; dimensions past Dims are left as they are.
type Rope struct {
	// Dims is the number of rotated dimensions of each head,
	// rope.dimension_count (n_rot): even and at most the head size.
	Dims int
	// Base is rope.freq_base; 0 means 10000.
	Base float32
	// FreqScale multiplies every angle: 1/rope.scaling.factor under linear
	// scaling; 0 means 1.
	FreqScale float32
	// NeoX pairs dimension i with i+Dims/2 (GPT-NeoX, Qwen2, Phi); otherwise
	// 2i pairs with 2i+1 (Llama, Mistral).
	NeoX bool
	// FreqFactors, when set, holds Dims/2 divisors of the angles (Llama 3's
	// rope_freqs.weight, Phi-3's LongRoPE factors).
	FreqFactors []float32
	// AttnFactor multiplies the cosines and sines, so the rotated vectors
	// and the attention scores (LongRoPE's rope.scaling.attn_factor); 0
	// means 1.
	AttnFactor float32
	// ExtFactor, when not 0, makes the scaling YaRN's (gpt-oss): pair i's
	// angle blends the scaled θ_i with the unscaled θ_i/FreqScale by
	// ExtFactor·ramp(i), the ramp 1 below CorrDims[0] and 0 above
	// CorrDims[1] (YarnCorrDims), and the cosines and sines grow by
	// 1 + 0.1·ln(1/FreqScale).
	ExtFactor float32
	CorrDims  [2]float32
}

// YarnCorrDims are YaRN's correction dims for a RoPE of dims rotated
// dimensions and base trained at origCtx positions: the pairs whose
// wavelengths turn betaFast and betaSlow times over origCtx, floored and
// ceiled within [0, dims−1], in float32 as ggml computes them.
func YarnCorrDims(dims, origCtx int, base, betaFast, betaSlow float32) [2]float32 {
	corr := func(beta float32) float32 {
		turns := float32(float32(origCtx) / float32(float32(beta*2)*float32(math.Pi)))
		return float32(float32(dims)*logf32(turns)) / float32(2*logf32(base))
	}
	start := float32(math.Floor(float64(corr(betaFast))))
	end := float32(math.Ceil(float64(corr(betaSlow))))
	return [2]float32{max(0, start), min(float32(dims-1), end)}
}

// logf32 is the natural logarithm rounded to float32, as glibc's logf.
func logf32(x float32) float32 { return float32(math.Log(float64(x))) }

// Angles fills cos and sin, each Dims/2 long, with the cosines and sines of
// the angles of position pos.
//
// The angles are made as ggml makes them, so that rotations agree with
// llama.cpp's to the bit: Base^(−2/Dims) rounded to float32 (glibc's powf
// differs from that for a few rare bases), θ_i by repeated float32
// multiplication from θ_0 = pos, and their cosines and sines by glibc's
// cosf and sinf (rope_trig.go).
func (r Rope) Angles(pos int, cos, sin []float32) {
	half := r.Dims / 2
	if r.Dims <= 0 || r.Dims%2 != 0 || len(cos) != half || len(sin) != half {
		panic(fmt.Sprintf("kernels: Rope.Angles with Dims %d needs cos and sin of %d, got %d and %d",
			r.Dims, half, len(cos), len(sin)))
	}
	if r.FreqFactors != nil && len(r.FreqFactors) < half {
		panic(fmt.Sprintf("kernels: Rope with Dims %d has %d freq factors", r.Dims, len(r.FreqFactors)))
	}
	base, fs := r.Base, r.FreqScale
	if base == 0 {
		base = 10000
	}
	if fs == 0 {
		fs = 1
	}
	step := float32(math.Pow(float64(base), float64(float32(-2)/float32(r.Dims))))
	theta := float32(pos)
	for i := range half {
		t := theta
		if r.FreqFactors != nil {
			t /= r.FreqFactors[i]
		}
		if r.ExtFactor != 0 {
			t = r.yarnAngle(t, fs, i)
		} else {
			t *= fs
		}
		cos[i], sin[i] = cosf(t), sinf(t)
		theta *= step
	}
	m := r.AttnFactor
	if r.ExtFactor != 0 {
		m = float32(cmpOr(m, 1) * float32(1+float32(0.1*logf32(1/fs))))
	}
	if m != 0 && m != 1 {
		// As ggml's rope_yarn: cosf(θ)·mscale, sinf(θ)·mscale.
		for i := range half {
			cos[i] *= m
			sin[i] *= m
		}
	}
}

// yarnAngle is ggml's rope_yarn angle of pair i: the unscaled angle
// extrap blended with the scaled one by the ramp between the correction
// dims, each product rounded as ggml rounds it.
func (r Rope) yarnAngle(extrap, fs float32, i int) float32 {
	interp := float32(fs * extrap)
	y := float32(float32(i)-r.CorrDims[0]) / max(0.001, float32(r.CorrDims[1]-r.CorrDims[0]))
	mix := float32(float32(1-min(1, max(0, y))) * r.ExtFactor)
	return float32(interp*float32(1-mix)) + float32(extrap*mix)
}

// cmpOr is x, or def when x is 0.
func cmpOr(x, def float32) float32 {
	if x == 0 {
		return def
	}
	return x
}

// Apply rotates every head of x, (heads, headDim) contiguous, by the angles
// Angles made for the token's position.
func (r Rope) Apply(x []float32, headDim int, cos, sin []float32) {
	r.check(x, headDim, cos, sin)
	half := r.Dims / 2
	for h := 0; h < len(x); h += headDim {
		if r.NeoX {
			ropeNeox(x[h:h+half], x[h+half:h+r.Dims], cos, sin)
		} else {
			ropeNorm(x[h:h+r.Dims], cos, sin)
		}
	}
}

// applyGo is Apply with only the pure-Go twins, for tests and benchmarks.
func (r Rope) applyGo(x []float32, headDim int, cos, sin []float32) {
	r.check(x, headDim, cos, sin)
	half := r.Dims / 2
	for h := 0; h < len(x); h += headDim {
		if r.NeoX {
			ropeNeoxGo(x[h:h+half], x[h+half:h+r.Dims], cos, sin)
		} else {
			ropeNormGo(x[h:h+r.Dims], cos, sin)
		}
	}
}

func (r Rope) check(x []float32, headDim int, cos, sin []float32) {
	half := r.Dims / 2
	if r.Dims <= 0 || r.Dims%2 != 0 || r.Dims > headDim || len(x)%headDim != 0 ||
		len(cos) != half || len(sin) != half {
		panic(fmt.Sprintf("kernels: Rope.Apply with Dims %d to %d values in heads of %d with %d cos and %d sin",
			r.Dims, len(x), headDim, len(cos), len(sin)))
	}
}

// Both rotations round as ggml's compiled rope does: x0·c − x1·s with the
// first product fused into the subtraction, x0·s + x1·c with the first
// product fused into the addition.

// ropeNormGo rotates the adjacent pairs (x[2i], x[2i+1]).
func ropeNormGo(x, cos, sin []float32) {
	x = x[:2*len(cos)]
	sin = sin[:len(cos)]
	for i, c := range cos {
		s := sin[i]
		x0, x1 := x[2*i], x[2*i+1]
		x[2*i] = fmaf(x0, c, -float32(x1*s))
		x[2*i+1] = fmaf(x0, s, float32(x1*c))
	}
}

// ropeNeoxGo rotates the pairs (x0[i], x1[i]).
func ropeNeoxGo(x0, x1, cos, sin []float32) {
	x0, x1, sin = x0[:len(cos)], x1[:len(cos)], sin[:len(cos)]
	for i, c := range cos {
		s := sin[i]
		a, b := x0[i], x1[i]
		x0[i] = fmaf(a, c, -float32(b*s))
		x1[i] = fmaf(a, s, float32(b*c))
	}
}
