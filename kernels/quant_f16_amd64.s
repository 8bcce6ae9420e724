//go:build amd64 && !purego

#include "textflag.h"

// func vecDotF16AVX2(n int, w, a *byte) float32
// n is a positive multiple of 32. Sums in four 8-lane accumulators, element i
// in Y(i/8%4), lane i%8, then reduces them as ggml's F32x8_REDUCE does
// (vecDotF16Generic is the twin).
TEXT ·vecDotF16AVX2(SB), NOSPLIT, $0-28
	MOVQ n+0(FP), CX
	MOVQ w+8(FP), SI
	MOVQ a+16(FP), DI
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	VXORPS Y2, Y2, Y2
	VXORPS Y3, Y3, Y3

loop:
	VCVTPH2PS 0(SI), Y4
	VCVTPH2PS 0(DI), Y5
	VFMADD231PS Y5, Y4, Y0
	VCVTPH2PS 16(SI), Y6
	VCVTPH2PS 16(DI), Y7
	VFMADD231PS Y7, Y6, Y1
	VCVTPH2PS 32(SI), Y8
	VCVTPH2PS 32(DI), Y9
	VFMADD231PS Y9, Y8, Y2
	VCVTPH2PS 48(SI), Y10
	VCVTPH2PS 48(DI), Y11
	VFMADD231PS Y11, Y10, Y3
	ADDQ $64, SI
	ADDQ $64, DI
	SUBQ $32, CX
	JNZ  loop

	VADDPS       Y2, Y0, Y0
	VADDPS       Y3, Y1, Y1
	VADDPS       Y1, Y0, Y0
	VEXTRACTF128 $1, Y0, X1
	VADDPS       X1, X0, X0
	VHADDPS      X0, X0, X0
	VHADDPS      X0, X0, X0
	VZEROUPPER
	MOVSS        X0, ret+24(FP)
	RET
