//go:build amd64 && !purego

package kernels

import "unsafe"

// The row accumulations of KV tiles (kvtile_amd64.s): four heads, or one, a
// call, sixteen columns a pass.

//go:noescape
func kvRowsQ4x4AVX2(data *byte, rowBytes, rows, chunks int, c0, c1, c2, c3, o0, o1, o2, o3 *float32)

//go:noescape
func kvRowsQ8x4AVX2(data *byte, rowBytes, rows, chunks int, c0, c1, c2, c3, o0, o1, o2, o3 *float32)

//go:noescape
func kvRowsF16x4AVX2(data *uint16, rowBytes, rows, chunks int, c0, c1, c2, c3, o0, o1, o2, o3 *float32)

//go:noescape
func kvRowsQ4x1AVX2(data *byte, rowBytes, rows, chunks int, c0, o0 *float32)

//go:noescape
func kvRowsQ8x1AVX2(data *byte, rowBytes, rows, chunks int, c0, o0 *float32)

//go:noescape
func kvRowsF16x1AVX2(data *uint16, rowBytes, rows, chunks int, c0, o0 *float32)

//go:noescape
func kvTailQ4x4AVX2(data *byte, rowBytes, rows int, c0, c1, c2, c3, o0, o1, o2, o3 *float32)

//go:noescape
func kvTailQ8x4AVX2(data *byte, rowBytes, rows int, c0, c1, c2, c3, o0, o1, o2, o3 *float32)

//go:noescape
func kvTailF16x4AVX2(data *uint16, rowBytes, rows int, c0, c1, c2, c3, o0, o1, o2, o3 *float32)

//go:noescape
func kvTailQ4x1AVX2(data *byte, rowBytes, rows int, c0, o0 *float32)

//go:noescape
func kvTailQ8x1AVX2(data *byte, rowBytes, rows int, c0, o0 *float32)

//go:noescape
func kvTailF16x1AVX2(data *uint16, rowBytes, rows int, c0, o0 *float32)

// kvAccumRows is KVAccumRows on checked shapes with rows and heads
// positive: the assembly for rows of a multiple of 8 elements (16-column
// passes, then an 8-column tail), the pure-Go twin for the rest.
func kvAccumRows(bits int, data []byte, rowBytes, rows, cols int, coef []float32, coefStride, heads int, out []float32, outStride int) {
	if !quantAsm || cols%8 != 0 {
		kvAccumRowsGeneric(bits, data, rowBytes, rows, cols, coef, coefStride, heads, out, outStride)
		return
	}
	chunks, tail := cols/16, cols%16 != 0
	tailAt := chunks * 16 * bits / 8 // the tail's bytes in a row
	j := 0
	for ; j+4 <= heads; j += 4 {
		c, o := &coef[j*coefStride], &out[j*outStride]
		c1, c2, c3 := &coef[(j+1)*coefStride], &coef[(j+2)*coefStride], &coef[(j+3)*coefStride]
		o1, o2, o3 := &out[(j+1)*outStride], &out[(j+2)*outStride], &out[(j+3)*outStride]
		if chunks > 0 {
			if bits == 4 {
				kvRowsQ4x4AVX2(&data[0], rowBytes, rows, chunks, c, c1, c2, c3, o, o1, o2, o3)
			} else {
				kvRowsQ8x4AVX2(&data[0], rowBytes, rows, chunks, c, c1, c2, c3, o, o1, o2, o3)
			}
		}
		if tail {
			t := chunks * 16
			o, o1, o2, o3 = &out[j*outStride+t], &out[(j+1)*outStride+t], &out[(j+2)*outStride+t], &out[(j+3)*outStride+t]
			if bits == 4 {
				kvTailQ4x4AVX2(&data[tailAt], rowBytes, rows, c, c1, c2, c3, o, o1, o2, o3)
			} else {
				kvTailQ8x4AVX2(&data[tailAt], rowBytes, rows, c, c1, c2, c3, o, o1, o2, o3)
			}
		}
	}
	for ; j < heads; j++ {
		c, o := &coef[j*coefStride], &out[j*outStride]
		if chunks > 0 {
			if bits == 4 {
				kvRowsQ4x1AVX2(&data[0], rowBytes, rows, chunks, c, o)
			} else {
				kvRowsQ8x1AVX2(&data[0], rowBytes, rows, chunks, c, o)
			}
		}
		if tail {
			o = &out[j*outStride+chunks*16]
			if bits == 4 {
				kvTailQ4x1AVX2(&data[tailAt], rowBytes, rows, c, o)
			} else {
				kvTailQ8x1AVX2(&data[tailAt], rowBytes, rows, c, o)
			}
		}
	}
}

// kvAccumRowsHalves is KVAccumRowsHalves on checked shapes with rows and
// heads positive.
func kvAccumRowsHalves(data []uint16, rowStride, rows, cols int, coef []float32, coefStride, heads int, out []float32, outStride int) {
	if !quantAsm || cols%8 != 0 {
		kvAccumRowsHalvesGeneric(data, rowStride, rows, cols, coef, coefStride, heads, out, outStride)
		return
	}
	chunks, tail := cols/16, cols%16 != 0
	t := chunks * 16
	j := 0
	for ; j+4 <= heads; j += 4 {
		c0, c1, c2, c3 := &coef[j*coefStride], &coef[(j+1)*coefStride], &coef[(j+2)*coefStride], &coef[(j+3)*coefStride]
		if chunks > 0 {
			kvRowsF16x4AVX2(&data[0], 2*rowStride, rows, chunks, c0, c1, c2, c3,
				&out[j*outStride], &out[(j+1)*outStride], &out[(j+2)*outStride], &out[(j+3)*outStride])
		}
		if tail {
			kvTailF16x4AVX2(&data[t], 2*rowStride, rows, c0, c1, c2, c3,
				&out[j*outStride+t], &out[(j+1)*outStride+t], &out[(j+2)*outStride+t], &out[(j+3)*outStride+t])
		}
	}
	for ; j < heads; j++ {
		if chunks > 0 {
			kvRowsF16x1AVX2(&data[0], 2*rowStride, rows, chunks, &coef[j*coefStride], &out[j*outStride])
		}
		if tail {
			kvTailF16x1AVX2(&data[t], 2*rowStride, rows, &coef[j*coefStride], &out[j*outStride+t])
		}
	}
}

//go:noescape
func kvDotQ4x2AVX2(data *byte, rowBytes, blocks, chunks int, qa, qb *byte, sa, sb *float32, oa, ob *float32)

// kvDotQ4 is kvDotQ4Generic: in assembly, two heads a call, for rows of a
// multiple of 32 elements; a last odd head is paired with itself, its
// second outputs written to spare (cols floats) and thrown away.
func kvDotQ4(data []byte, rowBytes, rows, cols int, q8, side []byte, heads int, out []float32, outStride int, spare []float32) {
	if !quantAsm || cols%32 != 0 {
		kvDotQ4Generic(data, rowBytes, rows, cols, q8, side, heads, out, outStride)
		return
	}
	nb := rows / QK
	qb, sb := nb*bytesQ8_0, nb*8
	// The checks the assembly relies on: every row and every head's
	// coefficients, scales and outputs in their slices.
	_ = data[(rows-1)*rowBytes+cols/2-1]
	_ = q8[heads*qb-1]
	_ = side[heads*sb-1]
	_ = out[(heads-1)*outStride+cols-1]
	_ = spare[cols-1]
	for j := 0; j < heads; j += 2 {
		k := j + 1
		ob := &spare[0]
		if k < heads {
			ob = &out[k*outStride]
		} else {
			k = j
		}
		kvDotQ4x2AVX2(&data[0], rowBytes, nb, cols/32, &q8[j*qb], &q8[k*qb],
			(*float32)(unsafe.Pointer(&side[j*sb])), (*float32)(unsafe.Pointer(&side[k*sb])), &out[j*outStride], ob)
	}
}

//go:noescape
func kvGroupsAVX2(codes *byte, groups int, dScale, dMin float32, s, m *float32)

// kvGroups is kvGroupsGeneric, in assembly for a multiple of 8 groups.
func kvGroups(codes []byte, dScale, dMin float32, s, m []float32) {
	if !quantAsm || len(s)%8 != 0 {
		kvGroupsGeneric(codes, dScale, dMin, s, m)
		return
	}
	_, _, _ = codes[2*len(s)-1], m[len(s)-1], s[len(s)-1]
	kvGroupsAVX2(&codes[0], len(s), dScale, dMin, &s[0], &m[0])
}

// The quantizer's kernels (kvquant_amd64.s), for rows of a multiple of 8
// elements.

//go:noescape
func kvRangeRowsAVX2(src *uint16, stride, rows, cols int, lo, hi *float32)

//go:noescape
func kvRangeColsAVX2(src *uint16, stride, rows, cols int, lo, hi *float32)

//go:noescape
func kvLevelsRowsAVX2(src *uint16, stride, rows, cols int, m, iv *float32, levels float32, u *byte, uStride int)

//go:noescape
func kvLevelsColsAVX2(src *uint16, stride, rows, cols int, m, iv *float32, levels float32, u *byte, uStride int)

func kvRanges(src []uint16, stride, rows, cols int, byRow bool, lo, hi []float32) {
	switch {
	case !quantAsm || cols%8 != 0:
		kvRangesGeneric(src, stride, rows, cols, byRow, lo, hi)
	case byRow:
		kvRangeRowsAVX2(&src[0], stride, rows, cols, &lo[0], &hi[0])
	default:
		kvRangeColsAVX2(&src[0], stride, rows, cols, &lo[0], &hi[0])
	}
}

func kvLevels(src []uint16, stride, rows, cols int, byRow bool, m, iv []float32, levels float32, u []byte) {
	switch {
	case !quantAsm || cols%8 != 0:
		kvLevelsGeneric(src, stride, rows, cols, byRow, m, iv, levels, u)
	case byRow:
		kvLevelsRowsAVX2(&src[0], stride, rows, cols, &m[0], &iv[0], levels, &u[0], cols)
	default:
		kvLevelsColsAVX2(&src[0], stride, rows, cols, &m[0], &iv[0], levels, &u[0], cols)
	}
}
