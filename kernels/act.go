package kernels

import "math"

// SiLU sets dst[i] = x[i]·σ(x[i]) = x[i] / (1 + e^−x[i]); dst may be x.
func SiLU(dst, x []float32) {
	sameLen("SiLU", len(dst), len(x))
	silu(dst, x)
}

// SwiGLU sets dst[i] = silu(gate[i])·up[i], the gated unit of the Llama FFN;
// dst may be gate or up.
func SwiGLU(dst, gate, up []float32) {
	sameLen("SwiGLU", len(gate), len(up))
	sameLen("SwiGLU", len(dst), len(gate))
	swiglu(dst, gate, up)
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
