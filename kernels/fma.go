package kernels

// FMA32 returns a·b + c rounded once to float32, as the FMA instructions
// do: what a pure-Go twin of an assembly kernel that fuses a multiply and an
// add computes in its place.
func FMA32(a, b, c float32) float32 { return fmaf(a, b, c) }
