//go:build amd64 && !purego

package sparse

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/ruvllm/ruvllm/kernels"
)

// TestKernelsMatchTheirTwins runs the assembly kernels and their pure-Go
// twins on random blocks, quads and outputs: the same bits.
func TestKernelsMatchTheirTwins(t *testing.T) {
	if !useAVX2 {
		t.Skip("no AVX2 on this CPU")
	}
	r := rand.New(rand.NewPCG(9, 10))
	for _, dt := range []kernels.DType{kernels.Q8_0, kernels.Q4_0} {
		for _, rows := range []int{32, 64, 96, 256} {
			t.Run(fmt.Sprintf("%v/%d", dt, rows), func(t *testing.T) {
				cols := 4 * kernels.QK
				m := encoded(dt, rows, cols, randRowMajor(r, dt, rows, cols))
				bb := blockBytes(dt, rows)
				for trial := range 20 {
					b := trial % 4
					blk := m.Data[b*bb : (b+1)*bb]
					n := 4 * (1 + r.IntN(8))
					extreme := trial >= 16 // the largest sums: 8 quads, every quant and activation at its limit
					if extreme {
						blk = append([]byte(nil), blk...)
						for i := 2 * rows; i < len(blk); i++ {
							blk[i] = 0xFF // Q4_0: nibbles 15; Q8_0: −1
						}
						n = kernels.QK
					}
					offs, xs := make([]int32, n), make([]int8, n)
					for i := range offs {
						offs[i] = int32(2*rows + r.IntN(kernels.QK)*colBytes(dt, rows))
						xs[i] = int8(r.IntN(255) - 127)
						if extreme {
							xs[i] = int8(127 * (1 - 2*(trial%2)))
						}
					}
					dx, corr := float32(r.Float64()), int32(r.IntN(20000)-10000)
					if dt == kernels.Q8_0 {
						corr = 0
					}
					first := trial%3 == 0
					y0 := make([]float32, rows)
					for i := range y0 {
						y0[i] = float32(r.NormFloat64())
					}
					want, got := append([]float32(nil), y0...), append([]float32(nil), y0...)
					blockQuantGeneric(dt, offs, xs, blk, rows, dx, corr, want, first)
					blockKernel(dt, offs, xs, blk, rows, dx, corr, got, first, offs, blk)
					for i := range got {
						if math.Float32bits(got[i]) != math.Float32bits(want[i]) && got[i] != want[i] {
							t.Fatalf("trial %d row %d: %g, twin %g", trial, i, got[i], want[i])
						}
					}
				}
				// The plans of random activations, some blocks all zero.
				x := randInput(r, cols)
				for i := range kernels.QK {
					x[kernels.QK+i] = 0
				}
				act, side := make([]byte, cols/kernels.QK*34), make([]byte, cols/kernels.QK*8)
				kernels.QuantizeActivationsQ8_0(x, act, side)
				nb := cols / kernels.QK
				for _, p := range [][]byte{act} {
					wo, wx, wc := make([]int32, 32*nb+8), make([]int8, 32*nb+8), make([]int32, nb)
					go_, gx, gc := make([]int32, 32*nb+8), make([]int8, 32*nb+8), make([]int32, nb)
					planBlocksGeneric(p, nb, int32(2*rows), int32(colBytes(dt, rows)), wo, wx, wc)
					planBlocks(p, nb, int32(2*rows), int32(colBytes(dt, rows)), go_, gx, gc)
					n := 0
					for b := range nb {
						if gc[b] != wc[b] {
							t.Fatalf("block %d: %d quads, twin %d", b, gc[b], wc[b])
						}
						n += 4 * int(wc[b])
					}
					for i := range n {
						if go_[i] != wo[i] || gx[i] != wx[i] {
							t.Fatalf("entry %d: offset %d x %d, twin %d %d", i, go_[i], gx[i], wo[i], wx[i])
						}
					}
				}
				rb := dt.RowBytes(cols)
				for _, span := range [][2]int{{0, rows}, {rows - 32, rows}} {
					want := make([]byte, (span[1]-span[0])*rb)
					got := make([]byte, len(want))
					packRowsGeneric(dt, rows, cols, m.Data, span[0], span[1], want)
					packRows(dt, rows, cols, m.Data, span[0], span[1], got)
					if string(got) != string(want) {
						t.Fatalf("rows %v: the packed bytes differ", span)
					}
				}
			})
		}
	}
}

// TestThresholdMatchesItsTwin thresholds random inputs (with NaNs,
// infinities, zeros of both signs and entries at the threshold itself) of
// lengths around the kernel's 8 lanes with both: the same bits.
func TestThresholdMatchesItsTwin(t *testing.T) {
	r := rand.New(rand.NewPCG(11, 12))
	const thr = 0.5
	special := []float32{float32(math.NaN()), float32(math.Inf(1)), float32(math.Inf(-1)), 0, float32(math.Copysign(0, -1)), thr, -thr}
	for _, n := range []int{1, 7, 8, 9, 31, 64, 100} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			x := make([]float32, n)
			for i := range x {
				if r.IntN(4) == 0 {
					x[i] = special[r.IntN(len(special))]
				} else {
					x[i] = float32(r.NormFloat64())
				}
			}
			want, got := make([]float32, n), make([]float32, n)
			wantKept, kept := thresholdGeneric(want, x, thr), threshold(got, x, thr)
			if kept != wantKept {
				t.Fatalf("kept %d entries, twin %d", kept, wantKept)
			}
			for i := range got {
				if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
					t.Fatalf("entry %d (%g): %g, twin %g", i, x[i], got[i], want[i])
				}
			}
		})
	}
}
