//go:build amd64 && !purego

package kernels

import "fmt"

// The kernels take whole super-blocks and never see a slice, so the
// dispatchers check sizes first (quant_recent_amd64.s).

//go:noescape
func vecDotQ4_KRepackAVX2(nb int, w, a *byte) float32

//go:noescape
func vecDotQ4_KGemmAVX2(nb int, w, a *byte) float32

//go:noescape
func vecDotIQ4_XSPanelAVX2(nb int, w, a *byte) float32

func vecDotQ4_KRepack(n int, w, a []byte) float32 {
	if !quantAsm || n == 0 {
		return vecDotQ4_KRepackGeneric(n, w, a)
	}
	checkDot(Q4_K, Q8_K, n, w, a)
	return vecDotQ4_KRepackAVX2(n/QKK, &w[0], &a[0])
}

func vecDotQ4_KGemm(n int, w, a []byte) float32 {
	if !quantAsm || n == 0 {
		return vecDotQ4_KGemmGeneric(n, w, a)
	}
	checkDot(Q4_K, Q8_K, n, w, a)
	return vecDotQ4_KGemmAVX2(n/QKK, &w[0], &a[0])
}

func vecDotIQ4_XSPanel(n int, w, a []byte) float32 {
	if !quantAsm || n == 0 {
		return vecDotIQ4_XSPanelGeneric(n, w, a)
	}
	checkDot(IQ4_XS, Q8_K, n, w, a)
	return vecDotIQ4_XSPanelAVX2(n/QKK, &w[0], &a[0])
}

//go:noescape
func vecDotQ4_KRepackAVX2x4(nb int, w, a *byte, aStride int, out *float32, outStride int)

//go:noescape
func vecDotQ4_KGemmAVX2x4(nb int, w, a *byte, aStride int, out *float32, outStride int)

// vecDotQ4_KRepack4 and vecDotQ4_KGemm4 are vecDotQ4_KRepack and
// vecDotQ4_KGemm of one row against the 4 tokens whose activation rows
// start aRow bytes apart in a, writing their outputs outRow floats apart in
// out; nil where the kernels do not run.
var vecDotQ4_KRepack4, vecDotQ4_KGemm4 func(n int, w, a []byte, aRow int, out []float32, outRow int)

// vecDotQ4_KRepack8 and vecDotQ4_KGemm8 are the same for 8 tokens, where
// AVX-512 VNNI runs (its registers Y16-Y31 hold the other 4 tokens).
var vecDotQ4_KRepack8, vecDotQ4_KGemm8 func(n int, w, a []byte, aRow int, out []float32, outRow int)

func init() {
	if !quantAsm {
		return
	}
	repack, gemm := vecDotQ4_KRepackAVX2x4, vecDotQ4_KGemmAVX2x4
	if vnni {
		// VPDPWSSD: 15% less time in the benchmark, the same integers.
		repack, gemm = vecDotQ4_KRepackVNNIx4, vecDotQ4_KGemmVNNIx4
	}
	vecDotQ4_KRepack4 = func(n int, w, a []byte, aRow int, out []float32, outRow int) {
		checkDotK(4, Q4_K, Q8_K, n, w, a, aRow, out, outRow)
		repack(n/QKK, &w[0], &a[0], aRow, &out[0], 4*outRow)
	}
	vecDotQ4_KGemm4 = func(n int, w, a []byte, aRow int, out []float32, outRow int) {
		checkDotK(4, Q4_K, Q8_K, n, w, a, aRow, out, outRow)
		gemm(n/QKK, &w[0], &a[0], aRow, &out[0], 4*outRow)
	}
	if !vnni {
		return
	}
	// 8 tokens: 35% less time than two 4-token calls in the benchmark.
	vecDotQ4_KRepack8 = func(n int, w, a []byte, aRow int, out []float32, outRow int) {
		checkDotK(8, Q4_K, Q8_K, n, w, a, aRow, out, outRow)
		vecDotQ4_KRepackVNNIx8(n/QKK, &w[0], &a[0], aRow, &out[0], 4*outRow)
	}
	vecDotQ4_KGemm8 = func(n int, w, a []byte, aRow int, out []float32, outRow int) {
		checkDotK(8, Q4_K, Q8_K, n, w, a, aRow, out, outRow)
		vecDotQ4_KGemmVNNIx8(n/QKK, &w[0], &a[0], aRow, &out[0], 4*outRow)
	}
}

// checkDotK checks the operands of a k-token product of weights of type wt
// by activations of type at: n a positive number of whole blocks, a row of
// w, k activation rows aRow apart in a and k outputs outRow apart in out.
func checkDotK(k int, wt, at DType, n int, w, a []byte, aRow int, out []float32, outRow int) {
	ab := rowBytes(at, n)
	if n <= 0 || ab < 0 || aRow < ab || len(a) < (k-1)*aRow+ab || outRow < 1 || len(out) <= (k-1)*outRow {
		panic(fmt.Sprintf("kernels: %d-token %v product of %d elements: activation rows of %d bytes %d apart in %d, outputs %d apart in %d",
			k, wt, n, ab, aRow, len(a), outRow, len(out)))
	}
	checkDot(wt, at, n, w, a)
}

//go:noescape
func vecDotQ4_KRepackVNNIx4(nb int, w, a *byte, aStride int, out *float32, outStride int)

//go:noescape
func vecDotQ4_KGemmVNNIx4(nb int, w, a *byte, aStride int, out *float32, outStride int)

//go:noescape
func vecDotQ4_KRepackVNNIx8(nb int, w, a *byte, aStride int, out *float32, outStride int)

//go:noescape
func vecDotQ4_KGemmVNNIx8(nb int, w, a *byte, aStride int, out *float32, outStride int)
