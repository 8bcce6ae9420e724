//go:build !amd64 || purego

package kernels

// dotHalvesRowsAsm reports false: without the assembly DotHalvesRows takes
// a row at a time.
func dotHalvesRowsAsm(rows []uint16, stride int, x []uint16, out []float32, gemm bool) bool {
	return false
}
