package kernels

import "math"

// The k-quant formats: super-blocks of 256 weights split into sub-blocks of
// 16 or 32, each sub-block with its own small integer scale (and min), the
// sub-block scales themselves scaled by one or two half-precision numbers.
// Byte layouts (offsets within a super-block):
//
//	Q2_K (84 B):  scales[16] @0 (low nibble scale, high nibble min of each 16),
//	              qs[64] @16 (2 bits), d f16 @80, dmin f16 @82;            w = d·sc·q - dmin·m
//	Q3_K (110 B): hmask[32] @0 (3rd bit), qs[64] @32 (low 2 bits),
//	              scales[12] @96 (16 six-bit scales, biased by 32), d f16 @108;  w = d·(sc-32)·(q-4)
//	Q4_K (144 B): d f16 @0, dmin f16 @2, scales[12] @4 (8 six-bit scales and
//	              8 six-bit mins), qs[128] @16 (4 bits);                     w = d·sc·q - dmin·m
//	Q5_K (176 B): as Q4_K, plus qh[32] @16 (5th bit), qs[128] @48
//	Q6_K (210 B): ql[128] @0 (low 4 bits), qh[64] @128 (high 2 bits),
//	              scales[16] int8 @192, d f16 @208;                          w = d·sc·(q-32)
//	Q8_K (292 B): d f32 @0, qs[256] int8 @4, bsums[16] int16 @260 (sums of each 16 quants)
//
// The 2- and 3-bit formats interleave: byte l of a 32-byte group of qs holds
// the quants of weights l, l+32, l+64, l+96 of a 128-weight half, two bits
// each from the least significant. Q4_K and Q5_K put weights l and l+32 of a
// 64-weight quarter in the low and high nibble of byte l; Q6_K likewise with
// l, l+64 (and l+32, l+96 in the next 32 bytes).

const (
	bytesQ2_K = 84
	bytesQ3_K = 110
	bytesQ4_K = 144
	bytesQ5_K = 176
	bytesQ6_K = 210
	bytesQ8_K = 292
)

// scaleMinK4 unpacks the j-th six-bit scale and min of a Q4_K/Q5_K block from
// its 12 scale bytes: entries 0-3 sit in the low 6 bits of bytes 0-3 (scales)
// and 4-7 (mins); entries 4-7 keep their low 4 bits in the nibbles of bytes
// 8-11 and their top 2 bits in the high bits of bytes 0-7.
func scaleMinK4(j int, s []byte) (sc, m uint8) {
	if j < 4 {
		return s[j] & 63, s[j+4] & 63
	}
	return s[j+4]&0xf | (s[j-4]>>6)<<4, s[j+4]>>4 | (s[j]>>6)<<4
}

// scaleQ3K unpacks the j-th of the 16 six-bit Q3_K scales, bias removed.
func scaleQ3K(j int, s []byte) int32 {
	var lo uint8
	if j < 8 {
		lo = s[j] & 0xf
	} else {
		lo = s[j-8] >> 4
	}
	hi := (s[8+j%4] >> (2 * (j / 4))) & 3
	return int32(lo|hi<<4) - 32
}

// The 2-, 3- and 6-bit formats are walked in runs of 32 weights: run j of
// half h holds weights 128h+32j .. 128h+32j+31, whose 16-weight groups (the
// scale granularity) are 8h+2j and 8h+2j+1. A run decoder writes the signed
// quants of one run.

// bsum is the int16 sum of activation group g of a Q8_K block.
func bsum(y []byte, g int) int32 { return int32(int16(le.Uint16(y[260+2*g:]))) }

// ---- Q2_K

func runQ2K(x []byte, h, j int, q *[32]int8) {
	qs := x[16+32*h : 16+32*h+32]
	for l, b := range qs {
		q[l] = int8(b >> (2 * j) & 3)
	}
}

func dequantizeRowQ2_K(src []byte, dst []float32) {
	checkRow(Q2_K, len(dst), len(src))
	var q [32]int8
	for b := 0; b < len(dst)/QKK; b++ {
		x, y := src[b*bytesQ2_K:(b+1)*bytesQ2_K], dst[b*QKK:(b+1)*QKK]
		d, dmin := halfAt(x, 80), halfAt(x, 82)
		for r := range 8 {
			runQ2K(x, r/4, r%4, &q)
			for l, v := range q {
				sc := x[2*r+l/16]
				y[32*r+l] = float32(d*float32(sc&0xf))*float32(v) - float32(dmin*float32(sc>>4))
			}
		}
	}
}

func vecDotQ2_KGeneric(n int, w, a []byte) float32 {
	checkDot(Q2_K, Q8_K, n, w, a)
	var (
		acc [8]float32
		q   [32]int8
	)
	for b := 0; b < n/QKK; b++ {
		x, y := w[b*bytesQ2_K:(b+1)*bytesQ2_K], a[b*bytesQ8_K:(b+1)*bytesQ8_K]
		// The min terms go into the same lanes first: lane m gets the mins
		// of groups 2m and 2m+1 times their activation sums.
		var mins, sums [8]int32
		for m := range mins {
			mins[m] = int32(x[2*m]>>4)*bsum(y, 2*m) + int32(x[2*m+1]>>4)*bsum(y, 2*m+1)
		}
		for r := range 8 {
			runQ2K(x, r/4, r%4, &q)
			lanes8(&sums, &q, y[4+32*r:], int32(x[2*r]&0xf), int32(x[2*r+1]&0xf))
		}
		dy := q8K(y)
		accumulate8(&acc, -dy*halfAt(x, 82), &mins)
		accumulate8(&acc, dy*halfAt(x, 80), &sums)
	}
	return hsum8(&acc)
}

// ---- Q3_K

func runQ3K(x []byte, h, j int, q *[32]int8) {
	qs, hm := x[32+32*h:32+32*h+32], x[:32]
	for l, b := range qs {
		v := int8(b >> (2 * j) & 3)
		if hm[l]>>(4*h+j)&1 == 0 {
			v -= 4
		}
		q[l] = v
	}
}

func dequantizeRowQ3_K(src []byte, dst []float32) {
	checkRow(Q3_K, len(dst), len(src))
	var q [32]int8
	for b := 0; b < len(dst)/QKK; b++ {
		x, y := src[b*bytesQ3_K:(b+1)*bytesQ3_K], dst[b*QKK:(b+1)*QKK]
		d := halfAt(x, 108)
		for r := range 8 {
			runQ3K(x, r/4, r%4, &q)
			d0, d1 := d*float32(scaleQ3K(2*r, x[96:])), d*float32(scaleQ3K(2*r+1, x[96:]))
			for l := range 16 {
				y[32*r+l] = d0 * float32(q[l])
				y[32*r+16+l] = d1 * float32(q[16+l])
			}
		}
	}
}

func vecDotQ3_KGeneric(n int, w, a []byte) float32 {
	checkDot(Q3_K, Q8_K, n, w, a)
	var (
		acc [8]float32
		q   [32]int8
	)
	for b := 0; b < n/QKK; b++ {
		x, y := w[b*bytesQ3_K:(b+1)*bytesQ3_K], a[b*bytesQ8_K:(b+1)*bytesQ8_K]
		var sums [8]int32
		for r := range 8 {
			runQ3K(x, r/4, r%4, &q)
			lanes8(&sums, &q, y[4+32*r:], scaleQ3K(2*r, x[96:]), scaleQ3K(2*r+1, x[96:]))
		}
		accumulate8(&acc, q8K(y)*halfAt(x, 108), &sums)
	}
	return hsum8(&acc)
}

// ---- Q4_K

func dequantizeRowQ4_K(src []byte, dst []float32) {
	checkRow(Q4_K, len(dst), len(src))
	for b := 0; b < len(dst)/QKK; b++ {
		x, y := src[b*bytesQ4_K:(b+1)*bytesQ4_K], dst[b*QKK:(b+1)*QKK]
		d, dmin := halfAt(x, 0), halfAt(x, 2)
		for j := range QKK / 32 {
			sc, m := scaleMinK4(j, x[4:])
			dl, ml := d*float32(sc), dmin*float32(m)
			q := x[16+j/2*32 : 16+j/2*32+32]
			shift := 4 * uint(j%2)
			for l, v := range q {
				y[32*j+l] = float32(dl*float32(v>>shift&0xf)) - ml
			}
		}
	}
}

// vecDotQ4_KGeneric keeps the min terms in a separate 4-lane accumulator,
// summed after the main one, as ggml's AVX2 kernel does.
func vecDotQ4_KGeneric(n int, w, a []byte) float32 {
	checkDot(Q4_K, Q8_K, n, w, a)
	var (
		acc  [8]float32
		accM [4]float32
		q    [32]int8
	)
	for b := 0; b < n/QKK; b++ {
		x, y := w[b*bytesQ4_K:(b+1)*bytesQ4_K], a[b*bytesQ8_K:(b+1)*bytesQ8_K]
		dy := q8K(y)
		mins := minLanesK4(x[4:16], y)
		dmin := -dy * halfAt(x, 2)
		for i, v := range mins {
			accM[i] = fmaf(dmin, float32(v), accM[i])
		}
		var sums [8]int32
		for k := range 4 { // 64 weights: sub-block 2k in the low nibbles, 2k+1 in the high
			qs := x[16+32*k : 16+32*k+32]
			s0, _ := scaleMinK4(2*k, x[4:16])
			s1, _ := scaleMinK4(2*k+1, x[4:16])
			for l, v := range qs {
				q[l] = int8(v & 0xf)
			}
			lanes8(&sums, &q, y[4+64*k:], int32(s0), int32(s0))
			for l, v := range qs {
				q[l] = int8(v >> 4)
			}
			lanes8(&sums, &q, y[4+64*k+32:], int32(s1), int32(s1))
		}
		accumulate8(&acc, dy*halfAt(x, 0), &sums)
	}
	return hsum8(&acc) + hsum4(&accM)
}

// ---- Q5_K

func dequantizeRowQ5_K(src []byte, dst []float32) {
	checkRow(Q5_K, len(dst), len(src))
	for b := 0; b < len(dst)/QKK; b++ {
		x, y := src[b*bytesQ5_K:(b+1)*bytesQ5_K], dst[b*QKK:(b+1)*QKK]
		d, dmin := halfAt(x, 0), halfAt(x, 2)
		qh := x[16:48]
		for j := range QKK / 32 {
			sc, m := scaleMinK4(j, x[4:])
			dl, ml := d*float32(sc), dmin*float32(m)
			q := x[48+j/2*32 : 48+j/2*32+32]
			shift := 4 * uint(j%2)
			for l, v := range q {
				v = v>>shift&0xf | (qh[l]>>uint(j)&1)<<4
				y[32*j+l] = float32(dl*float32(v)) - ml
			}
		}
	}
}

// vecDotQ5_KGeneric sums the min terms of all blocks in one float, as
// ggml's AVX2 kernel does (its compiler fuses that multiply-add).
func vecDotQ5_KGeneric(n int, w, a []byte) float32 {
	checkDot(Q5_K, Q8_K, n, w, a)
	var (
		acc   [8]float32
		summs float32
		q     [32]int8
	)
	for b := 0; b < n/QKK; b++ {
		x, y := w[b*bytesQ5_K:(b+1)*bytesQ5_K], a[b*bytesQ8_K:(b+1)*bytesQ8_K]
		dy := q8K(y)
		mins := minLanesK4(x[4:16], y)
		summs = fmaf(float32((mins[0]+mins[1])+(mins[2]+mins[3])), -dy*halfAt(x, 2), summs)
		qh := x[16:48]
		var sums [8]int32
		for k := range 4 {
			qs := x[48+32*k : 48+32*k+32]
			s0, _ := scaleMinK4(2*k, x[4:16])
			s1, _ := scaleMinK4(2*k+1, x[4:16])
			for l, v := range qs {
				q[l] = int8(v&0xf | (qh[l]>>(2*k)&1)<<4)
			}
			lanes8(&sums, &q, y[4+64*k:], int32(s0), int32(s0))
			for l, v := range qs {
				q[l] = int8(v>>4 | (qh[l]>>(2*k+1)&1)<<4)
			}
			lanes8(&sums, &q, y[4+64*k+32:], int32(s1), int32(s1))
		}
		accumulate8(&acc, dy*halfAt(x, 0), &sums)
	}
	return hsum8(&acc) + summs
}

// ---- Q6_K

// runQ6K decodes run j of half h: the low 4 bits of weight l are the low
// (j < 2) or high (j ≥ 2) nibble of ql[64h + 32(j%2) + l], the top 2 bits are
// bits 2j of qh[32h + l].
func runQ6K(x []byte, h, j int, q *[32]int8) {
	ql := x[64*h+32*(j%2) : 64*h+32*(j%2)+32]
	qh := x[128+32*h : 128+32*h+32]
	lshift, hshift := uint(4*(j/2)), uint(2*j)
	for l, b := range ql {
		q[l] = int8(b>>lshift&0xf|(qh[l]>>hshift&3)<<4) - 32
	}
}

func dequantizeRowQ6_K(src []byte, dst []float32) {
	checkRow(Q6_K, len(dst), len(src))
	var q [32]int8
	for b := 0; b < len(dst)/QKK; b++ {
		x, y := src[b*bytesQ6_K:(b+1)*bytesQ6_K], dst[b*QKK:(b+1)*QKK]
		d := halfAt(x, 208)
		for r := range 8 {
			runQ6K(x, r/4, r%4, &q)
			d0, d1 := d*float32(int8(x[192+2*r])), d*float32(int8(x[193+2*r]))
			for l := range 16 {
				y[32*r+l] = d0 * float32(q[l])
				y[32*r+16+l] = d1 * float32(q[16+l])
			}
		}
	}
}

func vecDotQ6_KGeneric(n int, w, a []byte) float32 {
	checkDot(Q6_K, Q8_K, n, w, a)
	var (
		acc [8]float32
		q   [32]int8
	)
	for b := 0; b < n/QKK; b++ {
		x, y := w[b*bytesQ6_K:(b+1)*bytesQ6_K], a[b*bytesQ8_K:(b+1)*bytesQ8_K]
		var sums [8]int32
		for r := range 8 {
			runQ6K(x, r/4, r%4, &q)
			lanes8(&sums, &q, y[4+32*r:], int32(int8(x[192+2*r])), int32(int8(x[193+2*r])))
		}
		accumulate8(&acc, q8K(y)*halfAt(x, 208), &sums)
	}
	return hsum8(&acc)
}

// ---- Q8_K (activations only)

// quantizeRowQ8_K is ggml's Q8_K quantizer, the one its CPU code uses for
// activations too: scale -127/max with the sign of the largest |x|, quants
// rounded half to even, sums of each 16 quants kept for the min terms.
func quantizeRowQ8_K(src []float32, dst []byte) {
	checkRow(Q8_K, len(src), len(dst))
	for b := 0; b < len(src)/QKK; b++ {
		x, y := src[b*QKK:(b+1)*QKK], dst[b*bytesQ8_K:(b+1)*bytesQ8_K]
		amax, max := absMaxSigned(x)
		if amax == 0 {
			clear(y)
			continue
		}
		iscale := -127 / max
		for j, v := range x {
			y[4+j] = uint8(int8(min(127, nearestInt(float32(iscale*v)))))
		}
		for g := 0; g < 16; g++ {
			var s int16
			for _, q := range y[4+16*g : 4+16*g+16] {
				s += int16(int8(q))
			}
			le.PutUint16(y[260+2*g:], uint16(s))
		}
		le.PutUint32(y, math.Float32bits(1/iscale))
	}
}

func dequantizeRowQ8_K(src []byte, dst []float32) {
	checkRow(Q8_K, len(dst), len(src))
	for b := 0; b < len(dst)/QKK; b++ {
		x, y := src[b*bytesQ8_K:(b+1)*bytesQ8_K], dst[b*QKK:(b+1)*QKK]
		d := math.Float32frombits(le.Uint32(x))
		for j, q := range x[4 : 4+QKK] {
			y[j] = d * float32(int8(q))
		}
	}
}

func vecDotQ8_KGeneric(n int, w, a []byte) float32 {
	checkDot(Q8_K, Q8_K, n, w, a)
	var sum float32
	for b := 0; b < n/QKK; b++ {
		x, y := w[b*bytesQ8_K:(b+1)*bytesQ8_K], a[b*bytesQ8_K:(b+1)*bytesQ8_K]
		var isum int32
		for j, q := range x[4 : 4+QKK] {
			isum += int32(int8(q)) * int32(int8(y[4+j]))
		}
		sum += float32(math.Float32frombits(le.Uint32(x))*math.Float32frombits(le.Uint32(y))) * float32(isum)
	}
	return sum
}
