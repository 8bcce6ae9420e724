package kernels

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"math"
	"math/rand/v2"
	"testing"
)

// ggmlGeluSHA256 is the SHA-256 of ggml's CPU GELU of every half-precision
// input that is not a NaN, in bit-pattern order, each result as 4
// little-endian float32 bytes: the output of ggml_gelu over a 65536-element
// F32 tensor holding FP16ToFP32(0..65535), computed by llama.cpp c392e509
// (b4748) and by the llama.cpp release v0.5.0 in node-llama-cpp 3.22.1
// (both gave this hash; they differ only in NaN payloads). ggml's geglu
// multiplies the same values by up.
const ggmlGeluSHA256 = "8ebf59c5946ac49d0bba5e5230711f2e3e3b5d0d98ea0d778f3097de16a73def"

func TestGeGLUMatchesGgml(t *testing.T) {
	var x []float32
	for i := range 1 << 16 {
		if h := uint16(i); h&0x7c00 != 0x7c00 || h&0x3ff == 0 { // not a NaN
			x = append(x, FP16ToFP32(h))
		}
	}
	ones := make([]float32, len(x))
	for i := range ones {
		ones[i] = 1
	}
	y := make([]float32, len(x))
	GeGLU(y, x, ones)
	h := sha256.New()
	var b [4]byte
	for _, v := range y {
		binary.LittleEndian.PutUint32(b[:], math.Float32bits(v))
		h.Write(b[:])
	}
	if got := hex.EncodeToString(h.Sum(nil)); got != ggmlGeluSHA256 {
		t.Fatalf("GELU of every half: sha256 %s, ggml's %s", got, ggmlGeluSHA256)
	}
}

// TestGeGLU checks the product with up, the ends of the table's range and
// that dst may be gate, on rows longer and shorter than the kernel's chunk.
func TestGeGLU(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	for _, n := range []int{1, 7, 100, 256, 257, 1000} {
		gate, up := randF32(rng, n, 6), randF32(rng, n, 2)
		for i := 0; i < n; i += 9 {
			gate[i] *= 4 // some beyond ±10
		}
		got := make([]float32, n)
		GeGLU(got, gate, up)
		for i, x := range gate {
			want := FP16ToFP32(FP32ToFP16(geluF32(FP16ToFP32(FP32ToFP16(x))))) * up[i]
			switch {
			case x <= -10:
				want = 0
			case x >= 10:
				want = x * up[i]
			}
			if got[i] != want {
				t.Fatalf("n=%d: GeGLU(%g, %g) = %g, want %g", n, x, up[i], got[i], want)
			}
		}
		in := append([]float32(nil), gate...)
		GeGLU(in, in, up)
		for i := range in {
			if in[i] != got[i] {
				t.Fatalf("in place [%d]: %g, apart %g", i, in[i], got[i])
			}
		}
	}
}

func TestSoftCap(t *testing.T) {
	cases := []struct{ x, c, want float64 }{
		{0, 50, 0},
		{1, 50, 50 * math.Tanh(1.0/50)},
		{-120, 30, -30 * math.Tanh(4)},
		{1e6, 30, 30},
		{-1e6, 30, -30},
	}
	for _, c := range cases {
		x := []float32{float32(c.x)}
		SoftCap(x, float32(c.c))
		if math.Abs(float64(x[0])-c.want) > 1e-5*math.Max(1, math.Abs(c.want)) {
			t.Errorf("SoftCap(%g, %g) = %g, want %g", c.x, c.c, x[0], c.want)
		}
	}
}

// BenchmarkGatedActivations compares GeGLU with SwiGLU on a row of
// Gemma-3-1B's MLP width.
func BenchmarkGatedActivations(b *testing.B) {
	rng := rand.New(rand.NewPCG(1, 2))
	const n = 6912
	gate, up, dst := randF32(rng, n, 3), randF32(rng, n, 3), make([]float32, n)
	for _, k := range []struct {
		name string
		f    func(dst, gate, up []float32)
	}{{"SwiGLU", SwiGLU}, {"GeGLU", GeGLU}} {
		b.Run(k.name, func(b *testing.B) {
			b.SetBytes(4 * n)
			for b.Loop() {
				k.f(dst, gate, up)
			}
		})
	}
}

// BenchmarkSoftCap measures capping a row of Gemma 2's vocabulary.
func BenchmarkSoftCap(b *testing.B) {
	rng := rand.New(rand.NewPCG(3, 4))
	const n = 256000
	x := randF32(rng, n, 20)
	b.SetBytes(4 * n)
	for b.Loop() {
		SoftCap(x, 30)
	}
}
