//go:build amd64 && !purego

#include "textflag.h"

// Both kernels take n, a positive multiple of 32, and sum in four 8-lane
// accumulators, element i in lane i%32, reduced as reduceLanes does.

#define REDUCE_Y0_Y3 \
	VADDPS       Y1, Y0, Y0; \
	VADDPS       Y3, Y2, Y2; \
	VADDPS       Y2, Y0, Y0; \
	VEXTRACTF128 $1, Y0, X1; \
	VADDPS       X1, X0, X0; \
	VMOVHLPS     X0, X0, X1; \
	VADDPS       X1, X0, X0; \
	VMOVSHDUP    X0, X1; \
	VADDSS       X1, X0, X0

// func vecDotF32AVX2(n int, w, a *byte) float32
TEXT ·vecDotF32AVX2(SB), NOSPLIT, $0-28
	MOVQ n+0(FP), CX
	MOVQ w+8(FP), SI
	MOVQ a+16(FP), DI
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	VXORPS Y2, Y2, Y2
	VXORPS Y3, Y3, Y3

f32loop:
	VMOVUPS     0(SI), Y4
	VFMADD231PS 0(DI), Y4, Y0
	VMOVUPS     32(SI), Y5
	VFMADD231PS 32(DI), Y5, Y1
	VMOVUPS     64(SI), Y6
	VFMADD231PS 64(DI), Y6, Y2
	VMOVUPS     96(SI), Y7
	VFMADD231PS 96(DI), Y7, Y3
	ADDQ        $128, SI
	ADDQ        $128, DI
	SUBQ        $32, CX
	JNZ         f32loop

	REDUCE_Y0_Y3
	VZEROUPPER
	MOVSS X0, ret+24(FP)
	RET

// BF16LOAD widens 8 bfloat16 at m into the 8 floats of Y: each is the top
// half of its float32.
#define BF16LOAD(m, Y) \
	VPMOVZXWD m, Y; \
	VPSLLD    $16, Y, Y

// func vecDotBF16AVX2(n int, w, a *byte) float32
// Multiplies and adds in two roundings, as ggml's AVX2 bf16 dot does.
TEXT ·vecDotBF16AVX2(SB), NOSPLIT, $0-28
	MOVQ n+0(FP), CX
	MOVQ w+8(FP), SI
	MOVQ a+16(FP), DI
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	VXORPS Y2, Y2, Y2
	VXORPS Y3, Y3, Y3

bf16loop:
	BF16LOAD(0(SI), Y4)
	BF16LOAD(0(DI), Y5)
	VMULPS Y5, Y4, Y4
	VADDPS Y4, Y0, Y0
	BF16LOAD(16(SI), Y6)
	BF16LOAD(16(DI), Y7)
	VMULPS Y7, Y6, Y6
	VADDPS Y6, Y1, Y1
	BF16LOAD(32(SI), Y8)
	BF16LOAD(32(DI), Y9)
	VMULPS Y9, Y8, Y8
	VADDPS Y8, Y2, Y2
	BF16LOAD(48(SI), Y10)
	BF16LOAD(48(DI), Y11)
	VMULPS Y11, Y10, Y10
	VADDPS Y10, Y3, Y3
	ADDQ   $64, SI
	ADDQ   $64, DI
	SUBQ   $32, CX
	JNZ    bf16loop

	REDUCE_Y0_Y3
	VZEROUPPER
	MOVSS X0, ret+24(FP)
	RET
