//go:build !amd64 || purego

package kernels

func vecDotQ4_KRepack(n int, w, a []byte) float32  { return vecDotQ4_KRepackGeneric(n, w, a) }
func vecDotIQ4_XSPanel(n int, w, a []byte) float32 { return vecDotIQ4_XSPanelGeneric(n, w, a) }
func vecDotQ4_KGemm(n int, w, a []byte) float32    { return vecDotQ4_KGemmGeneric(n, w, a) }
