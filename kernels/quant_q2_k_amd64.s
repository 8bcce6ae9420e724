//go:build amd64 && !purego

#include "textflag.h"

// func vecDotQ2_KAVX2(nb int, w, a *byte) float32
//
// Q2_K super-block (84 B): scales[16] @0 (low nibble scale, high nibble min
// of each 16 weights), qs[64] @16, d f16 @80, dmin f16 @82. Weight
// 128h+32j+l has its 2 bits at bits 2j of qs[32h+l] and scale/min 8h+2j+l/16.
// Q8_K super-block (292 B): d f32 @0, qs[256] @4, bsums[16] int16 @260.
//
// Σ (d·sc·q - dmin·m)·a = d·Σ sc·q·a - dmin·Σ m·bsum: integer sums per
// super-block in 8 lanes, then floats: as ggml's AVX2 kernel, the min lanes
// go into the accumulator first (times −dmin·dy), then the quant lanes.
// Scales are laid out and broadcast per 32-weight run as in the Q6_K kernel.
//
// Registers: Y0 float accumulator,
// Y6 qs shifted right by 2 per run, Y8 0x03 bytes, Y9 the scales (even in
// the low lane, odd in the high), Y10 the VPSHUFB control, Y12 its step,
// Y14 0x0f bytes, Y15 the int32 sums of the super-block.

DATA q2kDeinterleave<>+0(SB)/8, $0x0e0c0a0806040200
DATA q2kDeinterleave<>+8(SB)/8, $0x0f0d0b0907050301
GLOBL q2kDeinterleave<>(SB), RODATA|NOPTR, $16

// RUN adds Σ scale·q·a of the next 32-weight run, activations at aq.
#define RUN(aq) \
	VPAND      Y8, Y6, Y1; \
	VPSRLW     $2, Y6, Y6; \
	VPMADDUBSW aq, Y1, Y1; \
	VPSHUFB    Y10, Y9, Y3; \
	VPADDW     Y12, Y10, Y10; \
	VPMADDWD   Y3, Y1, Y1; \
	VPADDD     Y1, Y15, Y15

TEXT ·vecDotQ2_KAVX2(SB), NOSPLIT, $0-28
	MOVQ         nb+0(FP), CX
	MOVQ         w+8(FP), SI
	MOVQ         a+16(FP), DI
	VXORPS       Y0, Y0, Y0
	MOVL         $0x03030303, AX
	VMOVD        AX, X8
	VPBROADCASTD X8, Y8
	MOVL         $0x0f0f0f0f, AX
	VMOVD        AX, X14
	VPBROADCASTD X14, Y14
	MOVL         $0x02020202, AX
	VMOVD        AX, X12
	VPBROADCASTD X12, Y12

block:
	VMOVDQU   0(SI), X1
	VPSRLW    $4, X1, X2
	VPAND     X14, X2, X2
	VPMOVZXBW X2, Y2
	VPMADDWD  260(DI), Y2, Y2 // Σ m·bsum in 8 lanes
	VPAND     X14, X1, X1
	VPSHUFB   q2kDeinterleave<>(SB), X1, X1
	VPMOVZXBW X1, Y9

	MOVL         $0x01000100, AX
	VMOVD        AX, X10
	VPBROADCASTD X10, Y10

	VPXOR   Y15, Y15, Y15
	VMOVDQU 16(SI), Y6
	RUN(4(DI))
	RUN(36(DI))
	RUN(68(DI))
	RUN(100(DI))
	VMOVDQU 48(SI), Y6
	RUN(132(DI))
	RUN(164(DI))
	RUN(196(DI))
	RUN(228(DI))

	// dy·d and dy·dmin.
	MOVL         80(SI), AX
	VMOVD        AX, X1
	VCVTPH2PS    X1, X1
	VBROADCASTSS 0(DI), X3
	VMULPS       X3, X1, X1
	VBROADCASTSS X1, Y3
	VMOVSHDUP    X1, X4
	VBROADCASTSS X4, Y4

	VCVTDQ2PS    Y2, Y2
	VFNMADD231PS Y2, Y4, Y0
	VCVTDQ2PS    Y15, Y15
	VFMADD231PS  Y15, Y3, Y0

	ADDQ $84, SI
	ADDQ $292, DI
	DECQ CX
	JNZ  block

	VEXTRACTF128 $1, Y0, X1
	VADDPS       X1, X0, X0
	VMOVHLPS     X0, X0, X1
	VADDPS       X1, X0, X0
	VMOVSHDUP    X0, X1
	VADDSS       X1, X0, X0
	VZEROUPPER
	MOVSS        X0, ret+24(FP)
	RET
