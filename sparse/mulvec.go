package sparse

import (
	"bytes"
	"fmt"
	"math"
	"unsafe"

	"github.com/ruvllm/ruvllm/kernels"
)

// The sparse mat-vec, y = W·x̃, where x̃ is x with every entry of
// magnitude at or below the threshold zeroed. For the quantized formats x̃
// is quantized to Q8_0 by blocks of 32 as the dense product quantizes its
// activations, so that every block's integer sums are the dense product's
// on x̃; the channels whose quants are zero are skipped, and the others are
// taken four at a time (a quad), whose columns the AVX2 kernels interleave
// so that one VPMADDUBSW multiplies 8 rows by 4 channels (Q4_0 with rows a
// multiple of 64: 16 rows by 2 channels, half a quad). The blocks are
// split between a fixed number of tasks, each summing into its own partial
// output, and the partials are added in task order: the result does not
// depend on the number of threads.
//
// The tasks are cut by work, not by blocks: the active quads vary from
// block to block, and equal runs of blocks left one thread waiting for the
// other. Each task's share is fixed (taskShare: decreasing, as guided
// scheduling cuts, so that the last tasks are short and a thread that runs
// out of work waits little for the other), and its blocks are those whose
// running sum of work falls in it.

// decodeTasks is the number of tasks (and partial outputs) of a mat-vec:
// enough for the pool to even out two busy cores, few enough that adding
// the partials costs little.
const decodeTasks = 8

// taskShare[t] is task t's part of a mat-vec's work, in 36ths: 8, 7, … 1.
var taskShare = [decodeTasks]int{8, 7, 6, 5, 4, 3, 2, 1}

// blockOverhead is the work of a block with any active channel besides its
// quads', in quads: the AVX2 kernels' per-row epilogue (the rows' scales
// times the activation's, added to the output) costs about one Q8_0 quad
// (32 rows) and two of the 64-row Q4_0 kernel's; the float formats have
// none.
func blockOverhead(t kernels.DType) int {
	switch t {
	case kernels.Q8_0:
		return 1
	case kernels.Q4_0:
		return 2
	}
	return 0
}

// The active channels of a mat-vec's blocks go four at a time (a quad),
// the unit of the kernel, as two arrays: offs[4i+k], the byte offset of
// channel k of quad i's column from its block's start, and xs[4i+k], its
// quantized activation. A block's last quad is padded with its last column
// and activation 0.

// blockPlan is the work of one block of 32 input channels.
type blockPlan struct {
	q0, nq int32   // its quads (quantized formats: offs[4·q0:], xs[4·q0:]) or active channels (float ones)
	dx     float32 // the scale of its quantized activations
	corr   int32   // Q4_0: 8·Σx, as the weights are d·(n−8) for nibbles n
}

// Scratch is what a matrix product needs besides the matrix: the prepared
// activations, the plan of a mat-vec and its partial outputs, the
// thresholded input and packed rows of a product over several tokens.
// Fit sizes it once for the matrices, batch and threads it will serve, so
// that a product allocates nothing. One goroutine uses it at a time.
type Scratch struct {
	act     []byte    // the thresholded input quantized to Q8_0
	side    []byte    // per block of act its scale (float32) and 8·Σq (int32)
	key     planKey   // what the plan in offs, xs and plans was made for
	lastX   []float32 // and the input it was made of
	offs    []int32   // the quads' columns (a quad's 4, and slack for the kernel's stores)
	xs      []int8    // the quads' activations
	counts  []int32   // quads per block
	chans   []int32   // float formats: the active channels
	plans   []blockPlan
	partial []float32 // (decodeTasks, rows)
	xt      []float32 // (n, cols): the thresholded input
	packed  []byte    // MatMulPacked's scratch
	row     []float32 // (Rows): a token's result, for MatMulSplit
	rows    rowRange  // the rows MatMulSplit packs
	job     mulJob
}

// Fit grows s for products of m over up to n tokens on workers threads.
func (s *Scratch) Fit(m *Matrix, n, workers int) {
	s.key = planKey{}
	nb := (m.Cols + kernels.QK - 1) / kernels.QK
	s.offs = grow(s.offs, nb*kernels.QK+8)
	s.xs = grow(s.xs, nb*kernels.QK+8)
	s.counts = grow(s.counts, nb)
	s.act = grow(s.act, nb*34)
	s.side = grow(s.side, nb*8)
	s.lastX = grow(s.lastX, m.Cols)
	s.chans = grow(s.chans, m.Cols)
	s.plans = grow(s.plans, nb)
	s.partial = grow(s.partial, decodeTasks*m.Rows)
	s.xt = grow(s.xt, n*m.Cols)
	s.packed = grow(s.packed, kernels.PackedScratchBytes(m.Type, m.Cols, n, workers))
	s.row = grow(s.row, m.Rows)
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
	j := &s.job
	*j = mulJob{m: m, x: x, s: s}
	tasks := j.split(s.plans[:nb], blockOverhead(m.Type))
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

// planQuantized thresholds x, quantizes it by blocks as the dense product
// quantizes activations (kernels.QuantizeActivationsQ8_0) and gathers each
// block's non-zero quants into quads. A plan is kept for the next call:
// when that one has the same input (by content), threshold, format and
// rows, as k's and v's products after each other, it is used again.
func (m *Matrix) planQuantized(x []float32, thr float32, s *Scratch) {
	nb := m.Cols / kernels.QK
	key := planKey{typ: m.Type, rows: m.Rows, cols: m.Cols, threshold: thr}
	if s.key == key && bytes.Equal(floatBytes(s.lastX[:m.Cols]), floatBytes(x)) {
		return
	}
	xt := s.xt[:m.Cols]
	threshold(xt, x, thr)
	act, side := s.act[:nb*34], s.side[:nb*8]
	kernels.QuantizeActivationsQ8_0(xt, act, side)
	planBlocks(act, nb, int32(2*m.Rows), int32(colBytes(m.Type, m.Rows)), s.offs, s.xs, s.counts)
	nq := int32(0)
	for b := range nb {
		pl := blockPlan{q0: nq, nq: s.counts[b], dx: math.Float32frombits(le.Uint32(side[8*b:]))}
		if m.Type == kernels.Q4_0 {
			pl.corr = int32(le.Uint32(side[8*b+4:])) // 8·Σx
		}
		nq += pl.nq
		s.plans[b] = pl
	}
	s.key = key
	copy(s.lastX, x)
}

// floatBytes is x's memory, for comparing it by content.
func floatBytes(x []float32) []byte {
	return unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(x))), 4*len(x))
}

// planKey says what a kept plan was made for.
type planKey struct {
	typ        kernels.DType
	rows, cols int
	threshold  float32
}

// planBlocksGeneric lists the non-zero quants of nb Q8_0 blocks (act) as
// quads, one block after the other: the offsets of their columns (first +
// c·cb for channel c) in offs and the quants in xs; counts[b] is block b's
// number of quads.
func planBlocksGeneric(act []byte, nb int, first, cb int32, offs []int32, xs []int8, counts []int32) {
	k := 0
	for b := range nb {
		start := k
		for c, v := range act[34*b+2 : 34*b+34] {
			if v != 0 {
				offs[k], xs[k] = first+int32(c)*cb, int8(v)
				k++
			}
		}
		for ; k%4 != 0; k++ { // pad with the last column, times 0
			offs[k], xs[k] = offs[k-1], 0
		}
		counts[b] = int32((k - start) / 4)
	}
}

// planFloat lists each block's channels whose input stays.
func (m *Matrix) planFloat(x []float32, threshold float32, s *Scratch) {
	s.key = planKey{} // the plans are no quantized matrix's now
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
	m     *Matrix
	x     []float32
	s     *Scratch
	start [decodeTasks + 1]int32 // task t runs blocks [start[t], start[t+1])
	used  [decodeTasks]bool      // the task's partial holds a sum
}

// split cuts the blocks of plans into tasks by their work (a block with
// active channels: its quads, or channels, plus overhead) in the shares of
// taskShare, and returns the number of tasks; a task may get no block.
func (j *mulJob) split(plans []blockPlan, overhead int) int {
	total := 0
	for i := range plans {
		if n := int(plans[i].nq); n > 0 {
			total += n + overhead
		}
	}
	tasks := min(decodeTasks, len(plans))
	shares := 0
	for _, sh := range taskShare[:tasks] {
		shares += sh
	}
	b, done, target := 0, 0, 0
	for t := range tasks - 1 {
		j.start[t] = int32(b)
		target += taskShare[t]
		// The blocks whose work is centred within the first
		// target/shares of the total.
		for ; b < len(plans); b++ {
			w := 0
			if n := int(plans[b].nq); n > 0 {
				w = n + overhead
			}
			if shares*(2*done+w) > 2*target*total {
				break
			}
			done += w
		}
	}
	j.start[tasks-1], j.start[tasks] = int32(b), int32(len(plans))
	return tasks
}

func (j *mulJob) Do(task, _ int) {
	m, s := j.m, j.s
	y := s.partial[task*m.Rows : (task+1)*m.Rows]
	first := true
	b1 := int(j.start[task+1])
	for b := int(j.start[task]); b < b1; b++ {
		pl := &s.plans[b]
		if pl.nq == 0 {
			continue
		}
		switch m.Type {
		case kernels.Q8_0, kernels.Q4_0:
			bb := blockBytes(m.Type, m.Rows)
			next := b + 1 // the next block with work, whose columns the kernel starts reading
			for next < b1 && s.plans[next].nq == 0 {
				next++
			}
			var nOffs []int32
			var nBlk []byte
			if next < b1 {
				np := &s.plans[next]
				nOffs, nBlk = s.offs[4*np.q0:4*(np.q0+np.nq)], m.Data[next*bb:(next+1)*bb]
			}
			q0, q1 := 4*pl.q0, 4*(pl.q0+pl.nq)
			blockKernel(m.Type, s.offs[q0:q1], s.xs[q0:q1], m.Data[b*bb:(b+1)*bb], m.Rows, pl.dx, pl.corr, y, first, nOffs, nBlk)
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
func blockQuantGeneric(t kernels.DType, offs []int32, xs []int8, blk []byte, rows int, dx float32, corr int32, y []float32, first bool) {
	for g := 0; g < rows; g += 32 {
		var acc [32]int32 // by row within the 32
		for i, off := range offs {
			col := blk[off:]
			for r := range 32 {
				acc[r] += product(t, xs[i], quantAt(t, col, g+r))
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

// product is what the kernel adds for activation x and quant q: for Q4_0
// x·q, q a nibble; for Q8_0 |x|·w with w the int8 quant given x's sign by
// VPSIGNB (zero for x = 0; negating −128 leaves −128, as in ggml's dense
// kernels, though no quantizer writes −128).
func product(t kernels.DType, x int8, q byte) int32 {
	if t == kernels.Q4_0 {
		return int32(x) * int32(q)
	}
	w, ax := int8(q), int32(x)
	switch {
	case x == 0:
		w = 0
	case x < 0:
		w, ax = -w, -ax
	}
	return ax * int32(w)
}
