package kernels

import "math"

// SiLU sets dst[i] = x[i]·σ(x[i]) = x[i] / (1 + e^−x[i]); dst may be x.
//
// x is one row as ggml's silu sees it: its elements go through ggml's
// vectorised expf in groups of 8 from the start, the last len(x)%8 through
// C's expf, so that the results are llama.cpp's to the bit.
func SiLU(dst, x []float32) {
	sameLen("SiLU", len(dst), len(x))
	siluRow(dst, x, nil)
}

// SwiGLU sets dst[i] = silu(gate[i])·up[i], the gated unit of the Llama FFN,
// rounding silu(gate[i]) before the product as ggml's separate silu and mul
// do; dst may be gate or up. gate is one row, as for SiLU.
func SwiGLU(dst, gate, up []float32) {
	sameLen("SwiGLU", len(gate), len(up))
	sameLen("SwiGLU", len(dst), len(gate))
	siluRow(dst, gate, up)
}

// Constants of ggml's vectorised expf (ggml_v_expf, after ARM's optimized
// routines): e^x = 2^n·(1 + p(b)) with n = round(x·log2 e) by the 1.5·2^23
// shift and b = x − n·ln 2 in two parts. act_amd64.s holds the same bits.
var (
	gexpShift = math.Float32frombits(0x4b400000) // 1.5·2^23
	gexpLog2E = math.Float32frombits(0x3fb8aa3b)
	gexpLn2Hi = math.Float32frombits(0x3f317200)
	gexpLn2Lo = math.Float32frombits(0x35bfbe8e)
	gexpP0    = math.Float32frombits(0x3c072010)
	gexpP1    = math.Float32frombits(0x3d2b9f17)
	gexpP2    = math.Float32frombits(0x3e2aaf33)
	gexpP3    = math.Float32frombits(0x3efffedb)
	gexpP4    = math.Float32frombits(0x3f7ffff6)
)

// expfLane is e^x as one lane of ggml's vectorised expf computes it, with
// the same fused multiply-adds, including its handling of results that
// overflow or underflow (|n| > 126).
func expfLane(x float32) float32 {
	z := fmaf(x, gexpLog2E, gexpShift)
	n := z - gexpShift
	b := fmaf(-n, gexpLn2Lo, fmaf(-n, gexpLn2Hi, x))
	e := math.Float32bits(z) << 23
	k := math.Float32frombits(e + 0x3f800000)
	u := b * b
	j := fmaf(fmaf(fmaf(gexpP0, b, gexpP1), u, fmaf(gexpP2, b, gexpP3)), u, gexpP4*b)
	an := float32(math.Abs(float64(n)))
	if !(an > 126) {
		return fmaf(j, k, k)
	}
	var g uint32
	if n <= 0 {
		g = 0x82000000
	}
	s1 := math.Float32frombits(g + 0x7f000000)
	s2 := math.Float32frombits(e - g)
	if an > 192 {
		return s1 * s1
	}
	return fmaf(s2, j, s2) * s1
}

// expfLibm is C's expf, which ggml uses past the last whole group of 8. This
// is the correctly rounded value, which glibc's expf returns but for rare
// near-ties.
func expfLibm(x float32) float32 { return float32(math.Exp(float64(x))) }

// siluRowGo sets dst to silu(x) (times up when up is not nil) the way ggml
// computes a row: ggml_v_silu on whole groups of 8, x/(1+expf(−x)) on the rest.
func siluRowGo(dst, x, up []float32) {
	dst = dst[:len(x)]
	n8 := len(x) &^ 7
	for i, v := range x {
		var e float32
		if i < n8 {
			e = expfLane(0 - v)
		} else {
			e = expfLibm(-v)
		}
		s := v / (1 + e)
		if up != nil {
			s *= up[i]
		}
		dst[i] = s
	}
}

// GELU sets dst[i] to the tanh approximation of GELU that ggml uses,
// 0.5·x·(1 + tanh(sqrt(2/π)·x·(1 + 0.044715·x²))); dst may be x.
//
// ggml's CPU backend evaluates it through a table indexed by x rounded to
// half precision, so its results differ from these in about the third
// significant digit; this is the exact formula in float32.
func GELU(dst, x []float32) {
	sameLen("GELU", len(dst), len(x))
	gelu(dst, x)
}

// Constants of expf and of the assembly's EXP0 (float_exp_amd64.s holds the
// same bit patterns).
const (
	expLo = float32(-87.33654475)  // −126·ln 2: below it e^x is taken as 0
	expHi = float32(88.02969193)   // 127·ln 2: x is clamped to it, so 2^n stays finite
	log2E = float32(1.44269504089) // log₂ e
	ln2Hi = float32(0.693359375)   // ln 2 in 9 bits, so n·ln2Hi is exact
	ln2Lo = float32(-2.12194440e-4)
	expP0 = float32(1.9875691500e-4) // Cephes' expf polynomial on [−ln2/2, ln2/2]
	expP1 = float32(1.3981999507e-3)
	expP2 = float32(8.3334519073e-3)
	expP3 = float32(4.1665795894e-2)
	expP4 = float32(1.6666665459e-1)
	expP5 = float32(5.0000001201e-1)
	geluA = float32(0.044715)
	geluK = float32(-1.5957691216) // −2·sqrt(2/π)
)

// expf is e^x in float32 by the same steps as the assembly's EXP0: write
// x = n·ln 2 + r with integer n and |r| ≤ ln2/2, take e^r from a polynomial
// and multiply by 2^n built in the exponent bits. Accurate to about one ulp.
func expf(x float32) float32 {
	if x != x {
		return x
	}
	if x < expLo {
		return 0
	}
	if x > expHi {
		x = expHi
	}
	n := float32(math.RoundToEven(float64(x * log2E)))
	r := x - n*ln2Hi
	r = r - n*ln2Lo
	p := expP0
	p = p*r + expP1
	p = p*r + expP2
	p = p*r + expP3
	p = p*r + expP4
	p = p*r + expP5
	y := p*(r*r) + r + 1
	return y * math.Float32frombits(uint32(int32(n)+127)<<23)
}

func siluGo(dst, x []float32) {
	dst = dst[:len(x)]
	for i, v := range x {
		dst[i] = v / (1 + expf(-v))
	}
}

func swigluGo(dst, gate, up []float32) {
	up, dst = up[:len(gate)], dst[:len(gate)]
	for i, g := range gate {
		dst[i] = g / (1 + expf(-g)) * up[i]
	}
}

// geluGo uses 0.5·(1 + tanh z) = 1 / (1 + e^−2z), which needs one exp and
// saturates cleanly at both ends.
func geluGo(dst, x []float32) {
	dst = dst[:len(x)]
	for i, v := range x {
		t := v*v*geluA + 1
		dst[i] = v / (1 + expf(v*geluK*t))
	}
}
