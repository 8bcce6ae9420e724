//go:build !amd64 || purego

package kernels

func vecDotIQ4_NL(n int, w, a []byte) float32 { return vecDotIQ4_NLGeneric(n, w, a) }
func vecDotIQ4_XS(n int, w, a []byte) float32 { return vecDotIQ4_XSGeneric(n, w, a) }
func vecDotMXFP4(n int, w, a []byte) float32  { return vecDotMXFP4Generic(n, w, a) }
