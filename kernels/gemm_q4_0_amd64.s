//go:build amd64 && !purego

#include "textflag.h"

// Q4_0 weights (18-byte blocks: d f16, 16 bytes of nibbles, weight j in the
// low nibble of byte j, weight 16+j in the high one) against the blocked
// kernels' Q8_0 activations (gemm.go: nb 34-byte blocks, then per block its
// float32 scale da and the int32 8·Σq at a + 34·nb + 8·b).
//
// Each output rounds as vecDotQ4_0: per block the exact integer
// Σ (q-8)·a, here Σ q·a - 8·Σa, becomes a float that is added into the
// output's single float sum with one fused multiply-add by f32(dw)·da, block
// after block. The mat-vec gathers the integer sums of 8 blocks into the
// lanes of one register (a VPHADDW tree), so that the float work is done 8
// at a time; the token-group kernel has one token per lane.

DATA q4Ones16<>+0(SB)/8, $0x0001000100010001
DATA q4Ones16<>+8(SB)/8, $0x0001000100010001
DATA q4Ones16<>+16(SB)/8, $0x0001000100010001
DATA q4Ones16<>+24(SB)/8, $0x0001000100010001
GLOBL q4Ones16<>(SB), RODATA|NOPTR, $32

// q4Shifts shifts the high lane's dwords by 4: with the 16 nibble bytes in
// both lanes, the low lane keeps the low nibbles and the high lane gets the
// high ones.
DATA q4Shifts<>+0(SB)/8, $0
DATA q4Shifts<>+8(SB)/8, $0
DATA q4Shifts<>+16(SB)/8, $0x0000000400000004
DATA q4Shifts<>+24(SB)/8, $0x0000000400000004
GLOBL q4Shifts<>(SB), RODATA|NOPTR, $32

// Y15 0x0f bytes, Y14 q4Shifts.
#define Q4_CONSTANTS \
	MOVL         $0x0f0f0f0f, AX; \
	VMOVD        AX, X15; \
	VPBROADCASTD X15, Y15; \
	VMOVDQU      q4Shifts<>(SB), Y14

// Q4_PAIRS sets Yv to the 16 int16 pair sums of q·a for the weight block
// whose nibbles are at wm and the activation quants at am (each at most
// 2·15·127 in magnitude).
#define Q4_PAIRS(wm, am, Yv) \
	VBROADCASTI128 wm, Yv; \
	VPSRLVD        Y14, Yv, Yv; \
	VPAND          Y15, Yv, Yv; \
	VPMADDUBSW     am, Yv, Yv

// Q4_WIDEN sets Yx to the int32 sums of the low and high lane of Yx, whose
// 8 int16 lanes each hold one sum of 8 pairs; clobbers Ya.
#define Q4_WIDEN(Yx, Xx, Ya, Xa) \
	VEXTRACTI128 $1, Yx, Xa; \
	VPMOVSXWD    Xx, Yx; \
	VPMOVSXWD    Xa, Ya; \
	VPADDD       Ya, Yx, Yx

// Q4_ISUM8 sets Yx to Σ q·a - 8·Σa of the 8 blocks of the row at rp
// against the activations at DI, as floats in block order: a VPHADDW tree
// (sums of up to 8 pairs stay within int16), then widened. Y13 holds the
// blocks' 8·Σa. Clobbers Ya, Yb, Yc.
#define Q4_ISUM8(rp, Yx, Xx, Ya, Xa, Yb, Yc) \
	Q4_PAIRS(2(rp), 2(DI), Yx); \
	Q4_PAIRS(20(rp), 36(DI), Ya); \
	VPHADDW    Ya, Yx, Yx; \
	Q4_PAIRS(38(rp), 70(DI), Ya); \
	Q4_PAIRS(56(rp), 104(DI), Yb); \
	VPHADDW    Yb, Ya, Ya; \
	VPHADDW    Ya, Yx, Yx; \
	Q4_PAIRS(74(rp), 138(DI), Ya); \
	Q4_PAIRS(92(rp), 172(DI), Yb); \
	VPHADDW    Yb, Ya, Ya; \
	Q4_PAIRS(110(rp), 206(DI), Yb); \
	Q4_PAIRS(128(rp), 240(DI), Yc); \
	VPHADDW    Yc, Yb, Yb; \
	VPHADDW    Yb, Ya, Ya; \
	VPHADDW    Ya, Yx, Yx; \
	Q4_WIDEN(Yx, Xx, Ya, Xa); \
	VPSUBD     Y13, Yx, Yx; \
	VCVTDQ2PS  Yx, Yx

// Q4_SCALE8 sets Ys to f32(dw)·da of the 8 blocks of the row at rp (Y12:
// their da). The halves are gathered in general registers, which keeps the
// vector units free. Clobbers AX, BX, DX.
#define Q4_SCALE8(rp, Xs, Ys) \
	MOVWLZX   0(rp), AX; \
	MOVWLZX   18(rp), BX; \
	SHLQ      $16, BX; \
	ORQ       BX, AX; \
	MOVWLZX   36(rp), BX; \
	SHLQ      $32, BX; \
	ORQ       BX, AX; \
	MOVWLZX   54(rp), BX; \
	SHLQ      $48, BX; \
	ORQ       BX, AX; \
	MOVWLZX   72(rp), DX; \
	MOVWLZX   90(rp), BX; \
	SHLQ      $16, BX; \
	ORQ       BX, DX; \
	MOVWLZX   108(rp), BX; \
	SHLQ      $32, BX; \
	ORQ       BX, DX; \
	MOVWLZX   126(rp), BX; \
	SHLQ      $48, BX; \
	ORQ       BX, DX; \
	VMOVQ     AX, Xs; \
	VPINSRQ   $1, DX, Xs, Xs; \
	VCVTPH2PS Xs, Ys; \
	VMULPS    Y12, Ys, Ys

// Q4_SIDE8 loads Y12 (da) and Y13 (8·Σa) of 8 blocks from the side table
// at R10: the pairs (da, 8·Σa) are split and put back in block order.
// Clobbers Y6.
#define Q4_SIDE8 \
	VMOVUPS   0(R10), Y12; \
	VMOVUPS   32(R10), Y13; \
	VSHUFPS   $0xdd, Y13, Y12, Y6; \
	VSHUFPS   $0x88, Y13, Y12, Y12; \
	VPERMQ    $0xd8, Y12, Y12; \
	VPERMQ    $0xd8, Y6, Y13

// Q4_CHAIN4 adds the products of lanes 0-3 of Xx and Xs to Xsum, lane 0
// first, each rounded once; clobbers Xa, Xb.
#define Q4_CHAIN4(Xx, Xs, Xa, Xb, Xsum) \
	VFMADD231SS Xs, Xx, Xsum; \
	VMOVSHDUP   Xx, Xa; \
	VMOVSHDUP   Xs, Xb; \
	VFMADD231SS Xb, Xa, Xsum; \
	VMOVHLPS    Xx, Xx, Xa; \
	VMOVHLPS    Xs, Xs, Xb; \
	VFMADD231SS Xb, Xa, Xsum; \
	VSHUFPS     $0xff, Xx, Xx, Xa; \
	VSHUFPS     $0xff, Xs, Xs, Xb; \
	VFMADD231SS Xb, Xa, Xsum

// Q4_ONE adds one block of the row at rp (activations at DI, side at R10)
// to Xsum; clobbers AX, Y4, Y5.
#define Q4_ONE(rp, Xsum) \
	Q4_PAIRS(2(rp), 2(DI), Y4); \
	VPMADDWD     q4Ones16<>(SB), Y4, Y4; \
	VEXTRACTI128 $1, Y4, X5; \
	VPADDD       X5, X4, X4; \
	VPSHUFD      $0x4e, X4, X5; \
	VPADDD       X5, X4, X4; \
	VPSHUFD      $0xb1, X4, X5; \
	VPADDD       X5, X4, X4; \
	VMOVD        4(R10), X5; \
	VPSUBD       X5, X4, X4; \
	VCVTDQ2PS    X4, X4; \
	MOVWLZX      0(rp), AX; \
	VMOVD        AX, X5; \
	VCVTPH2PS    X5, X5; \
	VMULSS       0(R10), X5, X5; \
	VFMADD231SS  X5, X4, Xsum

// func gemvQ4_0x2(nb int, w0, w1 *byte, wStride int, a *byte, out0, out1 *float32, rows int)
//
// Two streams of rows: out0[r] for the rows at w0 + r·wStride and out1[r]
// for those at w1 + r·wStride, r < rows. A row's sum is a chain of
// dependent multiply-adds; the two rows' chains run side by side in lanes
// 0 and 1 of X0.
TEXT ·gemvQ4_0x2(SB), NOSPLIT, $0-64
	Q4_CONSTANTS
	MOVQ  nb+0(FP), R12
	IMULQ $34, R12          // offset of the side table
	MOVQ  w0+8(FP), R14
	MOVQ  w1+16(FP), R11
	MOVQ  out0+40(FP), R13
	MOVQ  out1+48(FP), R8

pairrow:
	MOVQ   R14, SI
	MOVQ   R11, R9
	MOVQ   a+32(FP), DI
	LEAQ   (DI)(R12*1), R10
	VXORPS X0, X0, X0
	MOVQ   nb+0(FP), CX
	SHRQ   $3, CX
	JZ     pairtail

pairgroup:
	// 1 KiB ahead in both rows' streams: with two threads the hardware
	// prefetchers alone left the decode mat-vec short of the bandwidth
	// (the one-row kernels below measured no gain from this).
	PREFETCHT0 1024(SI)
	PREFETCHT0 1088(SI)
	PREFETCHT0 1152(SI)
	PREFETCHT0 1024(R9)
	PREFETCHT0 1088(R9)
	PREFETCHT0 1152(R9)
	Q4_SIDE8
	Q4_ISUM8(SI, Y4, X4, Y5, X5, Y6, Y7)
	Q4_ISUM8(R9, Y8, X8, Y9, X9, Y10, Y11)
	Q4_SCALE8(SI, X6, Y6)
	Q4_SCALE8(R9, X10, Y10)
	// Interleave the rows: block k of both rows in lanes (0, 1) of one
	// register, x in Y1/Y2, the scales in Y3/Y7.
	VUNPCKLPS    Y8, Y4, Y1     // blocks 0, 1 | 4, 5
	VUNPCKHPS    Y8, Y4, Y2     // blocks 2, 3 | 6, 7
	VUNPCKLPS    Y10, Y6, Y3
	VUNPCKHPS    Y10, Y6, Y7
	VFMADD231PS  X3, X1, X0
	VMOVHLPS     X1, X1, X4
	VMOVHLPS     X3, X3, X5
	VFMADD231PS  X5, X4, X0
	VFMADD231PS  X7, X2, X0
	VMOVHLPS     X2, X2, X4
	VMOVHLPS     X7, X7, X5
	VFMADD231PS  X5, X4, X0
	VEXTRACTF128 $1, Y1, X1
	VEXTRACTF128 $1, Y3, X3
	VEXTRACTF128 $1, Y2, X2
	VEXTRACTF128 $1, Y7, X7
	VFMADD231PS  X3, X1, X0
	VMOVHLPS     X1, X1, X4
	VMOVHLPS     X3, X3, X5
	VFMADD231PS  X5, X4, X0
	VFMADD231PS  X7, X2, X0
	VMOVHLPS     X2, X2, X4
	VMOVHLPS     X7, X7, X5
	VFMADD231PS  X5, X4, X0
	ADDQ         $144, SI
	ADDQ         $144, R9
	ADDQ         $272, DI
	ADDQ         $64, R10
	DECQ         CX
	JNZ          pairgroup

pairtail:
	VMOVSHDUP X0, X1
	MOVQ      nb+0(FP), CX
	ANDQ      $7, CX
	JZ        pairdone

pairone:
	Q4_ONE(SI, X0)
	Q4_ONE(R9, X1)
	ADDQ $18, SI
	ADDQ $18, R9
	ADDQ $34, DI
	ADDQ $8, R10
	DECQ CX
	JNZ  pairone

pairdone:
	VMOVSS X0, 0(R13)
	VMOVSS X1, 0(R8)
	ADDQ   $4, R13
	ADDQ   $4, R8
	ADDQ   wStride+24(FP), R14
	ADDQ   wStride+24(FP), R11
	DECQ   rows+56(FP)
	JNZ    pairrow
	VZEROUPPER
	RET

// func gemvQ4_0(nb int, w *byte, wStride int, a *byte, out *float32, rows int)
//
// out[r] for the rows at w + r·wStride, r < rows, one after the other.
TEXT ·gemvQ4_0(SB), NOSPLIT, $0-48
	Q4_CONSTANTS
	MOVQ  nb+0(FP), R12
	IMULQ $34, R12
	MOVQ  w+8(FP), R14
	MOVQ  out+32(FP), R13

row:
	MOVQ   R14, SI
	MOVQ   a+24(FP), DI
	LEAQ   (DI)(R12*1), R10
	VXORPS X0, X0, X0
	MOVQ   nb+0(FP), CX
	SHRQ   $3, CX
	JZ     tail

group:
	Q4_SIDE8
	Q4_ISUM8(SI, Y4, X4, Y5, X5, Y6, Y7)
	Q4_SCALE8(SI, X6, Y6)
	Q4_CHAIN4(X4, X6, X2, X3, X0)
	VEXTRACTF128 $1, Y4, X4
	VEXTRACTF128 $1, Y6, X6
	Q4_CHAIN4(X4, X6, X2, X3, X0)
	ADDQ         $144, SI
	ADDQ         $272, DI
	ADDQ         $64, R10
	DECQ         CX
	JNZ          group

tail:
	MOVQ nb+0(FP), CX
	ANDQ $7, CX
	JZ   done

one:
	Q4_ONE(SI, X0)
	ADDQ $18, SI
	ADDQ $34, DI
	ADDQ $8, R10
	DECQ CX
	JNZ  one

done:
	VMOVSS X0, 0(R13)
	ADDQ   $4, R13
	ADDQ   wStride+16(FP), R14
	DECQ   rows+40(FP)
	JNZ    row
	VZEROUPPER
	RET

// The token-group kernel takes the activations of 8 tokens packed per block
// (gemm.go, packQ8Group), 320 bytes a block: four 64-byte slots holding the
// quants a[0:8], a[16:24], a[8:16], a[24:32] of every token (the weights
// that the low and high nibbles of nibble bytes 0-7 and 8-15 meet), each
// slot two 32-byte halves of 4 tokens by 8 bytes, tokens (0, 1, 4, 5) and
// (2, 3, 6, 7); then the 8 tokens' da as float32 and their 8·Σa as int32.
// A broadcast 8 bytes of nibbles then multiply 4 tokens a VPMADDUBSW, and
// the sums for the 8 tokens come out in the lanes of one register, with no
// horizontal adds across a block's products.

// Q4_G_ROW adds one block of the row at rm (its scale at rm, nibbles at
// 2+rm) against the packed group at DI to Yacc, token t in lane t.
// Clobbers Y4-Y9.
#define Q4_G_ROW(rm, Yacc) \
	VPBROADCASTQ 2+rm, Y8; \
	VPAND        Y15, Y8, Y9; \
	VPSRLW       $4, Y8, Y8; \
	VPAND        Y15, Y8, Y8; \
	VPMADDUBSW   0(DI), Y9, Y4; \
	VPMADDUBSW   32(DI), Y9, Y5; \
	VPMADDUBSW   64(DI), Y8, Y6; \
	VPADDW       Y6, Y4, Y4; \
	VPMADDUBSW   96(DI), Y8, Y6; \
	VPADDW       Y6, Y5, Y5; \
	VPBROADCASTQ 10+rm, Y8; \
	VPAND        Y15, Y8, Y9; \
	VPSRLW       $4, Y8, Y8; \
	VPAND        Y15, Y8, Y8; \
	VPMADDUBSW   128(DI), Y9, Y6; \
	VPADDW       Y6, Y4, Y4; \
	VPMADDUBSW   160(DI), Y9, Y6; \
	VPADDW       Y6, Y5, Y5; \
	VPMADDUBSW   192(DI), Y8, Y6; \
	VPADDW       Y6, Y4, Y4; \
	VPMADDUBSW   224(DI), Y8, Y6; \
	VPADDW       Y6, Y5, Y5; \
	VPHADDW      Y5, Y4, Y4; \
	VPMADDWD     q4Ones16<>(SB), Y4, Y4; \
	VPSUBD       288(DI), Y4, Y4; \
	VCVTDQ2PS    Y4, Y4; \
	VPBROADCASTW rm, X9; \
	VCVTPH2PS    X9, Y9; \
	VMULPS       256(DI), Y9, Y9; \
	VFMADD231PS  Y4, Y9, Yacc

// func gemmQ4_0x4x8(nb int, w *byte, wStride int, a *byte, out *float32, outStride int, nt int)
//
// 4 rows (w + r·wStride) by the packed group of 8 tokens at a:
// out[t·outStride + r] for the first nt tokens.
TEXT ·gemmQ4_0x4x8(SB), NOSPLIT, $128-56
	MOVL         $0x0f0f0f0f, AX
	VMOVD        AX, X15
	VPBROADCASTD X15, Y15
	MOVQ         nb+0(FP), CX
	MOVQ         w+8(FP), SI
	MOVQ         wStride+16(FP), R8
	LEAQ         (SI)(R8*1), R9
	MOVQ         a+24(FP), DI
	VXORPS       Y0, Y0, Y0
	VXORPS       Y1, Y1, Y1
	VXORPS       Y2, Y2, Y2
	VXORPS       Y3, Y3, Y3

gblock:
	Q4_G_ROW(0(SI), Y0)
	Q4_G_ROW(0(R9), Y1)
	Q4_G_ROW(0(SI)(R8*2), Y2)
	Q4_G_ROW(0(R9)(R8*2), Y3)
	ADDQ $18, SI
	ADDQ $18, R9
	ADDQ $320, DI
	DECQ CX
	JNZ  gblock

	// Row r's sums at 32·r(SP), token t at +4t; out[t·outStride + r].
	VMOVUPS Y0, 0(SP)
	VMOVUPS Y1, 32(SP)
	VMOVUPS Y2, 64(SP)
	VMOVUPS Y3, 96(SP)
	MOVQ    out+32(FP), DX
	MOVQ    outStride+40(FP), R8
	SHLQ    $2, R8
	MOVQ    nt+48(FP), CX
	XORQ    BX, BX

gstore:
	MOVL 0(SP)(BX*4), AX
	MOVL AX, 0(DX)
	MOVL 32(SP)(BX*4), AX
	MOVL AX, 4(DX)
	MOVL 64(SP)(BX*4), AX
	MOVL AX, 8(DX)
	MOVL 96(SP)(BX*4), AX
	MOVL AX, 12(DX)
	ADDQ R8, DX
	INCQ BX
	CMPQ BX, CX
	JLT  gstore
	VZEROUPPER
	RET
