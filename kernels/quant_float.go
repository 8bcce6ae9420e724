package kernels

import (
	"fmt"
	"math"
	"unsafe"
)

// Rows of the float formats F32, F16 and BF16: little-endian element arrays.
//
// The dot products sum in 32 float32 lanes (four 8-wide vector registers in
// the assembly), element i going to lane i%32, then reduce the lanes in a fixed
// tree; the tail past the last whole 32 is added one element at a time. The
// pure-Go twins follow the same order so that they differ from the assembly
// only by the fused multiply-adds.

// littleEndian reports whether the machine stores numbers as the files do, so
// that rows can be viewed in place instead of decoded element by element.
var littleEndian = func() bool {
	x := uint16(1)
	return *(*byte)(unsafe.Pointer(&x)) == 1
}()

// halfView is b as halves, when the machine is little-endian and b is aligned
// for them (GGUF tensor data and Go allocations are).
func halfView(b []byte) ([]uint16, bool) {
	if !littleEndian || len(b) == 0 || uintptr(unsafe.Pointer(&b[0]))%2 != 0 {
		return nil, false
	}
	return unsafe.Slice((*uint16)(unsafe.Pointer(&b[0])), len(b)/2), true
}

// floatBytes is the memory of x as bytes.
func floatBytes(x []float32) []byte {
	if len(x) == 0 {
		return nil
	}
	return unsafe.Slice((*byte)(unsafe.Pointer(&x[0])), 4*len(x))
}

func dequantizeRowF32(src []byte, dst []float32) {
	checkRow(F32, len(dst), len(src))
	if littleEndian {
		copy(floatBytes(dst), src)
		return
	}
	for i := range dst {
		dst[i] = math.Float32frombits(le.Uint32(src[4*i:]))
	}
}

func quantizeRowF32(src []float32, dst []byte) {
	checkRow(F32, len(src), len(dst))
	if littleEndian {
		copy(dst, floatBytes(src))
		return
	}
	for i, v := range src {
		le.PutUint32(dst[4*i:], math.Float32bits(v))
	}
}

func dequantizeRowF16(src []byte, dst []float32) {
	checkRow(F16, len(dst), len(src))
	if h, ok := halfView(src); ok {
		FP16ToFP32Row(h, dst) // the float kernels' row converter, F16C on amd64
		return
	}
	for i := range dst {
		dst[i] = FP16ToFP32(le.Uint16(src[2*i:]))
	}
}

func quantizeRowF16(src []float32, dst []byte) {
	checkRow(F16, len(src), len(dst))
	if h, ok := halfView(dst); ok {
		FP32ToFP16Row(src, h)
		return
	}
	for i, v := range src {
		le.PutUint16(dst[2*i:], FP32ToFP16(v))
	}
}

func dequantizeRowBF16(src []byte, dst []float32) {
	checkRow(BF16, len(dst), len(src))
	for i := range dst {
		dst[i] = BF16ToFP32(le.Uint16(src[2*i:]))
	}
}

func quantizeRowBF16(src []float32, dst []byte) {
	checkRow(BF16, len(src), len(dst))
	for i, v := range src {
		le.PutUint16(dst[2*i:], FP32ToBF16(v))
	}
}

// The dot products follow ggml's AVX2 CPU code bit for bit (with its
// compiler's fused multiply-adds), in two flavours:
//
//   - VecDot, ggml's vec_dot (a matrix times one activation row): 32
//     elements a step into four 8-lane accumulators with fused multiply-adds,
//     element i in register i/8%4, lane i%8; the registers reduced as
//     (0+2)+(1+3) and the lanes by reduceF32x8 (F32, F16) or hsum8 (BF16);
//     the elements past the last whole 32 added one at a time (F16, BF16:
//     in float64).
//   - gemm, llamafile's tinyBLAS (matrix products of two or more rows): one
//     8-lane accumulator, element i in lane i%8, summed by hsum8. tinyBLAS
//     takes only lengths that are multiples of 8; ggml falls back to vec_dot
//     for the others, and so do these.

// floatLanes holds the four 8-lane accumulators of ggml's vec_dot.
type floatLanes [4][8]float32

// combine adds the four registers as ggml's F32x8_REDUCE and BF16 dot do:
// (0 + 2) + (1 + 3), lane by lane.
func (acc *floatLanes) combine() (t [8]float32) {
	for l := range t {
		t[l] = (acc[0][l] + acc[2][l]) + (acc[1][l] + acc[3][l])
	}
	return t
}

// reduceF32x8 sums 8 lanes as ggml's F32x8_REDUCE: upper half onto lower,
// then two horizontal adds.
func reduceF32x8(t *[8]float32) float32 {
	u0, u1, u2, u3 := t[0]+t[4], t[1]+t[5], t[2]+t[6], t[3]+t[7]
	return (u0 + u1) + (u2 + u3)
}

func f32At(b []byte, i int) float32 { return math.Float32frombits(le.Uint32(b[4*i:])) }

func f16At(b []byte, i int) float32 { return FP16ToFP32(le.Uint16(b[2*i:])) }

func bf16At(b []byte, i int) float32 { return BF16ToFP32(le.Uint16(b[2*i:])) }

// laneSteps runs the 32-element steps of vec_dot over elements [0, body).
func laneSteps(acc *floatLanes, body int, w, a []byte, at func([]byte, int) float32) {
	for i := 0; i < body; i += 32 {
		for j := range 4 {
			for l := range 8 {
				k := i + 8*j + l
				acc[j][l] = fmaf(at(w, k), at(a, k), acc[j][l])
			}
		}
	}
}

func vecDotF32Generic(n int, w, a []byte) float32 {
	checkDot(F32, F32, n, w, a)
	var acc floatLanes
	body := n &^ 31
	laneSteps(&acc, body, w, a, f32At)
	t := acc.combine()
	return dotTailF32(reduceF32x8(&t), body, n, w, a)
}

// dotTailF32 adds the products of elements [from, n) to s as ggml's
// compiled vec_dot_f32 does: its compiler vectorises the loop in groups of
// 8 and then 4 whose products are rounded before their in-order adds, and
// fuses multiply and add for the last n%4.
func dotTailF32(s float32, from, n int, w, a []byte) float32 {
	fused := n - (n-from)%4
	for i := from; i < fused; i++ {
		s += float32(f32At(w, i) * f32At(a, i))
	}
	for i := fused; i < n; i++ {
		s = fmaf(f32At(w, i), f32At(a, i), s)
	}
	return s
}

func vecDotF16Generic(n int, w, a []byte) float32 {
	checkDot(F16, F16, n, w, a)
	var acc floatLanes
	body := n &^ 31
	laneSteps(&acc, body, w, a, f16At)
	t := acc.combine()
	return dotTailF16(reduceF32x8(&t), body, n, w, a)
}

// dotTailF16 adds the rounded products of elements [from, n) to s in
// float64, as ggml's vec_dot_f16 does.
func dotTailF16(s float32, from, n int, w, a []byte) float32 {
	sum := float64(s)
	for i := from; i < n; i++ {
		sum += float64(f16At(w, i) * f16At(a, i))
	}
	return float32(sum)
}

// vecDotBF16Generic fuses multiply and add: ggml writes them apart, but its
// compiler fuses them.
func vecDotBF16Generic(n int, w, a []byte) float32 {
	checkDot(BF16, BF16, n, w, a)
	var acc floatLanes
	body := n &^ 31
	laneSteps(&acc, body, w, a, bf16At)
	t := acc.combine()
	return dotTailBF16(hsum8(&t), body, n, w, a)
}

// dotTailBF16 adds the rounded products of elements [from, n) to s in
// float64, as ggml's vec_dot_bf16 does.
func dotTailBF16(s float32, from, n int, w, a []byte) float32 {
	sum := float64(s)
	for i := from; i < n; i++ {
		sum += float64(bf16At(w, i) * bf16At(a, i))
	}
	return float32(sum)
}

// gemmDotGeneric is tinyBLAS's element of a product: n a multiple of 8.
func gemmDotGeneric(n int, w, a []byte, at func([]byte, int) float32) float32 {
	var acc [8]float32
	for i := 0; i < n; i += 8 {
		for l := range acc {
			acc[l] = fmaf(at(w, i+l), at(a, i+l), acc[l])
		}
	}
	return hsum8(&acc)
}

func gemmDotF32Generic(n int, w, a []byte) float32 {
	if n%8 != 0 {
		return vecDotF32Generic(n, w, a)
	}
	checkDot(F32, F32, n, w, a)
	return gemmDotGeneric(n, w, a, f32At)
}

func gemmDotF16Generic(n int, w, a []byte) float32 {
	if n%8 != 0 {
		return vecDotF16Generic(n, w, a)
	}
	checkDot(F16, F16, n, w, a)
	return gemmDotGeneric(n, w, a, f16At)
}

func gemmDotBF16Generic(n int, w, a []byte) float32 {
	if n%8 != 0 {
		return vecDotBF16Generic(n, w, a)
	}
	checkDot(BF16, BF16, n, w, a)
	return gemmDotGeneric(n, w, a, bf16At)
}

// GemmVecDot returns the dot product ggml computes each element of a matrix
// product of weights of type t with two or more activation rows by: for F32,
// F16 and BF16 weights llamafile's tinyBLAS (one 8-lane accumulator, where
// VecDot has four), for every other format VecDot itself (tinyBLAS's Q8_0,
// Q4_0 and Q5_0 kernels round as ggml's vec_dot). It returns nil when t has
// no traits.
func GemmVecDot(t DType) func(n int, w, a []byte) float32 {
	switch t {
	case F32:
		return gemmDotF32
	case F16:
		return gemmDotF16
	case BF16:
		return gemmDotBF16
	}
	tr, ok := TraitsOf(t)
	if !ok {
		return nil
	}
	return tr.VecDot
}

// halfBytes is the memory of x as bytes.
func halfBytes(x []uint16) []byte {
	if len(x) == 0 {
		return nil
	}
	return unsafe.Slice((*byte)(unsafe.Pointer(&x[0])), 2*len(x))
}

// DotHalvesRows sets out[t] to the dot product of x with the row of halves
// at rows[t·stride:][:len(x)], for every t < len(out): VecDotHalves's sum,
// or GemmDotHalves's when gemm is set. It checks the sizes once, for the
// many short products of attention. Rows that do not fit panic.
func DotHalvesRows(rows []uint16, stride int, x []uint16, out []float32, gemm bool) {
	n := len(x)
	if len(out) == 0 {
		return
	}
	if stride < n || (len(out)-1)*stride+n > len(rows) {
		panic(fmt.Sprintf("kernels: DotHalvesRows of %d rows of %d halves, stride %d, from %d halves", len(out), n, stride, len(rows)))
	}
	if dotHalvesRowsAsm(rows, stride, x, out, gemm) {
		return
	}
	dotHalvesRowByRow(rows, stride, x, out, gemm)
}

// dotHalvesRowByRow is DotHalvesRows on checked shapes, one kernel call a
// row: the path for the lengths the row-wise kernels do not take.
func dotHalvesRowByRow(rows []uint16, stride int, x []uint16, out []float32, gemm bool) {
	n := len(x)
	dot := vecDotHalves
	if gemm {
		dot = gemmDotHalves
	}
	for t := range out {
		out[t] = dot(rows[t*stride:][:n], x)
	}
}

// VecDotHalves returns Σ w[i]·a[i] of two half-precision vectors of equal
// length as ggml's vec_dot_f16 computes it: the F16 VecDot for halves in
// memory, as attention over an F16 cache uses it for a single query row.
func VecDotHalves(w, a []uint16) float32 {
	sameLen("VecDotHalves", len(w), len(a))
	return vecDotF16(len(w), halfBytes(w), halfBytes(a))
}

// GemmDotHalves is VecDotHalves as llamafile's tinyBLAS computes an element
// of a product with two or more rows (GemmVecDot of F16).
func GemmDotHalves(w, a []uint16) float32 {
	sameLen("GemmDotHalves", len(w), len(a))
	return gemmDotF16(len(w), halfBytes(w), halfBytes(a))
}

// VecDotFloats is VecDotHalves for float32 vectors (ggml's vec_dot_f32).
func VecDotFloats(w, a []float32) float32 {
	sameLen("VecDotFloats", len(w), len(a))
	return vecDotF32(len(w), floatBytes(w), floatBytes(a))
}

// GemmDotFloats is GemmDotHalves for float32 vectors.
func GemmDotFloats(w, a []float32) float32 {
	sameLen("GemmDotFloats", len(w), len(a))
	return gemmDotF32(len(w), floatBytes(w), floatBytes(a))
}
