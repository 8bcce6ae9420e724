//go:build amd64 && !purego

#include "textflag.h"
#include "q4k_amd64.h"

// The products of quant_recent_amd64.s for one row against 4 tokens
// (activation rows at a, a + aStride, a + 2·aStride, a + 3·aStride; outputs
// outStride bytes apart from out): the row's nibbles and scales
// are unpacked once for the 4 tokens, and each token's sums reach its own
// lane of X0 (and X7 for the mins), so every lane rounds exactly as the
// one-token kernels of quant_recent_amd64.s.
//
// Registers: SI the row, DI, R11, R12, R13 the tokens; X0, X7 the float
// accumulators (token t in lane t); X10 d·dy and X11 dmin·dy per token;
// Y8, Y9, Y12, Y14 as there; Y1, Y2 a step's nibbles, Y3, Y4 its scales;
// Y5, Y6, Y13, Y15 the tokens' int32 lanes; Y11 scratch once the mins are
// added.

// TOKSET sets Yd to one token's int32 lanes of a step (activations at aq0,
// aq1); TOKADD adds them to Yd. Both clobber Y11.
#define TOKSET(aq0, aq1, Yd) \
	VPMADDUBSW aq0, Y1, Yd; \
	VPMADDUBSW aq1, Y2, Y11; \
	VPMADDWD   Y3, Yd, Yd; \
	VPMADDWD   Y4, Y11, Y11; \
	VPADDD     Y11, Yd, Yd

#define TOKADD(aq0, aq1, Yd) \
	VPMADDUBSW aq0, Y1, Y11; \
	VPMADDWD   Y3, Y11, Y11; \
	VPADDD     Y11, Yd, Yd; \
	VPMADDUBSW aq1, Y2, Y11; \
	VPMADDWD   Y4, Y11, Y11; \
	VPADDD     Y11, Yd, Yd

// TOKSETV and TOKADDV are TOKSET and TOKADD with AVX-512 VNNI: VPDPWSSD
// multiplies by the scales and adds to Yd in one instruction, with the
// same exact int32 result.
#define TOKSETV(aq0, aq1, Yd) \
	VPMADDUBSW aq0, Y1, Yd; \
	VPMADDWD   Y3, Yd, Yd; \
	VPMADDUBSW aq1, Y2, Y11; \
	VPDPWSSD   Y4, Y11, Yd

#define TOKADDV(aq0, aq1, Yd) \
	VPMADDUBSW aq0, Y1, Y11; \
	VPDPWSSD   Y3, Y11, Yd; \
	VPMADDUBSW aq1, Y2, Y11; \
	VPDPWSSD   Y4, Y11, Yd

// NIBBLES4 loads step k's 32 weight bytes at wq into Y1 (low nibbles) and
// Y2 (high), and its two scales into Y3 and Y4.
#define NIBBLES4(wq) \
	VMOVDQU wq, Y1; \
	VPSRLW  $4, Y1, Y2; \
	VPAND   Y14, Y1, Y1; \
	VPAND   Y14, Y2, Y2; \
	VPSHUFB Y9, Y8, Y3; \
	VPADDW  Y12, Y9, Y9; \
	VPSHUFB Y9, Y8, Y4; \
	VPADDW  Y12, Y9, Y9

// REDUCE4 sets X5 to the 4 tokens' sums of Y5, Y6, Y13, Y15 (token t in
// lane t).
#define REDUCE4 \
	VPHADDD      Y6, Y5, Y5; \
	VPHADDD      Y15, Y13, Y13; \
	VPHADDD      Y13, Y5, Y5; \
	VEXTRACTI128 $1, Y5, X6; \
	VPADDD       X6, X5, X5

// STEP4SET sets the 4 tokens' lanes of step k (weights at wq, activations
// at aq0, aq1 from each token's super-block).
// (TOK is TOKSET or TOKSETV.)
#define STEP4SET(TOK, wq, aq0, aq1) \
	NIBBLES4(wq); \
	TOK(aq0(DI), aq1(DI), Y5); \
	TOK(aq0(R11), aq1(R11), Y6); \
	TOK(aq0(R12), aq1(R12), Y13); \
	TOK(aq0(R13), aq1(R13), Y15)

// (TOK is TOKADD or TOKADDV.)
#define STEP4ADD(TOK, wq, aq0, aq1) \
	NIBBLES4(wq); \
	TOK(aq0(DI), aq1(DI), Y5); \
	TOK(aq0(R11), aq1(R11), Y6); \
	TOK(aq0(R12), aq1(R12), Y13); \
	TOK(aq0(R13), aq1(R13), Y15)

// HEAD4 unpacks the super-block's scales (R8) and mins (R9), sets X10 and
// X11, and sets X5, X6, X13, X15 to the 4 tokens' min sums (64 weights k
// in lane k), and Y8, Y9 for the steps.
#define HEAD4 \
	Q4K_SCALES; \
	MOVL         0(SI), AX; \
	VMOVD        AX, X1; \
	VCVTPH2PS    X1, X1; \
	VMOVSS       0(DI), X10; \
	VINSERTPS    $0x10, 0(R11), X10, X10; \
	VINSERTPS    $0x20, 0(R12), X10, X10; \
	VINSERTPS    $0x30, 0(R13), X10, X10; \
	VMOVSHDUP    X1, X11; \
	VBROADCASTSS X11, X11; \
	VBROADCASTSS X1, X1; \
	VMULPS       X10, X11, X11; \
	VMULPS       X1, X10, X10; \
	VMOVQ        R9, X3; \
	VPMOVZXBW    X3, X3; \
	VMOVDQU      260(DI), X5; \
	VPHADDW      276(DI), X5, X5; \
	VPMADDWD     X3, X5, X5; \
	VMOVDQU      260(R11), X6; \
	VPHADDW      276(R11), X6, X6; \
	VPMADDWD     X3, X6, X6; \
	VMOVDQU      260(R12), X13; \
	VPHADDW      276(R12), X13, X13; \
	VPMADDWD     X3, X13, X13; \
	VMOVDQU      260(R13), X15; \
	VPHADDW      276(R13), X15, X15; \
	VPMADDWD     X3, X15, X15; \
	VMOVQ        R8, X8; \
	VPMOVZXBW    X8, X8; \
	VINSERTI128  $1, X8, Y8, Y8; \
	MOVL         $0x01000100, AX; \
	VMOVD        AX, X9; \
	VPBROADCASTD X9, Y9

// SETUP4 loads the pointers and constants and clears the accumulators.
#define SETUP4 \
	MOVQ         nb+0(FP), CX; \
	MOVQ         w+8(FP), SI; \
	MOVQ         a+16(FP), DI; \
	MOVQ         aStride+24(FP), AX; \
	LEAQ         (DI)(AX*1), R11; \
	LEAQ         (R11)(AX*1), R12; \
	LEAQ         (R12)(AX*1), R13; \
	VXORPS       X0, X0, X0; \
	VXORPS       X7, X7, X7; \
	MOVL         $0x0f0f0f0f, AX; \
	VMOVD        AX, X14; \
	VPBROADCASTD X14, Y14; \
	MOVL         $0x02020202, AX; \
	VMOVD        AX, X12; \
	VPBROADCASTD X12, Y12

// NEXT4 moves to the next super-block and loops to lbl.
#define NEXT4(lbl) \
	ADDQ $144, SI; \
	ADDQ $292, DI; \
	ADDQ $292, R11; \
	ADDQ $292, R12; \
	ADDQ $292, R13; \
	DECQ CX; \
	JNZ  lbl

// STORE4 writes acc − accM of the 4 tokens to out, outStride bytes apart.
#define STORE4 \
	VSUBPS     X7, X0, X0; \
	MOVQ       out+32(FP), AX; \
	MOVQ       outStride+40(FP), BX; \
	VMOVSS     X0, 0(AX); \
	ADDQ       BX, AX; \
	VEXTRACTPS $1, X0, 0(AX); \
	ADDQ       BX, AX; \
	VEXTRACTPS $2, X0, 0(AX); \
	ADDQ       BX, AX; \
	VEXTRACTPS $3, X0, 0(AX); \
	VZEROUPPER; \
	RET

// REPACK4 and GEMM4 are the kernels' bodies (TOK: TOKADD/TOKSET, or their
// VNNI forms; lbl: the loop's label).
#define REPACK4(TOK, lbl) \
	SETUP4; \
lbl:; \
	HEAD4; \
	VPHADDD     X6, X5, X5; \
	VPHADDD     X15, X13, X13; \
	VPHADDD     X13, X5, X5; \
	VCVTDQ2PS   X5, X5; \
	VFMADD231PS X11, X5, X7; \
	VPXOR       Y5, Y5, Y5; \
	VPXOR       Y6, Y6, Y6; \
	VPXOR       Y13, Y13, Y13; \
	VPXOR       Y15, Y15, Y15; \
	STEP4ADD(TOK, 16(SI), 4, 36); \
	STEP4ADD(TOK, 48(SI), 68, 100); \
	STEP4ADD(TOK, 80(SI), 132, 164); \
	STEP4ADD(TOK, 112(SI), 196, 228); \
	REDUCE4; \
	VCVTDQ2PS   X5, X5; \
	VFMADD231PS X10, X5, X0; \
	NEXT4(lbl); \
	STORE4

// In GEMM4 the mins by 64 weights are transposed to step k's 4 tokens.
#define GEMM4(TOK, lbl) \
	SETUP4; \
lbl:; \
	HEAD4; \
	VPUNPCKLDQ  X6, X5, X1; \
	VPUNPCKHDQ  X6, X5, X2; \
	VPUNPCKLDQ  X15, X13, X3; \
	VPUNPCKHDQ  X15, X13, X4; \
	VPUNPCKLQDQ X3, X1, X5; \
	VPUNPCKHQDQ X3, X1, X6; \
	VPUNPCKLQDQ X4, X2, X13; \
	VPUNPCKHQDQ X4, X2, X15; \
	VCVTDQ2PS   X5, X5; \
	VFMADD231PS X11, X5, X7; \
	VCVTDQ2PS   X6, X6; \
	VFMADD231PS X11, X6, X7; \
	VCVTDQ2PS   X13, X13; \
	VFMADD231PS X11, X13, X7; \
	VCVTDQ2PS   X15, X15; \
	VFMADD231PS X11, X15, X7; \
	STEP4SET(TOK, 16(SI), 4, 36); \
	REDUCE4; \
	VCVTDQ2PS   X5, X5; \
	VFMADD231PS X10, X5, X0; \
	STEP4SET(TOK, 48(SI), 68, 100); \
	REDUCE4; \
	VCVTDQ2PS   X5, X5; \
	VFMADD231PS X10, X5, X0; \
	STEP4SET(TOK, 80(SI), 132, 164); \
	REDUCE4; \
	VCVTDQ2PS   X5, X5; \
	VFMADD231PS X10, X5, X0; \
	STEP4SET(TOK, 112(SI), 196, 228); \
	REDUCE4; \
	VCVTDQ2PS   X5, X5; \
	VFMADD231PS X10, X5, X0; \
	NEXT4(lbl); \
	STORE4

// func vecDotQ4_KRepackAVX2x4(nb int, w, a *byte, aStride int, out *float32, outStride int)
TEXT ·vecDotQ4_KRepackAVX2x4(SB), NOSPLIT, $0-48
	REPACK4(TOKADD, repack4loop)

// func vecDotQ4_KGemmAVX2x4(nb int, w, a *byte, aStride int, out *float32, outStride int)
TEXT ·vecDotQ4_KGemmAVX2x4(SB), NOSPLIT, $0-48
	GEMM4(TOKSET, gemm4loop)

// func vecDotQ4_KRepackVNNIx4(nb int, w, a *byte, aStride int, out *float32, outStride int)
TEXT ·vecDotQ4_KRepackVNNIx4(SB), NOSPLIT, $0-48
	REPACK4(TOKADDV, vrepack4loop)

// func vecDotQ4_KGemmVNNIx4(nb int, w, a *byte, aStride int, out *float32, outStride int)
TEXT ·vecDotQ4_KGemmVNNIx4(SB), NOSPLIT, $0-48
	GEMM4(TOKSETV, vgemm4loop)
