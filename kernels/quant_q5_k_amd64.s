//go:build amd64 && !purego

#include "textflag.h"

// func vecDotQ5_KAVX2(nb int, w, a *byte) float32
//
// Q5_K super-block (176 B): d f16 @0, dmin f16 @2, scales[12] @4, qh[32] @16,
// qs[128] @48; weight l of sub-block j has its 5th bit in bit j of qh[l].
// Q8_K super-block (292 B): d f32 @0, qs[256] @4, bsums[16] int16 @260.
// As the Q4_K kernel, with the 5th bits ORed in before VPMADDUBSW (unsigned
// quants up to 31: no int16 pair sum saturates).
//
// Unlike Q4_K, ggml's AVX2 kernel sums each block's min terms to one integer
// and adds it times −dmin·dy into a scalar (fused), added at the end.
//
// Registers: Y0 float accumulator, X7 scalar accumulator of the min terms,
// Y8 the 8 sub-block scales as int16 in both lanes, Y9 the VPSHUFB control
// that broadcasts scale j, Y12 its step, Y13 qh shifted right by 2 per 64
// weights, Y11 0x10 bytes, Y14 0x0f bytes, Y15 the int32 sums.

// SUBBLOCKS handles 64 weights: the 32 bytes at wq hold sub-block 2k in their
// low nibbles and 2k+1 in their high nibbles, their 5th bits in bits 0 and 1
// of Y13; the activations are at aq0 and aq1.
#define SUBBLOCKS(wq, aq0, aq1) \
	VMOVDQU    wq, Y1; \
	VPSRLW     $4, Y1, Y2; \
	VPAND      Y14, Y1, Y1; \
	VPAND      Y14, Y2, Y2; \
	VPSLLW     $4, Y13, Y3; \
	VPAND      Y11, Y3, Y3; \
	VPOR       Y3, Y1, Y1; \
	VPSLLW     $3, Y13, Y4; \
	VPAND      Y11, Y4, Y4; \
	VPOR       Y4, Y2, Y2; \
	VPSRLW     $2, Y13, Y13; \
	VPMADDUBSW aq0, Y1, Y1; \
	VPMADDUBSW aq1, Y2, Y2; \
	VPSHUFB    Y9, Y8, Y3; \
	VPADDW     Y12, Y9, Y9; \
	VPSHUFB    Y9, Y8, Y4; \
	VPADDW     Y12, Y9, Y9; \
	VPMADDWD   Y3, Y1, Y1; \
	VPMADDWD   Y4, Y2, Y2; \
	VPADDD     Y1, Y15, Y15; \
	VPADDD     Y2, Y15, Y15

TEXT ·vecDotQ5_KAVX2(SB), NOSPLIT, $0-28
	MOVQ         nb+0(FP), CX
	MOVQ         w+8(FP), SI
	MOVQ         a+16(FP), DI
	VXORPS       Y0, Y0, Y0
	VXORPS       X7, X7, X7
	MOVL         $0x0f0f0f0f, AX
	VMOVD        AX, X14
	VPBROADCASTD X14, Y14
	MOVL         $0x10101010, AX
	VMOVD        AX, X11
	VPBROADCASTD X11, Y11
	MOVL         $0x02020202, AX
	VMOVD        AX, X12
	VPBROADCASTD X12, Y12

block:
	// Scales and mins as in the Q4_K kernel.
	MOVL 4(SI), AX
	MOVL 8(SI), BX
	MOVL 12(SI), DX
	MOVL AX, R8
	ANDL $0x3f3f3f3f, R8
	MOVL BX, R9
	ANDL $0x3f3f3f3f, R9
	MOVL DX, R10
	ANDL $0x0f0f0f0f, R10
	SHRL $6, AX
	ANDL $0x03030303, AX
	SHLL $4, AX
	ORL  AX, R10
	SHRL $4, DX
	ANDL $0x0f0f0f0f, DX
	SHRL $6, BX
	ANDL $0x03030303, BX
	SHLL $4, BX
	ORL  BX, DX
	SHLQ $32, R10
	ORQ  R10, R8
	SHLQ $32, DX
	ORQ  DX, R9

	VMOVQ     R9, X10
	VPMOVZXBW X10, X10
	VMOVDQU   260(DI), X3
	VPHADDW   276(DI), X3, X3
	VPMADDWD  X10, X3, X10

	VMOVQ        R8, X8
	VPMOVZXBW    X8, X8
	VINSERTI128  $1, X8, Y8, Y8
	MOVL         $0x01000100, AX
	VMOVD        AX, X9
	VPBROADCASTD X9, Y9

	VMOVDQU 16(SI), Y13
	VPXOR   Y15, Y15, Y15
	SUBBLOCKS(48(SI), 4(DI), 36(DI))
	SUBBLOCKS(80(SI), 68(DI), 100(DI))
	SUBBLOCKS(112(SI), 132(DI), 164(DI))
	SUBBLOCKS(144(SI), 196(DI), 228(DI))

	MOVL         0(SI), AX
	VMOVD        AX, X1
	VCVTPH2PS    X1, X1
	VBROADCASTSS 0(DI), X2
	VMULPS       X2, X1, X1
	VBROADCASTSS X1, Y2
	VMOVSHDUP    X1, X3
	VBROADCASTSS X3, X3

	VCVTDQ2PS    Y15, Y15
	VFMADD231PS  Y15, Y2, Y0
	VPHADDD      X10, X10, X10
	VPHADDD      X10, X10, X10
	VCVTDQ2PS    X10, X10
	VFNMADD231SS X10, X3, X7

	ADDQ $176, SI
	ADDQ $292, DI
	DECQ CX
	JNZ  block

	VEXTRACTF128 $1, Y0, X1
	VADDPS       X1, X0, X0
	VMOVHLPS     X0, X0, X1
	VADDPS       X1, X0, X0
	VMOVSHDUP    X0, X1
	VADDSS       X1, X0, X0
	VADDSS       X7, X0, X0
	VZEROUPPER
	MOVSS        X0, ret+24(FP)
	RET
