package kernels

// RowPacker gives the rows of a matrix stored in some other layout (package
// sparse's input-channel-major one) in the row-major encoding of its format,
// a chunk at a time, so that MatMulPacked runs the same kernels over them as
// MatMul runs over a row-major matrix, without a second copy of the matrix.
type RowPacker interface {
	// PackRows writes rows [r0, r1) into dst, (r1−r0)·RowBytes(cols)
	// bytes, as a GGUF tensor stores them. It is called from the pool's
	// workers, several at once.
	PackRows(r0, r1 int, dst []byte)
}

// packedChunk is the number of rows MatMulPacked packs at a time: about
// 192 KiB of weights, so that a chunk packed by a worker is still in its
// second-level cache when the kernels read it for every token; a multiple of
// every format's row tile and of 64, so that a chunk of an 8-bit matrix
// stored channel-major reads whole 64-byte lines of each column (32 rows,
// half a line, left the other half to another worker's chunk).
func packedChunk(t DType, cols int) int {
	c := 192 << 10 / max(1, t.RowBytes(cols)) / 64 * 64
	return min(max(c, 64), 256)
}

// PackedScratchBytes is the scratch MatMulPacked needs for n tokens of cols
// activations against weights of type t, with workers workers (Pool.Size):
// MatMul's, and a chunk of packed rows per worker. It is −1 where MatMul's
// is.
func PackedScratchBytes(t DType, cols, n, workers int) int {
	need := MatScratchBytes(t, cols, n)
	if need < 0 {
		return -1
	}
	return need + max(1, workers)*packedChunk(t, cols)*t.RowBytes(cols)
}

// MatMulPacked is MatMul over a (rows, cols) matrix of type t whose rows
// src packs: every out[j·rows + r] is, bit for bit, what MatMul gives for
// the row-major matrix. The activations are prepared once; then each task
// packs a chunk of rows into its worker's part of scratch
// (PackedScratchBytes(t, cols, n, p.Size()) bytes) and runs it against
// every token. It does not allocate (src must be a pointer, or the
// interface allocates). Wrong sizes panic.
func MatMulPacked(p *Pool, t DType, src RowPacker, rows, cols int, x []float32, n int, out []float32, scratch []byte) {
	need := MatScratchBytes(t, cols, n)
	wRow := t.RowBytes(cols)
	tr := checkMatMul("MatMulPacked", t, rows*wRow, rows, cols, len(x), n, len(out), len(scratch), PackedScratchBytes(t, cols, n, p.Size()))
	if rows == 0 || n == 0 {
		return
	}
	j := packedJob{src: src, rows: rows, chunk: packedChunk(t, cols), wRow: wRow, bufs: scratch[need:]}
	if f := gemmFormatOf(t, cols); f != nil {
		j.gemm = prepareBlocked(p, f, tr, t, nil, rows, cols, x, n, out, scratch[:need])
	} else {
		j.vec = prepareVecDot(p, tr, t, nil, rows, cols, x, n, out, scratch[:need])
	}
	nTasks := (rows + j.chunk - 1) / j.chunk
	if p == nil || nTasks == 1 {
		for task := range nTasks {
			j.Do(task, 0)
		}
		return
	}
	p.mu.Lock()
	p.packed = j
	p.run(nTasks, &p.packed)
	p.packed = packedJob{}
	p.mu.Unlock()
}

// packedJob packs a chunk of rows per task and runs either the blocked
// kernels (gemm set) or the VecDot path over it.
type packedJob struct {
	src   RowPacker
	rows  int
	chunk int    // rows per task
	wRow  int    // bytes per packed row
	bufs  []byte // a chunk per worker
	gemm  gemmJob
	vec   matJob
}

func (j *packedJob) Do(task, worker int) {
	r0 := task * j.chunk
	r1 := min(r0+j.chunk, j.rows)
	size := j.chunk * j.wRow
	w := j.bufs[worker*size : worker*size+(r1-r0)*j.wRow]
	j.src.PackRows(r0, r1, w)
	if j.gemm.f != nil {
		g := j.gemm // the chunk's rows are rows 0.. of w, and of out from r0
		g.w, g.out = w, g.out[r0:]
		for t0 := 0; t0 < g.n; t0 += gemmTokChunk {
			g.run(0, r1-r0, t0, min(t0+gemmTokChunk, g.n))
		}
		return
	}
	v := j.vec
	v.w, v.out = w, v.out[r0:]
	v.run(0, r1-r0, 0, v.n)
}
