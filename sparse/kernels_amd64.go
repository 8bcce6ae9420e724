//go:build amd64 && !purego

package sparse

import (
	"fmt"

	"golang.org/x/sys/cpu"

	"github.com/ruvllm/ruvllm/kernels"
)

// The quantized products and the packing of rows run in AVX2 assembly
// (kernels_amd64.s) where the CPU has AVX2, FMA and F16C, as the kernels
// package's do; the twins otherwise.
var useAVX2 = cpu.X86.HasAVX2 && cpu.X86.HasFMA && cpu.X86.HasF16C

//go:noescape
func blockQ8_0AVX2(offs *int32, xs *int8, nq int, blk *byte, rows int, dx float32, corr int32, y *float32, first bool, next *int32, nextN int, nextBlk *byte)

//go:noescape
func blockQ4_0AVX2(offs *int32, xs *int8, nq int, blk *byte, rows int, dx float32, corr int32, y *float32, first bool, next *int32, nextN int, nextBlk *byte)

//go:noescape
func blockQ4_0x64AVX2(offs *int32, xs *int8, nq int, blk *byte, rows int, dx float32, corr int32, y *float32, first bool, next *int32, nextN int, nextBlk *byte)

//go:noescape
func planQ8AVX2(act *byte, nb int, cols *int32, table *uint64, offs *int32, xs *int8, counts *int32)

//go:noescape
func packQ8_0AVX2(cols *byte, stride int, scales *byte, dst *byte, rowBytes int, rowOff *[32]int, next, nextScales *byte)

//go:noescape
func packQ4_0AVX2(cols *byte, stride int, scales *byte, dst *byte, rowBytes int, rowOff *[32]int, next, nextScales *byte)

//go:noescape
func thresholdAVX2(dst, x *float32, n int, threshold float32) int

// threshold is thresholdGeneric, in assembly where it runs.
func threshold(dst, x []float32, t float32) int {
	n, kept := len(x)&^7, 0
	if useAVX2 && n > 0 {
		_ = dst[len(x)-1]
		kept = thresholdAVX2(&dst[0], &x[0], n, t)
	} else {
		n = 0
	}
	return kept + thresholdGeneric(dst[n:len(x)], x[n:], t)
}

// blockKernel adds one block's products to y: blockQuantGeneric, in
// assembly where it runs, which also starts reading the heads of the
// columns at nextOffs (in nextBlk), those the next call takes.
func blockKernel(t kernels.DType, offs []int32, xs []int8, blk []byte, rows int, dx float32, corr int32, y []float32, first bool, nextOffs []int32, nextBlk []byte) {
	if !useAVX2 || len(offs) == 0 {
		blockQuantGeneric(t, offs, xs, blk, rows, dx, corr, y, first)
		return
	}
	if rows%32 != 0 || len(offs)%4 != 0 || len(xs) != len(offs) || len(blk) != blockBytes(t, rows) || len(y) < rows ||
		(len(nextOffs) > 0 && len(nextBlk) != len(blk)) {
		panic(fmt.Sprintf("sparse: a %v block of %d rows in %d bytes, %d channels, into %d outputs", t, rows, len(blk), len(offs), len(y)))
	}
	var no *int32
	var nb *byte
	if len(nextOffs) > 0 {
		no, nb = &nextOffs[0], &nextBlk[0]
	}
	if t == kernels.Q8_0 {
		blockQ8_0AVX2(&offs[0], &xs[0], len(offs)/4, &blk[0], rows, dx, corr, &y[0], first, no, len(nextOffs)/4, nb)
	} else if rows%64 == 0 {
		blockQ4_0x64AVX2(&offs[0], &xs[0], len(offs)/4, &blk[0], rows, dx, corr, &y[0], first, no, len(nextOffs)/4, nb)
	} else {
		blockQ4_0AVX2(&offs[0], &xs[0], len(offs)/4, &blk[0], rows, dx, corr, &y[0], first, no, len(nextOffs)/4, nb)
	}
}

// setBits[m] lists the set bits of m, a byte each, for planQ8AVX2.
var setBits = func() (t [256]uint64) {
	for m := range t {
		k := 0
		for i := range 8 {
			if m&(1<<i) != 0 {
				t[m] |= uint64(i) << (8 * k)
				k++
			}
		}
	}
	return t
}()

// planBlocks is planBlocksGeneric, in assembly where it runs.
func planBlocks(act []byte, nb int, first, cb int32, offs []int32, xs []int8, counts []int32) {
	if !useAVX2 || nb == 0 {
		planBlocksGeneric(act, nb, first, cb, offs, xs, counts)
		return
	}
	if len(act) < 34*nb || len(offs) < 32*nb+8 || len(xs) < 32*nb+8 || len(counts) < nb {
		panic(fmt.Sprintf("sparse: a plan of %d blocks in %d, %d, %d and %d entries", nb, len(act), len(offs), len(xs), len(counts)))
	}
	var cols [32]int32
	for c := range cols {
		cols[c] = first + int32(c)*cb
	}
	planQ8AVX2(&act[0], nb, &cols[0], &setBits[0], &offs[0], &xs[0], &counts[0])
}

// packDistance is how many blocks ahead packRows asks for the pieces it
// will transpose: a block of 32 rows takes about as long as a read from
// memory.
const packDistance = 2

// packRows is packRowsGeneric, in assembly for the quantized formats and
// whole groups of 32 rows.
func packRows(t kernels.DType, rows, cols int, src []byte, r0, r1 int, dst []byte) {
	quantized := t == kernels.Q8_0 || t == kernels.Q4_0
	if !useAVX2 || !quantized || r0%32 != 0 || r1%32 != 0 {
		packRowsGeneric(t, rows, cols, src, r0, r1, dst)
		return
	}
	rb, bb, cb, qb := t.RowBytes(cols), blockBytes(t, rows), colBytes(t, rows), t.BlockBytes()
	if r0 < 0 || r1 > rows || r0 > r1 || len(src) != rows*rb || len(dst) < (r1-r0)*rb {
		panic(fmt.Sprintf("sparse: rows [%d, %d) of a %v (%d, %d) matrix of %d bytes into %d", r0, r1, t, rows, cols, len(src), len(dst)))
	}
	var rowOff [32]int
	for p := range rowOff {
		rowOff[p] = rowAt(p) * rb
	}
	pack := packQ8_0AVX2
	if t == kernels.Q4_0 {
		pack = packQ4_0AVX2
	}
	nb := cols / kernels.QK
	for b := range nb {
		blk := src[b*bb : (b+1)*bb]
		for g := r0; g < r1; g += 32 {
			piece := g * cb / rows // a column's bytes before row g
			// The pieces come from 32 lines far apart, which no hardware
			// prefetcher follows: ask for those packDistance blocks on.
			var next, nextScales *byte
			if b+packDistance < nb {
				later := src[(b+packDistance)*bb : (b+packDistance+1)*bb]
				next, nextScales = &later[2*rows+piece], &later[2*g]
			}
			pack(&blk[2*rows+piece], cb, &blk[2*g], &dst[(g-r0)*rb+b*qb], rb, &rowOff, next, nextScales)
		}
	}
}
