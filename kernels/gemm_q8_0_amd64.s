//go:build amd64 && !purego

#include "textflag.h"

// Q8_0 weights against Q8_0 activations (34-byte blocks: d f16, 32 int8),
// many rows or tokens per call, each output rounding exactly as
// vecDotQ8_0AVX2 does: per block the signed bytes multiply through
// VPMADDUBSW as |w|·(a·sign w) into 8 int32 lane sums, which become floats
// and add into the output's own 8-lane accumulator with one fused
// multiply-add by f32(dw)·f32(da); the lanes are summed at the end as hsum8.

DATA gemmOnes16<>+0(SB)/8, $0x0001000100010001
DATA gemmOnes16<>+8(SB)/8, $0x0001000100010001
DATA gemmOnes16<>+16(SB)/8, $0x0001000100010001
DATA gemmOnes16<>+24(SB)/8, $0x0001000100010001
GLOBL gemmOnes16<>(SB), RODATA|NOPTR, $32

// HSUM8 sums the 8 lanes of Y into the low float of X as hsum8 does;
// clobbers Xt.
#define HSUM8(Y, X, Xt) \
	VEXTRACTF128 $1, Y, Xt; \
	VADDPS       Xt, X, X; \
	VMOVHLPS     X, X, Xt; \
	VADDPS       Xt, X, X; \
	VMOVSHDUP    X, Xt; \
	VADDSS       Xt, X, X

// Q8_ROW adds one weight block (at m: d f16, then 32 int8) times the
// activations Ya with their scale Yda (8 copies) to Yacc; clobbers Yt (Xt
// is its low half), Yu.
#define Q8_ROW(m, Ya, Yda, Xt, Yt, Yu, Yacc) \
	VMOVDQU      2+m, Yu; \
	VPSIGNB      Yu, Ya, Yt; \
	VPABSB       Yu, Yu; \
	VPMADDUBSW   Yt, Yu, Yu; \
	VPMADDWD     gemmOnes16<>(SB), Yu, Yu; \
	VCVTDQ2PS    Yu, Yu; \
	VPBROADCASTW m, Xt; \
	VCVTPH2PS    Xt, Yt; \
	VMULPS       Yda, Yt, Yt; \
	VFMADD231PS  Yu, Yt, Yacc

// The activations are the blocked kernels' Q8_0 rows (gemm.go): nb blocks,
// then from a + 34·nb per block its float32 scale and an int32.

// func gemvQ8_0(nb int, w *byte, wStride int, a *byte, out *float32, rows int)
//
// out[r] for r < rows: rows of nb blocks at w + r·wStride against the one
// activation row at a, one row after the other.
TEXT ·gemvQ8_0(SB), NOSPLIT, $0-48
	MOVQ w+8(FP), SI
	MOVQ wStride+16(FP), R8
	MOVQ out+32(FP), DX
	MOVQ rows+40(FP), R12

	MOVQ nb+0(FP), AX
	IMULQ $34, AX
	MOVQ AX, R13          // offset of the scales

row:
	MOVQ   nb+0(FP), CX
	MOVQ   a+24(FP), DI
	LEAQ   (DI)(R13*1), R10
	MOVQ   SI, R9
	VXORPS Y0, Y0, Y0

block:
	VMOVDQU      2(DI), Y8
	VBROADCASTSS 0(R10), Y9
	Q8_ROW(0(R9), Y8, Y9, X10, Y10, Y11, Y0)
	ADDQ         $34, R9
	ADDQ         $34, DI
	ADDQ         $8, R10
	DECQ         CX
	JNZ          block

	HSUM8(Y0, X0, X8)
	VMOVSS X0, 0(DX)
	ADDQ   $4, DX
	ADDQ   R8, SI
	DECQ   R12
	JNZ    row
	VZEROUPPER
	RET

// Q8_ISUM turns one weight block's quants (at m+2)
// against the activations Ya into the 8 int32 lane sums as floats in Yu,
// with Yones the int16 ones; clobbers Yt.
#define Q8_ISUM(m, Ya, Yones, Yt, Yu) \
	VMOVDQU    2+m, Yu; \
	VPSIGNB    Yu, Ya, Yt; \
	VPABSB     Yu, Yu; \
	VPMADDUBSW Yt, Yu, Yu; \
	VPMADDWD   Yones, Yu, Yu; \
	VCVTDQ2PS  Yu, Yu

// func gemvQ8_0x2(nb int, w0, w1 *byte, wStride int, a *byte, out0, out1 *float32, rows int)
//
// Two streams of rows: out0[r] for the rows at w0 + r·wStride and out1[r]
// for those at w1 + r·wStride, r < rows. Each row keeps its own 8-lane
// accumulator (Y0, Y1) and rounds exactly as gemvQ8_0's; the two chains of
// fused multiply-adds run side by side, and each activation block and its
// scale is loaded once for both rows.
TEXT ·gemvQ8_0x2(SB), NOSPLIT, $0-64
	VMOVDQU gemmOnes16<>(SB), Y15
	MOVQ    nb+0(FP), R12
	IMULQ   $34, R12           // offset of the scales
	MOVQ    w0+8(FP), R14
	MOVQ    w1+16(FP), R11
	MOVQ    out0+40(FP), R13
	MOVQ    out1+48(FP), R8
	MOVQ    rows+56(FP), BX

pairrow:
	MOVQ   R14, SI
	MOVQ   R11, R9
	MOVQ   a+32(FP), DI
	LEAQ   (DI)(R12*1), R10
	MOVQ   nb+0(FP), CX
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1

pairblock:
	// 2 KB ahead in both streams: from memory (a 615 MB matrix, one
	// thread) the VNNI kernel measured 1.5 times as fast with this as with
	// the hardware prefetchers alone (1 to 4 KB measured alike).
	PREFETCHT0   2048(SI)
	PREFETCHT0   2048(R9)
	VMOVDQU      2(DI), Y8
	VBROADCASTSS 0(R10), Y9
	Q8_ISUM(0(SI), Y8, Y15, Y10, Y11)
	Q8_ISUM(0(R9), Y8, Y15, Y12, Y13)
	VPBROADCASTW 0(SI), X10
	VPBROADCASTW 0(R9), X12
	VCVTPH2PS    X10, Y10
	VCVTPH2PS    X12, Y12
	VMULPS       Y9, Y10, Y10
	VMULPS       Y9, Y12, Y12
	VFMADD231PS  Y11, Y10, Y0
	VFMADD231PS  Y13, Y12, Y1
	ADDQ         $34, SI
	ADDQ         $34, R9
	ADDQ         $34, DI
	ADDQ         $8, R10
	DECQ         CX
	JNZ          pairblock

	HSUM8(Y0, X0, X8)
	HSUM8(Y1, X1, X9)
	VMOVSS X0, 0(R13)
	VMOVSS X1, 0(R8)
	ADDQ   $4, R13
	ADDQ   $4, R8
	ADDQ   wStride+24(FP), R14
	ADDQ   wStride+24(FP), R11
	DECQ   BX
	JNZ    pairrow
	VZEROUPPER
	RET

// Q8V_ISUM turns one weight block's quants (at m+2) against the activations
// Ya into the 8 int32 lane sums as floats in Yu, with AVX-512 VNNI: Yp
// holds -128·(the lane's 4 activations' sum) on entry, and VPDPBUSD adds
// (w xor 0x80) = w+128 as unsigned bytes times a. Every step is exact (no
// int16 stage to saturate), so the sums are Q8_ISUM's. Y14 holds the bytes
// 0x80; clobbers Yp.
#define Q8V_ISUM(m, Ya, Yp, Yu) \
	VPXOR     2+m, Y14, Yu; \
	VPDPBUSD  Ya, Yu, Yp; \
	VCVTDQ2PS Yp, Yu

// func gemvQ8_0Vx2(nb int, w0, w1 *byte, wStride int, a *byte, out0, out1 *float32, rows int)
//
// gemvQ8_0x2 with AVX-512 VNNI (on 256-bit registers): the lane sums take
// 2 integer instructions a block instead of 5, and f32(dw) is read from
// the table f16Floats (every half's float, as VCVTPH2PS converts it)
// instead of converted.
TEXT ·gemvQ8_0Vx2(SB), NOSPLIT, $0-64
	MOVL         $0x80808080, AX
	VMOVD        AX, X14
	VPBROADCASTD X14, Y14
	MOVQ         nb+0(FP), R12
	IMULQ        $34, R12          // offset of the scales
	MOVQ         w0+8(FP), R14
	MOVQ         w1+16(FP), R11
	MOVQ         out0+40(FP), R13
	MOVQ         out1+48(FP), R8
	MOVQ         rows+56(FP), BX
	MOVQ         ·f16Floats(SB), DX

vpairrow:
	MOVQ   R14, SI
	MOVQ   R11, R9
	MOVQ   a+32(FP), DI
	LEAQ   (DI)(R12*1), R10
	MOVQ   nb+0(FP), CX
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1

vpairblock:
	// 2 KB ahead in both streams, as in gemvQ8_0x2.
	PREFETCHT0   2048(SI)
	PREFETCHT0   2048(R9)
	VMOVDQU      2(DI), Y8
	VBROADCASTSS 0(R10), Y9
	// Y7 = -128·(lane sums of a): the starting value of both rows' sums.
	VPXOR        Y6, Y6, Y6
	VPDPBUSD     Y8, Y14, Y6
	VPXOR        Y7, Y7, Y7
	VPSUBD       Y6, Y7, Y7
	VMOVDQA      Y7, Y11
	VMOVDQA      Y7, Y13
	Q8V_ISUM(0(SI), Y8, Y11, Y10)
	Q8V_ISUM(0(R9), Y8, Y13, Y12)
	MOVWLZX      0(SI), AX
	VBROADCASTSS (DX)(AX*4), Y11
	MOVWLZX      0(R9), AX
	VBROADCASTSS (DX)(AX*4), Y13
	VMULPS       Y9, Y11, Y11
	VMULPS       Y9, Y13, Y13
	VFMADD231PS  Y10, Y11, Y0
	VFMADD231PS  Y12, Y13, Y1
	ADDQ         $34, SI
	ADDQ         $34, R9
	ADDQ         $34, DI
	ADDQ         $8, R10
	DECQ         CX
	JNZ          vpairblock

	HSUM8(Y0, X0, X8)
	HSUM8(Y1, X1, X9)
	VMOVSS X0, 0(R13)
	VMOVSS X1, 0(R8)
	ADDQ   $4, R13
	ADDQ   $4, R8
	ADDQ   wStride+24(FP), R14
	ADDQ   wStride+24(FP), R11
	DECQ   BX
	JNZ    vpairrow
	VZEROUPPER
	RET

// The token-group kernel takes the activations of 8 tokens packed per block
// (gemm.go), 288 bytes a block: for each 4-byte lane m of the block a
// 32-byte slot holding that lane's quants of the 8 tokens, then the tokens'
// da as float32. A weight lane broadcast to all 8 token lanes then yields in
// one register the lane-m integer sums of all 8 outputs, which the kernel
// keeps in 8 accumulators (one per lane m, tokens across), so each output
// still has its own 8 lane accumulators, rounded exactly as vecDotQ8_0's,
// and hsum8 becomes adds of whole registers.

// Q8_G_LANE adds lane m of one weight block (its 4 quants at wm) against
// the group's slot at am, scaled by Y8, to Yacc. Clobbers Y9, Y10.
#define Q8_G_LANE(wm, am, Yacc) \
	VPBROADCASTD wm, Y9; \
	VMOVDQU      am, Y10; \
	VPSIGNB      Y9, Y10, Y10; \
	VPABSB       Y9, Y9; \
	VPMADDUBSW   Y10, Y9, Y9; \
	VPMADDWD     gemmOnes16<>(SB), Y9, Y9; \
	VCVTDQ2PS    Y9, Y9; \
	VFMADD231PS  Y9, Y8, Yacc

// func gemmQ8_0x1x8(nb int, w *byte, wStride int, a *byte, out *float32, outStride int, nt int)
//
// One row (w) by the packed group of 8 tokens at a: out[t·outStride] for
// the first nt tokens.
TEXT ·gemmQ8_0x1x8(SB), NOSPLIT, $32-56
	MOVQ   nb+0(FP), CX
	MOVQ   w+8(FP), SI
	MOVQ   a+24(FP), DI
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	VXORPS Y2, Y2, Y2
	VXORPS Y3, Y3, Y3
	VXORPS Y4, Y4, Y4
	VXORPS Y5, Y5, Y5
	VXORPS Y6, Y6, Y6
	VXORPS Y7, Y7, Y7

g8block:
	VPBROADCASTW 0(SI), X8
	VCVTPH2PS    X8, Y8
	VMULPS       256(DI), Y8, Y8
	Q8_G_LANE(2(SI), 0(DI), Y0)
	Q8_G_LANE(6(SI), 32(DI), Y1)
	Q8_G_LANE(10(SI), 64(DI), Y2)
	Q8_G_LANE(14(SI), 96(DI), Y3)
	Q8_G_LANE(18(SI), 128(DI), Y4)
	Q8_G_LANE(22(SI), 160(DI), Y5)
	Q8_G_LANE(26(SI), 192(DI), Y6)
	Q8_G_LANE(30(SI), 224(DI), Y7)
	ADDQ $34, SI
	ADDQ $288, DI
	DECQ CX
	JNZ  g8block

	// hsum8 of every token: (l0+l4 + l2+l6) + (l1+l5 + l3+l7).
	VADDPS  Y4, Y0, Y0
	VADDPS  Y5, Y1, Y1
	VADDPS  Y6, Y2, Y2
	VADDPS  Y7, Y3, Y3
	VADDPS  Y2, Y0, Y0
	VADDPS  Y3, Y1, Y1
	VADDPS  Y1, Y0, Y0
	VMOVUPS Y0, 0(SP)
	MOVQ    out+32(FP), DX
	MOVQ    outStride+40(FP), R8
	SHLQ    $2, R8
	MOVQ    nt+48(FP), CX
	XORQ    BX, BX

g8store:
	MOVL 0(SP)(BX*4), AX
	MOVL AX, 0(DX)
	ADDQ R8, DX
	INCQ BX
	CMPQ BX, CX
	JLT  g8store
	VZEROUPPER
	RET
