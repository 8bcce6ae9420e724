package kernels

import (
	"fmt"
	"math"
)

// Weights interleaved for the one-token mat-vec (decode): "packed" rows here
// are 8 rows side by side (not the row packing of MatMulPacked). The rows of a matrix
// are taken 8 at a time, and each block of the 8 rows is laid out so that
// one 32-byte load holds 4 weight bytes of each of the 8 rows: one broadcast
// of 4 activation quants feeds all 8 rows' products, there are no
// horizontal sums, and the float sums of the 8 rows run in the 8 lanes of
// registers. Recent ggml repacks Q4_0 and Q4_K the same way (several rows'
// blocks side by side); these layouts are this package's own.
//
// Every output rounds exactly as the format's VecDot (and so as MatVec):
// the integer sums are exact in any order, and each float operation of one
// row's VecDot happens in that row's lane, in the same order.
//
// Q4_0, 8 rows × one block = 144 bytes (bytesQ4_0x8): the 8 rows' scales as
// halves, then for k = 0..3 the nibble bytes 4k..4k+3 of rows 0..7.
//
// Q4_K, 8 rows × one super-block = 1184 bytes (bytesQ4_Kx8): the 8 d, the 8
// dmin (halves); for each sub-block j = 0..7 the 8 rows' six-bit scales (8
// bytes; the kernels widen each to the word pair that VPMADDWD multiplies
// by); for each pair i = 0..3 the 8 rows' mins 2i and 2i+1 (16 bytes); then
// for k = 0..3 and m = 0..7 the nibble bytes 32k+4m..32k+4m+3 of rows 0..7
// (32 bytes). The copy is 1184/1152 of the file's bytes.
//
// Q5_K, 8 rows × one super-block = 1440 bytes (bytesQ5_Kx8): the Q4_K
// layout of its scales, mins and low nibbles, then for m = 0..7 the high-bit
// bytes 4m..4m+3 of rows 0..7 (32 bytes; bit 2k of byte l is the fifth bit
// of the low nibble of byte l of chunk k, bit 2k+1 of its high nibble).

const (
	bytesQ4_0x8 = 8 * bytesQ4_0
	bytesQ4_Kx8 = 160 + 8*128
	bytesQ5_Kx8 = bytesQ4_Kx8 + 8*32
)

// interleavedGroupBytes is the size of 8 packed rows' block of t, 0 where t has
// no packed layout.
func interleavedGroupBytes(t DType) int {
	switch t {
	case Q4_0:
		return bytesQ4_0x8
	case Q4_K:
		return bytesQ4_Kx8
	case Q5_K:
		return bytesQ5_Kx8
	}
	return 0
}

// InterleavedBytes is the size of the interleaved copy (Interleave) of the (rows, cols)
// matrix of type t, or -1 when t has no packed layout or cols is not a whole
// number of its blocks.
func InterleavedBytes(t DType, rows, cols int) int {
	gb, rb := interleavedGroupBytes(t), t.RowBytes(cols)
	if gb == 0 || rb < 0 || rows < 0 || cols%t.BlockSize() != 0 {
		return -1
	}
	nb := cols / t.BlockSize()
	return rows/8*nb*gb + rows%8*rb
}

// Interleave writes into dst (InterleavedBytes(t, rows, cols) bytes) the packed copy
// of the (rows, cols) matrix w of type t, for MatVecInterleaved: the first
// rows/8·8 rows in groups of 8 (see above), the rest as they are. Wrong
// sizes or a type without a packed layout panic.
func Interleave(t DType, dst, w []byte, rows, cols int) {
	rb, need := t.RowBytes(cols), InterleavedBytes(t, rows, cols)
	if need < 0 || len(w) != rows*rb || len(dst) != need {
		panic(fmt.Sprintf("kernels: Interleave of %v (%d, %d): %d bytes into %d", t, rows, cols, len(w), len(dst)))
	}
	nb, gb := cols/t.BlockSize(), interleavedGroupBytes(t)
	groups := rows / 8
	for g := range groups {
		for b := range nb {
			blk := dst[(g*nb+b)*gb:][:gb]
			for r := range 8 {
				src := w[(8*g+r)*rb+b*t.BlockBytes():][:t.BlockBytes()]
				switch t {
				case Q4_0:
					interleaveQ4_0Row(blk, r, src)
				case Q4_K:
					interleaveQ4_KRow(blk, r, src)
				default:
					interleaveQ5_KRow(blk, r, src)
				}
			}
		}
	}
	copy(dst[groups*nb*gb:], w[groups*8*rb:])
}

// interleaveQ4_0Row puts the Q4_0 block src of row r into the 8-row block blk.
func interleaveQ4_0Row(blk []byte, r int, src []byte) {
	copy(blk[2*r:2*r+2], src[0:2])
	for k := range 4 {
		le.PutUint32(blk[16+32*k+4*r:], le.Uint32(src[2+4*k:]))
	}
}

// interleaveQ4_KRow puts the Q4_K super-block src of row r into the 8-row block
// blk.
func interleaveQ4_KRow(blk []byte, r int, src []byte) {
	copy(blk[2*r:2*r+2], src[0:2])
	copy(blk[16+2*r:16+2*r+2], src[2:4])
	var mins [8]uint8
	for j := range 8 {
		sc, m := scaleMinK4(j, src[4:16])
		blk[32+8*j+r] = sc
		mins[j] = m
	}
	for i := range 4 {
		blk[96+16*i+2*r], blk[96+16*i+2*r+1] = mins[2*i], mins[2*i+1]
	}
	for k := range 4 {
		for m := range 8 {
			le.PutUint32(blk[160+256*k+32*m+4*r:], le.Uint32(src[16+32*k+4*m:]))
		}
	}
}

// interleaveQ5_KRow puts the Q5_K super-block src of row r into the 8-row
// block blk: its d, dmin, scales and mins and low nibbles as Q4_K's (whose
// super-block is Q5_K's without the 32 high-bit bytes at 16), then its high
// bits.
func interleaveQ5_KRow(blk []byte, r int, src []byte) {
	var q4 [bytesQ4_K]byte
	copy(q4[:16], src[:16])
	copy(q4[16:], src[48:])
	interleaveQ4_KRow(blk, r, q4[:])
	for m := range 8 {
		le.PutUint32(blk[bytesQ4_Kx8+32*m+4*r:], le.Uint32(src[16+4*m:]))
	}
}

// MatVecInterleaved is MatVec of a matrix of type t interleaved by Interleave: out[r] is, to
// the bit, what MatVec(p, t, w, rows, cols, x, out, scratch) gives on the
// matrix before packing. scratch holds at least MatScratchBytes(t, cols, 1)
// bytes. It does not allocate. Wrong sizes panic.
func MatVecInterleaved(p *Pool, t DType, packed []byte, rows, cols int, x, out []float32, scratch []byte) {
	size, need := InterleavedBytes(t, rows, cols), MatScratchBytes(t, cols, 1)
	if size < 0 || len(packed) < size || len(x) < cols || len(out) < rows || len(scratch) < need {
		panic(fmt.Sprintf("kernels: MatVecInterleaved of %v (%d, %d): got %d weight bytes (need %d), %d inputs, %d outputs, %d scratch bytes (%d)",
			t, rows, cols, len(packed), size, len(x), len(out), len(scratch), need))
	}
	if rows == 0 {
		return
	}
	j := interleavedJob{t: t, w: packed, rb: t.RowBytes(cols), nb: cols / t.BlockSize(), rows: rows, out: out}
	if t == Q4_0 {
		qr := Q8_0.RowBytes(cols)
		j.a = scratch[:qr+8*j.nb]
		quantRowQ8_0Act(x[:cols], j.a[:qr], j.a[qr:])
		j.dot = j.a[:qr]
	} else {
		j.a = scratch[:Q8_K.RowBytes(cols)]
		quantRowQ8_K(x[:cols], j.a)
		j.dot = j.a
	}
	groups := rows / 8
	nTasks := j.plan(groups, p.Size())
	if rows%8 != 0 {
		nTasks++ // the last task: the rows past the groups
	}
	if p == nil {
		for task := range nTasks {
			j.Do(task, 0)
		}
		return
	}
	p.mu.Lock()
	p.inter = j
	p.run(nTasks, &p.inter)
	p.inter = interleavedJob{}
	p.mu.Unlock()
}

// interleavedJob runs per task a run of groups of 8 packed rows, or (the
// last task when rows is not a multiple of 8) the rows past the groups.
type interleavedJob struct {
	t    DType
	w    []byte
	rb   int // bytes per unpacked row
	nb   int // blocks per row
	a    []byte
	dot  []byte // the VecDotType row in a, for the rows past the groups
	rows int
	out  []float32
	// start[i] is the first group of task i; start[nGrouped] = rows/8.
	start    [maxInterleavedTasks + 1]int32
	nGrouped int
}

// maxInterleavedTasks bounds the tasks a mat-vec of packed rows is cut into.
const maxInterleavedTasks = 48

// minInterleavedTask is the fewest groups of 8 rows in a task (but the
// last): about 18 KB of a 2048-column Q4_0 matrix, streamed in about a
// microsecond.
const minInterleavedTask = 2

// plan cuts groups into tasks for threads workers and returns how many. The
// cuts are guided: each task takes half of what is left per worker (but
// at least minInterleavedTask groups), so the first tasks stream long
// stretches of memory and the last ones are short: when one worker runs
// out of tasks the other's last task ends soon after. Equal tasks (4 per
// worker) left one worker idle for half a task at the end of each mat-vec.
func (j *interleavedJob) plan(groups, threads int) int {
	n := 0
	for g := 0; g < groups; n++ {
		j.start[n] = int32(g)
		take := groups - g
		if threads > 1 && n < maxInterleavedTasks-1 {
			take = min(take, max(minInterleavedTask, (take+2*threads-1)/(2*threads)))
		}
		g += take
	}
	j.start[n], j.nGrouped = int32(groups), n
	return n
}

func (j *interleavedJob) Do(task, _ int) {
	groups := j.rows / 8
	gb := interleavedGroupBytes(j.t)
	if task >= j.nGrouped {
		tail := j.w[groups*j.nb*gb:]
		tr, _ := TraitsOf(j.t)
		for r := groups * 8; r < j.rows; r++ {
			i := r - groups*8
			j.out[r] = tr.VecDot(j.nb*j.t.BlockSize(), tail[i*j.rb:(i+1)*j.rb], j.dot)
		}
		return
	}
	g0, g1 := int(j.start[task]), int(j.start[task+1])
	gemvInterleaved(j.t, j.nb, j.w[g0*j.nb*gb:g1*j.nb*gb], j.a, j.out[8*g0:8*g1])
}

// gemvInterleavedGeneric sets out[8g+r] for the groups of 8 packed rows of type
// t in w against the activations a (Q4_0: the blocked kernels' Q8_0 row
// with its side table; Q4_K and Q5_K: the Q8_K row).
func gemvInterleavedGeneric(t DType, nb int, w, a []byte, out []float32) {
	switch t {
	case Q4_0:
		gemvQ4_0InterleavedGeneric(nb, w, a, out)
	case Q4_K:
		gemvQ4_KInterleavedGeneric(nb, w, a, out)
	default:
		gemvQ5_KInterleavedGeneric(nb, w, a, out)
	}
}

// gemvQ4_0InterleavedGeneric sets out[8g+r] for the groups of 8 packed rows in w
// against the blocked kernels' Q8_0 activations a (the Q8_0 row, then per
// block da as float32 and 8·Σa as int32): the pure-Go twin of
// gemvQ4_0P8AVX2, rounding as vecDotQ4_0.
func gemvQ4_0InterleavedGeneric(nb int, w, a []byte, out []float32) {
	side := a[nb*bytesQ8_0:]
	for g := range len(out) / 8 {
		var sum [8]float32
		for b := range nb {
			blk := w[(g*nb+b)*bytesQ4_0x8:][:bytesQ4_0x8]
			act := a[b*bytesQ8_0:][:bytesQ8_0]
			da := math.Float32frombits(le.Uint32(side[8*b:]))
			s8 := int32(le.Uint32(side[8*b+4:]))
			for r := range 8 {
				var isum int32
				for k := range 4 {
					for i := range 4 {
						q := blk[16+32*k+4*r+i]
						isum += int32(q&0xf)*int32(int8(act[2+4*k+i])) + int32(q>>4)*int32(int8(act[18+4*k+i]))
					}
				}
				sum[r] = fmaf(float32(isum-s8), halfAt(blk, 2*r)*da, sum[r])
			}
		}
		copy(out[8*g:8*g+8], sum[:])
	}
}

// gemvQ4_KInterleavedGeneric sets out[8g+r] for the groups of 8 packed Q4_K rows
// in w against the Q8_K row a: the pure-Go twin of gemvQ4_KP8AVX2, rounding
// as vecDotQ4_K (8 lanes of scaled sums of 4 products, 4 lanes of min
// terms, then hsum8 + hsum4).
func gemvQ4_KInterleavedGeneric(nb int, w, a []byte, out []float32) {
	for g := range len(out) / 8 {
		for r := range 8 {
			var acc [8]float32
			var accM [4]float32
			for b := range nb {
				blk := w[(g*nb+b)*bytesQ4_Kx8:][:bytesQ4_Kx8]
				y := a[b*bytesQ8_K:][:bytesQ8_K]
				dy := q8K(y)
				dmin := -dy * halfAt(blk, 16+2*r)
				for i := range accM {
					m0, m1 := int32(blk[96+16*i+2*r]), int32(blk[96+16*i+2*r+1])
					v := m0*(bsum(y, 4*i)+bsum(y, 4*i+1)) + m1*(bsum(y, 4*i+2)+bsum(y, 4*i+3))
					accM[i] = fmaf(dmin, float32(v), accM[i])
				}
				var sums [8]int32
				for k := range 4 {
					for m := range 8 {
						q := blk[160+256*k+32*m+4*r:][:4]
						var lo, hi int32
						for i, v := range q {
							lo += int32(v&0xf) * int32(int8(y[4+64*k+4*m+i]))
							hi += int32(v>>4) * int32(int8(y[4+64*k+32+4*m+i]))
						}
						sums[m] += int32(blk[32+8*(2*k)+r])*lo + int32(blk[32+8*(2*k+1)+r])*hi
					}
				}
				accumulate8(&acc, dy*halfAt(blk, 2*r), &sums)
			}
			out[8*g+r] = hsum8(&acc) + hsum4(&accM)
		}
	}
}

// gemvQ5_KInterleavedGeneric sets out[8g+r] for the groups of 8 packed Q5_K
// rows in w against the Q8_K row a: the pure-Go twin of gemvQ5_KP8AVX2,
// rounding as vecDotQ5_K (8 lanes of scaled sums of 4 products, then
// hsum8, plus one min term per super-block).
func gemvQ5_KInterleavedGeneric(nb int, w, a []byte, out []float32) {
	for g := range len(out) / 8 {
		for r := range 8 {
			var acc [8]float32
			var summs float32
			for b := range nb {
				blk := w[(g*nb+b)*bytesQ5_Kx8:][:bytesQ5_Kx8]
				y := a[b*bytesQ8_K:][:bytesQ8_K]
				dy := q8K(y)
				var v [4]int32
				for i := range v {
					m0, m1 := int32(blk[96+16*i+2*r]), int32(blk[96+16*i+2*r+1])
					v[i] = m0*(bsum(y, 4*i)+bsum(y, 4*i+1)) + m1*(bsum(y, 4*i+2)+bsum(y, 4*i+3))
				}
				summs = fmaf(float32((v[0]+v[1])+(v[2]+v[3])), -dy*halfAt(blk, 16+2*r), summs)
				var sums [8]int32
				for k := range 4 {
					for m := range 8 {
						q := blk[160+256*k+32*m+4*r:][:4]
						qh := blk[bytesQ4_Kx8+32*m+4*r:][:4]
						var lo, hi int32
						for i, c := range q {
							lo += int32(c&0xf|(qh[i]>>(2*k)&1)<<4) * int32(int8(y[4+64*k+4*m+i]))
							hi += int32(c>>4|(qh[i]>>(2*k+1)&1)<<4) * int32(int8(y[4+64*k+32+4*m+i]))
						}
						sums[m] += int32(blk[32+8*(2*k)+r])*lo + int32(blk[32+8*(2*k+1)+r])*hi
					}
				}
				accumulate8(&acc, dy*halfAt(blk, 2*r), &sums)
			}
			out[8*g+r] = hsum8(&acc) + summs
		}
	}
}
