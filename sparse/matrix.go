package sparse

import (
	"fmt"
	"math"

	"github.com/ruvllm/ruvllm/kernels"
)

// Matrix is a weight matrix of a sparsified file: its input-channel-major
// layout (layout.go), viewed in place in the file mapping, and the
// thresholds of its input at every sparsity level.
type Matrix struct {
	Type       kernels.DType
	Rows, Cols int
	// Data is the layout, Rows·Type.RowBytes(Cols) bytes.
	Data []byte
	// Thresholds[k] is the magnitude at or below which an input entry is
	// zeroed at sparsity level k/len(Thresholds) (Table).
	Thresholds Table
}

// Threshold sets dst to x with every entry of magnitude at or below t
// zeroed (and NaNs); dst has x's length at least.
func Threshold(dst, x []float32, t float32) { threshold(dst, x, t) }

// thresholdGeneric is Threshold's pure-Go twin; it returns how many
// entries it kept.
func thresholdGeneric(dst, x []float32, t float32) int {
	kept := 0
	for i, v := range x {
		if v > t || -v > t {
			dst[i] = v
			kept++
		} else {
			dst[i] = 0
		}
	}
	return kept
}

// NewMatrix checks that data and thresholds describe a (rows, cols) matrix
// of type t in the channel-major layout.
func NewMatrix(t kernels.DType, rows, cols int, data []byte, thresholds []float32) (*Matrix, error) {
	if err := Supported(t, rows, cols); err != nil {
		return nil, err
	}
	if len(data) != rows*t.RowBytes(cols) {
		return nil, fmt.Errorf("sparse: %d bytes do not hold a %v (%d, %d) matrix", len(data), t, rows, cols)
	}
	if err := Table(thresholds).check(); err != nil {
		return nil, err
	}
	return &Matrix{Type: t, Rows: rows, Cols: cols, Data: data, Thresholds: thresholds}, nil
}

// Table holds the thresholds of one matrix's input by sparsity level:
// Table[k] is the magnitude |x| at or below which an input entry is zeroed
// when the model runs at sparsity k/len(Table), ascending. The level is
// the model's: a file calibrated with a per-layer allocation gives one
// matrix a higher sparsity than another at the same level.
type Table []float32

func (t Table) check() error {
	if len(t) < 2 {
		return fmt.Errorf("sparse: a thresholds table needs at least 2 levels, got %d", len(t))
	}
	for k, v := range t {
		if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) || v < 0 || (k > 0 && v < t[k-1]) {
			return fmt.Errorf("sparse: thresholds must be finite, non-negative and ascending; level %d is %g", k, v)
		}
	}
	return nil
}

// MaxSparsity is the highest sparsity a table of n levels gives a
// threshold for: level n−1.
func MaxSparsity(n int) float64 { return float64(n-1) / float64(n) }

// At is the threshold at sparsity s, interpolated linearly between the two
// levels around it; 0 (only exact zeros dropped) at s = 0. s must be within
// [0, MaxSparsity(len(t))].
func (t Table) At(s float64) (float32, error) {
	top := MaxSparsity(len(t))
	if math.IsNaN(s) || s < 0 || s > top+1e-9 {
		return 0, fmt.Errorf("sparse: sparsity %g is outside the calibrated range [0, %.2f]", s, top)
	}
	if s == 0 {
		return 0, nil
	}
	f := s * float64(len(t))
	k := min(int(f), len(t)-1)
	if k == len(t)-1 {
		return t[k], nil
	}
	frac := f - float64(k)
	return float32(float64(t[k])*(1-frac) + float64(t[k+1])*frac), nil
}

// PackRows implements kernels.RowPacker: rows [r0, r1) of the matrix,
// row-major as the file it was made from stored them.
func (m *Matrix) PackRows(r0, r1 int, dst []byte) {
	packRows(m.Type, m.Rows, m.Cols, m.Data, r0, r1, dst)
}

// MatMul sets out (n, Rows) = X̃·Wᵀ for the n rows of x (n, Cols), each
// thresholded as MulVec thresholds. A few tokens of a quantized matrix (a
// batch of sequences decoding together, a short prompt) take the sparse
// mat-vec each, as one token does, when perToken says that costs less, and
// so does any number of tokens of a Q8_0 matrix the cache holds
// (perTokenInCache); each token's result is then the one it gets alone.
// The others run the dense kernels over rows packed back to row-major
// (kernels.MatMulPacked): bit for bit the dense matrix's product on the
// thresholded input. s must have been fitted to m and n tokens with p's
// size. It does not allocate.
func (m *Matrix) MatMul(p *kernels.Pool, x []float32, n int, thr float32, out []float32, s *Scratch) {
	m.MatMulSplit(p, x, n, thr, [][]float32{out}, s)
}

// MatMulSplit is MatMul with the rows of the product cut into parts, as
// for a stack of matrices that read one input: outs[i] (n, rowsᵢ) gets
// rows [Σ rowsⱼ for j < i, + rowsᵢ) of each token's result, rowsᵢ =
// len(outs[i])/n, and the rows of all parts add up to Rows. One token
// takes the sparse mat-vec in any format, as it does alone. Packed, each
// part's rows are packed and multiplied straight into it; the sparse
// mat-vecs (which compute every row) go through s and are copied out. It
// does not allocate.
func (m *Matrix) MatMulSplit(p *kernels.Pool, x []float32, n int, thr float32, outs [][]float32, s *Scratch) {
	if n == 0 {
		return
	}
	total := 0
	for _, o := range outs {
		if n < 0 || len(o)%n != 0 {
			panic(fmt.Sprintf("sparse: a part of %d outputs for %d tokens", len(o), n))
		}
		total += len(o) / n
	}
	if total != m.Rows || len(x) < n*m.Cols {
		panic(fmt.Sprintf("sparse: MatMul of a (%d, %d) matrix with %d inputs into parts of %d rows for %d tokens", m.Rows, m.Cols, len(x), total, n))
	}
	perToken := n == 1
	xt := s.xt[:n*m.Cols]
	if !perToken {
		kept := threshold(xt, x[:n*m.Cols], thr)
		perToken = m.takesMulVecs(float64(kept)/float64(n*m.Cols), n)
	}
	if perToken {
		y := s.row[:m.Rows]
		for t := range n {
			m.MulVec(p, x[t*m.Cols:(t+1)*m.Cols], thr, y, s)
			at := 0
			for _, o := range outs {
				rows := len(o) / n
				copy(o[t*rows:(t+1)*rows], y[at:at+rows])
				at += rows
			}
		}
		return
	}
	at := 0
	for _, o := range outs {
		rows := len(o) / n
		s.rows = rowRange{m: m, r0: at}
		kernels.MatMulPacked(p, m.Type, &s.rows, rows, m.Cols, xt, n, o, s.packed)
		at += rows
	}
}

// rowRange packs rows of m from r0 on, as rows 0… of a matrix of their
// own (kernels.RowPacker).
type rowRange struct {
	m  *Matrix
	r0 int
}

func (r *rowRange) PackRows(r0, r1 int, dst []byte) { r.m.PackRows(r.r0+r0, r.r0+r1, dst) }

// takesMulVecs reports whether MatMul runs n tokens, a fraction on of
// whose inputs the threshold keeps, as n sparse mat-vecs.
func (m *Matrix) takesMulVecs(on float64, n int) bool {
	return m.quantized() && (perToken(n, on) || perTokenInCache(m, on))
}

// The costs of MatMul's two ways, in dense mat-vecs of the matrix (the
// time the dense kernels take to read it once), measured on tinyllama's
// shapes at 2 threads, 50% sparsity (ffn_up, Q8_0: a dense mat-vec 0.55
// ms, the packed product of n tokens 1.65 ms + 0.171 ms a token, a sparse
// mat-vec 0.168 ms): packing the rows back reads every column in pieces
// (packCost), each token then costs a share of the dense product
// (tokenCost), and a sparse mat-vec about the fraction of the input that
// is on (its columns' bytes; from memory when the matrix is larger than
// the last-level cache, as it is then read again for each token).
const (
	packCost  = 3.0
	tokenCost = 0.31
)

// perToken reports whether n tokens, a fraction on of whose inputs is on
// (the fraction the threshold keeps), cost less as n sparse mat-vecs than as a packed
// product: n·on < packCost + n·tokenCost. At half the inputs on that is up
// to 15 tokens, at three quarters 6, at all of them 4; with fewer than
// tokenCost of them on, any number.
func perToken(n int, on float64) bool {
	return float64(n)*(on-tokenCost) < packCost
}
