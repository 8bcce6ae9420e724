//go:build amd64 && !purego

package kernels

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
