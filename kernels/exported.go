package kernels

import "fmt"

// Kernels other packages' kernels build on (package sparse).

// FMA32 returns a·b + c rounded once to float32, as the FMA instructions
// do: what a pure-Go twin of an assembly kernel that fuses a multiply and an
// add computes in its place.
func FMA32(a, b, c float32) float32 { return fmaf(a, b, c) }

// QuantizeActivationsQ8_0 quantizes x to Q8_0 as QuantizeActivations does
// (34-byte blocks into dst) and writes beside each block, in side, its
// scale as a float32 (the half of the block, widened) and 8·Σq as an int32:
// what the blocked kernels take, in assembly where it runs.
func QuantizeActivationsQ8_0(x []float32, dst, side []byte) {
	nb := len(x) / QK
	if len(x)%QK != 0 || len(dst) < nb*bytesQ8_0 || len(side) < 8*nb {
		panic(fmt.Sprintf("kernels: QuantizeActivationsQ8_0 of %d floats into %d and %d bytes", len(x), len(dst), len(side)))
	}
	quantRowQ8_0Act(x, dst[:nb*bytesQ8_0], side[:8*nb])
}
