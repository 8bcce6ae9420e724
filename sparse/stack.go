package sparse

import (
	"fmt"
	"slices"

	"github.com/ruvllm/ruvllm/kernels"
)

// Matrices that multiply one input (a block's q, k and v; its gate and up)
// can be stacked into one: the rows of the first, then those of the next.
// In the channel-major layout that puts each input channel's weights of
// all of them in one stretch of memory, so that a mat-vec over the stack
// reads fewer, longer runs than over its parts one after another, and
// plans its input once. The runs are what a decode from memory pays for:
// on tinyllama-1.1b's shape in Q4_0, at sparsity 0.5 and 2 threads, a
// 2048-row matrix's 1 KiB columns streamed at about half the rate of the
// dense kernel, the 128-byte ones of k and v slower still, gate and up's
// 2.75 KiB ones at about 1.3 times its speed.

// StackBytes is the size of the stack of parts: the sum of their sizes.
func StackBytes(parts []*Matrix) int {
	n := 0
	for _, m := range parts {
		n += len(m.Data)
	}
	return n
}

// Stack writes into dst (StackBytes(parts) bytes) the channel-major layout
// of the matrix whose rows are those of parts in order, and returns it.
// The parts must share their format, columns and thresholds table, as the
// matrices of one input do; the stack's product over an input is then
// every part's over it, in order. The bytes are moved, not quantized
// again: the stack is what Encode makes of the parts' row-major rows one
// after another.
func Stack(parts []*Matrix, dst []byte) (*Matrix, error) {
	if len(parts) == 0 {
		return nil, fmt.Errorf("sparse: a stack of no matrices")
	}
	first := parts[0]
	rows := 0
	for i, m := range parts {
		if m.Type != first.Type || m.Cols != first.Cols {
			return nil, fmt.Errorf("sparse: part %d of a stack is a %v (%d, %d) matrix, part 0 a %v of %d columns", i, m.Type, m.Rows, m.Cols, first.Type, first.Cols)
		}
		if !slices.Equal(m.Thresholds, first.Thresholds) {
			return nil, fmt.Errorf("sparse: part %d of a stack has other thresholds than part 0: they do not share an input", i)
		}
		rows += m.Rows
	}
	if len(dst) != StackBytes(parts) {
		return nil, fmt.Errorf("sparse: a stack of %d bytes given %d", StackBytes(parts), len(dst))
	}
	t, cols := first.Type, first.Cols
	switch t {
	case kernels.F32, kernels.F16:
		// Column after column, each the parts' pieces of it in order.
		es := t.RowBytes(cols) / cols
		at := 0
		for c := range cols {
			for _, m := range parts {
				at += copy(dst[at:], m.Data[c*m.Rows*es:(c+1)*m.Rows*es])
			}
		}
	default:
		// Block after block: the parts' scales in order, then each column's
		// pieces in order. A part's rows are whole groups of 32, so every
		// row keeps its position within its group.
		at := 0
		for b := range cols / kernels.QK {
			for _, m := range parts {
				bb := blockBytes(t, m.Rows)
				at += copy(dst[at:], m.Data[b*bb:b*bb+2*m.Rows])
			}
			for c := range kernels.QK {
				for _, m := range parts {
					bb, cb := blockBytes(t, m.Rows), colBytes(t, m.Rows)
					col := b*bb + 2*m.Rows + c*cb
					at += copy(dst[at:], m.Data[col:col+cb])
				}
			}
		}
	}
	return NewMatrix(t, rows, cols, dst, first.Thresholds)
}
