package kernels

import (
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

// reduceLanes sums 32 lanes as the assembly does: the four registers
// pairwise, then the 8 lanes of the result by halving.
func reduceLanes(acc *[32]float32) float32 {
	var s [8]float32
	for l := range s {
		s[l] = (acc[l] + acc[8+l]) + (acc[16+l] + acc[24+l])
	}
	a0, a1, a2, a3 := s[0]+s[4], s[1]+s[5], s[2]+s[6], s[3]+s[7]
	b0, b1 := a0+a2, a1+a3
	return b0 + b1
}

func vecDotF32Generic(n int, w, a []byte) float32 {
	checkDot(F32, F32, n, w, a)
	var acc [32]float32
	body := n &^ 31
	for i := 0; i < body; i += 32 {
		for l := range acc {
			x := math.Float32frombits(le.Uint32(w[4*(i+l):]))
			y := math.Float32frombits(le.Uint32(a[4*(i+l):]))
			acc[l] += float32(x * y)
		}
	}
	return reduceLanes(&acc) + dotTailF32(body, n, w, a)
}

func dotTailF32(from, n int, w, a []byte) float32 {
	var s float32
	for i := from; i < n; i++ {
		s += float32(math.Float32frombits(le.Uint32(w[4*i:])) * math.Float32frombits(le.Uint32(a[4*i:])))
	}
	return s
}

func vecDotF16Generic(n int, w, a []byte) float32 {
	checkDot(F16, F16, n, w, a)
	var acc [32]float32
	body := n &^ 31
	for i := 0; i < body; i += 32 {
		for l := range acc {
			x := FP16ToFP32(le.Uint16(w[2*(i+l):]))
			y := FP16ToFP32(le.Uint16(a[2*(i+l):]))
			acc[l] += float32(x * y)
		}
	}
	return reduceLanes(&acc) + dotTailF16(body, n, w, a)
}

func dotTailF16(from, n int, w, a []byte) float32 {
	var s float32
	for i := from; i < n; i++ {
		s += float32(FP16ToFP32(le.Uint16(w[2*i:])) * FP16ToFP32(le.Uint16(a[2*i:])))
	}
	return s
}

// vecDotBF16Generic multiplies and adds in separate roundings, as ggml's AVX2
// bf16 dot does, so the assembly twin gives the same bits.
func vecDotBF16Generic(n int, w, a []byte) float32 {
	checkDot(BF16, BF16, n, w, a)
	var acc [32]float32
	body := n &^ 31
	for i := 0; i < body; i += 32 {
		for l := range acc {
			x := BF16ToFP32(le.Uint16(w[2*(i+l):]))
			y := BF16ToFP32(le.Uint16(a[2*(i+l):]))
			acc[l] += float32(x * y)
		}
	}
	return reduceLanes(&acc) + dotTailBF16(body, n, w, a)
}

func dotTailBF16(from, n int, w, a []byte) float32 {
	var s float32
	for i := from; i < n; i++ {
		s += float32(BF16ToFP32(le.Uint16(w[2*i:])) * BF16ToFP32(le.Uint16(a[2*i:])))
	}
	return s
}
