//go:build amd64 && !purego

#include "textflag.h"

// gemvQ4_K runs vecDotQ4_KAVX2's arithmetic (quant_q4_k_amd64.s) over rows
// of weights, one after the other, without a call per row: its outputs equal
// VecDot's to the bit.
//
// Q4_K super-block (144 B): d f16 @0, dmin f16 @2, scales[12] @4, qs[128] @16.
// Q8_K super-block (292 B): d f32 @0, qs[256] @4, bsums[16] int16 @260.
//
// Per super-block the integer sums are exact: Σ_j sc_j·(q4·q8 over sub-block
// j) in 8 int32 lanes, and Σ_j m_j·(bsum_2j + bsum_2j+1) in 4. They become
// floats once per super-block, scaled by d·dy and −dmin·dy into two
// accumulators that are summed separately and added at the end, as in
// ggml's AVX2 kernel.
//
// Registers: Y0 float accumulator, X7 float accumulator of the min terms,
// Y8 the 8 sub-block scales as int16 in both lanes, Y9 the VPSHUFB control
// that broadcasts scale j, Y12 its per-sub-block step, Y14 0x0f bytes,
// Y15 the int32 sums of the current super-block.

// SUBBLOCKS handles 64 weights: the 32 bytes at wq hold sub-block 2k in their
// low nibbles and 2k+1 in their high nibbles, against the 64 int8 at aq.
#define SUBBLOCKS(wq, aq0, aq1) \
	VMOVDQU    wq, Y1; \
	VPSRLW     $4, Y1, Y2; \
	VPAND      Y14, Y1, Y1; \
	VPAND      Y14, Y2, Y2; \
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

// func gemvQ4_K(nb int, w *byte, wStride int, a *byte, out *float32, rows int)
TEXT ·gemvQ4_K(SB), NOSPLIT, $0-48
	MOVQ w+8(FP), R11
	MOVQ out+32(FP), R13
	MOVL         $0x0f0f0f0f, AX
	VMOVD        AX, X14
	VPBROADCASTD X14, Y14
	MOVL         $0x02020202, AX
	VMOVD        AX, X12
	VPBROADCASTD X12, Y12

row:
	MOVQ nb+0(FP), CX
	MOVQ R11, SI
	MOVQ a+24(FP), DI
	VXORPS       Y0, Y0, Y0
	VXORPS       X7, X7, X7

block:
	// Unpack the 6-bit scales and mins (u0, u1, u2: the 12 scale bytes as
	// little-endian words): scales 0-3 = u0 & 0x3f.., mins 0-3 = u1 & 0x3f..,
	// scales 4-7 = u2 & 0x0f.. | (u0>>6 & 0x03..)<<4,
	// mins 4-7 = u2>>4 & 0x0f.. | (u1>>6 & 0x03..)<<4.
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
	ORQ  R10, R8         // R8: the 8 scale bytes
	SHLQ $32, DX
	ORQ  DX, R9          // R9: the 8 min bytes

	// Min terms: bsums summed in pairs, times the mins.
	VMOVQ     R9, X10
	VPMOVZXBW X10, X10
	VMOVDQU   260(DI), X11
	VPHADDW   276(DI), X11, X11
	VPMADDWD  X10, X11, X11

	// Scales as int16 in both lanes; the control starts at bytes (0, 1).
	VMOVQ       R8, X8
	VPMOVZXBW   X8, X8
	VINSERTI128 $1, X8, Y8, Y8
	MOVL        $0x01000100, AX
	VMOVD       AX, X9
	VPBROADCASTD X9, Y9

	VPXOR Y15, Y15, Y15
	SUBBLOCKS(16(SI), 4(DI), 36(DI))
	SUBBLOCKS(48(SI), 68(DI), 100(DI))
	SUBBLOCKS(80(SI), 132(DI), 164(DI))
	SUBBLOCKS(112(SI), 196(DI), 228(DI))

	// d·dy and dmin·dy.
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
	VCVTDQ2PS    X11, X11
	VFNMADD231PS X11, X3, X7

	ADDQ $144, SI
	ADDQ $292, DI
	DECQ CX
	JNZ  block


	VEXTRACTF128 $1, Y0, X1
	VADDPS       X1, X0, X0
	VMOVHLPS     X0, X0, X1
	VADDPS       X1, X0, X0
	VMOVSHDUP    X0, X1
	VADDSS       X1, X0, X0
	VMOVHLPS     X7, X7, X1
	VADDPS       X1, X7, X7
	VMOVSHDUP    X7, X1
	VADDSS       X1, X7, X7
	VADDSS       X7, X0, X0
	VMOVSS X0, 0(R13)
	ADDQ   $4, R13
	ADDQ   wStride+16(FP), R11
	DECQ   rows+40(FP)
	JNZ    row
	VZEROUPPER
	RET
