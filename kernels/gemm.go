package kernels

import (
	"math"
	"unsafe"
)

// Blocked kernels for MatVec and MatMul: instead of one VecDot call per
// (row, token), a kernel call runs many rows against one token (gemv), a
// tile of rows × tokens (gemm), or rows against a group of tokens whose
// activations are packed so that one register holds the same positions of
// several tokens (group): the activations are loaded once for several rows
// and each weight is decoded once for several tokens. Every output rounds
// exactly as the format's VecDot does; only the work is shared.

// gemvKernel sets out[r] for r < rows: the rows of nb blocks at
// w + r·wStride against the activation row at a. It runs one row after the
// other, so that the weights stream through memory in order: on the
// machines measured, reading two or more rows side by side cuts the
// bandwidth by up to half.
type gemvKernel func(nb int, w *byte, wStride int, a *byte, out *float32, rows int)

// gemv2Kernel is a gemvKernel on two streams of rows at once: out0[r] for
// the rows at w0 + r·wStride, out1[r] for those at w1 + r·wStride. It is
// for formats whose sums are chains of dependent scalar operations, which
// two rows side by side keep twice as busy; the streams should lie tens of
// KB apart, or they slow each other's reads.
type gemv2Kernel func(nb int, w0, w1 *byte, wStride int, a *byte, out0, out1 *float32, rows int)

// gemmKernel sets out[t·outStride + r] for a fixed tile of rows r (at
// w + r·wStride) by tokens t (activations at a + t·aStride). A group tile
// kernel takes whole token groups instead: group k at a + k·aStride.
type gemmKernel func(nb int, w *byte, wStride int, a *byte, aStride int, out *float32, outStride int)

// gemmGroupKernel sets out[t·outStride + r] for a fixed number of rows r
// (at w + r·wStride) by the first nt tokens of the token group packed at a.
type gemmGroupKernel func(nb int, w *byte, wStride int, a *byte, out *float32, outStride int, nt int)

// gemmFormat holds the blocked kernels of one weight format.
type gemmFormat struct {
	blockSize int // weights per block: a row of cols weights has cols/blockSize blocks

	gemv  gemvKernel
	gemv2 gemv2Kernel // nil: gemv only
	// gemvTiles, if set, is the gemv for the activation rows of two or more
	// tokens, where they differ from a single token's (F16).
	gemvTiles gemvKernel

	// gemm, if set, runs two or more tokens in tiles of tileR rows by tileT
	// tokens (activations one row per token); rows and tokens past the last
	// whole tile go to gemv.
	gemm         gemmKernel
	tileR, tileT int

	// group, if set, replaces gemm: groupR rows by one token group (the
	// format's groupLayout), and groupTile, if set, groupR rows by
	// groupTiles whole groups at once. Rows past the last multiple of
	// groupR go to gemv, which needs the activation rows too
	// (groupLayout.rows).
	group      gemmGroupKernel
	groupTile  gemmKernel
	groupTiles int
	groupR     int
	layout     groupLayout // how the groups are packed
	// group1 and groupTile1, if set, take the rows past the last multiple
	// of groupR one at a time, in place of gemv (for layouts without rows).
	group1     gemmGroupKernel
	groupTile1 gemmKernel

	// narrow, if set, replaces this format for MatMul of at most
	// narrow.layout.tokens tokens (batched decode): its group kernels take
	// smaller groups, which would otherwise be mostly zero padding. Its
	// scratch fits in this format's (groupBytesPerToken).
	narrow *gemmFormat
}

// groupLayout describes the token groups of a format's group kernels.
type groupLayout struct {
	tokens     int  // tokens per group
	blockBytes int  // bytes per block (of groupBlockSize weights) per group
	rows       bool // the activation rows are kept too (for gemv)
	pairs      bool // 8 bytes of each token side by side (8-token 512-bit kernels)
	m32        bool // Q6_K, 8 tokens: also 32·a by pairs (gemm_vnni8_amd64.s)
}

// The group layouts (described at packQ8Group and prepJob).
var (
	q4Groups8   = groupLayout{tokens: 8, blockBytes: 320, rows: true}
	q4Groups16  = groupLayout{tokens: 16, blockBytes: 640, rows: true}
	q8Groups8   = groupLayout{tokens: 8, blockBytes: 288, rows: true}
	q8Pairs8    = groupLayout{tokens: 8, blockBytes: 288, rows: true, pairs: true}
	q8Groups16  = groupLayout{tokens: 16, blockBytes: 576, rows: true}
	f16Groups2  = groupLayout{tokens: 2, blockBytes: 256}
	q4kGroups8  = groupLayout{tokens: 8, blockBytes: 2208, rows: true, pairs: true}
	q6kGroups8  = groupLayout{tokens: 8, blockBytes: 4256, rows: true, pairs: true, m32: true}
	q4kGroups16 = groupLayout{tokens: 16, blockBytes: 4416, rows: true}
	groupsBound = 16 // the largest Q4_0 and Q8_0 group, for MatScratchBytes
)

// groupBytesPerToken bounds the group bytes per token and block of the
// layouts of weight type t on any CPU, or is 0 where t has no groups.
func groupBytesPerToken(t DType) int {
	switch t {
	case Q4_0:
		return 40
	case Q8_0:
		return 36
	case F16:
		return 128
	case Q4_K:
		return 276
	case Q6_K:
		return 532
	}
	return 0
}

// gemmFormats is indexed by DType; nil where there are no blocked kernels
// (for this CPU), and MatMul then calls VecDot per output.
var gemmFormats [MXFP4 + 1]*gemmFormat

// gemmFormatOf returns the blocked kernels of t for rows of cols weights, or
// nil.
func gemmFormatOf(t DType, cols int) *gemmFormat {
	if int(t) >= len(gemmFormats) {
		return nil
	}
	f := gemmFormats[t]
	if f == nil || cols%f.blockSize != 0 {
		return nil
	}
	return f
}

// The activations of the blocked kernels, one row per token: for Q8_0 and
// Q4_0 weights the Q8_0 row, then per block its scale as float32 and 8
// times the sum of its quants as int32 (the Q4_0 kernels multiply the
// unsigned nibbles and subtract the 8 afterwards); for F16 weights and two
// or more tokens the activations rounded to half precision, as float32 (the
// AVX2 tiles use them as they are; a single token keeps the halves, which
// gemv streams faster next to the weights); for the rest the VecDotType row
// as it is. After the rows (or instead, for F16), with two or more tokens,
// the token groups of the format's group kernels.

// blockedActRowBytes is the bytes per token of the blocked kernels'
// activation rows for n tokens against weights of type t, or 0 where they
// are the VecDotType row.
func blockedActRowBytes(t DType, cols, n int) int {
	switch t {
	case Q8_0, Q4_0:
		if cols%QK == 0 {
			return Q8_0.RowBytes(cols) + cols/QK*8
		}
	case F16:
		if n > 1 {
			return 4 * cols
		}
	case Q4_K, Q6_K:
		return Q8_K.RowBytes(cols)
	}
	return 0
}

// groupBlockSize is the weights per block of a group layout of type t.
func groupBlockSize(t DType) int {
	if t == F16 {
		return 32
	}
	return t.BlockSize()
}

// blockedScratch returns the scratch the blocked kernels need for n tokens
// on any CPU (so that MatScratchBytes does not depend on it), and where the
// token groups start in it (-1: none); 0 when the format takes the
// VecDotType rows as they are.
func blockedScratch(t DType, cols, n int) (need, groupsAt int) {
	rb := blockedActRowBytes(t, cols, n)
	if rb == 0 {
		return 0, -1
	}
	per := groupBytesPerToken(t)
	if per == 0 || n < 2 || cols%groupBlockSize(t) != 0 {
		return n * rb, -1
	}
	if t == F16 {
		// Token pairs, which replace the rows.
		return max(n*rb, (n+1)/2*2*per*(cols/32)), 0
	}
	groups := (n + groupsBound - 1) / groupsBound * groupsBound * per * (cols / groupBlockSize(t))
	return n*rb + groups, n * rb
}

// Work split of the blocked MatMul: a task is a chunk of rows (see
// gemmRowChunkFor) against up to gemmTokChunk tokens. A tile's activations
// stay in the first-level cache while the chunk's weight rows, from the
// second level, run past them.
const (
	gemmRowChunk = 48
	gemmTokChunk = 64 // a multiple of every group size
)

// gemmJob runs the blocked kernels over one chunk of rows × tokens per task.
type gemmJob struct {
	f          *gemmFormat
	gemv       gemvKernel
	w          []byte
	wRow       int
	a          []byte // activation rows
	aRow       int    // bytes per token in a
	groups     []byte // token groups, when the format's group kernels run
	gTokens    int    // tokens per group
	gBytes     int    // bytes per group
	rows, cols int
	n          int
	out        []float32
	rowChunk   int
	nRowChunks int
}

func (j *gemmJob) Do(task, _ int) {
	rc, tc := task%j.nRowChunks, task/j.nRowChunks
	r0, t0 := rc*j.rowChunk, tc*gemmTokChunk
	j.run(r0, min(r0+j.rowChunk, j.rows), t0, min(t0+gemmTokChunk, j.n))
}

// run computes rows [r0, r1) against tokens [t0, t1) (t0 a multiple of
// gemmTokChunk) with the format's kernels.
func (j *gemmJob) run(r0, r1, t0, t1 int) {
	switch {
	case j.groups != nil:
		j.doGroups(r0, r1, t0, t1)
	case j.f.gemm != nil && t1-t0 >= j.f.tileT:
		j.doTiles(r0, r1, t0, t1)
	default:
		j.doGemv(r0, r1, t0, t1)
	}
}

// doGroups runs rows [r0, r1) against the token groups of tokens [t0, t1)
// (t0 is a multiple of the group size).
func (j *gemmJob) doGroups(r0, r1, t0, t1 int) {
	f, nb := j.f, j.cols/j.f.blockSize
	gT := j.gTokens
	rEnd := r0 + (r1-r0)/f.groupR*f.groupR
	g, gEnd := t0/gT, (t1+gT-1)/gT
	if f.groupTile != nil {
		for ; (g+f.groupTiles)*gT <= t1; g += f.groupTiles {
			a := &j.groups[g*j.gBytes]
			for r := r0; r < rEnd; r += f.groupR {
				f.groupTile(nb, &j.w[r*j.wRow], j.wRow, a, j.gBytes, &j.out[g*gT*j.rows+r], j.rows)
			}
			if f.groupTile1 != nil {
				for r := rEnd; r < r1; r++ {
					f.groupTile1(nb, &j.w[r*j.wRow], j.wRow, a, j.gBytes, &j.out[g*gT*j.rows+r], j.rows)
				}
			}
		}
	}
	for ; g < gEnd; g++ {
		a, nt := &j.groups[g*j.gBytes], min(gT, j.n-g*gT)
		for r := r0; r < rEnd; r += f.groupR {
			f.group(nb, &j.w[r*j.wRow], j.wRow, a, &j.out[g*gT*j.rows+r], j.rows, nt)
		}
		if f.group1 != nil {
			for r := rEnd; r < r1; r++ {
				f.group1(nb, &j.w[r*j.wRow], j.wRow, a, &j.out[g*gT*j.rows+r], j.rows, nt)
			}
		}
	}
	if rEnd < r1 && f.group1 == nil {
		j.doGemv(rEnd, r1, t0, t1)
	}
}

// doTiles runs rows [r0, r1) by tokens [t0, t1) in gemm tiles, the rest by
// gemv.
func (j *gemmJob) doTiles(r0, r1, t0, t1 int) {
	f, nb := j.f, j.cols/j.f.blockSize
	tEnd := t0 + (t1-t0)/f.tileT*f.tileT
	rEnd := r0 + (r1-r0)/f.tileR*f.tileR
	for t := t0; t < tEnd; t += f.tileT {
		for r := r0; r < rEnd; r += f.tileR {
			f.gemm(nb, &j.w[r*j.wRow], j.wRow, &j.a[t*j.aRow], j.aRow, &j.out[t*j.rows+r], j.rows)
		}
	}
	if rEnd < r1 {
		j.doGemv(rEnd, r1, t0, tEnd)
	}
	j.doGemv(r0, r1, tEnd, t1)
}

// doGemv runs rows [r0, r1) against each token of [t0, t1) with gemv.
func (j *gemmJob) doGemv(r0, r1, t0, t1 int) {
	f, nb := j.f, j.cols/j.f.blockSize
	for t := t0; t < t1; t++ {
		a, out := &j.a[t*j.aRow], j.out[t*j.rows:]
		r := r0
		if h := (r1 - r0) / 2; f.gemv2 != nil && h > 0 {
			f.gemv2(nb, &j.w[r*j.wRow], &j.w[(r+h)*j.wRow], j.wRow, a, &out[r], &out[r+h], h)
			r += 2 * h
		}
		if r < r1 {
			j.gemv(nb, &j.w[r*j.wRow], j.wRow, a, &out[r], r1-r)
		}
	}
}

// gemmRowChunkFor picks the rows per task, a multiple of the format's tile
// height. Tokens are many (prefill): gemmRowChunk. A single token (decode)
// only streams the weights: then few large tasks, 4 per worker (the pool
// hands them out as workers come free, which evens out a busy core), so
// that each streams a long stretch of memory.
func gemmRowChunkFor(f *gemmFormat, rows, n, threads int, groups bool) int {
	unit := 1
	switch {
	case groups:
		unit = f.groupR
	case f.gemm != nil && n > 1:
		unit = f.tileR
	}
	chunk := gemmRowChunk
	if n == 1 {
		chunk = rows
		if threads > 1 {
			chunk = (rows + 4*threads - 1) / (4 * threads)
		}
	}
	return max(unit, (chunk+unit-1)/unit*unit)
}

// quantRowQ8_0ActGeneric is quantizeRowQ8_0Act into dst plus the blocked
// kernels' side table: per block its scale as float32 and 8·Σq as int32.
func quantRowQ8_0ActGeneric(x []float32, dst, side []byte) {
	quantizeRowQ8_0Act(x, dst)
	for b := range len(x) / QK {
		blk := dst[b*bytesQ8_0 : (b+1)*bytesQ8_0]
		var s int32
		for _, v := range blk[2:] {
			s += int32(int8(v))
		}
		le.PutUint32(side[8*b:], math.Float32bits(halfAt(blk, 0)))
		le.PutUint32(side[8*b+4:], uint32(8*s))
	}
}

// The token groups (each block of a group holds every token's share of that
// block, so that the kernels load one register per position for all the
// group's tokens):
//
//   - Q4_0 and Q8_0 with AVX-512 VNNI: groups of 16 tokens, described in
//     gemm_vnni_amd64.s (and for at most 8 tokens the groups below).
//   - Q4_K and Q6_K (AVX-512 VNNI): groups of 16 tokens, 4416 bytes a
//     super-block (gemm_vnni_amd64.s), or of 8 tokens, 2208 bytes, in
//     another order, and for Q6_K 2048 bytes more (gemm_vnni8_amd64.s).
//   - Q4_0, 8 tokens, 320 bytes a block: four 64-byte slots with the quants
//     a[0:8], a[16:24], a[8:16], a[24:32] of every token (the activations
//     that the low and high nibbles of weight bytes 0-7 and 8-15 meet), each
//     slot two 32-byte halves of 4 tokens by 8 bytes, tokens (0, 1, 4, 5)
//     and (2, 3, 6, 7) (q4GroupSlot); then the 8 scales da as float32, and
//     the 8 values 8·Σa as int32.
//   - Q8_0, 8 tokens, 288 bytes a block: for each 4-byte lane m of the block
//     a 32-byte slot with that lane of the 8 tokens; then the 8 da. For the
//     512-bit kernel (q8Pairs8) instead a 64-byte slot per 8-byte lane pair
//     k with the quants a[8k:8k+8] of every token (token t at 8t), biased
//     by 128 as in the 16-token groups; then the 8 da.
//   - F16, 2 tokens, 256 bytes per 32 positions: per 8 positions the first
//     token's 8 floats (rounded to half precision), then the second's.

// q4GroupSlot is where token p of a Q4_0 group puts its quants: the offset
// of its 8 bytes within each 64-byte slot, chosen so that the kernel's
// pairwise adds leave the tokens in order.
var q4GroupSlot = [8]int{0, 8, 32, 40, 16, 24, 48, 56}

// prepJob writes the blocked kernels' activations. Without groups a task
// is one token's row. With groups a task is a span of columns of every
// token: the tokens of a group share its cache lines, and workers writing
// different tokens of one group would pass those lines back and forth
// (with 8 tokens on 2 threads that made the preparation 3x slower than on
// one), while spans of columns are separate lines.
type prepJob struct {
	wt      DType // the weight format
	at      DType // its VecDotType
	x       []float32
	cols    int
	n       int    // tokens
	a       []byte // activation rows; nil when only groups are written
	aRow    int
	groups  []byte // nil: no groups
	gLayout groupLayout
	gBytes  int // bytes per group
	span    int // with groups: columns per task, a multiple of the block size
}

// tasks is the number of tasks of the job over threads workers.
func (q *prepJob) tasks(threads int) int {
	if q.groups == nil {
		return q.n
	}
	unit := groupBlockSize(q.wt)
	if q.at == Q8_K {
		unit = QKK
	}
	blocks := q.cols / unit
	// A few spans a worker, so that a slower or late worker holds up
	// little; but no span under 4 blocks, whose setup would cost more.
	spans := max(1, min(blocks/4, 2*threads))
	per := (blocks + spans - 1) / spans
	q.span = per * unit
	return (q.cols + q.span - 1) / q.span
}

func (q *prepJob) Do(task, _ int) {
	if q.groups == nil {
		q.token(task, 0, q.cols)
		return
	}
	c0 := task * q.span
	c1 := min(c0+q.span, q.cols)
	for k := range q.n {
		q.token(k, c0, c1)
	}
}

// token writes columns [c0, c1) of token k, c0 and c1 on block bounds.
func (q *prepJob) token(k, c0, c1 int) {
	x := q.x[k*q.cols+c0 : k*q.cols+c1]
	var g []byte
	p := 0
	if q.groups != nil {
		gT := q.gLayout.tokens
		g, p = q.groups[k/gT*q.gBytes:][:q.gBytes], k%gT
	}
	switch q.wt {
	case Q8_0, Q4_0:
		a := q.a[k*q.aRow : (k+1)*q.aRow]
		qr := Q8_0.RowBytes(q.cols)
		b0, b1 := c0/QK, c1/QK
		row, side := a[b0*bytesQ8_0:b1*bytesQ8_0], a[qr+8*b0:qr+8*b1]
		quantRowQ8_0Act(x, row, side)
		if g != nil {
			packQ8Group(q.wt, q.gLayout, g[b0*q.gLayout.blockBytes:], p, row, side)
		}
	case F16:
		if q.aRow == 2*q.cols { // a single token: the halves as they are
			QuantizeActivations(F16, x, q.a[k*q.aRow:(k+1)*q.aRow])
			return
		}
		// Round through half precision a stretch at a time (the row
		// converters are vectorised; the buffer lives on the stack).
		var h [256]uint16
		var dst []float32
		if g == nil {
			dst = unsafe.Slice((*float32)(unsafe.Pointer(&q.a[k*q.aRow])), q.cols)
		}
		for c := c0; c < c1; c += len(h) {
			n := min(len(h), c1-c)
			FP32ToFP16Row(x[c-c0:c-c0+n], h[:n])
			if g == nil {
				FP16ToFP32Row(h[:n], dst[c:c+n])
				continue
			}
			for i := 0; i < n; i += 8 { // 8 positions: 64 bytes, this token's half
				pair := unsafe.Slice((*float32)(unsafe.Pointer(&g[(c+i)/8*64+32*p])), 8)
				FP16ToFP32Row(h[i:i+8], pair)
			}
		}
	default:
		a := q.a[k*q.aRow : (k+1)*q.aRow]
		a = a[q.at.RowBytes(c0):q.at.RowBytes(c1)]
		if q.at != Q8_K {
			QuantizeActivations(q.at, x, a)
			return
		}
		quantRowQ8_K(x, a)
		if g != nil {
			packQ8KGroup(g[q.gLayout.blockBytes*(c0/QKK):], q.gLayout, p, a)
		}
	}
}

// packQ8KGroup puts token p's Q8_K row into the Q4_K and Q6_K group g of
// layout l (16 or 8 tokens; the layouts are described in gemm_vnni_amd64.s
// and gemm_vnni8_amd64.s).
func packQ8KGroup(g []byte, l groupLayout, p int, row []byte) {
	tokens, gBytes := l.tokens, l.blockBytes
	for b := range len(row) / bytesQ8_K {
		blk, gb := row[b*bytesQ8_K:(b+1)*bytesQ8_K], g[gBytes*b:gBytes*(b+1)]
		// P(j) = the sums of sub-block j's two 16s.
		var sums [8]int16
		for j := range sums {
			sums[j] = int16(le.Uint16(blk[260+4*j:])) + int16(le.Uint16(blk[262+4*j:]))
		}
		if tokens == 8 {
			// Per 8-byte lane pair k of sub-block j a 64-byte slot.
			for j := range 8 {
				for k := range 4 {
					le.PutUint64(gb[64*(4*j+k)+8*p:], le.Uint64(blk[4+32*j+8*k:]))
				}
			}
			le.PutUint32(gb[2048+4*p:], le.Uint32(blk[0:]))
			for j, v := range sums {
				le.PutUint16(gb[2080+64*(j/4)+8*p+2*(j%4):], uint16(v))
			}
			if l.m32 {
				// 32·(a[2i] + a[2i+1]), the VPMADDUBSW by 0x20 bytes that
				// the Q6_K kernel would otherwise repeat for every row.
				for i := range 128 {
					j, k, h := i/16, i/4%4, i%4
					a := blk[4+32*j+8*k+2*h:]
					le.PutUint16(gb[2208+64*(4*j+k)+8*p+2*h:], uint16(32*(int16(int8(a[0]))+int16(int8(a[1])))))
				}
			}
			continue
		}
		for j := range 8 {
			for m := range 8 {
				le.PutUint32(gb[64*(8*j+m)+4*p:], le.Uint32(blk[4+32*j+4*m:]))
			}
		}
		le.PutUint32(gb[4096+4*p:], le.Uint32(blk[0:]))
		for i := range 4 {
			le.PutUint16(gb[4160+64*i+4*p:], uint16(sums[2*i]))
			le.PutUint16(gb[4162+64*i+4*p:], uint16(sums[2*i+1]))
		}
	}
}

// packQ8Group puts token p's Q8_0 row (side: its side table) into the
// group g (of layout l) of weights of type wt.
func packQ8Group(wt DType, l groupLayout, g []byte, p int, row, side []byte) {
	tokens := l.tokens
	for b := range len(row) / bytesQ8_0 {
		blk := row[b*bytesQ8_0 : (b+1)*bytesQ8_0]
		d, s := le.Uint32(side[8*b:]), le.Uint32(side[8*b+4:])
		switch {
		case wt == Q4_0 && tokens == 8:
			gb := g[320*b : 320*(b+1)]
			o := q4GroupSlot[p]
			le.PutUint64(gb[o:], le.Uint64(blk[2:]))
			le.PutUint64(gb[64+o:], le.Uint64(blk[18:]))
			le.PutUint64(gb[128+o:], le.Uint64(blk[10:]))
			le.PutUint64(gb[192+o:], le.Uint64(blk[26:]))
			le.PutUint32(gb[256+4*p:], d)
			le.PutUint32(gb[288+4*p:], s)
		case wt == Q4_0: // 16 tokens
			gb := g[640*b : 640*(b+1)]
			for j := range 4 {
				le.PutUint32(gb[128*j+4*p:], le.Uint32(blk[2+4*j:]))
				le.PutUint32(gb[128*j+64+4*p:], le.Uint32(blk[18+4*j:]))
			}
			le.PutUint32(gb[512+4*p:], d)
			le.PutUint32(gb[576+4*p:], s)
		case l.pairs: // Q8_0, 8 tokens by 8 bytes, biased by 128
			gb := g[288*b : 288*(b+1)]
			for k := range 4 {
				le.PutUint64(gb[64*k+8*p:], le.Uint64(blk[2+8*k:])^0x8080808080808080)
			}
			le.PutUint32(gb[256+4*p:], d)
		case tokens == 8: // Q8_0
			gb := g[288*b : 288*(b+1)]
			for m := range 8 {
				le.PutUint32(gb[32*m+4*p:], le.Uint32(blk[2+4*m:]))
			}
			le.PutUint32(gb[256+4*p:], d)
		default: // Q8_0, 16 tokens: the quants biased by 128
			gb := g[576*b : 576*(b+1)]
			for m := range 8 {
				le.PutUint32(gb[64*m+4*p:], le.Uint32(blk[2+4*m:])^0x80808080)
			}
			le.PutUint32(gb[512+4*p:], d)
		}
	}
}

// matMulBlocked is MatMul with the blocked kernels of f; the sizes have been
// checked.
func matMulBlocked(p *Pool, f *gemmFormat, tr *Traits, t DType, w []byte, rows, cols int, x []float32, n int, out []float32, scratch []byte) {
	j := prepareBlocked(p, f, tr, t, w, rows, cols, x, n, out, scratch)
	j.rowChunk = gemmRowChunkFor(j.f, rows, n, p.Size(), j.groups != nil)
	j.nRowChunks = (rows + j.rowChunk - 1) / j.rowChunk
	nTasks := j.nRowChunks * ((n + gemmTokChunk - 1) / gemmTokChunk)
	if p == nil {
		for task := range nTasks {
			j.Do(task, 0)
		}
		return
	}
	p.mu.Lock()
	p.gemm = j
	p.run(nTasks, &p.gemm)
	p.gemm = gemmJob{}
	p.mu.Unlock()
}

// prepareBlocked writes the blocked kernels' activations of x into scratch
// and returns the job that runs them against w; the caller sets its work
// split.
func prepareBlocked(p *Pool, f *gemmFormat, tr *Traits, t DType, w []byte, rows, cols int, x []float32, n int, out []float32, scratch []byte) gemmJob {
	if f.narrow != nil && n <= f.narrow.layout.tokens {
		f = f.narrow
	}
	aRow := blockedActRowBytes(t, cols, n)
	if aRow == 0 {
		aRow = tr.VecDotType.RowBytes(cols)
	}
	j := gemmJob{
		f: f, gemv: f.gemv,
		w: w, wRow: t.RowBytes(cols),
		aRow: aRow,
		rows: rows, cols: cols, n: n,
		out: out,
	}
	if n > 1 && f.gemvTiles != nil {
		j.gemv = f.gemvTiles
	}
	q := prepJob{wt: t, at: tr.VecDotType, x: x, cols: cols, n: n, aRow: aRow}
	_, groupsAt := blockedScratch(t, cols, n)
	l := f.layout
	if f.group == nil || groupsAt < 0 {
		j.a = scratch[:n*aRow]
	} else {
		j.gTokens, j.gBytes = l.tokens, l.blockBytes*(cols/groupBlockSize(t))
		nGroups := (n + l.tokens - 1) / l.tokens
		j.groups = scratch[groupsAt : groupsAt+nGroups*j.gBytes]
		if l.rows {
			j.a = scratch[:n*aRow]
		}
		if n%l.tokens != 0 { // the missing tokens of the last group are zeros
			clear(j.groups[len(j.groups)-j.gBytes:])
		}
	}
	q.a, q.groups, q.gLayout, q.gBytes = j.a, j.groups, l, j.gBytes
	if nq := q.tasks(p.Size()); p == nil || nq == 1 {
		for k := range nq {
			q.Do(k, 0)
		}
	} else {
		p.mu.Lock()
		p.prep = q
		p.run(nq, &p.prep)
		p.prep = prepJob{}
		p.mu.Unlock()
	}
	return j
}
