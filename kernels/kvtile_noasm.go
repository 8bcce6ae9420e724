//go:build !amd64 || purego

package kernels

func kvAccumRows(bits int, data []byte, rowBytes, rows, cols int, coef []float32, coefStride, heads int, out []float32, outStride int) {
	kvAccumRowsGeneric(bits, data, rowBytes, rows, cols, coef, coefStride, heads, out, outStride)
}

func kvAccumRowsHalves(data []uint16, rowStride, rows, cols int, coef []float32, coefStride, heads int, out []float32, outStride int) {
	kvAccumRowsHalvesGeneric(data, rowStride, rows, cols, coef, coefStride, heads, out, outStride)
}

func kvRanges(src []uint16, stride, rows, cols int, byRow bool, lo, hi []float32) {
	kvRangesGeneric(src, stride, rows, cols, byRow, lo, hi)
}

func kvLevels(src []uint16, stride, rows, cols int, byRow bool, m, iv []float32, levels float32, u []byte) {
	kvLevelsGeneric(src, stride, rows, cols, byRow, m, iv, levels, u)
}

func kvDotQ4(data []byte, rowBytes, rows, cols int, q8, side []byte, heads int, out []float32, outStride int, _ []float32) {
	kvDotQ4Generic(data, rowBytes, rows, cols, q8, side, heads, out, outStride)
}

func kvGroups(codes []byte, dScale, dMin float32, s, m []float32) {
	kvGroupsGeneric(codes, dScale, dMin, s, m)
}
