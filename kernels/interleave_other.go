//go:build !amd64 || purego

package kernels

func gemvInterleaved(t DType, nb int, w, a []byte, out []float32) {
	gemvInterleavedGeneric(t, nb, w, a, out)
}
