package sparse

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/ruvllm/ruvllm/kernels"
)

// BenchmarkMulVec times the sparse mat-vec against the dense kernels'
// on matrices of tinyllama-1.1b's ffn_up shape (5632, 2048), 24 of them
// in turn so that, as in a model, the weights come from memory and not
// from a cache (with 8, about 26 MB, the half that sparsity 0.5 reads,
// stayed in a 32 MB L3 and flattered the sparse kernels twofold);
// sparsity s zeroes that fraction of random Gaussian inputs.
// Run it with -benchtime and -count and compare the dense and sparse lines
// of one run: the machine's speed drifts.
func BenchmarkMulVec(b *testing.B) {
	const rows, cols, mats = 5632, 2048, 24
	for _, dt := range []kernels.DType{kernels.Q8_0, kernels.Q4_0} {
		r := rand.New(rand.NewPCG(1, 2))
		dense := make([][]byte, mats)
		sparse := make([]*Matrix, mats)
		for i := range mats {
			dense[i] = randRowMajor(r, dt, rows, cols)
			sparse[i] = encoded(dt, rows, cols, dense[i])
		}
		x := make([]float32, cols)
		for i := range x {
			x[i] = float32(r.NormFloat64())
		}
		for _, threads := range []int{1, 2} {
			p := kernels.NewPool(threads)
			out := make([]float32, rows)
			scratch := make([]byte, kernels.MatScratchBytes(dt, cols, 1))
			b.Run(fmt.Sprintf("%v/t=%d/dense", dt, threads), func(b *testing.B) {
				b.SetBytes(int64(len(dense[0])))
				for i := 0; b.Loop(); i++ {
					kernels.MatVec(p, dt, dense[i%mats], rows, cols, x, out, scratch)
				}
			})
			if dt == kernels.Q4_0 { // as the dense decode reads Q4_0: rows interleaved 8 at a time
				packed := make([][]byte, mats)
				for i := range mats {
					packed[i] = make([]byte, kernels.InterleavedBytes(dt, rows, cols))
					kernels.Interleave(dt, packed[i], dense[i], rows, cols)
				}
				b.Run(fmt.Sprintf("%v/t=%d/dense-interleaved", dt, threads), func(b *testing.B) {
					b.SetBytes(int64(len(dense[0])))
					for i := 0; b.Loop(); i++ {
						kernels.MatVecInterleaved(p, dt, packed[i%mats], rows, cols, x, out, scratch)
					}
				})
			}
			var s Scratch
			s.Fit(sparse[0], 1, threads)
			for _, sp := range []float64{0, 0.25, 0.4, 0.5, 0.6} {
				thr := float32(gaussQuantile(sp))
				b.Run(fmt.Sprintf("%v/t=%d/sparsity=%.2f", dt, threads, sp), func(b *testing.B) {
					b.SetBytes(int64(len(dense[0])))
					for i := 0; b.Loop(); i++ {
						sparse[i%mats].MulVec(p, x, thr, out, &s)
					}
				})
			}
			p.Close()
		}
	}
}

// gaussQuantile is the magnitude below which fraction f of a standard
// normal's draws lie.
func gaussQuantile(f float64) float64 {
	lo, hi := 0.0, 10.0
	for range 60 {
		mid := (lo + hi) / 2
		if math.Erf(mid/1.4142135623730951) < f {
			lo = mid
		} else {
			hi = mid
		}
	}
	return lo
}
