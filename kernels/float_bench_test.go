package kernels

import (
	"math/rand/v2"
	"testing"
)

// The benchmarks time each kernel as dispatched ("simd": assembly where the
// CPU has it) against its pure-Go twin ("go"), on the sizes of a 7B-class
// model: a hidden state of 4096, 32 heads of 128.

const benchN = 4096

func BenchmarkDotF32(b *testing.B) {
	r := rand.New(rand.NewPCG(51, 52))
	x, y := randF32(r, benchN, 1), randF32(r, benchN, 1)
	var sink float32
	b.Run("simd", func(b *testing.B) {
		b.SetBytes(8 * benchN)
		for b.Loop() {
			sink += DotF32(x, y)
		}
	})
	b.Run("go", func(b *testing.B) {
		b.SetBytes(8 * benchN)
		for b.Loop() {
			sink += dotF32Go(x, y)
		}
	})
	_ = sink
}

func BenchmarkDotF16(b *testing.B) {
	r := rand.New(rand.NewPCG(53, 54))
	x, y := randF16(r, benchN, 1), randF16(r, benchN, 1)
	var sink float32
	b.Run("simd", func(b *testing.B) {
		b.SetBytes(4 * benchN)
		for b.Loop() {
			sink += DotF16(x, y)
		}
	})
	b.Run("go", func(b *testing.B) {
		b.SetBytes(4 * benchN)
		for b.Loop() {
			sink += dotF16Go(x, y)
		}
	})
	_ = sink
}

func BenchmarkRMSNorm(b *testing.B) {
	r := rand.New(rand.NewPCG(55, 56))
	x, w, dst := randF32(r, benchN, 1), randF32(r, benchN, 1), make([]float32, benchN)
	b.Run("simd", func(b *testing.B) {
		for b.Loop() {
			RMSNorm(dst, x, w, 1e-5)
		}
	})
	b.Run("go", func(b *testing.B) {
		for b.Loop() {
			rmsNormGo(dst, x, w, 1e-5)
		}
	})
}

func BenchmarkRoPE(b *testing.B) {
	r := rand.New(rand.NewPCG(57, 58))
	const heads, hd = 32, 128
	x := randF32(r, heads*hd, 1)
	for _, neox := range []bool{false, true} {
		rope := Rope{Dims: hd, Base: 10000, NeoX: neox}
		cos, sin := make([]float32, hd/2), make([]float32, hd/2)
		rope.Angles(1234, cos, sin)
		name := map[bool]string{false: "normal", true: "neox"}[neox]
		b.Run(name+"/simd", func(b *testing.B) {
			for b.Loop() {
				rope.Apply(x, hd, cos, sin)
			}
		})
		b.Run(name+"/go", func(b *testing.B) {
			for b.Loop() {
				rope.applyGo(x, hd, cos, sin)
			}
		})
	}
	b.Run("angles", func(b *testing.B) {
		rope := Rope{Dims: hd, Base: 10000}
		cos, sin := make([]float32, hd/2), make([]float32, hd/2)
		for b.Loop() {
			rope.Angles(1234, cos, sin)
		}
	})
}

func BenchmarkSoftmax(b *testing.B) {
	r := rand.New(rand.NewPCG(59, 60))
	src := randF32(r, benchN, 10)
	x := make([]float32, benchN)
	b.Run("simd", func(b *testing.B) {
		for b.Loop() {
			copy(x, src)
			Softmax(x)
		}
	})
	b.Run("go", func(b *testing.B) {
		for b.Loop() {
			copy(x, src)
			softmaxGo(x)
		}
	})
}

func BenchmarkSwiGLU(b *testing.B) {
	r := rand.New(rand.NewPCG(61, 62))
	const n = 11008
	g, u, dst := randF32(r, n, 4), randF32(r, n, 4), make([]float32, n)
	b.Run("simd", func(b *testing.B) {
		for b.Loop() {
			SwiGLU(dst, g, u)
		}
	})
	b.Run("go", func(b *testing.B) {
		for b.Loop() {
			swigluGo(dst, g, u)
		}
	})
}
