//go:build !amd64 || purego

package kernels

// vecDotRows4Of: no 4-row kernels; matJob takes the rows one at a time.
func vecDotRows4Of(DType) func(n int, w []byte, wRow int, a []byte, out []float32) { return nil }
