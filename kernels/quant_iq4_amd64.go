//go:build amd64 && !purego

package kernels

import "fmt"

// The kernels take whole blocks and never see a slice, so the dispatchers
// check sizes first (quant_iq4_amd64.s).

//go:noescape
func vecDotIQ4_NLAVX2(nb int, w, a *byte) float32

//go:noescape
func vecDotIQ4_XSAVX2(nb int, w, a *byte) float32

//go:noescape
func vecDotMXFP4AVX2(nb int, w, a *byte) float32

// e8m0Halves are e8m0Half of every exponent, for the MXFP4 kernel.
//
//lint:ignore U1000 vecDotMXFP4AVX2 and vecDotMXFP4AVX2x4 read it
var e8m0Halves = func() (t [256]float32) {
	for e := range t {
		t[e] = e8m0Half(uint8(e))
	}
	return t
}()

func vecDotIQ4_NL(n int, w, a []byte) float32 {
	if !quantAsm || n == 0 {
		return vecDotIQ4_NLGeneric(n, w, a)
	}
	checkDot(IQ4_NL, Q8_0, n, w, a)
	return vecDotIQ4_NLAVX2(n/QK, &w[0], &a[0])
}

func vecDotIQ4_XS(n int, w, a []byte) float32 {
	if !quantAsm || n == 0 {
		return vecDotIQ4_XSGeneric(n, w, a)
	}
	checkDot(IQ4_XS, Q8_K, n, w, a)
	return vecDotIQ4_XSAVX2(n/QKK, &w[0], &a[0])
}

func vecDotMXFP4(n int, w, a []byte) float32 {
	if !quantAsm || n == 0 {
		return vecDotMXFP4Generic(n, w, a)
	}
	checkDot(MXFP4, Q8_0, n, w, a)
	return vecDotMXFP4AVX2(n/QK, &w[0], &a[0])
}

//go:noescape
func vecDotIQ4_NLAVX2x4(nb int, w, a *byte, aStride int, out *float32, outStride int)

//go:noescape
func vecDotMXFP4AVX2x4(nb int, w, a *byte, aStride int, out *float32, outStride int)

//go:noescape
func vecDotMXFP4AVX2x4s(nb int, w, a *byte, aStride int, out *float32, outStride int, side *byte, sideStride int)

//go:noescape
func vecDotMXFP4AVX2x8s(nb int, w, a *byte, aStride int, out *float32, outStride int, side *byte, sideStride int)

// fp4Values12 are fp4Values + 12, for vecDotMXFP4AVX2x4s.
//
//lint:ignore U1000 vecDotMXFP4AVX2x4s reads it
var fp4Values12 = func() (t [16]uint8) {
	for i, v := range fp4Values {
		t[i] = uint8(v + 12)
	}
	return t
}()

// vecDotIQ4_NLx4 and vecDotMXFP4x4 are vecDotIQ4_NL and vecDotMXFP4 of one
// row against the 4 tokens whose activation rows start aRow bytes apart in
// a, writing their outputs outRow floats apart in out
// (quant_iq4x4_amd64.s); nil where the kernels do not run.
var vecDotIQ4_NLx4, vecDotMXFP4x4 func(n int, w, a []byte, aRow int, out []float32, outRow int)

// vecDotMXFP4x4s is vecDotMXFP4x4 with the tokens' per-block terms in side
// (mxfp4Side, of nTok tokens, from the first of the 4); nil where the
// kernel does not run.
var vecDotMXFP4x4s func(n int, w, a []byte, aRow int, out []float32, outRow int, side []byte, nTok int)

// vecDotMXFP4x8s is vecDotMXFP4x4s for 8 tokens.
var vecDotMXFP4x8s func(n int, w, a []byte, aRow int, out []float32, outRow int, side []byte, nTok int)

func init() {
	if !quantAsm {
		return
	}
	vecDotIQ4_NLx4 = func(n int, w, a []byte, aRow int, out []float32, outRow int) {
		checkDotK(4, IQ4_NL, Q8_0, n, w, a, aRow, out, outRow)
		vecDotIQ4_NLAVX2x4(n/QK, &w[0], &a[0], aRow, &out[0], 4*outRow)
	}
	vecDotMXFP4x4 = func(n int, w, a []byte, aRow int, out []float32, outRow int) {
		checkDotK(4, MXFP4, Q8_0, n, w, a, aRow, out, outRow)
		vecDotMXFP4AVX2x4(n/QK, &w[0], &a[0], aRow, &out[0], 4*outRow)
	}
	vecDotMXFP4x4s = func(n int, w, a []byte, aRow int, out []float32, outRow int, side []byte, nTok int) {
		checkDotK(4, MXFP4, Q8_0, n, w, a, aRow, out, outRow)
		if nTok < 4 || len(side) < (n/QK-1)*8*nTok+4*nTok+16 {
			panic(fmt.Sprintf("kernels: 4-token MXFP4 product of %d elements: %d bytes of side terms of %d tokens", n, len(side), nTok))
		}
		vecDotMXFP4AVX2x4s(n/QK, &w[0], &a[0], aRow, &out[0], 4*outRow, &side[0], 8*nTok)
	}
	vecDotMXFP4x8s = func(n int, w, a []byte, aRow int, out []float32, outRow int, side []byte, nTok int) {
		checkDotK(8, MXFP4, Q8_0, n, w, a, aRow, out, outRow)
		if nTok < 8 || len(side) < (n/QK-1)*8*nTok+4*nTok+32 {
			panic(fmt.Sprintf("kernels: 8-token MXFP4 product of %d elements: %d bytes of side terms of %d tokens", n, len(side), nTok))
		}
		vecDotMXFP4AVX2x8s(n/QK, &w[0], &a[0], aRow, &out[0], 4*outRow, &side[0], 8*nTok)
	}
}
