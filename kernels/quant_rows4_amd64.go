//go:build amd64 && !purego

package kernels

import "fmt"

// The kernels take whole blocks and never see a slice, so the wrappers
// check sizes first (quant_rows4_amd64.s).

//go:noescape
func vecDotMXFP4Rows4AVX2(nb int, w *byte, wStride int, a *byte, out *float32)

//go:noescape
func vecDotMXFP4Rows4VNNI(nb int, w *byte, wStride int, a *byte, out *float32)

//go:noescape
func vecDotIQ4_NLRows4AVX2(nb int, w *byte, wStride int, a *byte, out *float32)

// vecDotRows4Of is VecDot of t for 4 rows by one token (the rows at w,
// w[wRow:], w[2·wRow:], w[3·wRow:], the outputs in out[0:4]), each output
// rounding as VecDot's; nil for the formats without such a kernel.
func vecDotRows4Of(t DType) func(n int, w []byte, wRow int, a []byte, out []float32) {
	if !quantAsm {
		return nil
	}
	switch t {
	case MXFP4:
		if vnni {
			return vecDotMXFP4Rows4V
		}
		return vecDotMXFP4Rows4
	case IQ4_NL:
		return vecDotIQ4_NLRows4
	}
	return nil
}

func vecDotMXFP4Rows4(n int, w []byte, wRow int, a []byte, out []float32) {
	checkDotRows4(MXFP4, n, w, wRow, a, out)
	vecDotMXFP4Rows4AVX2(n/QK, &w[0], wRow, &a[0], &out[0])
}

func vecDotMXFP4Rows4V(n int, w []byte, wRow int, a []byte, out []float32) {
	checkDotRows4(MXFP4, n, w, wRow, a, out)
	vecDotMXFP4Rows4VNNI(n/QK, &w[0], wRow, &a[0], &out[0])
}

func vecDotIQ4_NLRows4(n int, w []byte, wRow int, a []byte, out []float32) {
	checkDotRows4(IQ4_NL, n, w, wRow, a, out)
	vecDotIQ4_NLRows4AVX2(n/QK, &w[0], wRow, &a[0], &out[0])
}

// checkDotRows4 checks the operands of 4 rows of t by one token.
func checkDotRows4(t DType, n int, w []byte, wRow int, a []byte, out []float32) {
	rb := rowBytes(t, n)
	if n <= 0 || rb < 0 || wRow < rb || len(w) < 3*wRow+rb || len(out) < 4 {
		panic(fmt.Sprintf("kernels: 4 rows of %v by one token, %d elements: rows of %d bytes %d apart in %d, %d outputs",
			t, n, rb, wRow, len(w), len(out)))
	}
	checkDot(t, Q8_0, n, w, a)
}
