package sparse

import (
	"encoding/binary"
	"fmt"

	"github.com/ruvllm/ruvllm/kernels"
)

// The input-channel-major layout of a (rows, cols) weight matrix W, for
// y = W·x: the weights that input channel c multiplies, W[·, c], lie
// together, so that when x[c] is zero a mat-vec skips one contiguous
// stretch of memory. The layout keeps the matrix's format and its bytes'
// count, and its values exactly: it moves the bytes of the row-major GGUF
// tensor, it does not quantize again.
//
//   - F32, F16: column after column, each the rows' values in row order.
//   - Q8_0, Q4_0 (blocks of 32 input channels, one scale per row and
//     block): block after block, each the rows' scales as halves in row
//     order, then the block's 32 columns, each the rows' quants: one int8
//     per row for Q8_0; for Q4_0 16 bytes per 32 rows, the quant at
//     position p in the low nibble of byte p and the one at p+16 in its high
//     nibble, as ggml packs a block along its inputs. Within every 32 rows
//     position p holds row rowAt(p): the order in which the AVX2 kernel,
//     interleaving four columns with unpacks, lands the rows in its four
//     accumulators in row order. rows must be a multiple of 32.
//
// A block of Q8_0 is 34·rows bytes, of Q4_0 18·rows: a row-major block row
// (the same bytes, in another order) times the rows.

// rowAt is the row (within its 32) whose quant a column stores at position
// p. Unpacking bytes with bytes and then words with words keeps 128-bit
// halves apart: accumulator i gets positions 4i … 4i+3 of each half, so
// those must hold rows 8i … 8i+7.
func rowAt(p int) int { return 8*(p%16/4) + 4*(p/16) + p%4 }

// posOf is the inverse of rowAt: the position of row r (within its 32).
var posOf = func() (pos [32]int) {
	for p := range 32 {
		pos[rowAt(p)] = p
	}
	return pos
}()

// Supported reports why a (rows, cols) matrix of type t cannot be stored
// input-channel-major, or nil when it can: the formats are F32, F16, Q8_0
// and Q4_0, and the quantized ones need whole groups of 32 rows.
func Supported(t kernels.DType, rows, cols int) error {
	switch t {
	case kernels.F32, kernels.F16:
	case kernels.Q8_0, kernels.Q4_0:
		if rows%32 != 0 {
			return fmt.Errorf("sparse: %v matrices of %d rows (not a multiple of 32) have no channel-major layout", t, rows)
		}
	default:
		return fmt.Errorf("sparse: %v matrices have no channel-major layout (F32, F16, Q8_0 and Q4_0 have)", t)
	}
	if rows <= 0 || cols <= 0 || t.RowBytes(cols) < 0 {
		return fmt.Errorf("sparse: a %v matrix of (%d, %d) is not a whole number of blocks", t, rows, cols)
	}
	return nil
}

// colBytes is the size of one column's weights (quants, for the quantized
// formats) in the layout.
func colBytes(t kernels.DType, rows int) int {
	switch t {
	case kernels.F32:
		return 4 * rows
	case kernels.F16:
		return 2 * rows
	case kernels.Q8_0:
		return rows
	}
	return rows / 2 // Q4_0
}

// blockBytes is the size of one block of 32 input channels with its
// scales, for the quantized formats.
func blockBytes(t kernels.DType, rows int) int { return 2*rows + kernels.QK*colBytes(t, rows) }

var le = binary.LittleEndian

// Encode writes the (rows, cols) matrix of type t held row-major in src
// (GGUF's layout) into dst in the input-channel-major layout; both are
// t.RowBytes(cols)·rows bytes. rows and cols must pass Supported.
func Encode(t kernels.DType, rows, cols int, src, dst []byte) {
	if Supported(t, rows, cols) != nil || len(src) != rows*t.RowBytes(cols) || len(dst) != len(src) {
		panic(fmt.Sprintf("sparse: Encode of a %v (%d, %d) matrix with %d and %d bytes", t, rows, cols, len(src), len(dst)))
	}
	encodeColumns(t, rows, cols, src, dst, 0, cols)
}

// encodeColumns is Encode of columns [c0, c1), on block bounds for the
// quantized formats.
func encodeColumns(t kernels.DType, rows, cols int, src, dst []byte, c0, c1 int) {
	rb := t.RowBytes(cols)
	switch t {
	case kernels.F32, kernels.F16:
		es := rb / cols
		for r := range rows {
			for c := c0; c < c1; c++ {
				copy(dst[(c*rows+r)*es:(c*rows+r+1)*es], src[r*rb+c*es:r*rb+(c+1)*es])
			}
		}
		return
	}
	bb, cb, qb := blockBytes(t, rows), colBytes(t, rows), t.BlockBytes()
	for b := c0 / kernels.QK; b < c1/kernels.QK; b++ {
		blk := dst[b*bb : (b+1)*bb]
		for r := range rows {
			in := src[r*rb+b*qb : r*rb+(b+1)*qb] // the row's block: scale, quants
			copy(blk[2*r:], in[:2])
			for c := range kernels.QK {
				col := blk[2*rows+c*cb : 2*rows+(c+1)*cb]
				setQuant(t, col, r, quantOf(t, in, c))
			}
		}
	}
}

// quantOf is quant c of a row-major block of type t: the int8 of Q8_0, the
// nibble (0..15, the weight being d·(n−8)) of Q4_0.
func quantOf(t kernels.DType, blk []byte, c int) byte {
	if t == kernels.Q8_0 {
		return blk[2+c]
	}
	if c < 16 {
		return blk[2+c] & 0x0F
	}
	return blk[2+c-16] >> 4
}

// setQuant stores quant q of row r in a column of the layout.
func setQuant(t kernels.DType, col []byte, r int, q byte) {
	p := r/32*32 + posOf[r%32]
	if t == kernels.Q8_0 {
		col[p] = q
		return
	}
	i := p/32*16 + p%16
	if p%32 < 16 {
		col[i] = col[i]&0xF0 | q
	} else {
		col[i] = col[i]&0x0F | q<<4
	}
}

// quantAt is the inverse of setQuant.
func quantAt(t kernels.DType, col []byte, r int) byte {
	p := r/32*32 + posOf[r%32]
	if t == kernels.Q8_0 {
		return col[p]
	}
	b := col[p/32*16+p%16]
	if p%32 < 16 {
		return b & 0x0F
	}
	return b >> 4
}

// packRowsGeneric writes rows [r0, r1) of the (rows, cols) matrix of type t
// stored input-channel-major in src into dst, row-major as GGUF stores
// them ((r1−r0)·t.RowBytes(cols) bytes): the inverse of Encode for those
// rows.
func packRowsGeneric(t kernels.DType, rows, cols int, src []byte, r0, r1 int, dst []byte) {
	rb := t.RowBytes(cols)
	switch t {
	case kernels.F32, kernels.F16:
		es := rb / cols
		for r := r0; r < r1; r++ {
			out := dst[(r-r0)*rb:]
			for c := range cols {
				copy(out[c*es:(c+1)*es], src[(c*rows+r)*es:(c*rows+r+1)*es])
			}
		}
		return
	}
	bb, cb, qb := blockBytes(t, rows), colBytes(t, rows), t.BlockBytes()
	for b := range cols / kernels.QK {
		blk := src[b*bb : (b+1)*bb]
		for r := r0; r < r1; r++ {
			out := dst[(r-r0)*rb+b*qb : (r-r0)*rb+(b+1)*qb]
			copy(out[:2], blk[2*r:])
			for c := range kernels.QK {
				q := quantAt(t, blk[2*rows+c*cb:2*rows+(c+1)*cb], r)
				if t == kernels.Q8_0 {
					out[2+c] = q
				} else if c < 16 {
					out[2+c] = out[2+c]&0xF0 | q
				} else {
					out[2+c-16] = out[2+c-16]&0x0F | q<<4
				}
			}
		}
	}
}
