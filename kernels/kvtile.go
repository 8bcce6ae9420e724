package kernels

import (
	"fmt"
	"math"
	"unsafe"
)

// KV tiles are the quantized forms of a tiered KV cache's blocks: one tile
// holds the keys or the values of one kv head of one block in one layer, a
// matrix of rows × cols elements stored row after row.
//
// Every element is x = m_g + s_g·u with u an unsigned integer of bits bits
// (4 or 8) and g its group: a row (byRow) or a column. A tile's keys are
// (head_dim channels × block tokens) with a group per row, its values
// (block tokens × head_dim channels) with a group per column: both are
// quantized per channel over the block's tokens, as KIVI quantizes keys
// (kvcache's package doc says why values too). The groups' mins and scales
// are 8-bit codes against two F16 factors of the tile, as K-quants code
// their sub-block scales:
//
//	[0:2]   dScale (F16)   s_g = dScale·scaleCode[g], scaleCode uint8
//	[2:4]   dMin (F16)     m_g = dMin·minCode[g],     minCode int8
//	[4:4+g]                scaleCode, one byte a group
//	[4+g:4+2g]             minCode, one byte a group
//	then rows × rowBytes   u, row after row
//
// An 8-bit row is a byte an element. A 4-bit row is packed 16 elements to 8
// bytes: byte i of a chunk holds element i in its low nibble and element
// i+8 in its high one, so that eight consecutive elements widen with one
// load, one shift and one mask; a row whose length is not a multiple of 16
// ends with a shorter chunk of r elements in (r+1)/2 bytes, packed alike
// (element i and element i+(r+1)/2), its last high nibble 0 when r is odd.

// kvTileHeader is the bytes before a tile's codes: dScale and dMin.
const kvTileHeader = 4

// maxKVGroups bounds the groups of a tile: a head's channels (at most 256
// in the models we know) or a block's tokens.
const maxKVGroups = 1024

// KVTileBytes is the size of a tile of rows × cols elements of bits bits (4
// or 8) with a group per row (byRow) or per column.
func KVTileBytes(bits, rows, cols int, byRow bool) int {
	return kvTileData(rows, cols, byRow) + rows*kvRowBytes(bits, cols)
}

// kvRowBytes is the bytes of one row of cols elements.
func kvRowBytes(bits, cols int) int {
	if bits == 8 {
		return cols
	}
	return cols/16*8 + (cols%16+1)/2
}

// kvTileData is the offset of a tile's rows: after the header and the
// codes.
func kvTileData(rows, cols int, byRow bool) int {
	groups := cols
	if byRow {
		groups = rows
	}
	return kvTileHeader + 2*groups
}

func checkKVTile(op string, bits, rows, cols, tileLen int, byRow bool) {
	if bits != 4 && bits != 8 {
		panic(fmt.Sprintf("kernels: %s: %d-bit KV tile (4 or 8)", op, bits))
	}
	if rows <= 0 || cols <= 0 || rows > maxKVGroups || cols > maxKVGroups {
		panic(fmt.Sprintf("kernels: %s: KV tile of %d×%d", op, rows, cols))
	}
	if need := KVTileBytes(bits, rows, cols, byRow); tileLen < need {
		panic(fmt.Sprintf("kernels: %s: %d bytes for a %d-bit %d×%d KV tile of %d", op, tileLen, bits, rows, cols, need))
	}
}

// QuantizeKVTile quantizes the rows × cols halves of src, row r at
// src[r·srcStride:], into the tile dst. Each group's min is coded at or
// below its smallest element and its scale at or above what the group's
// range needs, so that no element is clipped; elements round to the
// nearest level (halves away from zero). A NaN is left out of its group's
// range and stored as the level nearest 0.
func QuantizeKVTile(dst []byte, src []uint16, srcStride, bits, rows, cols int, byRow bool) {
	checkKVTile("QuantizeKVTile", bits, rows, cols, len(dst), byRow)
	if srcStride < cols || len(src) < (rows-1)*srcStride+cols {
		panic(fmt.Sprintf("kernels: QuantizeKVTile: %d halves at stride %d for %d×%d", len(src), srcStride, rows, cols))
	}
	groups := cols
	if byRow {
		groups = rows
	}
	levels := float32(int(1)<<bits - 1)
	// lo, hi and the inverse scale of every group on the stack: a block
	// fills in a decode step, which allocates nothing.
	var loA, hiA, invA [maxKVGroups]float32
	lo, hi, inv := loA[:groups], hiA[:groups], invA[:groups]
	kvRanges(src, srcStride, rows, cols, byRow, lo, hi)
	for g := range groups {
		if lo[g] > hi[g] { // NaNs only
			lo[g], hi[g] = 0, 0
		}
	}
	// Mins: a signed code against dMin = max|lo|/127, floored so that the
	// coded min never exceeds the group's smallest element.
	var amin float32
	for _, l := range lo {
		amin = max(amin, float32(math.Abs(float64(l))))
	}
	dMin16 := fp16Up(amin / 127)
	dMin := FP16ToFP32(dMin16)
	minCodes := dst[kvTileHeader+groups : kvTileHeader+2*groups]
	var smax float32
	for g := range groups {
		var m float32
		code := 0
		if dMin > 0 && !math.IsInf(float64(dMin), 0) {
			code = int(math.Floor(float64(lo[g] / dMin)))
			code = max(-128, min(127, code))
			m = float32(code) * dMin
		}
		minCodes[g] = byte(int8(code))
		lo[g] = m
		// The scale the group needs; hi keeps it until its code is known.
		hi[g] = (hi[g] - m) / levels
		smax = max(smax, hi[g])
	}
	// Scales: an unsigned code against dScale = max scale/255, rounded up
	// so that the coded scale covers the group's range.
	dScale16 := fp16Up(smax / 255)
	dScale := FP16ToFP32(dScale16)
	scaleCodes := dst[kvTileHeader : kvTileHeader+groups]
	for g := range groups {
		code := 0
		if dScale > 0 && !math.IsInf(float64(dScale), 0) {
			code = min(255, int(math.Ceil(float64(hi[g]/dScale))))
		}
		scaleCodes[g] = byte(code)
		inv[g] = 0
		if s := float32(code) * dScale; s > 0 {
			inv[g] = 1 / s
		}
	}
	dst[0], dst[1] = byte(dScale16), byte(dScale16>>8)
	dst[2], dst[3] = byte(dMin16), byte(dMin16>>8)
	data := dst[kvTileData(rows, cols, byRow):]
	rb := kvRowBytes(bits, cols)
	// The levels, some rows at a time, then packed.
	var uA [kvLevelBytes]byte
	step := max(1, len(uA)/cols)
	for r0 := 0; r0 < rows; r0 += step {
		n := min(step, rows-r0)
		m, iv := lo, inv
		if byRow {
			m, iv = lo[r0:r0+n], inv[r0:r0+n]
		}
		kvLevels(src[r0*srcStride:], srcStride, n, cols, byRow, m, iv, levels, uA[:n*cols])
		for r := range n {
			u := uA[r*cols : (r+1)*cols]
			row := data[(r0+r)*rb : (r0+r+1)*rb]
			if bits == 8 {
				copy(row, u)
			} else {
				packNibbles(row, u)
			}
		}
	}
}

// kvLevelBytes bounds the levels QuantizeKVTile holds at once.
const kvLevelBytes = 8192

// kvRangesGeneric is the pure-Go twin of the ranges of a tile's groups:
// the smallest and largest element of each row (byRow) or column, NaNs
// left out (+Inf and -Inf for a group of NaNs only).
func kvRangesGeneric(src []uint16, stride, rows, cols int, byRow bool, lo, hi []float32) {
	inf := float32(math.Inf(1))
	for g := range lo {
		lo[g], hi[g] = inf, -inf
	}
	var rowA [maxKVGroups]float32
	x := rowA[:cols]
	for r := range rows {
		FP16ToFP32Row(src[r*stride:r*stride+cols], x)
		if byRow {
			l, h := lo[r], hi[r]
			for _, v := range x {
				if v < l {
					l = v
				}
				if v > h {
					h = v
				}
			}
			lo[r], hi[r] = l, h
			continue
		}
		for c, v := range x {
			if v < lo[c] {
				lo[c] = v
			}
			if v > hi[c] {
				hi[c] = v
			}
		}
	}
}

// kvLevelsGeneric is the pure-Go twin of the levels of rows rows of a
// tile, into u (rows × cols): m and iv are the rows' (byRow) or the
// columns' min and inverse scale.
func kvLevelsGeneric(src []uint16, stride, rows, cols int, byRow bool, m, iv []float32, levels float32, u []byte) {
	var rowA [maxKVGroups]float32
	x := rowA[:cols]
	for r := range rows {
		FP16ToFP32Row(src[r*stride:r*stride+cols], x)
		ur := u[r*cols : (r+1)*cols]
		if byRow {
			for c, v := range x {
				ur[c] = quantLevel(v, m[r], iv[r], levels)
			}
			continue
		}
		for c, v := range x {
			ur[c] = quantLevel(v, m[c], iv[c], levels)
		}
	}
}

// quantLevel is the level of x in a group of min m and inverse scale iv:
// round((x-m)·iv) within [0, levels], a NaN as 0.
func quantLevel(x, m, iv, levels float32) byte {
	if x != x {
		x = 0
	}
	v := (x - m) * iv
	if !(v > 0) { // also a NaN from an infinite x
		return 0
	}
	if v >= levels {
		return byte(levels)
	}
	// Truncating the non-negative v+½ (a float32 sum) rounds to nearest.
	return byte(v + 0.5)
}

// packNibbles packs the 4-bit levels u into a row (kvNibble's layout).
func packNibbles(row, u []byte) {
	cols := len(u)
	full := cols / 16
	for k := range full {
		a, b := u[16*k:16*k+8], u[16*k+8:16*k+16]
		o := row[8*k : 8*k+8]
		for i := range o {
			o[i] = a[i] | b[i]<<4
		}
	}
	if r := cols - 16*full; r > 0 {
		half := (r + 1) / 2
		t := u[16*full:]
		o := row[8*full : 8*full+half]
		for i := range o {
			o[i] = t[i]
			if i+half < r {
				o[i] |= t[i+half] << 4
			}
		}
	}
}

// kvNibble is where element c of a 4-bit row of cols elements lies: its
// byte and the shift of its nibble.
func kvNibble(c, cols int) (at int, shift uint) {
	chunk, i := c/16, c%16
	half := 8
	if r := cols - chunk*16; r < 16 {
		half = (r + 1) / 2
	}
	if i >= half {
		return chunk*8 + i - half, 4
	}
	return chunk*8 + i, 0
}

// fp16Up is the smallest half at or above the non-negative x (the largest
// finite half beyond it).
func fp16Up(x float32) uint16 {
	h := FP32ToFP16(x)
	if FP16ToFP32(h) < x && h < 0x7bff {
		h++
	}
	return min(h, 0x7bff)
}

// KVTileGroups decodes the tile's group scales and mins into s and m, one a
// group (rows of them when byRow, else cols).
func KVTileGroups(tile []byte, bits, rows, cols int, byRow bool, s, m []float32) {
	checkKVTile("KVTileGroups", bits, rows, cols, len(tile), byRow)
	groups := cols
	if byRow {
		groups = rows
	}
	dScale := FP16ToFP32(uint16(tile[0]) | uint16(tile[1])<<8)
	dMin := FP16ToFP32(uint16(tile[2]) | uint16(tile[3])<<8)
	kvGroups(tile[kvTileHeader:kvTileHeader+2*groups], dScale, dMin, s[:groups], m[:groups])
}

// kvGroupsGeneric is the pure-Go twin of decoding a tile's codes (groups
// scale codes, then groups min codes) into its groups' scales and mins.
func kvGroupsGeneric(codes []byte, dScale, dMin float32, s, m []float32) {
	for g, c := range codes[:len(s)] {
		s[g] = dScale * float32(c)
	}
	for g, c := range codes[len(s):] {
		m[g] = dMin * float32(int8(c))
	}
}

// DequantizeKVTile writes the tile's elements, rounded to halves, into dst,
// row r at dst[r·dstStride:]: what a block whose exact form is gone holds
// when it is written again.
func DequantizeKVTile(dst []uint16, dstStride int, tile []byte, bits, rows, cols int, byRow bool) {
	checkKVTile("DequantizeKVTile", bits, rows, cols, len(tile), byRow)
	groups := cols
	if byRow {
		groups = rows
	}
	var sA, mA [maxKVGroups]float32
	s, m := sA[:groups], mA[:groups]
	KVTileGroups(tile, bits, rows, cols, byRow, s, m)
	data := tile[kvTileData(rows, cols, byRow):]
	rb := kvRowBytes(bits, cols)
	for r := range rows {
		for c := range cols {
			g := c
			if byRow {
				g = r
			}
			dst[r*dstStride+c] = FP32ToFP16(m[g] + s[g]*kvElem(data[r*rb:], bits, c, cols))
		}
	}
}

// KVTileAt is element (r, c) of the tile, dequantized: for tests and
// debugging, not the hot path.
func KVTileAt(tile []byte, bits, rows, cols int, byRow bool, r, c int) float32 {
	checkKVTile("KVTileAt", bits, rows, cols, len(tile), byRow)
	groups, g := cols, c
	if byRow {
		groups, g = rows, r
	}
	dScale := FP16ToFP32(uint16(tile[0]) | uint16(tile[1])<<8)
	dMin := FP16ToFP32(uint16(tile[2]) | uint16(tile[3])<<8)
	s := dScale * float32(tile[kvTileHeader+g])
	m := dMin * float32(int8(tile[kvTileHeader+groups+g]))
	row := tile[kvTileData(rows, cols, byRow)+r*kvRowBytes(bits, cols):]
	return m + s*kvElem(row, bits, c, cols)
}

// kvElem is element c of a row of cols elements as an integer-valued
// float.
func kvElem(row []byte, bits, c, cols int) float32 {
	if bits == 8 {
		return float32(row[c])
	}
	at, shift := kvNibble(c, cols)
	return float32(row[at] >> shift & 0xf)
}

// KVScratchFloats is the scratch KVKeyScores and KVValueAccum need for
// heads query heads over tiles of head_dim hd and bt tokens: the groups'
// scales and mins, the heads' coefficients and sums, and for 4-bit tiles
// a spare output row, and the coefficients quantized to Q8_0 with their
// scales.
func KVScratchFloats(heads, hd, bt int) int {
	n := max(hd, bt)
	nb := (n + QK - 1) / QK
	return 2*hd + heads*hd + heads + n + (heads*nb*(bytesQ8_0+8)+3)/4
}

// kvDotScratch carves out of a KVScratchFloats(heads, hd, bt) scratch,
// past the groups' scales and mins and the heads' coefficients and sums,
// the spare output row of kvDotQ4 and the Q8_0 rows of heads heads of nb
// blocks with their scales (8 bytes a block).
func kvDotScratch(scratch []float32, heads, hd, bt, nb int) (spare []float32, q8, side []byte) {
	at := 2*hd + heads*hd + heads
	spare = scratch[at : at+max(hd, bt)]
	f := scratch[at+len(spare):]
	b := unsafe.Slice((*byte)(unsafe.Pointer(&f[0])), 4*len(f))
	q8 = b[:heads*nb*bytesQ8_0]
	side = b[len(q8) : len(q8)+heads*nb*8]
	return spare, q8, side
}

// kvIntegerRows reports whether a reduction over rows of a bits-bit tile
// runs as integer dot products (kvDotQ4): 4-bit tiles whose reduced side
// is whole Q8_0 blocks.
func kvIntegerRows(bits, rows int) bool { return bits == 4 && rows%QK == 0 }

// KVKeyScores sets the scores of heads query heads against the keys of a
// tile (hd channels × bt tokens, grouped by row):
//
//	out[j·outStride + t] = Σ_c q[j·qStride + c]·K[c][t],  t < bt, j < heads
//
// as (Σ_c q_jc·m_c) + Σ_c (q_jc·s_c)·u[c][t]. The second sum runs on the
// tile's own elements: for a 4-bit tile whose hd is a multiple of 32, the
// coefficients q_jc·s_c are quantized to Q8_0 (as llama.cpp quantizes the
// query against a Q4_0 cache) and summed as integers, 32 channels a scale
// (kvDotQ4); else in float32 (KVAccumRows). scratch holds
// KVScratchFloats(heads, hd, bt).
func KVKeyScores(tile []byte, bits, hd, bt int, q []float32, qStride, heads int, out []float32, outStride int, scratch []float32) {
	checkKVTile("KVKeyScores", bits, hd, bt, len(tile), true)
	s, m := scratch[:hd], scratch[hd:2*hd]
	coef := scratch[2*hd : 2*hd+heads*hd]
	KVTileGroups(tile, bits, hd, bt, true, s, m)
	// The per-channel products with the vector kernels: a decode step
	// runs this for every block, kv head and layer, and scalar loops here
	// took half the time of a 4-bit block (BenchmarkKVBlockAttention).
	for j := range heads {
		qj := q[j*qStride : j*qStride+hd]
		cj := coef[j*hd : (j+1)*hd]
		Mul(cj, qj, s)
		bias := DotF32(qj, m)
		o := out[j*outStride : j*outStride+bt]
		for t := range o {
			o[t] = bias
		}
	}
	data := tile[kvTileData(hd, bt, true):]
	if kvIntegerRows(bits, hd) {
		// The heads' coefficients are one row of whole Q8_0 blocks.
		spare, q8, side := kvDotScratch(scratch, heads, hd, bt, hd/QK)
		quantRowQ8_0Act(coef, q8, side)
		kvDotQ4(data, kvRowBytes(bits, bt), hd, bt, q8, side, heads, out, outStride, spare)
		return
	}
	KVAccumRows(bits, data, kvRowBytes(bits, bt), hd, bt, coef, hd, heads, out, outStride)
}

// KVValueAccum adds the values of a tile (bt tokens × hd channels, grouped
// by column) weighted by heads rows of weights to heads outputs:
//
//	out[j·outStride + c] += Σ_r w[j·wStride + r]·V[r][c],  r < bt, c < hd
//
// as s_c·(Σ_r w_jr·u[r][c]) + m_c·(Σ_r w_jr). For a 4-bit tile of a
// multiple of 32 tokens the weights are quantized to Q8_0 (as llama.cpp
// quantizes them against a Q4_0 cache) and Σ_r w_jr·u[r][c] summed as
// integers (kvDotQ4); else in float32. scratch holds KVScratchFloats(heads,
// hd, bt).
func KVValueAccum(tile []byte, bits, bt, hd int, w []float32, wStride, heads int, out []float32, outStride int, scratch []float32) {
	checkKVTile("KVValueAccum", bits, bt, hd, len(tile), false)
	s, m := scratch[:hd], scratch[hd:2*hd]
	raw := scratch[2*hd : 2*hd+heads*hd]
	sums := scratch[2*hd+heads*hd:][:heads]
	KVTileGroups(tile, bits, bt, hd, false, s, m)
	clear(raw)
	data := tile[kvTileData(bt, hd, false):]
	if kvIntegerRows(bits, bt) {
		// The weights' sums are those of the quantized weights too, so
		// that both terms weigh the values alike: Σ_b d_b·Σq_b (the
		// quantizer's side table holds 8·Σq_b).
		nb := bt / QK
		spare, q8, side := kvDotScratch(scratch, heads, hd, bt, nb)
		for j := range heads {
			sj := side[j*nb*8 : (j+1)*nb*8]
			quantRowQ8_0Act(w[j*wStride:j*wStride+bt], q8[j*nb*bytesQ8_0:(j+1)*nb*bytesQ8_0], sj)
			var sum float32
			for b := range nb {
				sum = fmaf(math.Float32frombits(le.Uint32(sj[8*b:])), float32(int32(le.Uint32(sj[8*b+4:]))/8), sum)
			}
			sums[j] = sum
		}
		kvDotQ4(data, kvRowBytes(bits, hd), bt, hd, q8, side, heads, raw, hd, spare)
	} else {
		for j := range heads {
			var sum float32
			for _, x := range w[j*wStride : j*wStride+bt] {
				sum += x
			}
			sums[j] = sum
		}
		KVAccumRows(bits, data, kvRowBytes(bits, hd), bt, hd, w, wStride, heads, raw, hd)
	}
	for j := range heads {
		o := out[j*outStride : j*outStride+hd]
		rj := raw[j*hd : (j+1)*hd]
		Mul(rj, rj, s)
		Add(o, o, rj)
		Axpy(sums[j], m, o)
	}
}

// kvDotQ4Generic is the pure-Go twin of kvDotQ4: for each head j and each
// block b of 32 rows of a 4-bit tile's data, the integer sums
// Σ_r k_j[r]·u[r][c] of the head's Q8_0 coefficients (q8, nb blocks a
// head) and the rows' elements, each added to its output with one FMA by
// the block's scale (side, 8 bytes a block):
//
//	out[j·outStride + c] = fma(d_jb, Σ_{r in b} k_j[r]·u[r][c], out[…])
//
// The sums are exact, so any order gives the same outputs. spare, of cols
// floats, is the assembly's.
func kvDotQ4Generic(data []byte, rowBytes, rows, cols int, q8, side []byte, heads int, out []float32, outStride int) {
	nb := rows / QK
	for j := range heads {
		o := out[j*outStride : j*outStride+cols]
		for b := range nb {
			at := (j*nb + b) * bytesQ8_0
			k := q8[at+2 : at+bytesQ8_0]
			d := math.Float32frombits(le.Uint32(side[8*(j*nb+b):]))
			for c := range o {
				byteAt, shift := kvNibble(c, cols)
				var sum int32
				for r, kr := range k {
					sum += int32(int8(kr)) * int32(data[(b*QK+r)*rowBytes+byteAt]>>shift&0xf)
				}
				o[c] = fmaf(d, float32(sum), o[c])
			}
		}
	}
}

// KVAccumRows adds to heads outputs the rows of integer elements of a
// tile's data, rows rows of rowBytes bytes of cols elements of bits bits,
// each row weighted by a coefficient of the head:
//
//	out[j·outStride + c] += Σ_r coef[j·coefStride + r]·u[r][c]
//
// summing row after row with one rounding per step (a fused multiply-add),
// so that the assembly and the pure-Go twin agree bit for bit.
func KVAccumRows(bits int, data []byte, rowBytes, rows, cols int, coef []float32, coefStride, heads int, out []float32, outStride int) {
	checkAccumRows("KVAccumRows", len(data), rowBytes, kvRowBytes(bits, cols), rows, cols, len(coef), coefStride, heads, len(out), outStride)
	if bits != 4 && bits != 8 {
		panic(fmt.Sprintf("kernels: KVAccumRows: %d bits", bits))
	}
	if rows == 0 || heads == 0 {
		return
	}
	kvAccumRows(bits, data, rowBytes, rows, cols, coef, coefStride, heads, out, outStride)
}

// KVAccumRowsHalves is KVAccumRows over rows of halves, row r at
// data[r·rowStride:]: the exact (F16) form of a tiered block.
func KVAccumRowsHalves(data []uint16, rowStride, rows, cols int, coef []float32, coefStride, heads int, out []float32, outStride int) {
	checkAccumRows("KVAccumRowsHalves", len(data), rowStride, cols, rows, cols, len(coef), coefStride, heads, len(out), outStride)
	if rows == 0 || heads == 0 {
		return
	}
	kvAccumRowsHalves(data, rowStride, rows, cols, coef, coefStride, heads, out, outStride)
}

// checkAccumRows panics unless rows rows of rowLen units, stride apart,
// lie in data, and heads rows of coefficients and outputs in theirs. It is
// written so that no product overflows, whatever the arguments.
func checkAccumRows(op string, dataLen, stride, rowLen, rows, cols, coefLen, coefStride, heads, outLen, outStride int) {
	bad := rows < 0 || cols <= 0 || heads < 0 || stride < rowLen || coefStride < rows || outStride < cols ||
		rows > 1<<16 || cols > 1<<16 || heads > 1<<16 || stride > 1<<30 || coefStride > 1<<30 || outStride > 1<<30
	if !bad && rows > 0 && heads > 0 {
		bad = dataLen < (rows-1)*stride+rowLen || coefLen < (heads-1)*coefStride+rows || outLen < (heads-1)*outStride+cols
	}
	if bad {
		panic(fmt.Sprintf("kernels: %s: %d rows of %d (stride %d, %d units) for %d heads (coef %d at %d, out %d at %d, %d columns)",
			op, rows, rowLen, stride, dataLen, heads, coefLen, coefStride, outLen, outStride, cols))
	}
}

// kvAccumRowsGeneric is the pure-Go twin of KVAccumRows on checked shapes:
// each row widened once, then added to every head's outputs, so that each
// output sums its rows in order with one rounding a step, as the assembly
// does.
func kvAccumRowsGeneric(bits int, data []byte, rowBytes, rows, cols int, coef []float32, coefStride, heads int, out []float32, outStride int) {
	var buf [maxKVGroups]float32
	u := buf[:cols]
	for r := range rows {
		row := data[r*rowBytes:]
		for c := range u {
			u[c] = kvElem(row, bits, c, cols)
		}
		accumRow(u, r, coef, coefStride, heads, out, outStride)
	}
}

// kvAccumRowsHalvesGeneric is the pure-Go twin of KVAccumRowsHalves on
// checked shapes.
func kvAccumRowsHalvesGeneric(data []uint16, rowStride, rows, cols int, coef []float32, coefStride, heads int, out []float32, outStride int) {
	var buf [maxKVGroups]float32
	u := buf[:cols]
	for r := range rows {
		for c, h := range data[r*rowStride : r*rowStride+cols] {
			u[c] = FP16ToFP32(h)
		}
		accumRow(u, r, coef, coefStride, heads, out, outStride)
	}
}

// accumRow adds coef_j[r]·u to every head j's outputs, one fused
// multiply-add an element.
func accumRow(u []float32, r int, coef []float32, coefStride, heads int, out []float32, outStride int) {
	for j := range heads {
		x := coef[j*coefStride+r]
		o := out[j*outStride : j*outStride+len(u)]
		for c, v := range u {
			o[c] = fmaf(x, v, o[c])
		}
	}
}
