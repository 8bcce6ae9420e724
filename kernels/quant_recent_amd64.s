//go:build amd64 && !purego

#include "textflag.h"
#include "q4k_amd64.h"

// The Q4_K products of recent ggml's repacked kernels (quant_recent.go).
// The integer work is vecDotQ4_KAVX2's; only where the integers become
// floats differs: every 64 weights' integer sum (the 32 bytes of one
// SUBBLOCKS step) is kept apart, and the super-block's four of them, with
// their four min sums, reach a scalar float accumulator by fused
// multiply-adds, one per super-block (gemv) or one per 64 weights (gemm).
//
// Registers: X0 the float accumulator, X7 the float accumulator of the
// min terms, Y8 the 8 sub-block scales as int16 in both lanes, Y9 the
// VPSHUFB control that broadcasts scale j, Y12 its per-sub-block step, Y14
// 0x0f bytes; Y5, Y6, Y13, Y15 the int32 lanes of the four 64-weight steps.

// STEP sets Yd to the int32 lanes of 64 weights: the 32 bytes at wq hold
// sub-block 2k in their low nibbles and 2k+1 in their high nibbles, against
// the 64 int8 at aq0 and aq1.
#define STEP(wq, aq0, aq1, Yd) \
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
	VPADDD     Y1, Y2, Yd

// SUPERBLOCK sets X5 to the four 64-weight integer sums of the super-block
// at SI against the one at DI (int32, step k in lane k), X11 to their four
// min sums (m_2k·(bsum_4k + bsum_4k+1) + m_2k+1·(bsum_4k+2 + bsum_4k+3)), and
// X1 to d·dy in lane 0 and dmin·dy in lane 1.
#define SUPERBLOCK \
	Q4K_SCALES; \
	VMOVQ        R9, X10; \
	VPMOVZXBW    X10, X10; \
	VMOVDQU      260(DI), X11; \
	VPHADDW      276(DI), X11, X11; \
	VPMADDWD     X10, X11, X11; \
	VMOVQ        R8, X8; \
	VPMOVZXBW    X8, X8; \
	VINSERTI128  $1, X8, Y8, Y8; \
	MOVL         $0x01000100, AX; \
	VMOVD        AX, X9; \
	VPBROADCASTD X9, Y9; \
	STEP(16(SI), 4(DI), 36(DI), Y5); \
	STEP(48(SI), 68(DI), 100(DI), Y6); \
	STEP(80(SI), 132(DI), 164(DI), Y13); \
	STEP(112(SI), 196(DI), 228(DI), Y15); \
	VPHADDD      Y6, Y5, Y5; \
	VPHADDD      Y15, Y13, Y13; \
	VPHADDD      Y13, Y5, Y5; \
	VEXTRACTI128 $1, Y5, X1; \
	VPADDD       X1, X5, X5; \
	MOVL         0(SI), AX; \
	VMOVD        AX, X1; \
	VCVTPH2PS    X1, X1; \
	VBROADCASTSS 0(DI), X2; \
	VMULPS       X2, X1, X1

// SETUP_Q4K loads the constants and clears the accumulators.
#define SETUP_Q4K \
	MOVQ         nb+0(FP), CX; \
	MOVQ         w+8(FP), SI; \
	MOVQ         a+16(FP), DI; \
	VXORPS       X0, X0, X0; \
	VXORPS       X7, X7, X7; \
	MOVL         $0x0f0f0f0f, AX; \
	VMOVD        AX, X14; \
	VPBROADCASTD X14, Y14; \
	MOVL         $0x02020202, AX; \
	VMOVD        AX, X12; \
	VPBROADCASTD X12, Y12

// func vecDotQ4_KRepackAVX2(nb int, w, a *byte) float32
TEXT ·vecDotQ4_KRepackAVX2(SB), NOSPLIT, $0-28
	SETUP_Q4K
	MOVQ  CX, R11
	IMULQ $144, R11 // the row's length: the next row of a matrix

repackloop:
	// The same super-block of the next row: a decode reads a matrix row
	// after row, and the hardware prefetchers alone left it short of the
	// bandwidth.
	PREFETCHT0 (SI)(R11*1)
	PREFETCHT0 64(SI)(R11*1)
	PREFETCHT0 128(SI)(R11*1)
	SUPERBLOCK
	VPHADDD      X5, X5, X5
	VPHADDD      X5, X5, X5
	VPHADDD      X11, X11, X11
	VPHADDD      X11, X11, X11
	VCVTDQ2PS    X5, X5
	VCVTDQ2PS    X11, X11
	VMOVSHDUP    X1, X3
	VFMADD231SS  X1, X5, X0
	VFMADD231SS  X3, X11, X7
	ADDQ         $144, SI
	ADDQ         $292, DI
	DECQ         CX
	JNZ          repackloop

	VSUBSS X7, X0, X0
	VZEROUPPER
	MOVSS  X0, ret+24(FP)
	RET

// func vecDotQ4_KGemmAVX2(nb int, w, a *byte) float32
TEXT ·vecDotQ4_KGemmAVX2(SB), NOSPLIT, $0-28
	SETUP_Q4K

gemmloop:
	SUPERBLOCK
	VCVTDQ2PS    X5, X5
	VCVTDQ2PS    X11, X11
	VMOVSHDUP    X1, X3
	VFMADD231SS  X1, X5, X0
	VFMADD231SS  X3, X11, X7
	VPSRLDQ      $4, X5, X5
	VPSRLDQ      $4, X11, X11
	VFMADD231SS  X1, X5, X0
	VFMADD231SS  X3, X11, X7
	VPSRLDQ      $4, X5, X5
	VPSRLDQ      $4, X11, X11
	VFMADD231SS  X1, X5, X0
	VFMADD231SS  X3, X11, X7
	VPSRLDQ      $4, X5, X5
	VPSRLDQ      $4, X11, X11
	VFMADD231SS  X1, X5, X0
	VFMADD231SS  X3, X11, X7
	ADDQ         $144, SI
	ADDQ         $292, DI
	DECQ         CX
	JNZ          gemmloop

	VSUBSS X7, X0, X0
	VZEROUPPER
	MOVSS  X0, ret+24(FP)
	RET
