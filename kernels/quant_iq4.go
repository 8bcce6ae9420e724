package kernels

import "math"

// The 4-bit formats whose quants index a table of non-uniform values
// instead of counting up from a zero point: the files of mixtures of
// experts use them (gpt-oss's experts are MXFP4, many downloads are
// IQ4_XS). Byte layouts (offsets within a block):
//
//	IQ4_NL (18 B, 32 weights):  d f16 @0, qs[16] @2: low nibble of qs[j] is weight j, high nibble weight j+16;
//	                            w = d·iq4nl[q]
//	IQ4_XS (136 B, 256 weights): d f16 @0, scales_h u16 @2, scales_l[4] @4, qs[128] @8: 8 sub-blocks of 32
//	                            as IQ4_NL's qs, sub-block i's six-bit scale ls = (low nibble i of scales_l) |
//	                            (bits 2i, 2i+1 of scales_h) << 4; w = d·(ls−32)·iq4nl[q]
//	MXFP4  (17 B, 32 weights):  e u8 (E8M0) @0, qs[16] @1 as IQ4_NL's; w = 2^(e−128)·fp4[q]
//
// fp4 holds the E2M1 values doubled (so they are integers), and 2^(e−128)
// is half the block's power of two, so that the products are the MX
// format's. The quantizers follow ggml's step for step (without an
// importance matrix), so that they write the bytes llama-quantize writes.

const (
	bytesIQ4_NL = 2 + QK/2
	bytesIQ4_XS = 2 + 2 + QKK/64 + QKK/2
	bytesMXFP4  = 1 + QK/2
)

// iq4nlValues are the 16 values of an IQ4_NL or IQ4_XS quant, ascending.
var iq4nlValues = [16]int8{-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113}

// fp4Values are the E2M1 values of an MXFP4 quant, doubled: 0, 0.5, 1, 1.5,
// 2, 3, 4, 6 and their negatives.
var fp4Values = [16]int8{0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12}

// e8m0Half is half the E8M0 power of two e, 2^(e−128), as ggml's
// GGML_E8M0_TO_FP32_HALF builds its bits (exponents 0 and 1 give
// subnormals).
func e8m0Half(e uint8) float32 {
	if e < 2 {
		return math.Float32frombits(0x00200000 << e)
	}
	return math.Float32frombits(uint32(e-1) << 23)
}

// ---- IQ4_NL

func dequantizeRowIQ4_NL(src []byte, dst []float32) {
	checkRow(IQ4_NL, len(dst), len(src))
	for b := 0; b < len(dst)/QK; b++ {
		x, y := src[b*bytesIQ4_NL:(b+1)*bytesIQ4_NL], dst[b*QK:(b+1)*QK]
		d := halfAt(x, 0)
		for j, q := range x[2:bytesIQ4_NL] {
			y[j] = d * float32(iq4nlValues[q&0xf])
			y[j+QK/2] = d * float32(iq4nlValues[q>>4])
		}
	}
}

// quantizeRowIQ4_NL is ggml's quantize_iq4_nl without an importance
// matrix: each block of 32 on its own, scale searched over 15 tries.
func quantizeRowIQ4_NL(src []float32, dst []byte) {
	checkRow(IQ4_NL, len(src), len(dst))
	var sc iq4Scratch
	for b := 0; b < len(src)/QK; b++ {
		y := dst[b*bytesIQ4_NL : (b+1)*bytesIQ4_NL]
		d := sc.quantize(src[b*QK:(b+1)*QK], y[2:], nil, nil)
		le.PutUint16(y, d)
	}
}

// vecDotIQ4_NLGeneric is the product of ggml's CPU backend for IQ4_NL
// matrices, which it repacks 8 rows at a time on x86 and ARM (as Q4_0):
// each block's exact integer dot becomes a float added into one float per
// output by a fused multiply-add with dw·da, block after block.
func vecDotIQ4_NLGeneric(n int, w, a []byte) float32 {
	checkDot(IQ4_NL, Q8_0, n, w, a)
	var sum float32
	for b := 0; b < n/QK; b++ {
		x, y := w[b*bytesIQ4_NL:(b+1)*bytesIQ4_NL], a[b*bytesQ8_0:(b+1)*bytesQ8_0]
		sum = fmaf(float32(dotNibbles(&iq4nlValues, x[2:bytesIQ4_NL], y[2:bytesQ8_0])), halfAt(x, 0)*halfAt(y, 0), sum)
	}
	return sum
}

// dotNibbles is Σ values[q]·a over a block of 32 nibbles qs (low nibbles
// weights 0-15, high ones 16-31) and 32 int8 activations a: exact.
func dotNibbles(values *[16]int8, qs, a []byte) int32 {
	qs, a = qs[:QK/2], a[:QK]
	var s int32
	for j, q := range qs {
		s += int32(values[q&0xf])*int32(int8(a[j])) + int32(values[q>>4])*int32(int8(a[j+QK/2]))
	}
	return s
}

// ---- IQ4_XS

func dequantizeRowIQ4_XS(src []byte, dst []float32) {
	checkRow(IQ4_XS, len(dst), len(src))
	for b := 0; b < len(dst)/QKK; b++ {
		x, y := src[b*bytesIQ4_XS:(b+1)*bytesIQ4_XS], dst[b*QKK:(b+1)*QKK]
		d := halfAt(x, 0)
		for i := range QKK / 32 {
			dl := d * float32(iq4xsScale(x, i)-32)
			for j, q := range x[8+16*i : 8+16*(i+1)] {
				y[32*i+j] = dl * float32(iq4nlValues[q&0xf])
				y[32*i+j+16] = dl * float32(iq4nlValues[q>>4])
			}
		}
	}
}

// iq4xsScale is the six-bit scale of sub-block i of the IQ4_XS block x.
func iq4xsScale(x []byte, i int) int32 {
	lo := int32(x[4+i/2]>>(4*(i%2))) & 0xf
	hi := int32(le.Uint16(x[2:])>>(2*i)) & 3
	return lo | hi<<4
}

// quantizeRowIQ4_XS is ggml's quantize_iq4_xs without an importance
// matrix: the eight sub-blocks' scales found as IQ4_NL's, then quantized
// to six bits against the super-block's scale.
func quantizeRowIQ4_XS(src []float32, dst []byte) {
	checkRow(IQ4_XS, len(src), len(dst))
	var sc iq4Scratch
	var scalesL [QKK / 64]byte
	for b := 0; b < len(src)/QKK; b++ {
		y := dst[b*bytesIQ4_XS : (b+1)*bytesIQ4_XS]
		var scalesH uint16
		d := sc.quantize(src[b*QKK:(b+1)*QKK], y[8:], &scalesH, scalesL[:])
		le.PutUint16(y, d)
		le.PutUint16(y[2:], scalesH)
		copy(y[4:8], scalesL[:])
	}
}

// vecDotIQ4_XSGeneric follows ggml's AVX2 vec_dot_iq4_xs_q8_K (ggml does
// not repack IQ4_XS): each sub-block's products, times its scale, summed
// into the 8 int32 lanes; per super-block the lanes are added into 8 float
// lanes by a fused multiply-add with dw·da, summed by hsum8 at the end.
func vecDotIQ4_XSGeneric(n int, w, a []byte) float32 {
	checkDot(IQ4_XS, Q8_K, n, w, a)
	var acc [8]float32
	for b := 0; b < n/QKK; b++ {
		x, y := w[b*bytesIQ4_XS:(b+1)*bytesIQ4_XS], a[b*bytesQ8_K:(b+1)*bytesQ8_K]
		var sum [8]int32
		var q [32]int8
		for i := range QKK / 32 {
			for j, v := range x[8+16*i : 8+16*(i+1)] {
				q[j], q[j+16] = iq4nlValues[v&0xf], iq4nlValues[v>>4]
			}
			ls := iq4xsScale(x, i) - 32
			lanes8(&sum, &q, y[4+32*i:], ls, ls)
		}
		accumulate8(&acc, halfAt(x, 0)*q8K(y), &sum)
	}
	return hsum8(&acc)
}

// ---- MXFP4

func dequantizeRowMXFP4(src []byte, dst []float32) {
	checkRow(MXFP4, len(dst), len(src))
	for b := 0; b < len(dst)/QK; b++ {
		x, y := src[b*bytesMXFP4:(b+1)*bytesMXFP4], dst[b*QK:(b+1)*QK]
		d := e8m0Half(x[0])
		for j, q := range x[1:bytesMXFP4] {
			y[j] = float32(fp4Values[q&0xf]) * d
			y[j+QK/2] = float32(fp4Values[q>>4]) * d
		}
	}
}

// quantizeRowMXFP4 is ggml's quantize_row_mxfp4_ref: the block's exponent
// from its largest magnitude (floor(log2 amax) − 2, so that amax lands in
// the top of the E2M1 range), each weight the nearest value (the first of
// equals).
func quantizeRowMXFP4(src []float32, dst []byte) {
	checkRow(MXFP4, len(src), len(dst))
	for b := 0; b < len(src)/QK; b++ {
		x, y := src[b*QK:(b+1)*QK], dst[b*bytesMXFP4:(b+1)*bytesMXFP4]
		var amax float32
		for _, v := range x {
			amax = max(amax, float32(math.Abs(float64(v))))
		}
		var e uint8
		if amax > 0 {
			e = uint8(int32(float32(math.Floor(float64(log2f(amax))))-2+127) & 0xff)
		}
		d := e8m0Half(e)
		y[0] = e
		for j := range QK / 2 {
			y[1+j] = nearestFP4(x[j], d) | nearestFP4(x[j+QK/2], d)<<4
		}
	}
}

// log2f is log2 rounded to float32: glibc's log2f is correctly rounded, and
// so is float64's log2 rounded to float32 for every float32 input.
func log2f(x float32) float32 { return float32(math.Log2(float64(x))) }

// nearestFP4 is the index of the fp4 value v·d nearest x, the first of
// equals, as ggml's best_index_mxfp4.
func nearestFP4(x, d float32) uint8 {
	best := 0
	bestErr := float32(math.Abs(float64(float32(float32(fp4Values[0])*d) - x)))
	for i := 1; i < 16; i++ {
		if err := float32(math.Abs(float64(float32(float32(fp4Values[i])*d) - x))); err < bestErr {
			best, bestErr = i, err
		}
	}
	return uint8(best)
}

// vecDotMXFP4Generic is the product of ggml's CPU backend for MXFP4
// matrices, repacked 8 rows at a time as IQ4_NL's: per block, a fused
// multiply-add of the exact integer dot with dw·da.
func vecDotMXFP4Generic(n int, w, a []byte) float32 {
	checkDot(MXFP4, Q8_0, n, w, a)
	var sum float32
	for b := 0; b < n/QK; b++ {
		x, y := w[b*bytesMXFP4:(b+1)*bytesMXFP4], a[b*bytesQ8_0:(b+1)*bytesQ8_0]
		sum = fmaf(float32(dotNibbles(&fp4Values, x[1:bytesMXFP4], y[2:bytesQ8_0])), e8m0Half(x[0])*halfAt(y, 0), sum)
	}
	return sum
}

// ---- the IQ4 quantizer

// iq4Scratch is the working memory of ggml's quantize_row_iq4_nl_impl for
// one super-block: the quant index of every weight, and each block's scale.
type iq4Scratch struct {
	l      [QKK]uint8
	scales [QKK / 32]float32
}

// quantize quantizes one super-block x of 32 (IQ4_NL) or 256 (IQ4_XS)
// weights without an importance matrix, writing its nibbles to qs and, for
// 256, the six-bit scales to scalesH and scalesL; it returns the block's
// scale as a half. Every float operation rounds as ggml's C does (a
// product of three is two roundings, left to right), so that the bytes are
// llama-quantize's.
func (s *iq4Scratch) quantize(x []float32, qs []byte, scalesH *uint16, scalesL []byte) uint16 {
	const ntry = 7
	values := &iq4nlValues
	n := len(x)
	for i := range qs[:n/2] {
		qs[i] = 0
	}
	var dh uint16
	var maxScale, amaxScale float32
	for ib := range n / 32 {
		xb := x[32*ib : 32*(ib+1)]
		lb := s.l[32*ib : 32*(ib+1)]
		var amax, mx float32
		for _, v := range xb {
			if ax := float32(math.Abs(float64(v))); ax > amax {
				amax, mx = ax, v
			}
		}
		if amax < 1e-15 { // GROUP_MAX_EPS
			s.scales[ib] = 0
			continue
		}
		d := -mx / float32(values[0])
		id := 1 / d
		var sumqx, sumq2 float32
		for j, v := range xb {
			l := nearestIQ4(values, float32(id*v))
			lb[j] = l
			q := float32(values[l])
			w := float32(v * v)
			sumqx += float32(float32(w*q) * v)
			sumq2 += float32(float32(w*q) * q)
		}
		d = 0
		if sumq2 > 0 {
			d = sumqx / sumq2
		}
		best := float32(d * sumqx)
		for itry := -ntry; itry <= ntry; itry++ {
			id := float32(itry+int(values[0])) / mx
			sumqx, sumq2 = 0, 0
			for _, v := range xb {
				q := float32(values[nearestIQ4(values, float32(id*v))])
				w := float32(v * v)
				sumqx += float32(float32(w*q) * v)
				sumq2 += float32(float32(w*q) * q)
			}
			if sumq2 > 0 && float32(sumqx*sumqx) > float32(best*sumq2) {
				d = sumqx / sumq2
				best = float32(d * sumqx)
			}
		}
		s.scales[ib] = d
		if ad := float32(math.Abs(float64(d))); ad > amaxScale {
			amaxScale, maxScale = ad, d
		}
	}
	if nb := n / 32; nb > 1 {
		*scalesH = 0
		d := -maxScale / 32
		dh = FP32ToFP16(d)
		var id float32
		if d != 0 {
			id = 1 / d
		}
		for ib := range nb {
			l := max(-32, min(31, nearestInt(float32(id*s.scales[ib]))))
			dl := float32(d * float32(l))
			var idl float32
			if dl != 0 {
				idl = 1 / dl
			}
			for j, v := range x[32*ib : 32*(ib+1)] {
				s.l[32*ib+j] = nearestIQ4(values, float32(idl*v))
			}
			l += 32
			if ib%2 == 0 {
				scalesL[ib/2] = uint8(l & 0xf)
			} else {
				scalesL[ib/2] |= uint8(l&0xf) << 4
			}
			*scalesH |= uint16(l>>4) << (2 * (ib % 8))
		}
	} else {
		dh = FP32ToFP16(s.scales[0])
		var id float32
		if s.scales[0] != 0 {
			id = 1 / s.scales[0]
		}
		for j, v := range x {
			s.l[j] = nearestIQ4(values, float32(id*v))
		}
	}
	for i := range n / 32 {
		for j := range 16 {
			qs[16*i+j] = s.l[32*i+j] | s.l[32*i+16+j]<<4
		}
	}
	return dh
}

// nearestIQ4 is the index of the value of values nearest x, the upper one
// of a tie, by ggml's bisection (best_index_int8).
func nearestIQ4(values *[16]int8, x float32) uint8 {
	if x <= float32(values[0]) {
		return 0
	}
	if x >= float32(values[15]) {
		return 15
	}
	lo, hi := 0, 15
	for hi-lo > 1 {
		mid := (lo + hi) / 2
		if x < float32(values[mid]) {
			hi = mid
		} else {
			lo = mid
		}
	}
	if x-float32(values[hi-1]) < float32(values[hi])-x {
		return uint8(hi - 1)
	}
	return uint8(hi)
}
