//go:build !amd64 || purego

package sparse

import "github.com/ruvllm/ruvllm/kernels"

// Without the assembly kernels every product runs the pure-Go twins.

func blockKernel(t kernels.DType, offs []int32, xs []int8, blk []byte, rows int, dx float32, corr int32, y []float32, first bool, _ []int32, _ []byte) {
	blockQuantGeneric(t, offs, xs, blk, rows, dx, corr, y, first)
}

func planBlocks(act []byte, nb int, first, cb int32, offs []int32, xs []int8, counts []int32) {
	planBlocksGeneric(act, nb, first, cb, offs, xs, counts)
}

func packRows(t kernels.DType, rows, cols int, src []byte, r0, r1 int, dst []byte) {
	packRowsGeneric(t, rows, cols, src, r0, r1, dst)
}

func threshold(dst, x []float32, t float32) int { return thresholdGeneric(dst, x, t) }
