//go:build amd64 && !purego

#include "textflag.h"
#include "iq4_amd64.h"

// The IQ4_NL and MXFP4 products of quant_iq4_amd64.s for one row against 4
// tokens (activation rows at a, a + aStride, a + 2·aStride, a + 3·aStride;
// outputs outStride bytes apart from out): each block's 32 weights are
// unpacked once for the 4 tokens, and each token's exact integer sum of
// the block reaches its own lane of X0 by one fused multiply-add with its
// own dw·da, block after block, so that every lane rounds exactly as the
// one-token kernel does.
//
// Registers: SI the row, DI the first token's row, R11 aStride and R12
// 3·aStride (only DI moves); X0 the float accumulators (token t in lane
// t); X1 dw·da per token; Y3 a block's signed weights, Y4 their
// magnitudes; Y5-Y8 the tokens' int32 lanes; Y13 the format's table in
// both lanes, Y14 0x0f bytes, Y15 int16 ones.

// SETUPX4 loads the pointers and constants and clears the accumulators;
// tab is the format's table.
#define SETUPX4(tab) \
	MOVQ           nb+0(FP), CX; \
	MOVQ           w+8(FP), SI; \
	MOVQ           a+16(FP), DI; \
	MOVQ           aStride+24(FP), R11; \
	LEAQ           (R11)(R11*2), R12; \
	VXORPS         X0, X0, X0; \
	TABLESETUP(tab)

// DWDA4 sets X1 to dw·da of the 4 tokens, from dw broadcast in X1: the
// tokens' f16 scales converted, times dw, one rounding as the one-token
// kernel's VMULSS. Clobbers AX, X2.
#define DWDA4 \
	MOVWLZX   0(DI), AX; \
	VMOVD     AX, X2; \
	VPINSRW   $1, (DI)(R11*1), X2, X2; \
	VPINSRW   $2, (DI)(R11*2), X2, X2; \
	VPINSRW   $3, (DI)(R12*1), X2, X2; \
	VCVTPH2PS X2, X2; \
	VMULPS    X2, X1, X1

// TOK sets Yd to a token's 8 int32 lanes of the block (activations at
// aq): the int16 pair sums |w|·(a·sign w), widened.
#define TOK(aq, Yd) \
	VMOVDQU    aq, Yd; \
	VPSIGNB    Y3, Yd, Yd; \
	VPMADDUBSW Yd, Y4, Yd; \
	VPMADDWD   Y15, Yd, Yd

// BLOCK4 adds the block of weights whose 16 nibble bytes are at wq to the
// 4 tokens' accumulators: their 4 integer sums, in lanes t of X5, times
// X1, into X0.
#define BLOCK4(wq) \
	VMOVDQU      wq, X3; \
	VPSRLW       $4, X3, X4; \
	VINSERTI128  $1, X4, Y3, Y3; \
	VPAND        Y14, Y3, Y3; \
	VPSHUFB      Y3, Y13, Y3; \
	VPSIGNB      Y3, Y3, Y4; \
	TOK(2(DI), Y5); \
	TOK(2(DI)(R11*1), Y6); \
	TOK(2(DI)(R11*2), Y7); \
	TOK(2(DI)(R12*1), Y8); \
	VPHADDD      Y6, Y5, Y5; \
	VPHADDD      Y8, Y7, Y7; \
	VPHADDD      Y7, Y5, Y5; \
	VEXTRACTI128 $1, Y5, X6; \
	VPADDD       X6, X5, X5; \
	VCVTDQ2PS    X5, X5; \
	VFMADD231PS  X1, X5, X0

// STOREX4 writes the 4 tokens' sums to out, outStride bytes apart.
#define STOREX4 \
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

// func vecDotIQ4_NLAVX2x4(nb int, w, a *byte, aStride int, out *float32, outStride int)
TEXT ·vecDotIQ4_NLAVX2x4(SB), NOSPLIT, $0-48
	SETUPX4(·iq4nlValues(SB))

nl4loop:
	MOVWLZX      0(SI), AX
	VMOVD        AX, X1
	VCVTPH2PS    X1, X1
	VBROADCASTSS X1, X1
	DWDA4
	BLOCK4(2(SI))
	ADDQ         $18, SI
	ADDQ         $34, DI
	DECQ         CX
	JNZ          nl4loop
	STOREX4

// func vecDotMXFP4AVX2x4(nb int, w, a *byte, aStride int, out *float32, outStride int)
TEXT ·vecDotMXFP4AVX2x4(SB), NOSPLIT, $0-48
	SETUPX4(·fp4Values(SB))
	LEAQ ·e8m0Halves(SB), R8

mx4loop:
	// dw = 2^(e−128) from the table
	MOVBLZX      0(SI), AX
	VBROADCASTSS (R8)(AX*4), X1
	DWDA4
	BLOCK4(1(SI))
	ADDQ         $17, SI
	ADDQ         $34, DI
	DECQ         CX
	JNZ          mx4loop
	STOREX4

// func vecDotMXFP4AVX2x4s(nb int, w, a *byte, aStride int, out *float32, outStride int, side *byte, sideStride int)
//
// vecDotMXFP4AVX2x4 with the 4 tokens' per-block terms prepared once for
// all rows (mxfp4Side): at side, block after block sideStride bytes apart,
// the 4 tokens' da as float32, and sideStride/2 bytes on 12 times their
// block's sum of quants as int32. The weights are looked up offset by 12
// (fp4Values12, all ≥ 0), so VPMADDUBSW takes them unsigned against the
// activations straight from memory; Σ(w+12)·a − 12·Σa is the block's
// integer sum, exact (no int16 pair sum exceeds 2·24·127). X1 is dw·da, the
// same product as the one-token kernel's.
TEXT ·vecDotMXFP4AVX2x4s(SB), NOSPLIT, $0-64
	SETUPX4(·fp4Values12(SB))
	LEAQ ·e8m0Halves(SB), R8
	MOVQ side+48(FP), R9
	MOVQ sideStride+56(FP), R13
	MOVQ R13, R10
	SHRQ $1, R10

mxs4loop:
	MOVBLZX      0(SI), AX
	VBROADCASTSS (R8)(AX*4), X1
	VMULPS       (R9), X1, X1
	VMOVDQU      1(SI), X3
	VPSRLW       $4, X3, X4
	VINSERTI128  $1, X4, Y3, Y3
	VPAND        Y14, Y3, Y3
	VPSHUFB      Y3, Y13, Y3
	VPMADDUBSW   2(DI), Y3, Y5
	VPMADDWD     Y15, Y5, Y5
	VPMADDUBSW   2(DI)(R11*1), Y3, Y6
	VPMADDWD     Y15, Y6, Y6
	VPMADDUBSW   2(DI)(R11*2), Y3, Y7
	VPMADDWD     Y15, Y7, Y7
	VPMADDUBSW   2(DI)(R12*1), Y3, Y8
	VPMADDWD     Y15, Y8, Y8
	VPHADDD      Y6, Y5, Y5
	VPHADDD      Y8, Y7, Y7
	VPHADDD      Y7, Y5, Y5
	VEXTRACTI128 $1, Y5, X6
	VPADDD       X6, X5, X5
	VPSUBD       (R9)(R10*1), X5, X5
	VCVTDQ2PS    X5, X5
	VFMADD231PS  X1, X5, X0
	ADDQ         $17, SI
	ADDQ         $34, DI
	ADDQ         R13, R9
	DECQ         CX
	JNZ          mxs4loop
	STOREX4

// func vecDotMXFP4AVX2x8s(nb int, w, a *byte, aStride int, out *float32, outStride int, side *byte, sideStride int)
//
// vecDotMXFP4AVX2x4s for 8 tokens (rows at a + k·aStride, k < 8; R13 the
// fifth), token t in lane t of Y0: the block's weights, once for 8 tokens,
// and one reduction, conversion and fused multiply-add for all 8.
TEXT ·vecDotMXFP4AVX2x8s(SB), NOSPLIT, $0-64
	SETUPX4(·fp4Values12(SB))
	LEAQ ·e8m0Halves(SB), R8
	LEAQ (DI)(R11*4), R13
	MOVQ side+48(FP), R9
	MOVQ sideStride+56(FP), DX
	MOVQ DX, BX
	SHRQ $1, BX

mxs8loop:
	MOVBLZX      0(SI), AX
	VBROADCASTSS (R8)(AX*4), Y1
	VMULPS       (R9), Y1, Y1
	VMOVDQU      1(SI), X3
	VPSRLW       $4, X3, X4
	VINSERTI128  $1, X4, Y3, Y3
	VPAND        Y14, Y3, Y3
	VPSHUFB      Y3, Y13, Y3
	VPMADDUBSW   2(DI), Y3, Y5
	VPMADDWD     Y15, Y5, Y5
	VPMADDUBSW   2(DI)(R11*1), Y3, Y6
	VPMADDWD     Y15, Y6, Y6
	VPMADDUBSW   2(DI)(R11*2), Y3, Y7
	VPMADDWD     Y15, Y7, Y7
	VPMADDUBSW   2(DI)(R12*1), Y3, Y8
	VPMADDWD     Y15, Y8, Y8
	VPMADDUBSW   2(R13), Y3, Y9
	VPMADDWD     Y15, Y9, Y9
	VPMADDUBSW   2(R13)(R11*1), Y3, Y10
	VPMADDWD     Y15, Y10, Y10
	VPMADDUBSW   2(R13)(R11*2), Y3, Y11
	VPMADDWD     Y15, Y11, Y11
	VPMADDUBSW   2(R13)(R12*1), Y3, Y12
	VPMADDWD     Y15, Y12, Y12
	VPHADDD      Y6, Y5, Y5
	VPHADDD      Y8, Y7, Y7
	VPHADDD      Y7, Y5, Y5
	VPHADDD      Y10, Y9, Y9
	VPHADDD      Y12, Y11, Y11
	VPHADDD      Y11, Y9, Y9
	VPERM2I128   $0x20, Y9, Y5, Y2
	VPERM2I128   $0x31, Y9, Y5, Y4
	VPADDD       Y4, Y2, Y2
	VPSUBD       (R9)(BX*1), Y2, Y2
	VCVTDQ2PS    Y2, Y2
	VFMADD231PS  Y1, Y2, Y0
	ADDQ         $17, SI
	ADDQ         $34, DI
	ADDQ         $34, R13
	ADDQ         DX, R9
	DECQ         CX
	JNZ          mxs8loop

	MOVQ         out+32(FP), AX
	MOVQ         outStride+40(FP), BX
	VMOVSS       X0, 0(AX)
	ADDQ         BX, AX
	VEXTRACTPS   $1, X0, 0(AX)
	ADDQ         BX, AX
	VEXTRACTPS   $2, X0, 0(AX)
	ADDQ         BX, AX
	VEXTRACTPS   $3, X0, 0(AX)
	VEXTRACTF128 $1, Y0, X0
	ADDQ         BX, AX
	VMOVSS       X0, 0(AX)
	ADDQ         BX, AX
	VEXTRACTPS   $1, X0, 0(AX)
	ADDQ         BX, AX
	VEXTRACTPS   $2, X0, 0(AX)
	ADDQ         BX, AX
	VEXTRACTPS   $3, X0, 0(AX)
	VZEROUPPER
	RET
