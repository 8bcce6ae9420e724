//go:build amd64 && !purego

package kernels

import (
	"math"
	"math/rand/v2"
	"testing"
)

// rows4Kernels are the 4-row kernels this CPU can run, not only the ones
// vecDotRows4Of picks.
func rows4Kernels() []struct {
	name string
	typ  DType
	k    func(nb int, w *byte, wStride int, a *byte, out *float32)
	run  bool
} {
	return []struct {
		name string
		typ  DType
		k    func(nb int, w *byte, wStride int, a *byte, out *float32)
		run  bool
	}{
		{"mxfp4 avx2", MXFP4, vecDotMXFP4Rows4AVX2, quantAsm},
		{"mxfp4 vnni", MXFP4, vecDotMXFP4Rows4VNNI, vnni},
		{"iq4_nl avx2", IQ4_NL, vecDotIQ4_NLRows4AVX2, quantAsm},
	}
}

// TestRows4KernelsMatchGeneric runs every 4-row kernel lane by lane
// against the pure-Go VecDot, on quantized rows (the tables' ends among
// them) and on random bytes (every nibble; MXFP4 exponents in a normal
// range).
func TestRows4KernelsMatchGeneric(t *testing.T) {
	rng := rand.New(rand.NewPCG(47, 48))
	want := map[DType]func(int, []byte, []byte) float32{MXFP4: vecDotMXFP4Generic, IQ4_NL: vecDotIQ4_NLGeneric}
	for _, c := range rows4Kernels() {
		t.Run(c.name, func(t *testing.T) {
			if !c.run {
				t.Skip("not on this CPU")
			}
			for _, cols := range []int{32, 96, 2880} {
				rb := c.typ.RowBytes(cols)
				for i := range 20 {
					w := make([]byte, 0, 4*rb)
					for r := range 4 {
						x := randomRow(rng, cols)
						if (i+r)%3 == 0 {
							for j := range x {
								x[j] = float32(1 - 2*(j%2))
							}
						}
						row := quantize(c.typ, x)
						if i%4 == 3 {
							for j := range row {
								row[j] = byte(rng.Uint32())
							}
							for b := 0; b < len(row); b += rb / (cols / QK) {
								if c.typ == MXFP4 {
									row[b] = byte(118 + rng.IntN(12))
								} else {
									row[b], row[b+1] = 0x00, 0x2c // 1/16 as f16
								}
							}
						}
						w = append(w, row...)
					}
					a := quantize(Q8_0, randomRow(rng, cols))
					var out [4]float32
					c.k(cols/QK, &w[0], rb, &a[0], &out[0])
					for r := range 4 {
						if g, e := out[r], want[c.typ](cols, w[r*rb:(r+1)*rb], a); math.Float32bits(g) != math.Float32bits(e) {
							t.Fatalf("cols %d case %d row %d: %.9g, pure Go %.9g", cols, i, r, g, e)
						}
					}
				}
			}
		})
	}
}

// BenchmarkRows4Kernels times each 4-row kernel over 4 rows of 2880.
func BenchmarkRows4Kernels(b *testing.B) {
	const cols = 2880
	rng := rand.New(rand.NewPCG(49, 50))
	for _, c := range rows4Kernels() {
		if !c.run {
			continue
		}
		w := quantize(c.typ, randomRow(rng, 4*cols))
		a := quantize(Q8_0, randomRow(rng, cols))
		var out [4]float32
		b.Run(c.name, func(b *testing.B) {
			b.SetBytes(int64(len(w)))
			for b.Loop() {
				c.k(cols/QK, &w[0], c.typ.RowBytes(cols), &a[0], &out[0])
			}
		})
	}
}
