//go:build !amd64 || purego

package kernels

// Without the assembly kernels gemmFormats stays empty and MatMul computes
// every output with VecDot.

func quantRowQ8_0Act(x []float32, dst, side []byte) { quantRowQ8_0ActGeneric(x, dst, side) }

func quantRowQ8_K(x []float32, dst []byte) { quantizeRowQ8_K(x, dst) }
