//go:build amd64 && !purego

package kernels

// The row-wise kernels (keydot_amd64.s) compute len(out) rows of halves,
// row t at w + t·stride, each against x: n elements, a positive multiple of
// 32 (vec_dot) or 8 (gemm); rows is positive.

//go:noescape
func keyDotRowsF16AVX2(w *uint16, stride, n int, x *uint16, out *float32, rows int)

//go:noescape
func keyGemmDotRowsF16AVX2(w *uint16, stride, n int, x *uint16, out *float32, rows int)

// dotHalvesRowsAsm is DotHalvesRows on checked shapes by the row-wise
// kernels, for the lengths they take (a multiple of 8 for gemm, of 32
// otherwise); it reports false, having done nothing, for the others.
func dotHalvesRowsAsm(rows []uint16, stride int, x []uint16, out []float32, gemm bool) bool {
	n := len(x)
	if !quantAsm || n == 0 || len(out) == 0 {
		return false
	}
	switch {
	case gemm && n%8 == 0:
		keyGemmDotRowsF16AVX2(&rows[0], stride, n, &x[0], &out[0], len(out))
	case !gemm && n%32 == 0:
		keyDotRowsF16AVX2(&rows[0], stride, n, &x[0], &out[0], len(out))
	default:
		return false
	}
	return true
}
