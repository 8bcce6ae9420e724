package kernels

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
)

// mixedHalves is mixedF32 rounded to halves: magnitudes 2^-8 … 2^8, within
// the normal range of a half, so that the order of the sums shows.
func mixedHalves(rng *rand.Rand, n int) []uint16 {
	h := make([]uint16, n)
	FP32ToFP16Row(mixedF32(rng, n, 8, 8), h)
	return h
}

// TestDotHalvesRowsMatchesOneRow checks that the several-rows kernels give
// every row exactly the one-row products' sum, for lengths the row-wise
// kernels take and those they leave to the one-row path, row counts that
// are not a multiple of their groups, and strides equal to and past the
// row; and that nothing past len(out) is written.
func TestDotHalvesRowsMatchesOneRow(t *testing.T) {
	rng := rand.New(rand.NewPCG(71, 72))
	for _, n := range []int{8, 24, 32, 40, 64, 96, 128, 136} {
		for _, pad := range []int{0, 8, 3 * n} {
			stride := n + pad
			t.Run(fmt.Sprintf("n=%d/stride=%d", n, stride), func(t *testing.T) {
				const maxRows = 40
				k := mixedHalves(rng, (maxRows-1)*stride+n)
				x := mixedHalves(rng, n)
				buf := make([]float32, maxRows+1)
				differ := false // whether the two orders ever round apart
				for rows := 1; rows <= maxRows; rows++ {
					var vec [maxRows]float32
					for _, gemm := range []bool{false, true} {
						const sentinel = float32(-12345)
						buf[rows] = sentinel
						out := buf[:rows]
						DotHalvesRows(k[:(rows-1)*stride+n], stride, x, out, gemm)
						if buf[rows] != sentinel {
							t.Fatalf("rows=%d gemm=%v: wrote past len(out)", rows, gemm)
						}
						for r := range out {
							w := k[r*stride:][:n]
							want := VecDotHalves(w, x)
							if gemm {
								want = GemmDotHalves(w, x)
							}
							if math.Float32bits(out[r]) != math.Float32bits(want) {
								t.Fatalf("rows=%d gemm=%v row %d: %g (%#x), want %g (%#x)",
									rows, gemm, r, out[r], math.Float32bits(out[r]), want, math.Float32bits(want))
							}
							if !gemm {
								vec[r] = out[r]
							} else if vec[r] != out[r] {
								differ = true
							}
						}
					}
				}
				if n >= 32 && !differ {
					t.Error("vec_dot and gemm orders never round apart: the data does not test the order")
				}
			})
		}
	}
}

// TestDotHalvesRowsNoAllocs checks that the row-wise products allocate
// nothing, on the several-rows kernels and the one-row path.
func TestDotHalvesRowsNoAllocs(t *testing.T) {
	rng := rand.New(rand.NewPCG(73, 74))
	for _, n := range []int{40, 64} {
		const rows, stride = 21, 256
		k := mixedHalves(rng, (rows-1)*stride+n)
		x := mixedHalves(rng, n)
		out := make([]float32, rows)
		for _, gemm := range []bool{false, true} {
			f := func() { DotHalvesRows(k, stride, x, out, gemm) }
			if allocs := testing.AllocsPerRun(10, f); allocs != 0 {
				t.Errorf("n=%d gemm=%v: %v allocations a call", n, gemm, allocs)
			}
		}
	}
}

// BenchmarkDotHalvesRows compares the several-rows kernels ("rows") with a
// kernel call a row ("row-by-row") on one attention block of a 64-wide head
// with 4 KV heads: 32 keys, stride 256.
func BenchmarkDotHalvesRows(b *testing.B) {
	rng := rand.New(rand.NewPCG(75, 76))
	const n, rows, stride = 64, 32, 256
	k := mixedHalves(rng, (rows-1)*stride+n)
	x := mixedHalves(rng, n)
	out := make([]float32, rows)
	for _, gemm := range []bool{false, true} {
		b.Run(fmt.Sprintf("gemm=%v/rows", gemm), func(b *testing.B) {
			for b.Loop() {
				DotHalvesRows(k, stride, x, out, gemm)
			}
		})
		b.Run(fmt.Sprintf("gemm=%v/row-by-row", gemm), func(b *testing.B) {
			for b.Loop() {
				dotHalvesRowByRow(k, stride, x, out, gemm)
			}
		})
	}
}
