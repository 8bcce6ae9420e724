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

// thresholdGeneric is Threshold's pure-Go twin.
func thresholdGeneric(dst, x []float32, t float32) {
	for i, v := range x {
		if v > t || -v > t {
			dst[i] = v
		} else {
			dst[i] = 0
		}
	}
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
func (m *Matrix) MatMul(p *kernels.Pool, x []float32, n int, threshold float32, out []float32, s *Scratch) {
	if m.takesMulVecs(x, n, threshold) {
		for t := range n {
			m.MulVec(p, x[t*m.Cols:(t+1)*m.Cols], threshold, out[t*m.Rows:(t+1)*m.Rows], s)
		}
		return
	}
	xt := s.xt[:n*m.Cols]
	Threshold(xt, x[:n*m.Cols], threshold)
	kernels.MatMulPacked(p, m.Type, m, m.Rows, m.Cols, xt, n, out, s.packed)
}

// takesMulVecs reports whether MatMul runs the n tokens of x (n, Cols) at
// threshold as n sparse mat-vecs.
func (m *Matrix) takesMulVecs(x []float32, n int, threshold float32) bool {
	if !m.quantized() {
		return false
	}
	on := activeFraction(x, n, m.Cols, threshold)
	return perToken(n, on) || perTokenInCache(m, on)
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
// (activeFraction), cost less as n sparse mat-vecs than as a packed
// product: n·on < packCost + n·tokenCost. At half the inputs on that is up
// to 15 tokens, at three quarters 6, at all of them 4; with fewer than
// tokenCost of them on, any number.
func perToken(n int, on float64) bool {
	return float64(n)*(on-tokenCost) < packCost
}

// activeFraction is the fraction of the entries of up to 8 of the n rows
// of x (n, cols), evenly spread, that the threshold keeps (Threshold): a
// prompt's first token (often BOS) alone may be unlike the rest.
func activeFraction(x []float32, n, cols int, threshold float32) float64 {
	k := min(n, 8)
	on := 0
	for i := range k {
		t := i * n / k
		for _, v := range x[t*cols : (t+1)*cols] {
			if v > threshold || -v > threshold {
				on++
			}
		}
	}
	return float64(on) / float64(max(1, k*cols))
}
