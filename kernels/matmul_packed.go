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
	nTasks := j.plan(p.Size())
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
	chunk int    // rows per task, at most
	wRow  int    // bytes per packed row
	bufs  []byte // a chunk per worker
	gemm  gemmJob
	vec   matJob
	// The first nHead tasks take chunk rows each; the others, the tail,
	// start at tail[k] (tail[nTail] = rows).
	nHead, nTail int
	tail         [maxPackedTail + 1]int32
}

// maxPackedTail bounds the tasks of a packed product's tail.
const maxPackedTail = 63

// plan cuts the rows into tasks for workers workers and returns how many.
// All but the last rows go in whole chunks; the last 2·workers chunks' worth
// (at most 8) are cut guided, each task half of what is left per worker
// (at least a quarter chunk), so that when one worker runs out of tasks the
// others' last ones end soon after: with equal chunks a worker waited half
// a chunk (a 32nd of a 2048-row product) at the end of every product. The
// tail has under 9 chunks' rows in tasks of a quarter chunk at least: it
// fits maxPackedTail.
func (j *packedJob) plan(workers int) int {
	workers = max(1, workers)
	j.nHead = max(0, j.rows-min(2*workers, 8)*j.chunk) / j.chunk
	least := max(32, j.chunk/4/32*32)
	n := 0
	for r := j.nHead * j.chunk; r < j.rows; n++ {
		j.tail[n] = int32(r)
		left := j.rows - r
		part := (left + 2*workers - 1) / (2 * workers)
		r += min(left, j.chunk, max(least, (part+31)/32*32))
	}
	j.tail[n], j.nTail = int32(j.rows), n
	return j.nHead + n
}

// span is the rows [r0, r1) of a task.
func (j *packedJob) span(task int) (r0, r1 int) {
	if task < j.nHead {
		return task * j.chunk, (task + 1) * j.chunk
	}
	k := task - j.nHead
	return int(j.tail[k]), int(j.tail[k+1])
}

func (j *packedJob) Do(task, worker int) {
	r0, r1 := j.span(task)
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
