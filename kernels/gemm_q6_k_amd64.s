//go:build amd64 && !purego

#include "textflag.h"

// gemvQ6_K runs vecDotQ6_KAVX2's arithmetic (quant_q6_k_amd64.s) over rows
// of weights, one after the other, without a call per row: its outputs equal
// VecDot's to the bit.
//
// Q6_K super-block (210 B): ql[128] @0, qh[64] @128, scales[16] int8 @192,
// d f16 @208. Q8_K super-block (292 B): d f32 @0, qs[256] @4, bsums @260.
//
// The quants are stored biased by 32: the unsigned q go into VPMADDUBSW and
// the bias comes off each int16 pair sum as VPMADDUBSW(32, a), so that every
// int32 lane holds exactly the products of its own bytes, as in ggml's AVX2
// kernel (the float rounding of each lane depends on it).
//
// Registers: Y0 float accumulator, Y9 the 16 scales as int16, even-numbered
// ones in the low lane and odd-numbered in the high lane (a 32-weight run
// covers scales 2p and 2p+1, one per lane of the VPMADDUBSW result), Y10 the
// VPSHUFB control that broadcasts pair p, Y12 its step, Y13 0x30 bytes,
// Y14 0x0f bytes, Y11 0x20 bytes, Y15 the int32 sums of the current
// super-block.

DATA q6kDeinterleaveRows<>+0(SB)/8, $0x0e0c0a0806040200
DATA q6kDeinterleaveRows<>+8(SB)/8, $0x0f0d0b0907050301
GLOBL q6kDeinterleaveRows<>(SB), RODATA|NOPTR, $16

// RUN adds Σ scale·q·a of one 32-weight run: Yq holds its quants, aq the
// activations.
#define RUN(Yq, aq) \
	VPMADDUBSW aq, Yq, Yq; \
	VPMADDUBSW aq, Y11, Y5; \
	VPSUBW     Y5, Yq, Yq; \
	VPSHUFB    Y10, Y9, Y5; \
	VPADDW     Y12, Y10, Y10; \
	VPMADDWD   Y5, Yq, Yq; \
	VPADDD     Yq, Y15, Y15

// HALF handles 128 weights: ql at lq (64 bytes), qh at hq (32 bytes), the
// activations from aq.
#define HALF(lq, hq, aq0, aq1, aq2, aq3) \
	VMOVDQU lq, Y1; \
	VMOVDQU 32+lq, Y2; \
	VMOVDQU hq, Y3; \
	VPAND   Y14, Y1, Y4; \
	VPSLLW  $4, Y3, Y5; \
	VPAND   Y13, Y5, Y5; \
	VPOR    Y5, Y4, Y4; \
	VPAND   Y14, Y2, Y6; \
	VPSLLW  $2, Y3, Y5; \
	VPAND   Y13, Y5, Y5; \
	VPOR    Y5, Y6, Y6; \
	VPSRLW  $4, Y1, Y7; \
	VPAND   Y14, Y7, Y7; \
	VPAND   Y13, Y3, Y5; \
	VPOR    Y5, Y7, Y7; \
	VPSRLW  $4, Y2, Y8; \
	VPAND   Y14, Y8, Y8; \
	VPSRLW  $2, Y3, Y5; \
	VPAND   Y13, Y5, Y5; \
	VPOR    Y5, Y8, Y8; \
	RUN(Y4, aq0); \
	RUN(Y6, aq1); \
	RUN(Y7, aq2); \
	RUN(Y8, aq3)

// Q6K_AHEAD is how far ahead of the super-block being summed gemvQ6_K asks
// for the weights (the rows lie one after the other, so past a row's end
// is the next row): the hardware prefetcher alone left the output matrix,
// read once a token, the slowest per byte of a 2-thread decode.
#define Q6K_AHEAD 2048

// func gemvQ6_K(nb int, w *byte, wStride int, a *byte, out *float32, rows int)
TEXT ·gemvQ6_K(SB), NOSPLIT, $0-48
	MOVQ w+8(FP), R11
	MOVQ out+32(FP), R13
	MOVL         $0x0f0f0f0f, AX
	VMOVD        AX, X14
	VPBROADCASTD X14, Y14
	MOVL         $0x30303030, AX
	VMOVD        AX, X13
	VPBROADCASTD X13, Y13
	MOVL         $0x02020202, AX
	VMOVD        AX, X12
	VPBROADCASTD X12, Y12
	MOVL         $0x20202020, AX
	VMOVD        AX, X11
	VPBROADCASTD X11, Y11

row:
	MOVQ nb+0(FP), CX
	MOVQ R11, SI
	MOVQ a+24(FP), DI
	VXORPS       Y0, Y0, Y0

block:
	PREFETCHT0 Q6K_AHEAD(SI)
	PREFETCHT0 Q6K_AHEAD+64(SI)
	PREFETCHT0 Q6K_AHEAD+128(SI)
	PREFETCHT0 Q6K_AHEAD+192(SI)
	VPXOR Y15, Y15, Y15

	VMOVDQU      192(SI), X9
	VPSHUFB      q6kDeinterleaveRows<>(SB), X9, X9
	VPMOVSXBW    X9, Y9
	MOVL         $0x01000100, AX
	VMOVD        AX, X10
	VPBROADCASTD X10, Y10

	HALF(0(SI), 128(SI), 4(DI), 36(DI), 68(DI), 100(DI))
	HALF(64(SI), 160(SI), 132(DI), 164(DI), 196(DI), 228(DI))

	MOVWLZX      208(SI), AX
	VMOVD        AX, X1
	VCVTPH2PS    X1, X1
	VMULSS       0(DI), X1, X1
	VBROADCASTSS X1, Y1
	VCVTDQ2PS    Y15, Y15
	VFMADD231PS  Y15, Y1, Y0

	ADDQ $210, SI
	ADDQ $292, DI
	DECQ CX
	JNZ  block


	VEXTRACTF128 $1, Y0, X1
	VADDPS       X1, X0, X0
	VMOVHLPS     X0, X0, X1
	VADDPS       X1, X0, X0
	VMOVSHDUP    X0, X1
	VADDSS       X1, X0, X0
	VMOVSS X0, 0(R13)
	ADDQ   $4, R13
	ADDQ   wStride+16(FP), R11
	DECQ   rows+40(FP)
	JNZ    row
	VZEROUPPER
	RET
