//go:build amd64 && !purego

package sparse

import "github.com/ruvllm/ruvllm/kernels"

// Without the assembly kernels every product runs the pure-Go twins.

func blockKernel(t kernels.DType, quads []quad, blk []byte, rows int, dx float32, corr int32, y []float32, first bool) {
	blockQuantGeneric(t, quads, blk, rows, dx, corr, y, first)
}

func packRows(t kernels.DType, rows, cols int, src []byte, r0, r1 int, dst []byte) {
	packRowsGeneric(t, rows, cols, src, r0, r1, dst)
}
