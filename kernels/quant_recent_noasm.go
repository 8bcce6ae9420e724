//go:build !amd64 || purego

package kernels

func vecDotQ4_KRepack(n int, w, a []byte) float32  { return vecDotQ4_KRepackGeneric(n, w, a) }
func vecDotIQ4_XSPanel(n int, w, a []byte) float32 { return vecDotIQ4_XSPanelGeneric(n, w, a) }
func vecDotQ4_KGemm(n int, w, a []byte) float32    { return vecDotQ4_KGemmGeneric(n, w, a) }

// No 4-token kernels: matJob takes the tokens one at a time.
var vecDotQ4_KRepack4, vecDotQ4_KGemm4, vecDotQ4_KRepack8, vecDotQ4_KGemm8 func(n int, w, a []byte, aRow int, out []float32, outRow int)
