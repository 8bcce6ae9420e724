//go:build amd64 && !purego

package kernels

import (
	"math"
	"math/rand/v2"
	"testing"
)

// TestRecentProducts4KernelsMatchGeneric runs every 4- and 8-token Q4_K kernel
// this CPU can run (AVX2, and AVX-512 VNNI where present), not only the one
// init picked, lane by lane against the pure-Go one-token products.
func TestRecentProducts4KernelsMatchGeneric(t *testing.T) {
	if !quantAsm {
		t.Skip("no AVX2")
	}
	type kernel = func(nb int, w, a *byte, aStride int, out *float32, outStride int)
	cases := []struct {
		name   string
		k      kernel
		want   func(int, []byte, []byte) float32
		run    bool
		tokens int
	}{
		{"repack avx2", vecDotQ4_KRepackAVX2x4, vecDotQ4_KRepackGeneric, true, 4},
		{"gemm avx2", vecDotQ4_KGemmAVX2x4, vecDotQ4_KGemmGeneric, true, 4},
		{"repack vnni", vecDotQ4_KRepackVNNIx4, vecDotQ4_KRepackGeneric, vnni, 4},
		{"gemm vnni", vecDotQ4_KGemmVNNIx4, vecDotQ4_KGemmGeneric, vnni, 4},
		{"repack vnni 8", vecDotQ4_KRepackVNNIx8, vecDotQ4_KRepackGeneric, vnni, 8},
		{"gemm vnni 8", vecDotQ4_KGemmVNNIx8, vecDotQ4_KGemmGeneric, vnni, 8},
	}
	rng := rand.New(rand.NewPCG(39, 40))
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if !c.run {
				t.Skip("not on this CPU")
			}
			for _, n := range []int{QKK, 5 * QKK} {
				for i := range 30 {
					w := recentWeights(rng, Q4_K, n, i == 0)
					aRow := Q8_K.RowBytes(n) + 292*(i%2)
					a := make([]byte, c.tokens*aRow)
					for tok := range c.tokens {
						QuantizeActivations(Q8_K, randomRow(rng, n), a[tok*aRow:tok*aRow+Q8_K.RowBytes(n)])
					}
					out := make([]float32, 2*c.tokens-1)
					c.k(n/QKK, &w[0], &a[0], aRow, &out[0], 8)
					for tok := range c.tokens {
						want := c.want(n, w, a[tok*aRow:])
						if g := out[2*tok]; math.Float32bits(g) != math.Float32bits(want) {
							t.Fatalf("n=%d case %d token %d: %.9g, pure Go %.9g", n, i, tok, g, want)
						}
					}
				}
			}
		})
	}
}
