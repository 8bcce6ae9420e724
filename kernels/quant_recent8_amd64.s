//go:build amd64 && !purego

#include "textflag.h"
#include "q4k_amd64.h"

// The 4-token Q4_K products of quant_recent4_amd64.s for 8 tokens, with
// AVX-512 VNNI (VL, BW): the row's nibbles, scales and mins are unpacked
// once for 8 tokens, whose int32 lanes take eight registers, four of them
// among Y16-Y19 (EVEX only). VPHADDW and VPHADDD have no EVEX form, so the
// mins and the lane sums are taken 4 tokens at a time in Y0-Y15 as there,
// and the floats of the 8 tokens sit in the 8 lanes of Y0 (Y7 for the
// mins), token t in lane t, rounding exactly as the one-token kernels.
//
// Tokens: t at a + t·aStride, addressed from DI (t = 0, 1, 2, 4 with
// index R11 = aStride), R12 = a + 3·aStride (t = 3, 5) and R13 = a +
// 6·aStride (t = 6, 7). Registers otherwise as in quant_recent4_amd64.s.

// TOKSET8 and TOKADD8 are TOKSETV and TOKADDV (any Yd of Y0-Y31).
#define TOKSET8(aq0, aq1, Yd) \
	VPMADDUBSW aq0, Y1, Yd; \
	VPMADDWD   Y3, Yd, Yd; \
	VPMADDUBSW aq1, Y2, Y11; \
	VPDPWSSD   Y4, Y11, Yd

#define TOKADD8(aq0, aq1, Yd) \
	VPMADDUBSW aq0, Y1, Y11; \
	VPDPWSSD   Y3, Y11, Yd; \
	VPMADDUBSW aq1, Y2, Y11; \
	VPDPWSSD   Y4, Y11, Yd

#define NIBBLES8(wq) \
	VMOVDQU wq, Y1; \
	VPSRLW  $4, Y1, Y2; \
	VPAND   Y14, Y1, Y1; \
	VPAND   Y14, Y2, Y2; \
	VPSHUFB Y9, Y8, Y3; \
	VPADDW  Y12, Y9, Y9; \
	VPSHUFB Y9, Y8, Y4; \
	VPADDW  Y12, Y9, Y9

// STEP8 runs TOK (TOKSET8 or TOKADD8) for step k's 8 tokens.
#define STEP8(TOK, wq, o0, o1) \
	NIBBLES8(wq); \
	TOK(o0(DI), o1(DI), Y5); \
	TOK(o0(DI)(R11*1), o1(DI)(R11*1), Y6); \
	TOK(o0(DI)(R11*2), o1(DI)(R11*2), Y13); \
	TOK(o0(R12), o1(R12), Y15); \
	TOK(o0(DI)(R11*4), o1(DI)(R11*4), Y16); \
	TOK(o0(R12)(R11*2), o1(R12)(R11*2), Y17); \
	TOK(o0(R13), o1(R13), Y18); \
	TOK(o0(R13)(R11*1), o1(R13)(R11*1), Y19)

// RED4 sets X5 to the 4 tokens' sums of Y5, Y6, Y13, Y15.
#define RED4 \
	VPHADDD      Y6, Y5, Y5; \
	VPHADDD      Y15, Y13, Y13; \
	VPHADDD      Y13, Y5, Y5; \
	VEXTRACTI128 $1, Y5, X6; \
	VPADDD       X6, X5, X5

// RED8 sets Y1 to the 8 tokens' sums of Y5, Y6, Y13, Y15, Y16-Y19 as
// floats (token t in lane t).
#define RED8 \
	RED4; \
	VMOVDQA       X5, X1; \
	VMOVDQA64     Y16, Y5; \
	VMOVDQA64     Y17, Y6; \
	VMOVDQA64     Y18, Y13; \
	VMOVDQA64     Y19, Y15; \
	RED4; \
	VINSERTI128   $1, X5, Y1, Y1; \
	VCVTDQ2PS     Y1, Y1

// MINS sets Xd to a token's four min sums (super-block at P, min words X3).
#define MINS(p260, p276, Xd) \
	VMOVDQU  p260, Xd; \
	VPHADDW  p276, Xd, Xd; \
	VPMADDWD X3, Xd, Xd

#define MINSLO \
	MINS(260(DI), 276(DI), X5); \
	MINS(260(DI)(R11*1), 276(DI)(R11*1), X6); \
	MINS(260(DI)(R11*2), 276(DI)(R11*2), X13); \
	MINS(260(R12), 276(R12), X15)

#define MINSHI \
	MINS(260(DI)(R11*4), 276(DI)(R11*4), X5); \
	MINS(260(R12)(R11*2), 276(R12)(R11*2), X6); \
	MINS(260(R13), 276(R13), X13); \
	MINS(260(R13)(R11*1), 276(R13)(R11*1), X15)

// TRANSPOSE4 turns the 4 tokens' min sums X5, X6, X13, X15 (64 weights k
// in lane k) into step k's 4 tokens in X5, X6, X13, X15; clobbers X1-X4.
#define TRANSPOSE4 \
	VPUNPCKLDQ  X6, X5, X1; \
	VPUNPCKHDQ  X6, X5, X2; \
	VPUNPCKLDQ  X15, X13, X3; \
	VPUNPCKHDQ  X15, X13, X4; \
	VPUNPCKLQDQ X3, X1, X5; \
	VPUNPCKHQDQ X3, X1, X6; \
	VPUNPCKLQDQ X4, X2, X13; \
	VPUNPCKHQDQ X4, X2, X15

// HEAD8 unpacks the scales (R8) and mins (R9), sets Y10 to d·dy and Y11
// to dmin·dy of the 8 tokens, X3 to the min words, and Y8, Y9 for the
// steps.
#define HEAD8 \
	Q4K_SCALES; \
	MOVL         0(SI), AX; \
	VMOVD        AX, X1; \
	VCVTPH2PS    X1, X1; \
	VMOVSS       0(DI), X10; \
	VINSERTPS    $0x10, 0(DI)(R11*1), X10, X10; \
	VINSERTPS    $0x20, 0(DI)(R11*2), X10, X10; \
	VINSERTPS    $0x30, 0(R12), X10, X10; \
	VMOVSS       0(DI)(R11*4), X2; \
	VINSERTPS    $0x10, 0(R12)(R11*2), X2, X2; \
	VINSERTPS    $0x20, 0(R13), X2, X2; \
	VINSERTPS    $0x30, 0(R13)(R11*1), X2, X2; \
	VINSERTF128  $1, X2, Y10, Y10; \
	VMOVSHDUP    X1, X11; \
	VBROADCASTSS X11, Y11; \
	VBROADCASTSS X1, Y1; \
	VMULPS       Y10, Y11, Y11; \
	VMULPS       Y1, Y10, Y10; \
	VMOVQ        R9, X3; \
	VPMOVZXBW    X3, X3; \
	VMOVQ        R8, X8; \
	VPMOVZXBW    X8, X8; \
	VINSERTI128  $1, X8, Y8, Y8; \
	MOVL         $0x01000100, AX; \
	VMOVD        AX, X9; \
	VPBROADCASTD X9, Y9

// SETUP8 loads the pointers and constants and clears the accumulators.
#define SETUP8 \
	MOVQ         nb+0(FP), CX; \
	MOVQ         w+8(FP), SI; \
	MOVQ         a+16(FP), DI; \
	MOVQ         aStride+24(FP), R11; \
	LEAQ         (DI)(R11*2), R12; \
	ADDQ         R11, R12; \
	LEAQ         (R12)(R11*2), R13; \
	ADDQ         R11, R13; \
	VXORPS       Y0, Y0, Y0; \
	VXORPS       Y7, Y7, Y7; \
	MOVL         $0x0f0f0f0f, AX; \
	VMOVD        AX, X14; \
	VPBROADCASTD X14, Y14; \
	MOVL         $0x02020202, AX; \
	VMOVD        AX, X12; \
	VPBROADCASTD X12, Y12

#define NEXT8(lbl) \
	ADDQ $144, SI; \
	ADDQ $292, DI; \
	ADDQ $292, R12; \
	ADDQ $292, R13; \
	DECQ CX; \
	JNZ  lbl

// STORE8 writes acc − accM of the 8 tokens to out, outStride bytes apart.
#define STORE8 \
	VSUBPS       Y7, Y0, Y0; \
	MOVQ         out+32(FP), AX; \
	MOVQ         outStride+40(FP), BX; \
	VMOVSS       X0, 0(AX); \
	ADDQ         BX, AX; \
	VEXTRACTPS   $1, X0, 0(AX); \
	ADDQ         BX, AX; \
	VEXTRACTPS   $2, X0, 0(AX); \
	ADDQ         BX, AX; \
	VEXTRACTPS   $3, X0, 0(AX); \
	ADDQ         BX, AX; \
	VEXTRACTF128 $1, Y0, X0; \
	VMOVSS       X0, 0(AX); \
	ADDQ         BX, AX; \
	VEXTRACTPS   $1, X0, 0(AX); \
	ADDQ         BX, AX; \
	VEXTRACTPS   $2, X0, 0(AX); \
	ADDQ         BX, AX; \
	VEXTRACTPS   $3, X0, 0(AX); \
	VZEROUPPER; \
	RET

// func vecDotQ4_KRepackVNNIx8(nb int, w, a *byte, aStride int, out *float32, outStride int)
TEXT ·vecDotQ4_KRepackVNNIx8(SB), NOSPLIT, $0-48
	SETUP8

repack8loop:
	HEAD8
	// The mins: the 8 tokens' totals, 4 at a time.
	MINSLO
	VPHADDD     X6, X5, X5
	VPHADDD     X15, X13, X13
	VPHADDD     X13, X5, X5
	VMOVDQA64   X5, X16
	MINSHI
	VPHADDD     X6, X5, X5
	VPHADDD     X15, X13, X13
	VPHADDD     X13, X5, X5
	VINSERTI32X4 $1, X5, Y16, Y16
	VCVTDQ2PS   Y16, Y16
	VFMADD231PS Y11, Y16, Y7
	VPXOR       Y5, Y5, Y5
	VPXOR       Y6, Y6, Y6
	VPXOR       Y13, Y13, Y13
	VPXOR       Y15, Y15, Y15
	VPXORD      Y16, Y16, Y16
	VPXORD      Y17, Y17, Y17
	VPXORD      Y18, Y18, Y18
	VPXORD      Y19, Y19, Y19
	STEP8(TOKADD8, 16(SI), 4, 36)
	STEP8(TOKADD8, 48(SI), 68, 100)
	STEP8(TOKADD8, 80(SI), 132, 164)
	STEP8(TOKADD8, 112(SI), 196, 228)
	RED8
	VFMADD231PS Y10, Y1, Y0
	NEXT8(repack8loop)
	STORE8

// func vecDotQ4_KGemmVNNIx8(nb int, w, a *byte, aStride int, out *float32, outStride int)
TEXT ·vecDotQ4_KGemmVNNIx8(SB), NOSPLIT, $0-48
	SETUP8

gemm8loop:
	HEAD8
	// The mins by 64 weights, step k's 8 tokens in Y16+k (X20 keeps the
	// min words from TRANSPOSE4).
	VMOVDQA64    X3, X20
	MINSLO
	TRANSPOSE4
	VMOVDQA64    X5, X16
	VMOVDQA64    X6, X17
	VMOVDQA64    X13, X18
	VMOVDQA64    X15, X19
	VMOVDQA64    X20, X3
	MINSHI
	TRANSPOSE4
	VINSERTI32X4 $1, X5, Y16, Y16
	VINSERTI32X4 $1, X6, Y17, Y17
	VINSERTI32X4 $1, X13, Y18, Y18
	VINSERTI32X4 $1, X15, Y19, Y19
	VCVTDQ2PS    Y16, Y16
	VFMADD231PS  Y11, Y16, Y7
	VCVTDQ2PS    Y17, Y17
	VFMADD231PS  Y11, Y17, Y7
	VCVTDQ2PS    Y18, Y18
	VFMADD231PS  Y11, Y18, Y7
	VCVTDQ2PS    Y19, Y19
	VFMADD231PS  Y11, Y19, Y7
	STEP8(TOKSET8, 16(SI), 4, 36)
	RED8
	VFMADD231PS  Y10, Y1, Y0
	STEP8(TOKSET8, 48(SI), 68, 100)
	RED8
	VFMADD231PS  Y10, Y1, Y0
	STEP8(TOKSET8, 80(SI), 132, 164)
	RED8
	VFMADD231PS  Y10, Y1, Y0
	STEP8(TOKSET8, 112(SI), 196, 228)
	RED8
	VFMADD231PS  Y10, Y1, Y0
	NEXT8(gemm8loop)
	STORE8
