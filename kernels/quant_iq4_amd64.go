//go:build amd64 && !purego

package kernels

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
//lint:ignore U1000 vecDotMXFP4AVX2 reads it
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
