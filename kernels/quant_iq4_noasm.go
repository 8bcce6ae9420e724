//go:build !amd64 || purego

package kernels

func vecDotIQ4_NL(n int, w, a []byte) float32 { return vecDotIQ4_NLGeneric(n, w, a) }
func vecDotIQ4_XS(n int, w, a []byte) float32 { return vecDotIQ4_XSGeneric(n, w, a) }
func vecDotMXFP4(n int, w, a []byte) float32  { return vecDotMXFP4Generic(n, w, a) }

// No 4-token kernels: matJob takes the tokens one at a time.
var vecDotIQ4_NLx4, vecDotMXFP4x4 func(n int, w, a []byte, aRow int, out []float32, outRow int)
var vecDotMXFP4x4s, vecDotMXFP4x8s func(n int, w, a []byte, aRow int, out []float32, outRow int, side []byte, nTok int)
