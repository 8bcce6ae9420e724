//go:build amd64 && !purego

package kernels

import (
	"unsafe"

	"golang.org/x/sys/cpu"
)

// quantAsm reports whether the assembly kernels of the block formats run:
// they need AVX2, FMA and F16C (x/sys/cpu sets HasAVX2 only when the OS saves
// the YMM registers).
var quantAsm = cpu.X86.HasAVX2 && cpu.X86.HasFMA && cpu.X86.HasF16C

// asmVecDotTypes are the formats whose VecDot has an assembly kernel.
var asmVecDotTypes = []DType{F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, IQ4_NL, IQ4_XS, MXFP4}

// The kernels take whole blocks (or, for the float formats, a multiple of 32
// elements) and never see a slice, so the dispatchers below check sizes first.

//go:noescape
func vecDotF32AVX2(n int, w, a *byte) float32

//go:noescape
func vecDotF16AVX2(n int, w, a *byte) float32

//go:noescape
func vecDotBF16AVX2(n int, w, a *byte) float32

//go:noescape
func vecDotQ8_0AVX2(nb int, w, a *byte) float32

//go:noescape
func vecDotQ4_0AVX2(nb int, w, a *byte) float32

//go:noescape
func vecDotQ4_1AVX2(nb int, w, a *byte) float32

//go:noescape
func vecDotQ5_0AVX2(nb int, w, a *byte) float32

//go:noescape
func vecDotQ5_1AVX2(nb int, w, a *byte) float32

//go:noescape
func vecDotQ2_KAVX2(nb int, w, a *byte) float32

//go:noescape
func vecDotQ3_KAVX2(nb int, w, a *byte) float32

//go:noescape
func vecDotQ4_KAVX2(nb int, w, a *byte) float32

//go:noescape
func vecDotQ5_KAVX2(nb int, w, a *byte) float32

//go:noescape
func vecDotQ6_KAVX2(nb int, w, a *byte) float32

func vecDotF32(n int, w, a []byte) float32 {
	if !quantAsm || n < 32 {
		return vecDotF32Generic(n, w, a)
	}
	checkDot(F32, F32, n, w, a)
	body := n &^ 31
	return dotTailF32(vecDotF32AVX2(body, &w[0], &a[0]), body, n, w, a)
}

func vecDotF16(n int, w, a []byte) float32 {
	if !quantAsm || n < 32 {
		return vecDotF16Generic(n, w, a)
	}
	checkDot(F16, F16, n, w, a)
	body := n &^ 31
	return dotTailF16(vecDotF16AVX2(body, &w[0], &a[0]), body, n, w, a)
}

func vecDotBF16(n int, w, a []byte) float32 {
	if !quantAsm || n < 32 {
		return vecDotBF16Generic(n, w, a)
	}
	checkDot(BF16, BF16, n, w, a)
	body := n &^ 31
	return dotTailBF16(vecDotBF16AVX2(body, &w[0], &a[0]), body, n, w, a)
}

//go:noescape
func gemmDotF32AVX2(n int, w, a *byte) float32

//go:noescape
func gemmDotF16AVX2(n int, w, a *byte) float32

//go:noescape
func gemmDotBF16AVX2(n int, w, a *byte) float32

func gemmDotF32(n int, w, a []byte) float32 {
	if !quantAsm || n == 0 || n%8 != 0 {
		return gemmDotF32Generic(n, w, a)
	}
	checkDot(F32, F32, n, w, a)
	return gemmDotF32AVX2(n, &w[0], &a[0])
}

func gemmDotF16(n int, w, a []byte) float32 {
	if !quantAsm || n == 0 || n%8 != 0 {
		return gemmDotF16Generic(n, w, a)
	}
	checkDot(F16, F16, n, w, a)
	return gemmDotF16AVX2(n, &w[0], &a[0])
}

func gemmDotBF16(n int, w, a []byte) float32 {
	if !quantAsm || n == 0 || n%8 != 0 {
		return gemmDotBF16Generic(n, w, a)
	}
	checkDot(BF16, BF16, n, w, a)
	return gemmDotBF16AVX2(n, &w[0], &a[0])
}

func vecDotQ8_0(n int, w, a []byte) float32 {
	if !quantAsm || n == 0 {
		return vecDotQ8_0Generic(n, w, a)
	}
	checkDot(Q8_0, Q8_0, n, w, a)
	return vecDotQ8_0AVX2(n/QK, &w[0], &a[0])
}

func vecDotQ4_0(n int, w, a []byte) float32 {
	if !quantAsm || n == 0 {
		return vecDotQ4_0Generic(n, w, a)
	}
	checkDot(Q4_0, Q8_0, n, w, a)
	return vecDotQ4_0AVX2(n/QK, &w[0], &a[0])
}

func vecDotQ4_1(n int, w, a []byte) float32 {
	if !quantAsm || n == 0 {
		return vecDotQ4_1Generic(n, w, a)
	}
	checkDot(Q4_1, Q8_1, n, w, a)
	return vecDotQ4_1AVX2(n/QK, &w[0], &a[0])
}

func vecDotQ5_0(n int, w, a []byte) float32 {
	if !quantAsm || n == 0 {
		return vecDotQ5_0Generic(n, w, a)
	}
	checkDot(Q5_0, Q8_0, n, w, a)
	return vecDotQ5_0AVX2(n/QK, &w[0], &a[0])
}

func vecDotQ5_1(n int, w, a []byte) float32 {
	if !quantAsm || n == 0 {
		return vecDotQ5_1Generic(n, w, a)
	}
	checkDot(Q5_1, Q8_1, n, w, a)
	return vecDotQ5_1AVX2(n/QK, &w[0], &a[0])
}

func vecDotQ2_K(n int, w, a []byte) float32 {
	if !quantAsm || n == 0 {
		return vecDotQ2_KGeneric(n, w, a)
	}
	checkDot(Q2_K, Q8_K, n, w, a)
	return vecDotQ2_KAVX2(n/QKK, &w[0], &a[0])
}

func vecDotQ3_K(n int, w, a []byte) float32 {
	if !quantAsm || n == 0 {
		return vecDotQ3_KGeneric(n, w, a)
	}
	checkDot(Q3_K, Q8_K, n, w, a)
	return vecDotQ3_KAVX2(n/QKK, &w[0], &a[0])
}

func vecDotQ4_K(n int, w, a []byte) float32 {
	if !quantAsm || n == 0 {
		return vecDotQ4_KGeneric(n, w, a)
	}
	checkDot(Q4_K, Q8_K, n, w, a)
	return vecDotQ4_KAVX2(n/QKK, &w[0], &a[0])
}

func vecDotQ5_K(n int, w, a []byte) float32 {
	if !quantAsm || n == 0 {
		return vecDotQ5_KGeneric(n, w, a)
	}
	checkDot(Q5_K, Q8_K, n, w, a)
	return vecDotQ5_KAVX2(n/QKK, &w[0], &a[0])
}

func vecDotQ6_K(n int, w, a []byte) float32 {
	if !quantAsm || n == 0 {
		return vecDotQ6_KGeneric(n, w, a)
	}
	checkDot(Q6_K, Q8_K, n, w, a)
	return vecDotQ6_KAVX2(n/QKK, &w[0], &a[0])
}

// vecDotHalves is vecDotF16 on halves whose lengths the caller has checked.
// The elements past the last whole 32 (all of them in a short head) are
// widened by F16C and summed as dotTailF16 does.
func vecDotHalves(w, a []uint16) float32 {
	n := len(w)
	if !quantAsm {
		return vecDotF16Generic(n, halfBytes(w), halfBytes(a))
	}
	a = a[:n]
	body := n &^ 31
	var s float32
	if body > 0 {
		s = vecDotF16AVX2(body, (*byte)(unsafe.Pointer(&w[0])), (*byte)(unsafe.Pointer(&a[0])))
		if body == n {
			return s
		}
	}
	var wf, af [32]float32
	tail := n - body
	fp16ToFP32Row(w[body:], wf[:tail])
	fp16ToFP32Row(a[body:], af[:tail])
	sum := float64(s)
	for i := range tail {
		sum += float64(wf[i] * af[i])
	}
	return float32(sum)
}

// gemmDotHalves is gemmDotF16 on halves whose lengths the caller has checked.
func gemmDotHalves(w, a []uint16) float32 {
	n := len(w)
	if !quantAsm || n == 0 || n%8 != 0 {
		return gemmDotF16Generic(n, halfBytes(w), halfBytes(a))
	}
	a = a[:n]
	return gemmDotF16AVX2(n, (*byte)(unsafe.Pointer(&w[0])), (*byte)(unsafe.Pointer(&a[0])))
}
