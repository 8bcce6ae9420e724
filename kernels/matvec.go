package kernels

import (
	"fmt"
	"math"
	"unsafe"
)

// Matrix-vector and matrix-matrix products over weights in any format with
// Traits, the way ggml's CPU backend does them: the activations are quantized
// once to the format's VecDotType, then every output is one VecDot of a weight
// row against an activation row. Weights are (rows, cols) row-major, each row
// RowBytes(cols) bytes, as a GGUF tensor of ne = [cols, rows] is stored.
//
// For the formats with blocked kernels (gemm.go: F16, Q8_0, Q4_0, Q4_K,
// Q6_K on amd64) the same outputs, to the bit, come from kernels that run
// many rows per call (mat-vec) or several tokens per weight block
// (mat-mul); the rest take the path below, one VecDot per output.

// Work split of the VecDot path: a task is a block of matRowBlock weight
// rows against a block of matTokBlock tokens. Within a task each weight row
// is read once from memory and reused from cache for every token of the
// block; 16 rows of float32 outputs fill a cache line, so workers do not
// write the same line.
const (
	matRowBlock = 16
	matTokBlock = 32
)

// MatScratchBytes is the size of the scratch MatMul needs for n tokens of
// cols activations against weights of type t (MatVec: n = 1). It is 0 when
// the activations are used as they are (F32 weights), and −1 when t has no dot
// product or cols is not a whole number of its blocks.
func MatScratchBytes(t DType, cols, n int) int {
	tr, ok := TraitsOf(t)
	if !ok || n < 0 || t.RowBytes(cols) < 0 {
		return -1
	}
	if tr.VecDotType == F32 {
		return 0
	}
	rb := tr.VecDotType.RowBytes(cols)
	if rb < 0 {
		return -1
	}
	// The blocked kernels (gemm.go) may take more: on any CPU, so that a
	// buffer sized here fits every build.
	blocked, _ := blockedScratch(t, cols, n)
	return max(n*rb+sideBytes(t, cols, n), blocked)
}

// MatVec sets out = W·x for the (rows, cols) matrix W of type t stored in w:
// out[r] = Σ_c W[r,c]·x[c]. x has cols elements, out rows; scratch holds at
// least MatScratchBytes(t, cols, 1) bytes. Rows are spread over p (nil: the
// caller alone). It does not allocate. Wrong sizes panic.
func MatVec(p *Pool, t DType, w []byte, rows, cols int, x, out []float32, scratch []byte) {
	MatMul(p, t, w, rows, cols, x, 1, out, scratch)
}

// MatMul sets out = X·Wᵀ for n tokens: x is (n, cols), out is (n, rows),
// out[j·rows + r] = Σ_c W[r,c]·x[j·cols + c]. All n activation rows are
// quantized once into scratch (MatScratchBytes(t, cols, n) bytes); then each
// worker takes a block of weight rows and runs it against a block of tokens,
// so that a weight row is read from memory once per block of tokens. Every
// out[j·rows + r] equals VecDot of row r and token j's quantized activations.
// It does not allocate. Wrong sizes panic.
func MatMul(p *Pool, t DType, w []byte, rows, cols int, x []float32, n int, out []float32, scratch []byte) {
	tr := checkMatMul("MatMul", t, len(w), rows, cols, len(x), n, len(out), len(scratch), MatScratchBytes(t, cols, n))
	if rows == 0 || n == 0 {
		return
	}
	if f := gemmFormatOf(t, cols); f != nil {
		matMulBlocked(p, f, tr, t, w, rows, cols, x, n, out, scratch)
		return
	}
	j := prepareVecDot(p, tr, t, w, rows, cols, x, n, out, scratch)
	nTasks := (rows + matRowBlock - 1) / matRowBlock * j.nTokBlocks
	if p == nil {
		for task := range nTasks {
			j.Do(task, 0)
		}
		return
	}
	p.mu.Lock()
	p.mat = j
	p.run(nTasks, &p.mat)
	p.mat = matJob{} // drop the references to the caller's buffers
	p.mu.Unlock()
}

// checkMatMul returns the traits of t after checking the sizes of a
// product of a (rows, cols) matrix of type t given in wBytes by n tokens;
// need is the scratch it takes. Wrong sizes panic, naming op.
func checkMatMul(op string, t DType, wBytes, rows, cols, xLen, n, outLen, scratchLen, need int) *Traits {
	tr, ok := TraitsOf(t)
	if !ok {
		panic("kernels: " + op + ": no dot product for " + t.String())
	}
	wRow := t.RowBytes(cols)
	switch {
	case rows < 0 || n < 0 || wRow < 0 || need < 0:
		panic(fmt.Sprintf("kernels: %s of %v (%d, %d) by %d tokens: bad shape", op, t, rows, cols, n))
	case wBytes < rows*wRow || xLen < n*cols || outLen < n*rows || scratchLen < need:
		panic(fmt.Sprintf("kernels: %s of %v (%d, %d) by %d tokens: got %d weight bytes (need %d), "+
			"%d inputs (%d), %d outputs (%d), %d scratch bytes (%d)",
			op, t, rows, cols, n, wBytes, rows*wRow, xLen, n*cols, outLen, n*rows, scratchLen, need))
	}
	return tr
}

// prepareVecDot quantizes the activations of the VecDot path into scratch
// and returns the job that runs them against w.
func prepareVecDot(p *Pool, tr *Traits, t DType, w []byte, rows, cols int, x []float32, n int, out []float32, scratch []byte) matJob {
	var acts, side []byte
	aRow := tr.VecDotType.RowBytes(cols)
	if tr.VecDotType == F32 {
		acts = unsafe.Slice((*byte)(unsafe.Pointer(&x[0])), n*cols*4)
	} else {
		acts = scratch[:n*aRow]
		q := quantJob{t: tr.VecDotType, x: x, cols: cols, a: acts, aRow: aRow}
		if t == MXFP4 && vecDotMXFP4x4s != nil && n >= 4 {
			side = scratch[n*aRow : n*aRow+sideBytes(t, cols, n)]
			q.side, q.n = side, n
		}
		if p == nil || n == 1 {
			for j := range n {
				q.Do(j, 0)
			}
		} else {
			p.mu.Lock()
			p.quan = q
			p.run(n, &p.quan)
			p.quan = quantJob{}
			p.mu.Unlock()
		}
	}
	j := matJob{
		vecDot: tr.VecDot,
		dot4:   vecDot4Of(t),
		rows4:  vecDotRows4Of(t),
		w:      w, wRow: t.RowBytes(cols),
		a: acts, aRow: aRow,
		rows: rows, cols: cols, n: n,
		out:        out,
		nTokBlocks: (n + matTokBlock - 1) / matTokBlock,
	}
	if side != nil {
		j.side, j.dot4s, j.dot8s = side, vecDotMXFP4x4s, vecDotMXFP4x8s
	}
	return j
}

// vecDot4Of is the 4-token kernel of VecDot of t (IQ4_NL and MXFP4 on
// amd64), or nil: the products of one row by 4 tokens at once, bit for bit
// those of VecDot token by token.
func vecDot4Of(t DType) func(n int, w, a []byte, aRow int, out []float32, outRow int) {
	switch t {
	case IQ4_NL:
		return vecDotIQ4_NLx4
	case MXFP4:
		return vecDotMXFP4x4
	}
	return nil
}

// quantJob quantizes activation row task of x into a, and writes its
// per-block terms into side if set (mxfp4Side, of n tokens).
type quantJob struct {
	t    DType
	x    []float32
	cols int
	a    []byte
	aRow int
	side []byte
	n    int
}

func (q *quantJob) Do(task, _ int) {
	a := q.a[task*q.aRow : (task+1)*q.aRow]
	QuantizeActivations(q.t, q.x[task*q.cols:(task+1)*q.cols], a)
	if q.side != nil {
		mxfp4Side(a, q.side, task, q.n)
	}
}

// sideBytes is the size of the per-block terms of n tokens of cols
// activations that MatMul's 4-token kernel of weights of type t takes
// (mxfp4Side; MXFP4 only), kept after the activations in its scratch.
func sideBytes(t DType, cols, n int) int {
	if t != MXFP4 {
		return 0
	}
	return n * (cols / QK) * 8
}

// mxfp4Side writes the terms of token tok's Q8_0 row a into side, the terms
// of n tokens for vecDotMXFP4x4s: for block b, at 8·n·b, the n tokens' da
// as float32, then 12 times their block's sum of quants as int32.
func mxfp4Side(a, side []byte, tok, n int) {
	for b := range len(a) / bytesQ8_0 {
		blk := a[b*bytesQ8_0 : (b+1)*bytesQ8_0]
		var s int32
		for _, v := range blk[2:] {
			s += int32(int8(v))
		}
		at := 8*n*b + 4*tok
		le.PutUint32(side[at:], math.Float32bits(halfAt(blk, 0)))
		le.PutUint32(side[at+4*n:], uint32(12*s))
	}
}

// matJob computes one block of rows against one block of tokens per task.
type matJob struct {
	vecDot     func(n int, w, a []byte) float32
	w          []byte
	wRow       int
	a          []byte
	aRow       int
	rows, cols int
	n          int
	out        []float32
	nTokBlocks int
	// rest, when set, is the product of the tokens from split on
	// (MatMulRecent); vecDot that of the tokens before.
	rest  func(n int, w, a []byte) float32
	split int
	// dot4 and dot8, when set, are vecDot of one row against 4 or 8
	// tokens at once (the activation rows of tokens t… at a[t·aRow:],
	// their outputs at out[t·rows+r:] rows apart), for the tokens before
	// split; dot8 only with dot4.
	dot4, dot8 func(n int, w, a []byte, aRow int, out []float32, outRow int)
	// dot4s and dot8s, when set, replace dot4 and dot8, taking the tokens'
	// per-block terms in side (MXFP4: mxfp4Side).
	dot4s, dot8s func(n int, w, a []byte, aRow int, out []float32, outRow int, side []byte, nTok int)
	side         []byte
	// rows4, when set, is vecDot of the 4 rows at w, w[wRow:]… against one
	// token's activations a, into out[0:4], for the tokens taken one by
	// one (without rest).
	rows4 func(n int, w []byte, wRow int, a []byte, out []float32)
}

func (j *matJob) Do(task, _ int) {
	rb, tb := task/j.nTokBlocks, task%j.nTokBlocks
	r0, t0 := rb*matRowBlock, tb*matTokBlock
	j.run(r0, min(r0+matRowBlock, j.rows), t0, min(t0+matTokBlock, j.n))
}

// run computes rows [r0, r1) against tokens [t0, t1).
func (j *matJob) run(r0, r1, t0, t1 int) {
	end := t0 // tokens [t0, end) go 8 (dot8) then 4 (dot4) at a time
	if j.dot4 != nil {
		end = t1
		if j.rest != nil {
			end = max(t0, min(end, j.split))
		}
	}
	end8 := t0
	if j.dot8 != nil || j.dot8s != nil {
		end8 = t0 + (end-t0)/8*8
	}
	// When 2 or 3 tokens are left over (after 4 or more), the last 4 go
	// once more, writing again the outputs of the 4 − (2 or 3) tokens
	// before them, with the same values (each lane is its row's and
	// token's product alone), which is cheaper than 2 or 3 one-token
	// calls; a single one takes the one-token call.
	full := end8 + (end-end8)/4*4
	tail := full // the last 4 tokens again from tail, if below full
	if left := end - full; full > t0 && left >= 2 {
		tail, full = end-4, end
	}
	// The tokens taken one by one go through rows4 for rows [r0, rows4End)
	// where it is set.
	rows4End := r0
	if j.rows4 != nil && j.rest == nil && full < t1 {
		rows4End = r0 + (r1-r0)/4*4
		for t := full; t < t1; t++ {
			a := j.a[t*j.aRow : (t+1)*j.aRow]
			for r := r0; r < rows4End; r += 4 {
				j.rows4(j.cols, j.w[r*j.wRow:], j.wRow, a, j.out[t*j.rows+r:])
			}
		}
	}
	for r := r0; r < r1; r++ {
		wr := j.w[r*j.wRow : (r+1)*j.wRow]
		for t := t0; t < end8; t += 8 {
			j.oct(wr, r, t)
		}
		for t := end8; t+4 <= end; t += 4 {
			j.quad(wr, r, t)
		}
		if tail < full {
			j.quad(wr, r, tail)
		}
		for t := full; t < t1 && r >= rows4End; t++ {
			dot := j.vecDot
			if j.rest != nil && t >= j.split {
				dot = j.rest
			}
			j.out[t*j.rows+r] = dot(j.cols, wr, j.a[t*j.aRow:(t+1)*j.aRow])
		}
	}
}

// oct computes row r (weights wr) against tokens t…t+7.
func (j *matJob) oct(wr []byte, r, t int) {
	if j.dot8s != nil {
		j.dot8s(j.cols, wr, j.a[t*j.aRow:], j.aRow, j.out[t*j.rows+r:], j.rows, j.side[4*t:], j.n)
		return
	}
	j.dot8(j.cols, wr, j.a[t*j.aRow:], j.aRow, j.out[t*j.rows+r:], j.rows)
}

// quad computes row r (weights wr) against tokens t…t+3.
func (j *matJob) quad(wr []byte, r, t int) {
	if j.dot4s != nil {
		j.dot4s(j.cols, wr, j.a[t*j.aRow:], j.aRow, j.out[t*j.rows+r:], j.rows, j.side[4*t:], j.n)
		return
	}
	j.dot4(j.cols, wr, j.a[t*j.aRow:], j.aRow, j.out[t*j.rows+r:], j.rows)
}
