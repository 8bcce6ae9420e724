//go:build !amd64 || purego

package kernels

func dotHalvesPaged(base []uint16, offs []int, seg, stride int, x []uint16, out []float32, gemm bool) {
	dotHalvesPagedGeneric(base, offs, seg, stride, x, out, gemm)
}

func dotFloatsPaged(base []float32, offs []int, seg, stride int, x []float32, out []float32, gemm bool) {
	dotFloatsPagedGeneric(base, offs, seg, stride, x, out, gemm)
}
