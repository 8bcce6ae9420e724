package sparse

import (
	"fmt"
	"unsafe"

	"github.com/ruvllm/ruvllm/kernels"
)

// The sparse mat-vec, y = W·x̃, where x̃ is x with every entry of
// magnitude at or below the threshold zeroed. For the quantized formats x̃
// is quantized to Q8_0 by blocks of 32 as the dense product quantizes its
// activations, so that every block's integer sums are the dense product's
// on x̃; the channels whose quants are zero are skipped, and the others are
// taken four at a time (a quad), whose columns the AVX2 kernel interleaves
// so that one VPMADDUBSW multiplies 8 rows by 4 channels. The blocks are
// split between a fixed number of tasks, each summing into its own partial
// output, and the partials are added in task order: the result does not
// depend on the number of threads.

// decodeTasks is the number of tasks (and partial outputs) of a mat-vec:
// enough for the pool to even out two busy cores, few enough that adding
// the partials costs little.
const decodeTasks = 8

// quad is four active input channels of one block, the unit of the kernel.
type quad struct {
	off [4]int32 // byte offset of each channel's column from its block's start
	x   [4]int8  // the channels' quantized activations; 0 pads a block's last quad
	ax  [4]uint8 // their magnitudes
	_   [8]byte  // to 32 bytes
}

// blockPlan is the work of one block of 32 input channels.
type blockPlan struct {
	q0, nq int32   // its quads (quantized formats) or active channels (float ones)
	dx     float32 // the scale of its quantized activations
	corr   int32   // Q4_0: 8·Σx, as the weights are d·(n−8) for nibbles n
}

// Scratch is what a matrix product needs besides the matrix: the prepared
// activations, the plan of a mat-vec and its partial outputs, the
// thresholded input and packed rows of a product over several tokens.
// Fit sizes it once for the matrices, batch and threads it will serve, so
// that a product allocates nothing. One goroutine uses it at a time.
type Scratch struct {
	act     [kernels.QK + 2]byte // one block of Q8_0 activations
	block   [kernels.QK]float32  // one block of the thresholded input
	quads   []quad
	chans   []int32 // float formats: the active channels
	plans   []blockPlan
	partial []float32 // (decodeTasks, rows)
	xt      []float32 // (n, cols): the thresholded input of a MatMul
	packed  []byte    // MatMulPacked's scratch
	job     mulJob
}

// Fit grows s for products of m over up to n tokens on workers threads.
func (s *Scratch) Fit(m *Matrix, n, workers int) {
	nb := (m.Cols + kernels.QK - 1) / kernels.QK
	s.quads = grow(s.quads, nb*kernels.QK/4)
	s.chans = grow(s.chans, m.Cols)
	s.plans = grow(s.plans, nb)
	s.partial = grow(s.partial, decodeTasks*m.Rows)
	s.xt = grow(s.xt, n*m.Cols)
	s.packed = grow(s.packed, kernels.PackedScratchBytes(m.Type, m.Cols, n, workers))
}

func grow[T any](s []T, n int) []T {
	if len(s) < n {
		return make([]T, n)
	}
	return s
}

// MulVec sets out (Rows) = W·x̃ for x (Cols): x with every entry of
// magnitude at or below threshold zeroed, reading only the columns of the
// entries that stay. s must have been fitted to m; p spreads the work
// (nil: the caller alone). It does not allocate.
func (m *Matrix) MulVec(p *kernels.Pool, x []float32, threshold float32, out []float32, s *Scratch) {
	if len(x) != m.Cols || len(out) != m.Rows {
		panic(fmt.Sprintf("sparse: MulVec of a (%d, %d) matrix with %d inputs and %d outputs", m.Rows, m.Cols, len(x), len(out)))
	}
	nb := (m.Cols + kernels.QK - 1) / kernels.QK
	if m.quantized() {
		m.planQuantized(x, threshold, s)
	} else {
		m.planFloat(x, threshold, s)
	}
	tasks := min(decodeTasks, nb)
	j := &s.job
	*j = mulJob{m: m, x: x, s: s, nb: nb, tasks: tasks}
	p.Run(tasks, j)
	first := true
	for t := range tasks {
		if !j.used[t] {
			continue
		}
		y := s.partial[t*m.Rows : (t+1)*m.Rows]
		if first {
			copy(out, y)
			first = false
		} else {
			kernels.Add(out, out, y)
		}
	}
	if first {
		clear(out)
	}
	j.m, j.x, j.s = nil, nil, nil
}

func (m *Matrix) quantized() bool { return m.Type == kernels.Q8_0 || m.Type == kernels.Q4_0 }

// planQuantized quantizes the thresholded x by blocks as the dense product
// quantizes activations (kernels.QuantizeActivations) and gathers each
// block's non-zero quants into quads.
func (m *Matrix) planQuantized(x []float32, threshold float32, s *Scratch) {
	cb := colBytes(m.Type, m.Rows)
	nq := int32(0)
	tmp := &s.block
	for b := range s.plans[:m.Cols/kernels.QK] {
		for i, v := range x[b*kernels.QK : (b+1)*kernels.QK] {
			if v > threshold || -v > threshold {
				tmp[i] = v
			} else {
				tmp[i] = 0
			}
		}
		kernels.QuantizeActivations(kernels.Q8_0, tmp[:], s.act[:])
		pl := blockPlan{q0: nq, dx: kernels.FP16ToFP32(le.Uint16(s.act[:]))}
		k := 0
		var q *quad
		var sum int32
		for c, v := range s.act[2:] {
			if v == 0 {
				continue
			}
			if k == 0 {
				q = &s.quads[nq]
				nq++
			}
			xv := int8(v)
			q.off[k] = int32(2*m.Rows + c*cb)
			q.x[k], q.ax[k] = xv, uint8(abs8(xv))
			sum += int32(xv)
			k = (k + 1) % 4
		}
		for ; k != 0; k = (k + 1) % 4 { // pad with the last column, times 0
			q.off[k], q.x[k], q.ax[k] = q.off[k-1], 0, 0
		}
		pl.nq = nq - pl.q0
		if m.Type == kernels.Q4_0 {
			pl.corr = 8 * sum
		}
		s.plans[b] = pl
	}
}

func abs8(v int8) int {
	if v < 0 {
		return -int(v)
	}
	return int(v)
}

// planFloat lists each block's channels whose input stays.
func (m *Matrix) planFloat(x []float32, threshold float32, s *Scratch) {
	n := int32(0)
	for b := range (m.Cols + kernels.QK - 1) / kernels.QK {
		pl := blockPlan{q0: n}
		for c := b * kernels.QK; c < min((b+1)*kernels.QK, m.Cols); c++ {
			if v := x[c]; v > threshold || -v > threshold {
				s.chans[n] = int32(c)
				n++
			}
		}
		pl.nq = n - pl.q0
		s.plans[b] = pl
	}
}

// mulJob runs the blocks of one task of a MulVec into its partial output.
type mulJob struct {
	m         *Matrix
	x         []float32
	s         *Scratch
	nb, tasks int
	used      [decodeTasks]bool // the task's partial holds a sum
}

func (j *mulJob) Do(task, _ int) {
	m, s := j.m, j.s
	y := s.partial[task*m.Rows : (task+1)*m.Rows]
	first := true
	for b := task * j.nb / j.tasks; b < (task+1)*j.nb/j.tasks; b++ {
		pl := &s.plans[b]
		if pl.nq == 0 {
			continue
		}
		switch m.Type {
		case kernels.Q8_0, kernels.Q4_0:
			bb := blockBytes(m.Type, m.Rows)
			blockKernel(m.Type, s.quads[pl.q0:pl.q0+pl.nq], m.Data[b*bb:(b+1)*bb], m.Rows, pl.dx, pl.corr, y, first)
		default:
			if first {
				clear(y)
			}
			for _, c := range s.chans[pl.q0 : pl.q0+pl.nq] {
				if m.Type == kernels.F32 {
					kernels.Axpy(j.x[c], unsafe.Slice((*float32)(unsafe.Pointer(&m.Data[4*m.Rows*int(c)])), m.Rows), y)
				} else { // the activation rounded to half, as the dense F16 product rounds it
					a := kernels.FP16ToFP32(kernels.FP32ToFP16(j.x[c]))
					kernels.AxpyF16(a, unsafe.Slice((*uint16)(unsafe.Pointer(&m.Data[2*m.Rows*int(c)])), m.Rows), y)
				}
			}
		}
		first = false
	}
	j.used[task] = !first
}

// blockQuantGeneric adds (first: sets) to y (rows) one block's products:
// for every row r, y[r] += float(Σ quads' x·w[r] − corr)·(d[r]·dx), the
// integer sums of VPMADDUBSW/VPMADDWD, the float steps those of the AVX2
// kernel (a fused multiply-add into y).
func blockQuantGeneric(t kernels.DType, quads []quad, blk []byte, rows int, dx float32, corr int32, y []float32, first bool) {
	for g := 0; g < rows; g += 32 {
		var acc [32]int32 // by row within the 32
		for i := range quads {
			q := &quads[i]
			for k := range 4 {
				col := blk[q.off[k]:]
				for r := range 32 {
					acc[r] += product(t, q.x[k], q.ax[k], quantAt(t, col, g+r))
				}
			}
		}
		for r := range 32 {
			a, d := float32(acc[r]-corr), kernels.FP16ToFP32(le.Uint16(blk[2*(g+r):]))*dx
			if first {
				y[g+r] = a * d
			} else {
				y[g+r] = kernels.FMA32(a, d, y[g+r])
			}
		}
	}
}

// product is what the kernel adds for activation x (magnitude ax) and
// quant q: for Q4_0 x·q, q a nibble; for Q8_0 ax·w with w the int8 quant
// given x's sign by VPSIGNB (zero for x = 0; negating −128 leaves −128, as
// in ggml's dense kernels, though no quantizer writes −128).
func product(t kernels.DType, x int8, ax uint8, q byte) int32 {
	if t == kernels.Q4_0 {
		return int32(x) * int32(q)
	}
	w := int8(q)
	switch {
	case x == 0:
		w = 0
	case x < 0:
		w = -w
	}
	return int32(ax) * int32(w)
}
