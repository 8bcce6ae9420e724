//go:build !amd64 || purego

package kernels

// Without assembly every kernel is its pure-Go twin.

const (
	useAVX2 = false
	useF16C = false
)

func dotF32(x, y []float32) float32                 { return dotF32Go(x, y) }
func dotF16(x, y []uint16) float32                  { return dotF16Go(x, y) }
func sumSquares(x []float32) float32                { return sumSquaresGo(x) }
func maxF32(x []float32) float32                    { return maxGo(x) }
func axpy(a float32, x, y []float32)                { axpyGo(a, x, y) }
func axpyF16(a float32, x []uint16, y []float32)    { axpyF16Go(a, x, y) }
func scale(a float32, x []float32)                  { scaleGo(a, x) }
func add(dst, x, y []float32)                       { addGo(dst, x, y) }
func mul(dst, x, y []float32)                       { mulGo(dst, x, y) }
func mulScale(dst, x, w []float32, s float32)       { mulScaleGo(dst, x, w, s) }
func fp16ToFP32Row(src []uint16, dst []float32)     { fp16ToFP32RowGo(src, dst) }
func fp32ToFP16Row(src []float32, dst []uint16)     { fp32ToFP16RowGo(src, dst) }
func ropeNorm(x, cos, sin []float32)                { ropeNormGo(x, cos, sin) }
func ropeNeox(x0, x1, cos, sin []float32)           { ropeNeoxGo(x0, x1, cos, sin) }
func expSubSum(dst, x []float32, m float32) float32 { return expSubSumGo(dst, x, m) }
func gelu(dst, x []float32)                         { geluGo(dst, x) }
