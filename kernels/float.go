package kernels

import "fmt"

// Float vector operations. Each runs an AVX2/FMA (F16C for halves) kernel on
// amd64 when the CPU has it and a pure-Go twin otherwise; the two agree to
// float32 rounding (the assembly fuses multiply and add and sums in another
// order). Slices of the wrong length are a bug in the caller and panic, since
// the assembly must never run past a slice.
//
// Half-precision values are IEEE binary16 bit patterns in uint16, as GGUF
// stores F16 tensors.

// DotF32 returns Σ x[i]·y[i].
func DotF32(x, y []float32) float32 {
	sameLen("DotF32", len(x), len(y))
	return dotF32(x, y)
}

// DotF16 returns Σ x[i]·y[i] of two half-precision vectors, each product and
// the sum in float32: the dot ggml uses for F16 weights against activations
// rounded to F16.
func DotF16(x, y []uint16) float32 {
	sameLen("DotF16", len(x), len(y))
	return dotF16(x, y)
}

// SumSquares returns Σ x[i]².
func SumSquares(x []float32) float32 { return sumSquares(x) }

// Max returns the largest element of x, or -Inf when x is empty. NaNs are
// skipped only in the pure-Go twin; callers should not pass them.
func Max(x []float32) float32 { return maxF32(x) }

// Axpy adds a·x to y (y += a·x).
func Axpy(a float32, x, y []float32) {
	sameLen("Axpy", len(x), len(y))
	axpy(a, x, y)
}

// AxpyF16 adds a·x to y for a half-precision x, as attention accumulates F16
// values into a float32 output.
func AxpyF16(a float32, x []uint16, y []float32) {
	sameLen("AxpyF16", len(x), len(y))
	axpyF16(a, x, y)
}

// Scale multiplies x by a in place.
func Scale(a float32, x []float32) { scale(a, x) }

// Add sets dst = x + y; dst may be x or y.
func Add(dst, x, y []float32) {
	sameLen("Add", len(x), len(y))
	sameLen("Add", len(dst), len(x))
	add(dst, x, y)
}

// Mul sets dst = x ⊙ y (elementwise); dst may be x or y.
func Mul(dst, x, y []float32) {
	sameLen("Mul", len(x), len(y))
	sameLen("Mul", len(dst), len(x))
	mul(dst, x, y)
}

// FP16ToFP32Row widens the halves of src into dst, bit for bit as FP16ToFP32
// except that F16C returns signalling NaNs quieted.
func FP16ToFP32Row(src []uint16, dst []float32) {
	sameLen("FP16ToFP32Row", len(src), len(dst))
	fp16ToFP32Row(src, dst)
}

// FP32ToFP16Row rounds src into the halves of dst; bit for bit as FP32ToFP16.
func FP32ToFP16Row(src []float32, dst []uint16) {
	sameLen("FP32ToFP16Row", len(src), len(dst))
	fp32ToFP16Row(src, dst)
}

func sameLen(op string, a, b int) {
	if a != b {
		panic(fmt.Sprintf("kernels: %s of slices of lengths %d and %d", op, a, b))
	}
}
