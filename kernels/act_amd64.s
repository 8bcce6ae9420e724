//go:build amd64 && !purego

#include "textflag.h"

// ggml's vectorised expf (ggml_v_expf) and the kernels built on it. The
// instructions and their order are ggml's AVX2 ones, so that results match
// llama.cpp's to the bit; expfLane in act.go is the scalar twin.

DATA gexp<>+0(SB)/4, $0x4b400000   // 1.5·2^23
DATA gexp<>+4(SB)/4, $0x3fb8aa3b   // log2 e
DATA gexp<>+8(SB)/4, $0x3f317200   // ln 2, high part
DATA gexp<>+12(SB)/4, $0x35bfbe8e  // ln 2, low part
DATA gexp<>+16(SB)/4, $0x3c072010  // p0
DATA gexp<>+20(SB)/4, $0x3d2b9f17  // p1
DATA gexp<>+24(SB)/4, $0x3e2aaf33  // p2
DATA gexp<>+28(SB)/4, $0x3efffedb  // p3
DATA gexp<>+32(SB)/4, $0x3f7ffff6  // p4
DATA gexp<>+36(SB)/4, $0x3f800000  // 1
DATA gexp<>+40(SB)/4, $0x7fffffff  // |x| mask
DATA gexp<>+44(SB)/4, $0x42fc0000  // 126
DATA gexp<>+48(SB)/4, $0x43400000  // 192
DATA gexp<>+52(SB)/4, $0x82000000  // scale offset for n ≤ 0
DATA gexp<>+56(SB)/4, $0x7f000000
GLOBL gexp<>(SB), RODATA|NOPTR, $60

#define C_SHIFT gexp<>+0(SB)
#define C_LOG2E gexp<>+4(SB)
#define C_LN2HI gexp<>+8(SB)
#define C_LN2LO gexp<>+12(SB)
#define C_P0 gexp<>+16(SB)
#define C_P1 gexp<>+20(SB)
#define C_P2 gexp<>+24(SB)
#define C_P3 gexp<>+28(SB)
#define C_P4 gexp<>+32(SB)
#define C_ONE gexp<>+36(SB)
#define C_ABS gexp<>+40(SB)
#define C_126 gexp<>+44(SB)
#define C_192 gexp<>+48(SB)
#define C_G gexp<>+52(SB)
#define C_S1 gexp<>+56(SB)

// GEXP sets Y0 to e^Y0 in 8 lanes. ggml branches to the overflow and
// underflow handling only when a lane needs it; computing it always and
// blending gives the same lanes. Clobbers Y1-Y9.
#define GEXP \
	VBROADCASTSS C_SHIFT, Y1; \
	VBROADCASTSS C_LOG2E, Y2; \
	VFMADD231PS  Y2, Y0, Y1; \
	VBROADCASTSS C_SHIFT, Y2; \
	VSUBPS       Y2, Y1, Y2; \
	VBROADCASTSS C_LN2HI, Y3; \
	VFNMADD231PS Y3, Y2, Y0; \
	VBROADCASTSS C_LN2LO, Y3; \
	VFNMADD231PS Y3, Y2, Y0; \
	VPSLLD       $23, Y1, Y1; \
	VPBROADCASTD C_ONE, Y3; \
	VPADDD       Y3, Y1, Y3; \
	VPBROADCASTD C_ABS, Y4; \
	VANDPS       Y4, Y2, Y4; \
	VBROADCASTSS C_126, Y5; \
	VCMPPS       $0x1e, Y5, Y4, Y5; \
	VMULPS       Y0, Y0, Y6; \
	VBROADCASTSS C_P0, Y7; \
	VBROADCASTSS C_P1, Y8; \
	VFMADD213PS  Y8, Y0, Y7; \
	VBROADCASTSS C_P2, Y8; \
	VBROADCASTSS C_P3, Y9; \
	VFMADD213PS  Y9, Y0, Y8; \
	VFMADD213PS  Y8, Y6, Y7; \
	VBROADCASTSS C_P4, Y9; \
	VMULPS       Y9, Y0, Y9; \
	VFMADD213PS  Y9, Y6, Y7; \
	VMOVAPS      Y3, Y9; \
	VFMADD231PS  Y7, Y3, Y9; \
	VXORPS       Y0, Y0, Y0; \
	VCMPPS       $0x12, Y0, Y2, Y0; \
	VPBROADCASTD C_G, Y8; \
	VANDPS       Y8, Y0, Y0; \
	VPBROADCASTD C_S1, Y8; \
	VPADDD       Y8, Y0, Y8; \
	VPSUBD       Y0, Y1, Y1; \
	VBROADCASTSS C_192, Y2; \
	VCMPPS       $0x1e, Y2, Y4, Y2; \
	VMOVAPS      Y1, Y6; \
	VFMADD231PS  Y7, Y1, Y6; \
	VMULPS       Y8, Y6, Y6; \
	VMULPS       Y8, Y8, Y4; \
	VBLENDVPS    Y5, Y6, Y9, Y0; \
	VBLENDVPS    Y2, Y4, Y0, Y0

// func siluRowAVX2(dst, x, up *float32, n int)
// dst = x / (1 + e^(0−x)), times up when up is not nil; n a multiple of 8.
TEXT ·siluRowAVX2(SB), NOSPLIT, $0-32
	MOVQ dst+0(FP), DI
	MOVQ x+8(FP), SI
	MOVQ up+16(FP), DX
	MOVQ n+24(FP), CX
	VBROADCASTSS C_ONE, Y15
	VXORPS       Y14, Y14, Y14

silu_loop:
	TESTQ   CX, CX
	JZ      silu_done
	VMOVUPS (SI), Y13
	VSUBPS  Y13, Y14, Y0
	GEXP
	VADDPS  Y15, Y0, Y0
	VDIVPS  Y0, Y13, Y0
	TESTQ   DX, DX
	JZ      silu_store
	VMULPS  (DX), Y0, Y0
	ADDQ    $32, DX

silu_store:
	VMOVUPS Y0, (DI)
	ADDQ    $32, SI
	ADDQ    $32, DI
	SUBQ    $8, CX
	JMP     silu_loop

silu_done:
	VZEROUPPER
	RET

// func expSubSumRowAVX2(dst, x *float32, m float32, n int) float64
// dst = e^(x−m) in groups of 8 (n a multiple of 8); returns Σ over groups of
// the group's hsum8, added in float64, as ggml_vec_soft_max_f32.
TEXT ·expSubSumRowAVX2(SB), NOSPLIT, $0-40
	MOVQ         dst+0(FP), DI
	MOVQ         x+8(FP), SI
	VBROADCASTSS m+16(FP), Y15
	MOVQ         n+24(FP), CX
	VXORPD       X14, X14, X14

esum_loop:
	TESTQ        CX, CX
	JZ           esum_done
	VMOVUPS      (SI), Y0
	VSUBPS       Y15, Y0, Y0
	GEXP
	VMOVUPS      Y0, (DI)
	VEXTRACTF128 $1, Y0, X1
	VADDPS       X1, X0, X1
	VMOVHLPS     X1, X1, X2
	VADDPS       X2, X1, X1
	VMOVSHDUP    X1, X2
	VADDSS       X2, X1, X1
	VCVTSS2SD    X1, X1, X1
	VADDSD       X1, X14, X14
	ADDQ         $32, SI
	ADDQ         $32, DI
	SUBQ         $8, CX
	JMP          esum_loop

esum_done:
	VZEROUPPER
	MOVSD X14, ret+32(FP)
	RET
