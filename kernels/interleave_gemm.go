package kernels

import "fmt"

// MatMulInterleaved is MatMul of several tokens against a matrix of type t
// interleaved by Interleave: out (n, rows) = x (n, cols) · Wᵀ, each output
// to the bit what MatVecInterleaved (and so MatVec, and VecDot) gives for
// its token, so that a batch decodes exactly as its tokens one at a time.
// The activations are quantized once; each weight block is loaded and split
// into nibbles once for a tile of several tokens, so a batch of a few
// tokens (batched decode: 2 to 16) reads the weights from memory once, and
// none is padded to a larger group. scratch holds at least
// MatScratchBytes(t, cols, n) bytes. It does not allocate. Wrong sizes
// panic.
func MatMulInterleaved(p *Pool, t DType, packed []byte, rows, cols int, x []float32, n int, out []float32, scratch []byte) {
	size, need := InterleavedBytes(t, rows, cols), MatScratchBytes(t, cols, n)
	if size < 0 || n < 0 || len(packed) < size || len(x) < n*cols || len(out) < n*rows || len(scratch) < need {
		panic(fmt.Sprintf("kernels: MatMulInterleaved of %v (%d, %d) × %d tokens: got %d weight bytes (need %d), %d inputs, %d outputs, %d scratch bytes (%d)",
			t, rows, cols, n, len(packed), size, len(x), len(out), len(scratch), need))
	}
	if rows == 0 || n == 0 {
		return
	}
	tr, _ := TraitsOf(t)
	aRow := blockedActRowBytes(t, cols, n)
	if aRow == 0 {
		aRow = tr.VecDotType.RowBytes(cols)
	}
	q := prepJob{wt: t, at: tr.VecDotType, x: x, cols: cols, n: n, a: scratch[:n*aRow], aRow: aRow}
	if p == nil || n == 1 {
		for k := range n {
			q.Do(k, 0)
		}
	} else {
		p.mu.Lock()
		p.prep = q
		p.run(n, &p.prep)
		p.prep = prepJob{}
		p.mu.Unlock()
	}
	j := interleavedMMJob{t: t, w: packed, rb: t.RowBytes(cols), nb: cols / t.BlockSize(), rows: rows, n: n,
		a: q.a, aRow: aRow, out: out}
	nTasks := j.plan(p.Size())
	if p == nil {
		for task := range nTasks {
			j.Do(task, 0)
		}
		return
	}
	p.mu.Lock()
	p.interMM = j
	p.run(nTasks, &p.interMM)
	p.interMM = interleavedMMJob{}
	p.mu.Unlock()
}

// interleavedTokChunk is the most tokens a task of MatMulInterleaved runs
// against its rows: up to it the weights are read from memory once (a
// batched decode step); a longer prompt goes in chunks of it, whose
// activations stay in the second-level cache while a task's rows run past
// them.
const interleavedTokChunk = 64

// interleavedPrefillGroups is the groups of 8 rows a task takes when the
// tokens are many (48 rows, as the blocked MatMul's row chunk).
const interleavedPrefillGroups = 6

// interleavedMMJob runs per task a run of groups of 8 packed rows against a
// chunk of tokens, or (the tasks past nGrouped·nTokChunks) the rows past
// the groups against a chunk of tokens.
type interleavedMMJob struct {
	t      DType
	w      []byte
	rb, nb int
	rows   int
	n      int
	a      []byte // the tokens' activation rows, aRow bytes each
	aRow   int
	out    []float32
	// start[i] is the first group of group task i; start[nGrouped] =
	// rows/8.
	start      [maxInterleavedTasks + 1]int32
	nGrouped   int
	nTokChunks int
}

// plan cuts the work into tasks for threads workers and returns how many:
// the tokens into chunks of interleavedTokChunk, the groups of rows as
// MatVecInterleaved cuts them (guided) when there is one chunk, else into
// runs of interleavedPrefillGroups.
func (j *interleavedMMJob) plan(threads int) int {
	groups := j.rows / 8
	j.nTokChunks = (j.n + interleavedTokChunk - 1) / interleavedTokChunk
	if j.nTokChunks == 1 {
		iv := interleavedJob{}
		j.nGrouped = iv.plan(groups, threads)
		j.start = iv.start
	} else {
		j.nGrouped = 0
		for g := 0; g < groups && j.nGrouped < maxInterleavedTasks; j.nGrouped++ {
			j.start[j.nGrouped] = int32(g)
			g += interleavedPrefillGroups
			if j.nGrouped == maxInterleavedTasks-1 {
				g = groups
			}
		}
		j.start[j.nGrouped] = int32(groups)
	}
	per := j.nGrouped
	if j.rows%8 != 0 {
		per++
	}
	return per * j.nTokChunks
}

func (j *interleavedMMJob) Do(task, _ int) {
	per := j.nGrouped
	if j.rows%8 != 0 {
		per++
	}
	gi, tc := task%per, task/per
	t0 := tc * interleavedTokChunk
	t1 := min(t0+interleavedTokChunk, j.n)
	groups := j.rows / 8
	gb := interleavedGroupBytes(j.t)
	if gi >= j.nGrouped {
		// The rows past the groups, as they are.
		tail := j.w[groups*j.nb*gb:]
		tr, _ := TraitsOf(j.t)
		dot := j.t.BlockSize() * j.nb
		for k := t0; k < t1; k++ {
			a := j.a[k*j.aRow:]
			for r := groups * 8; r < j.rows; r++ {
				i := r - groups*8
				j.out[k*j.rows+r] = tr.VecDot(dot, tail[i*j.rb:(i+1)*j.rb], a)
			}
		}
		return
	}
	g0, g1 := int(j.start[gi]), int(j.start[gi+1])
	gemmInterleaved(j.t, j.nb, j.w[g0*j.nb*gb:g1*j.nb*gb], j.a[t0*j.aRow:t1*j.aRow], j.aRow, j.out[t0*j.rows+8*g0:], j.rows, t1-t0)
}

// gemmInterleavedGeneric sets out[k·outStride + 8g + r] for the groups of
// 8 packed rows of type t in w against the activations of nt tokens, token
// k's at a[k·aStride:] (as gemvInterleavedGeneric takes them): the
// pure-Go twin of the several-token kernels, which is the one-token kernel
// per token.
func gemmInterleavedGeneric(t DType, nb int, w, a []byte, aStride int, out []float32, outStride, nt int) {
	groups := len(w) / (nb * interleavedGroupBytes(t))
	for k := range nt {
		gemvInterleavedGeneric(t, nb, w, a[k*aStride:], out[k*outStride:k*outStride+8*groups])
	}
}
