//go:build amd64 && !purego

#include "textflag.h"

// The vec_dot kernels take n, a positive multiple of 32, and sum in four
// 8-lane accumulators Y0-Y3 (element i in Y(i/8%4), lane i%8) as ggml's AVX2
// vec_dot does; the gemm kernels take a positive multiple of 8 and sum in
// one, as llamafile's tinyBLAS does. quant_float.go has the twins.

// COMBINE adds the four accumulators into Y0 as (Y0 + Y2) + (Y1 + Y3).
#define COMBINE \
	VADDPS Y2, Y0, Y0; \
	VADDPS Y3, Y1, Y1; \
	VADDPS Y1, Y0, Y0

// REDUCE_F32X8 sums the lanes of Y0 into X0 as ggml's F32x8_REDUCE.
#define REDUCE_F32X8 \
	VEXTRACTF128 $1, Y0, X1; \
	VADDPS       X1, X0, X0; \
	VHADDPS      X0, X0, X0; \
	VHADDPS      X0, X0, X0

// HSUM8 sums the lanes of Y0 into X0 as ggml's hsum_float_8.
#define HSUM8 \
	VEXTRACTF128 $1, Y0, X1; \
	VADDPS       X1, X0, X0; \
	VMOVHLPS     X0, X0, X1; \
	VADDPS       X1, X0, X0; \
	VMOVSHDUP    X0, X1; \
	VADDSS       X1, X0, X0

// func vecDotF32AVX2(n int, w, a *byte) float32
TEXT ·vecDotF32AVX2(SB), NOSPLIT, $0-28
	MOVQ   n+0(FP), CX
	MOVQ   w+8(FP), SI
	MOVQ   a+16(FP), DI
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

	COMBINE
	REDUCE_F32X8
	VZEROUPPER
	MOVSS X0, ret+24(FP)
	RET

// BF16LOAD widens 8 bfloat16 at m into the 8 floats of Y: each is the top
// half of its float32.
#define BF16LOAD(m, Y) \
	VPMOVZXWD m, Y; \
	VPSLLD    $16, Y, Y

// func vecDotBF16AVX2(n int, w, a *byte) float32
// ggml writes multiply and add apart; its compiler fuses them.
TEXT ·vecDotBF16AVX2(SB), NOSPLIT, $0-28
	MOVQ   n+0(FP), CX
	MOVQ   w+8(FP), SI
	MOVQ   a+16(FP), DI
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	VXORPS Y2, Y2, Y2
	VXORPS Y3, Y3, Y3

bf16loop:
	BF16LOAD(0(SI), Y4)
	BF16LOAD(0(DI), Y5)
	VFMADD231PS Y5, Y4, Y0
	BF16LOAD(16(SI), Y6)
	BF16LOAD(16(DI), Y7)
	VFMADD231PS Y7, Y6, Y1
	BF16LOAD(32(SI), Y8)
	BF16LOAD(32(DI), Y9)
	VFMADD231PS Y9, Y8, Y2
	BF16LOAD(48(SI), Y10)
	BF16LOAD(48(DI), Y11)
	VFMADD231PS Y11, Y10, Y3
	ADDQ        $64, SI
	ADDQ        $64, DI
	SUBQ        $32, CX
	JNZ         bf16loop

	COMBINE
	HSUM8
	VZEROUPPER
	MOVSS X0, ret+24(FP)
	RET

// func gemmDotF32AVX2(n int, w, a *byte) float32
TEXT ·gemmDotF32AVX2(SB), NOSPLIT, $0-28
	MOVQ   n+0(FP), CX
	MOVQ   w+8(FP), SI
	MOVQ   a+16(FP), DI
	VXORPS Y0, Y0, Y0

gf32loop:
	VMOVUPS     (SI), Y4
	VFMADD231PS (DI), Y4, Y0
	ADDQ        $32, SI
	ADDQ        $32, DI
	SUBQ        $8, CX
	JNZ         gf32loop

	HSUM8
	VZEROUPPER
	MOVSS X0, ret+24(FP)
	RET

// func gemmDotF16AVX2(n int, w, a *byte) float32
TEXT ·gemmDotF16AVX2(SB), NOSPLIT, $0-28
	MOVQ   n+0(FP), CX
	MOVQ   w+8(FP), SI
	MOVQ   a+16(FP), DI
	VXORPS Y0, Y0, Y0

gf16loop:
	VCVTPH2PS   (SI), Y4
	VCVTPH2PS   (DI), Y5
	VFMADD231PS Y5, Y4, Y0
	ADDQ        $16, SI
	ADDQ        $16, DI
	SUBQ        $8, CX
	JNZ         gf16loop

	HSUM8
	VZEROUPPER
	MOVSS X0, ret+24(FP)
	RET

// func gemmDotBF16AVX2(n int, w, a *byte) float32
TEXT ·gemmDotBF16AVX2(SB), NOSPLIT, $0-28
	MOVQ   n+0(FP), CX
	MOVQ   w+8(FP), SI
	MOVQ   a+16(FP), DI
	VXORPS Y0, Y0, Y0

gbf16loop:
	BF16LOAD((SI), Y4)
	BF16LOAD((DI), Y5)
	VFMADD231PS Y5, Y4, Y0
	ADDQ        $16, SI
	ADDQ        $16, DI
	SUBQ        $8, CX
	JNZ         gbf16loop

	HSUM8
	VZEROUPPER
	MOVSS X0, ret+24(FP)
	RET
