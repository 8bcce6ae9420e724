package kernels

import (
	"math/rand/v2"
	"testing"
)

func BenchmarkTmpGemvQ8(b *testing.B) {
	const cols = 2880
	for _, rows := range []int{1024, 201088} {
		rng := rand.New(rand.NewPCG(1, 2))
		rb := Q8_0.RowBytes(cols)
		w := make([]byte, rows*rb)
		for i := range w {
			w[i] = byte(rng.Uint32() & 0x3f)
		}
		x := randomRow(rng, cols)
		out := make([]float32, rows)
		scratch := make([]byte, MatScratchBytes(Q8_0, cols, 1))
		b.Run("rows"+string(rune('0'+rows%10)), func(b *testing.B) {
			b.SetBytes(int64(len(w)))
			for b.Loop() {
				MatMul(nil, Q8_0, w, rows, cols, x, 1, out, scratch)
			}
		})
	}
}

func BenchmarkTmpRead(b *testing.B) {
	w := make([]float32, 615<<20/4)
	for i := range w {
		w[i] = 1
	}
	x := make([]float32, 4096)
	b.SetBytes(int64(len(w) * 4))
	for b.Loop() {
		var s float32
		for i := 0; i+4096 <= len(w); i += 4096 {
			s += DotF32(w[i:i+4096], x)
		}
		_ = s
	}
}
