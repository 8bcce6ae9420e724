//go:build !amd64 || purego

package kernels

// quantAsm reports whether the assembly kernels of the block formats run.
const quantAsm = false

// asmVecDotTypes are the formats whose VecDot has an assembly kernel.
var asmVecDotTypes []DType

func vecDotF32(n int, w, a []byte) float32   { return vecDotF32Generic(n, w, a) }
func vecDotF16(n int, w, a []byte) float32   { return vecDotF16Generic(n, w, a) }
func vecDotBF16(n int, w, a []byte) float32  { return vecDotBF16Generic(n, w, a) }
func gemmDotF32(n int, w, a []byte) float32  { return gemmDotF32Generic(n, w, a) }
func gemmDotF16(n int, w, a []byte) float32  { return gemmDotF16Generic(n, w, a) }
func gemmDotBF16(n int, w, a []byte) float32 { return gemmDotBF16Generic(n, w, a) }
func vecDotQ4_0(n int, w, a []byte) float32  { return vecDotQ4_0Generic(n, w, a) }
func vecDotQ8_0(n int, w, a []byte) float32  { return vecDotQ8_0Generic(n, w, a) }
func vecDotQ4_1(n int, w, a []byte) float32  { return vecDotQ4_1Generic(n, w, a) }
func vecDotQ5_0(n int, w, a []byte) float32  { return vecDotQ5_0Generic(n, w, a) }
func vecDotQ5_1(n int, w, a []byte) float32  { return vecDotQ5_1Generic(n, w, a) }
func vecDotQ2_K(n int, w, a []byte) float32  { return vecDotQ2_KGeneric(n, w, a) }
func vecDotQ3_K(n int, w, a []byte) float32  { return vecDotQ3_KGeneric(n, w, a) }
func vecDotQ4_K(n int, w, a []byte) float32  { return vecDotQ4_KGeneric(n, w, a) }
func vecDotQ5_K(n int, w, a []byte) float32  { return vecDotQ5_KGeneric(n, w, a) }
func vecDotQ6_K(n int, w, a []byte) float32  { return vecDotQ6_KGeneric(n, w, a) }

func vecDotHalves(w, a []uint16) float32 { return vecDotF16Generic(len(w), halfBytes(w), halfBytes(a)) }
func gemmDotHalves(w, a []uint16) float32 {
	return gemmDotF16Generic(len(w), halfBytes(w), halfBytes(a))
}
