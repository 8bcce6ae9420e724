//go:build amd64 && !purego

#include "textflag.h"

// func vecDotQ3_KAVX2(nb int, w, a *byte) float32
//
// Q3_K super-block (110 B): hmask[32] @0, qs[64] @32, scales[12] @96,
// d f16 @108. Weight 128h+32j+l has its low 2 bits at bits 2j of qs[32h+l],
// its 3rd bit at bit 4h+j of hmask[l], and scale 8h+2j+l/16; the quant is
// (low | 3rd<<2) - 4. Q8_K super-block (292 B): d f32 @0, qs[256] @4,
// bsums[16] int16 @260.
//
// The unsigned u = low | 3rd<<2 go through VPMADDUBSW and the bias comes off
// each int16 pair sum as VPMADDUBSW(4, a), so that every int32 lane holds
// exactly the products of its own bytes, as in ggml's AVX2 kernel (the float
// rounding of each lane depends on it). A 32-weight run
// covers scales 2p and 2p+1, one per lane of the VPMADDUBSW result; the
// scales are kept even-numbered in the low lane and odd in the high lane of
// Y9, and the VPSHUFB control Y10 (step Y12) broadcasts pair p.
//
// Registers: Y0 float accumulator, Y6 qs shifted right by 2 per run, Y7 hmask
// shifted right by 1 per run, Y8 0x03 bytes, Y11 0x04 bytes, Y13 0x20 bytes,
// Y4 scratch,
// Y15 the int32 sums of the super-block.

DATA q3kDeinterleave<>+0(SB)/8, $0x0e0c0a0806040200
DATA q3kDeinterleave<>+8(SB)/8, $0x0f0d0b0907050301
GLOBL q3kDeinterleave<>(SB), RODATA|NOPTR, $16

// RUN adds Σ scale·u·a of the next 32-weight run, activations at aq.
#define RUN(aq) \
	VPAND      Y8, Y6, Y1; \
	VPSRLW     $2, Y6, Y6; \
	VPSLLW     $2, Y7, Y2; \
	VPAND      Y11, Y2, Y2; \
	VPSRLW     $1, Y7, Y7; \
	VPOR       Y2, Y1, Y1; \
	VPMADDUBSW aq, Y1, Y1; \
	VPMADDUBSW aq, Y11, Y4; \
	VPSUBW     Y4, Y1, Y1; \
	VPSHUFB    Y10, Y9, Y3; \
	VPADDW     Y12, Y10, Y10; \
	VPMADDWD   Y3, Y1, Y1; \
	VPADDD     Y1, Y15, Y15

TEXT ·vecDotQ3_KAVX2(SB), NOSPLIT, $0-28
	MOVQ         nb+0(FP), CX
	MOVQ         w+8(FP), SI
	MOVQ         a+16(FP), DI
	VXORPS       Y0, Y0, Y0
	MOVL         $0x03030303, AX
	VMOVD        AX, X8
	VPBROADCASTD X8, Y8
	MOVL         $0x04040404, AX
	VMOVD        AX, X11
	VPBROADCASTD X11, Y11
	MOVL         $0x02020202, AX
	VMOVD        AX, X12
	VPBROADCASTD X12, Y12
	MOVL         $0x20202020, AX
	VMOVD        AX, X13
	VPBROADCASTD X13, Y13

block:
	// The 16 six-bit scales: low 4 bits from the nibbles of bytes 0-7
	// (scales 0-7 low nibbles, 8-15 high), top 2 bits from bytes 8-11
	// (scale j at bits 2(j/4) of byte 8+j%4).
	MOVL 96(SI), AX
	MOVL 100(SI), BX
	MOVL 104(SI), DX
	MOVL AX, R8
	ANDL $0x0f0f0f0f, R8
	MOVL DX, R10
	ANDL $0x03030303, R10
	SHLL $4, R10
	ORL  R10, R8         // scales 0-3
	MOVL BX, R9
	ANDL $0x0f0f0f0f, R9
	MOVL DX, R10
	SHRL $2, R10
	ANDL $0x03030303, R10
	SHLL $4, R10
	ORL  R10, R9         // scales 4-7
	SHLQ $32, R9
	ORQ  R9, R8
	SHRL $4, AX
	ANDL $0x0f0f0f0f, AX
	MOVL DX, R10
	SHRL $4, R10
	ANDL $0x03030303, R10
	SHLL $4, R10
	ORL  R10, AX         // scales 8-11
	SHRL $4, BX
	ANDL $0x0f0f0f0f, BX
	SHRL $6, DX
	ANDL $0x03030303, DX
	SHLL $4, DX
	ORL  DX, BX          // scales 12-15
	SHLQ $32, BX
	ORQ  BX, AX
	VMOVQ   R8, X9
	VPINSRQ $1, AX, X9, X9
	VPSUBB  X13, X9, X9  // remove the bias of 32

	VPXOR Y15, Y15, Y15

	VPSHUFB      q3kDeinterleave<>(SB), X9, X9
	VPMOVSXBW    X9, Y9
	MOVL         $0x01000100, AX
	VMOVD        AX, X10
	VPBROADCASTD X10, Y10

	VMOVDQU 0(SI), Y7
	VMOVDQU 32(SI), Y6
	RUN(4(DI))
	RUN(36(DI))
	RUN(68(DI))
	RUN(100(DI))
	VMOVDQU 64(SI), Y6
	RUN(132(DI))
	RUN(164(DI))
	RUN(196(DI))
	RUN(228(DI))

	MOVWLZX      108(SI), AX
	VMOVD        AX, X1
	VCVTPH2PS    X1, X1
	VMULSS       0(DI), X1, X1
	VBROADCASTSS X1, Y1
	VCVTDQ2PS    Y15, Y15
	VFMADD231PS  Y15, Y1, Y0

	ADDQ $110, SI
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
