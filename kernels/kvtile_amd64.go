//go:build amd64 && !purego

package kernels

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

// kvAccumRows is KVAccumRows on checked shapes with rows and heads
// positive: the assembly for whole 16-column chunks, the pure-Go twin for
// the rest.
func kvAccumRows(bits int, data []byte, rowBytes, rows, cols int, coef []float32, coefStride, heads int, out []float32, outStride int) {
	if !quantAsm || cols%16 != 0 {
		kvAccumRowsGeneric(bits, data, rowBytes, rows, cols, coef, coefStride, heads, out, outStride)
		return
	}
	chunks := cols / 16
	j := 0
	for ; j+4 <= heads; j += 4 {
		c, o := &coef[j*coefStride], &out[j*outStride]
		c1, c2, c3 := &coef[(j+1)*coefStride], &coef[(j+2)*coefStride], &coef[(j+3)*coefStride]
		o1, o2, o3 := &out[(j+1)*outStride], &out[(j+2)*outStride], &out[(j+3)*outStride]
		if bits == 4 {
			kvRowsQ4x4AVX2(&data[0], rowBytes, rows, chunks, c, c1, c2, c3, o, o1, o2, o3)
		} else {
			kvRowsQ8x4AVX2(&data[0], rowBytes, rows, chunks, c, c1, c2, c3, o, o1, o2, o3)
		}
	}
	for ; j < heads; j++ {
		if bits == 4 {
			kvRowsQ4x1AVX2(&data[0], rowBytes, rows, chunks, &coef[j*coefStride], &out[j*outStride])
		} else {
			kvRowsQ8x1AVX2(&data[0], rowBytes, rows, chunks, &coef[j*coefStride], &out[j*outStride])
		}
	}
}

// kvAccumRowsHalves is KVAccumRowsHalves on checked shapes with rows and
// heads positive.
func kvAccumRowsHalves(data []uint16, rowStride, rows, cols int, coef []float32, coefStride, heads int, out []float32, outStride int) {
	if !quantAsm || cols%16 != 0 {
		kvAccumRowsHalvesGeneric(data, rowStride, rows, cols, coef, coefStride, heads, out, outStride)
		return
	}
	chunks := cols / 16
	j := 0
	for ; j+4 <= heads; j += 4 {
		kvRowsF16x4AVX2(&data[0], 2*rowStride, rows, chunks,
			&coef[j*coefStride], &coef[(j+1)*coefStride], &coef[(j+2)*coefStride], &coef[(j+3)*coefStride],
			&out[j*outStride], &out[(j+1)*outStride], &out[(j+2)*outStride], &out[(j+3)*outStride])
	}
	for ; j < heads; j++ {
		kvRowsF16x1AVX2(&data[0], 2*rowStride, rows, chunks, &coef[j*coefStride], &out[j*outStride])
	}
}
