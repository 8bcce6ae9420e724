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

// BenchmarkMulVecShapes times the sparse mat-vec at sparsity 0.5 against
// the dense one the native backend runs (Q4_0: interleaved) on each matrix
// shape of tinyllama-1.1b: q and o (2048, 2048), k and v (256, 2048),
// gate and up (5632, 2048), down (2048, 5632). Each shape cycles enough
// copies (about 96 MB) that the weights come from memory; the copies hold
// one random matrix's bytes, as the speed does not depend on the values;
// the two inputs alternate, so that every call plans. The dense copies lie
// on ordinary pages here; the backend puts its interleaved ones on huge
// pages.
func BenchmarkMulVecShapes(b *testing.B) {
	shapes := []struct {
		name       string
		rows, cols int
	}{{"q", 2048, 2048}, {"k", 256, 2048}, {"up", 5632, 2048}, {"down", 2048, 5632}}
	const traffic = 96 << 20
	for _, dt := range []kernels.DType{kernels.Q8_0, kernels.Q4_0} {
		for _, sh := range shapes {
			r := rand.New(rand.NewPCG(3, 4))
			rowMajor := randRowMajor(r, dt, sh.rows, sh.cols)
			one := encoded(dt, sh.rows, sh.cols, rowMajor)
			mats := max(2, traffic/len(rowMajor))
			sparse, dense := make([]*Matrix, mats), make([][]byte, mats)
			inter := dt == kernels.Q4_0
			for i := range mats {
				m := *one
				m.Data = append([]byte(nil), one.Data...)
				sparse[i] = &m
				if inter {
					dense[i] = make([]byte, kernels.InterleavedBytes(dt, sh.rows, sh.cols))
					kernels.Interleave(dt, dense[i], rowMajor, sh.rows, sh.cols)
				} else {
					dense[i] = append([]byte(nil), rowMajor...)
				}
			}
			xs := [2][]float32{randInput(r, sh.cols), randInput(r, sh.cols)} // in turn: each call plans
			out := make([]float32, sh.rows)
			scratch := make([]byte, kernels.MatScratchBytes(dt, sh.cols, 1))
			thr := float32(gaussQuantile(0.5))
			for _, threads := range []int{1, 2} {
				p := kernels.NewPool(threads)
				var s Scratch
				s.Fit(one, 1, threads)
				name := fmt.Sprintf("%v/%s-%dx%d/t=%d", dt, sh.name, sh.rows, sh.cols, threads)
				b.Run(name+"/dense", func(b *testing.B) {
					b.SetBytes(int64(len(rowMajor)))
					for i := 0; b.Loop(); i++ {
						if inter {
							kernels.MatVecInterleaved(p, dt, dense[i%mats], sh.rows, sh.cols, xs[i%2], out, scratch)
						} else {
							kernels.MatVec(p, dt, dense[i%mats], sh.rows, sh.cols, xs[i%2], out, scratch)
						}
					}
				})
				b.Run(name+"/sparse", func(b *testing.B) {
					b.SetBytes(int64(len(rowMajor)))
					for i := 0; b.Loop(); i++ {
						sparse[i%mats].MulVec(p, xs[i%2], thr, out, &s)
					}
				})
				p.Close()
			}
		}
	}
}

// BenchmarkPackRows times the packing of rows back to row-major (what a
// prompt's product does before the dense kernels run) in the chunks
// kernels.MatMulPacked asks for, on tinyllama-1.1b's q shape (2048, 2048),
// enough copies in turn (about 96 MB) that the columns come from memory.
func BenchmarkPackRows(b *testing.B) {
	const rows, cols, chunk, traffic = 2048, 2048, 128, 96 << 20
	for _, dt := range []kernels.DType{kernels.Q8_0, kernels.Q4_0} {
		r := rand.New(rand.NewPCG(5, 6))
		one := encoded(dt, rows, cols, randRowMajor(r, dt, rows, cols))
		mats := make([]*Matrix, traffic/len(one.Data))
		for i := range mats {
			m := *one
			m.Data = append([]byte(nil), one.Data...)
			mats[i] = &m
		}
		dst := make([]byte, chunk*dt.RowBytes(cols))
		b.Run(dt.String(), func(b *testing.B) {
			b.SetBytes(int64(len(dst)))
			for i := 0; b.Loop(); i++ {
				c := i / len(mats) % (rows / chunk)
				mats[i%len(mats)].PackRows(c*chunk, (c+1)*chunk, dst)
			}
		})
	}
}
