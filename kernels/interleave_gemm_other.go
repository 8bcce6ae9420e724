//go:build !amd64 || purego

package kernels

func gemmInterleaved(t DType, nb int, w, a []byte, aStride int, out []float32, outStride, nt int) {
	gemmInterleavedGeneric(t, nb, w, a, aStride, out, outStride, nt)
}
