//go:build amd64 && !purego

#include "textflag.h"
#include "iq4_amd64.h"

// Four rows of MXFP4 or IQ4_NL against one token's Q8_0 activations: the
// decode's products of the table formats. The activation block loads once
// for the 4 rows, and each row's block integer (exact, as the one-token
// kernels sum it) reaches its own lane of X0 by one fused multiply-add with
// the row's dw·da, block after block, so every lane rounds exactly as
// vecDotMXFP4AVX2 / vecDotIQ4_NLAVX2 (the order of ggml's repacked
// products). Rows at w, w + wStride, w + 2·wStride, w + 3·wStride (SI, R9,
// R10, R11); the outputs are out[0..3]. Every row prefetches the same block
// of the row 4 below it, which the next call reads: a decode reads a matrix
// 4 rows at a time, and with only the hardware prefetchers it ran at 4.5 GB/s
// from memory (7 with this).

// ROWS4 runs the four rows' blocks against the activations at DI.
#define ROWS4(off) \
	PREFETCHT0 (SI)(R12*1); \
	PREFETCHT0 (R9)(R12*1); \
	PREFETCHT0 (R10)(R12*1); \
	PREFETCHT0 (R11)(R12*1); \
	VMOVDQU 2(DI), Y12; \
	TABLEROW(off(SI), X5, Y5, Y12, X3, Y3); \
	TABLEROW(off(R9), X6, Y6, Y12, X3, Y3); \
	TABLEROW(off(R10), X7, Y7, Y12, X3, Y3); \
	TABLEROW(off(R11), X8, Y8, Y12, X3, Y3); \
	REDUCEROWS; \
	VCVTDQ2PS   X5, X5; \
	VFMADD231PS X1, X5, X0

// MXDWDA sets X1 to dw·da of the 4 rows' MXFP4 blocks at SI, R9, R10, R11
// (dw = 2^(e−128) from the table at R8) against the Q8_0 block at DI, each
// the one-token kernel's product. Clobbers AX, BX, X2.
#define MXDWDA \
	MOVWLZX      0(DI), BX; \
	VMOVD        BX, X2; \
	VCVTPH2PS    X2, X2; \
	VBROADCASTSS X2, X2; \
	MOVBLZX      0(SI), AX; \
	VMOVSS       (R8)(AX*4), X1; \
	MOVBLZX      0(R9), AX; \
	VINSERTPS    $0x10, (R8)(AX*4), X1, X1; \
	MOVBLZX      0(R10), AX; \
	VINSERTPS    $0x20, (R8)(AX*4), X1, X1; \
	MOVBLZX      0(R11), AX; \
	VINSERTPS    $0x30, (R8)(AX*4), X1, X1; \
	VMULPS       X2, X1, X1

// NEXT4ROWS moves the 4 rows on by one block of bsize bytes and the
// activations by one Q8_0 block, and counts the blocks down.
#define NEXT4ROWS(bsize) \
	ADDQ $bsize, SI; \
	ADDQ $bsize, R9; \
	ADDQ $bsize, R10; \
	ADDQ $bsize, R11; \
	ADDQ $34, DI; \
	DECQ CX

// STORE4ROWS writes the 4 rows' sums X0 to out.
#define STORE4ROWS \
	MOVQ    out+32(FP), AX; \
	VMOVUPS X0, 0(AX); \
	VZEROUPPER; \
	RET

// ROWPTRS loads nb into CX, the 4 rows into SI, R9, R10, R11, the
// activations into DI, and 4·wStride into R12 (the next 4 rows).
#define ROWPTRS \
	MOVQ   nb+0(FP), CX; \
	MOVQ   w+8(FP), SI; \
	MOVQ   wStride+16(FP), AX; \
	LEAQ   (SI)(AX*1), R9; \
	LEAQ   (R9)(AX*1), R10; \
	LEAQ   (R10)(AX*1), R11; \
	MOVQ   a+24(FP), DI; \
	MOVQ   AX, R12; \
	SHLQ   $2, R12

// func vecDotMXFP4Rows4AVX2(nb int, w *byte, wStride int, a *byte, out *float32)
TEXT ·vecDotMXFP4Rows4AVX2(SB), NOSPLIT, $0-40
	ROWPTRS
	LEAQ   ·e8m0Halves(SB), R8
	VXORPS X0, X0, X0
	TABLESETUP(·fp4Values(SB))

mxrows:
	// dw·da of the 4 rows, dw = 2^(e−128) from the table
	MXDWDA
	ROWS4(1)
	NEXT4ROWS(17)
	JNZ          mxrows

	STORE4ROWS

// func vecDotIQ4_NLRows4AVX2(nb int, w *byte, wStride int, a *byte, out *float32)
TEXT ·vecDotIQ4_NLRows4AVX2(SB), NOSPLIT, $0-40
	ROWPTRS
	VXORPS X0, X0, X0
	TABLESETUP(·iq4nlValues(SB))

nlrows:
	// dw·da of the 4 rows
	MOVWLZX      0(DI), BX
	VMOVD        BX, X2
	VCVTPH2PS    X2, X2
	VBROADCASTSS X2, X2
	MOVWLZX      0(SI), AX
	VMOVD        AX, X1
	MOVWLZX      0(R9), AX
	VPINSRW      $1, AX, X1, X1
	MOVWLZX      0(R10), AX
	VPINSRW      $2, AX, X1, X1
	MOVWLZX      0(R11), AX
	VPINSRW      $3, AX, X1, X1
	VCVTPH2PS    X1, X1
	VMULPS       X2, X1, X1
	ROWS4(2)
	NEXT4ROWS(18)
	JNZ          nlrows

	STORE4ROWS

// ROWV sets Yacc to one row's 8 int32 lane sums of the block (nibbles at
// m) against the activations Y12, with AVX-512 VNNI: the weights looked
// up offset by 12 (Y13: fp4Values12), all ≥ 0, so VPDPBUSD takes them
// unsigned, from Y10 = −12·(the lane's activation sum): exact, the same
// lane sums as TABLEROW's. Clobbers X3, Y4.
#define ROWV(m, Yacc) \
	NIBBLES4X(m, X4, Y4, X3, Y14); \
	VPSHUFB  Y4, Y13, Y4; \
	VMOVDQA  Y10, Yacc; \
	VPDPBUSD Y12, Y4, Yacc

// func vecDotMXFP4Rows4VNNI(nb int, w *byte, wStride int, a *byte, out *float32)
TEXT ·vecDotMXFP4Rows4VNNI(SB), NOSPLIT, $0-40
	ROWPTRS
	LEAQ           ·e8m0Halves(SB), R8
	VXORPS         X0, X0, X0
	MOVL           $0x0f0f0f0f, AX
	VMOVD          AX, X14
	VPBROADCASTD   X14, Y14
	MOVL           $0x0c0c0c0c, AX
	VMOVD          AX, X15
	VPBROADCASTD   X15, Y15
	VBROADCASTI128 ·fp4Values12(SB), Y13

mxvrows:
	PREFETCHT0   (SI)(R12*1)
	PREFETCHT0   (R9)(R12*1)
	PREFETCHT0   (R10)(R12*1)
	PREFETCHT0   (R11)(R12*1)
	MXDWDA
	VMOVDQU      2(DI), Y12
	VPXOR        Y11, Y11, Y11
	VPDPBUSD     Y12, Y15, Y11
	VPXOR        Y10, Y10, Y10
	VPSUBD       Y11, Y10, Y10
	ROWV(1(SI), Y5)
	ROWV(1(R9), Y6)
	ROWV(1(R10), Y7)
	ROWV(1(R11), Y8)
	REDUCEROWS
	VCVTDQ2PS    X5, X5
	VFMADD231PS  X1, X5, X0
	NEXT4ROWS(17)
	JNZ          mxvrows

	STORE4ROWS
