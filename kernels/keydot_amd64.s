//go:build amd64 && !purego

#include "textflag.h"

// The row-wise dot products of attention: the contiguous kernels of
// quant_f16_amd64.s and quant_float_amd64.s over many rows of halves, rows
// w, w+stride, ... (out[t] the sum of row t), looping over the rows here
// rather than in Go. A head's product is short (64 or 128 elements), so
// alone it is a few dependent FMAs, a reduction and a Go call; a group of
// rows shares the loads and widening of x, gives the FMA units independent
// chains and pays one call for all rows. Every row keeps its own
// accumulators and is reduced as the one-row kernel reduces it, so each sum
// is bit for bit the one-row kernel's. Each kernel takes
//
//	w+0(FP)       the first row
//	stride+8(FP)  the elements from one row to the next
//	n+16(FP)      the elements to sum: a positive multiple of 32 (vec_dot) or 8 (gemm)
//	x+24(FP)      the other operand
//	out+32(FP)    where the rows' sums go, one float32 each
//	rows+40(FP)   the rows, positive

// ROWS_ARGS loads the arguments: SI the group's first row, R11 the stride
// in bytes, CX n, DX x, AX out, R8 rows.
#define ROWS_ARGS \
	MOVQ w+0(FP), SI; \
	MOVQ stride+8(FP), R11; \
	SHLQ $1, R11; \
	MOVQ n+16(FP), CX; \
	MOVQ x+24(FP), DX; \
	MOVQ out+32(FP), AX; \
	MOVQ rows+40(FP), R8

// REDUCE4 sums the four accumulators Ya..Yd of one row into the low float
// of Xa as ggml's vec_dot: (Ya + Yc) + (Yb + Yd), then F32x8_REDUCE (the
// upper half onto the lower, two horizontal adds).
#define REDUCE4(Ya, Yb, Yc, Yd, Xa, Xt) \
	VADDPS       Yc, Ya, Ya; \
	VADDPS       Yd, Yb, Yb; \
	VADDPS       Yb, Ya, Ya; \
	VEXTRACTF128 $1, Ya, Xt; \
	VADDPS       Xt, Xa, Xa; \
	VHADDPS      Xa, Xa, Xa; \
	VHADDPS      Xa, Xa, Xa

// HSUM8 sums the lanes of Y into the low float of X as ggml's hsum_float_8.
#define HSUM8(Y, X, Xt) \
	VEXTRACTF128 $1, Y, Xt; \
	VADDPS       Xt, X, X; \
	VMOVHLPS     X, X, Xt; \
	VADDPS       Xt, X, X; \
	VMOVSHDUP    X, Xt; \
	VADDSS       Xt, X, X

// ZERO8 clears Y0..Y7.
#define ZERO8 \
	VXORPS Y0, Y0, Y0; \
	VXORPS Y1, Y1, Y1; \
	VXORPS Y2, Y2, Y2; \
	VXORPS Y3, Y3, Y3; \
	VXORPS Y4, Y4, Y4; \
	VXORPS Y5, Y5, Y5; \
	VXORPS Y6, Y6, Y6; \
	VXORPS Y7, Y7, Y7

// func keyDotRowsF16AVX2(w *uint16, stride, n int, x *uint16, out *float32, rows int)
// vecDotF16AVX2 for every row, two rows a pass: row 0 of the pair in Y0-Y3,
// row 1 in Y4-Y7, element i in register i/8%4 of its row, lane i%8; an odd
// last row alone in Y0-Y3.
TEXT ·keyDotRowsF16AVX2(SB), NOSPLIT, $0-48
	ROWS_ARGS

vpair:
	CMPQ R8, $2
	JLT  vsingle
	ZERO8
	MOVQ SI, R10
	MOVQ DX, DI
	MOVQ CX, BX

vpairstep:
	VCVTPH2PS   0(DI), Y8
	VCVTPH2PS   0(R10), Y9
	VCVTPH2PS   0(R10)(R11*1), Y10
	VFMADD231PS Y8, Y9, Y0
	VFMADD231PS Y8, Y10, Y4
	VCVTPH2PS   16(DI), Y11
	VCVTPH2PS   16(R10), Y12
	VCVTPH2PS   16(R10)(R11*1), Y13
	VFMADD231PS Y11, Y12, Y1
	VFMADD231PS Y11, Y13, Y5
	VCVTPH2PS   32(DI), Y8
	VCVTPH2PS   32(R10), Y9
	VCVTPH2PS   32(R10)(R11*1), Y10
	VFMADD231PS Y8, Y9, Y2
	VFMADD231PS Y8, Y10, Y6
	VCVTPH2PS   48(DI), Y11
	VCVTPH2PS   48(R10), Y12
	VCVTPH2PS   48(R10)(R11*1), Y13
	VFMADD231PS Y11, Y12, Y3
	VFMADD231PS Y11, Y13, Y7
	ADDQ        $64, R10
	ADDQ        $64, DI
	SUBQ        $32, BX
	JNZ         vpairstep

	REDUCE4(Y0, Y1, Y2, Y3, X0, X15)
	REDUCE4(Y4, Y5, Y6, Y7, X4, X14)
	VMOVSS X0, 0(AX)
	VMOVSS X4, 4(AX)
	LEAQ   (SI)(R11*2), SI
	ADDQ   $8, AX
	SUBQ   $2, R8
	JMP    vpair

vsingle:
	TESTQ R8, R8
	JZ    vdone
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	VXORPS Y2, Y2, Y2
	VXORPS Y3, Y3, Y3
	MOVQ  SI, R10
	MOVQ  DX, DI
	MOVQ  CX, BX

vsinglestep:
	VCVTPH2PS   0(DI), Y8
	VCVTPH2PS   0(R10), Y9
	VFMADD231PS Y8, Y9, Y0
	VCVTPH2PS   16(DI), Y10
	VCVTPH2PS   16(R10), Y11
	VFMADD231PS Y10, Y11, Y1
	VCVTPH2PS   32(DI), Y12
	VCVTPH2PS   32(R10), Y13
	VFMADD231PS Y12, Y13, Y2
	VCVTPH2PS   48(DI), Y8
	VCVTPH2PS   48(R10), Y9
	VFMADD231PS Y8, Y9, Y3
	ADDQ        $64, R10
	ADDQ        $64, DI
	SUBQ        $32, BX
	JNZ         vsinglestep

	REDUCE4(Y0, Y1, Y2, Y3, X0, X15)
	VMOVSS X0, 0(AX)

vdone:
	VZEROUPPER
	RET

// func keyGemmDotRowsF16AVX2(w *uint16, stride, n int, x *uint16, out *float32, rows int)
// gemmDotF16AVX2 for every row, eight rows a pass: row k of the eight in
// Yk, element i in lane i%8, rows 0-3 read from R10, rows 4-7 from R13 =
// R10 + 4·stride (R12 is 3·stride); then four rows a pass the same way, the
// last ones one a pass in Y0.
TEXT ·keyGemmDotRowsF16AVX2(SB), NOSPLIT, $0-48
	ROWS_ARGS
	LEAQ (R11)(R11*2), R12

g8:
	CMPQ R8, $8
	JLT  g4
	ZERO8
	MOVQ SI, R10
	LEAQ (SI)(R11*4), R13
	MOVQ DX, DI
	MOVQ CX, BX

g8step:
	VCVTPH2PS   (DI), Y8
	VCVTPH2PS   (R10), Y9
	VCVTPH2PS   (R10)(R11*1), Y10
	VCVTPH2PS   (R10)(R11*2), Y11
	VCVTPH2PS   (R10)(R12*1), Y12
	VFMADD231PS Y8, Y9, Y0
	VFMADD231PS Y8, Y10, Y1
	VFMADD231PS Y8, Y11, Y2
	VFMADD231PS Y8, Y12, Y3
	VCVTPH2PS   (R13), Y9
	VCVTPH2PS   (R13)(R11*1), Y10
	VCVTPH2PS   (R13)(R11*2), Y11
	VCVTPH2PS   (R13)(R12*1), Y12
	VFMADD231PS Y8, Y9, Y4
	VFMADD231PS Y8, Y10, Y5
	VFMADD231PS Y8, Y11, Y6
	VFMADD231PS Y8, Y12, Y7
	ADDQ        $16, R10
	ADDQ        $16, R13
	ADDQ        $16, DI
	SUBQ        $8, BX
	JNZ         g8step

	HSUM8(Y0, X0, X15)
	HSUM8(Y1, X1, X14)
	HSUM8(Y2, X2, X13)
	HSUM8(Y3, X3, X12)
	HSUM8(Y4, X4, X11)
	HSUM8(Y5, X5, X10)
	HSUM8(Y6, X6, X9)
	HSUM8(Y7, X7, X8)
	VMOVSS X0, 0(AX)
	VMOVSS X1, 4(AX)
	VMOVSS X2, 8(AX)
	VMOVSS X3, 12(AX)
	VMOVSS X4, 16(AX)
	VMOVSS X5, 20(AX)
	VMOVSS X6, 24(AX)
	VMOVSS X7, 28(AX)
	LEAQ   (SI)(R11*8), SI
	ADDQ   $32, AX
	SUBQ   $8, R8
	JMP    g8

g4:
	CMPQ R8, $4
	JLT  g1
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	VXORPS Y2, Y2, Y2
	VXORPS Y3, Y3, Y3
	MOVQ SI, R10
	MOVQ DX, DI
	MOVQ CX, BX

g4step:
	VCVTPH2PS   (DI), Y8
	VCVTPH2PS   (R10), Y9
	VCVTPH2PS   (R10)(R11*1), Y10
	VCVTPH2PS   (R10)(R11*2), Y11
	VCVTPH2PS   (R10)(R12*1), Y12
	VFMADD231PS Y8, Y9, Y0
	VFMADD231PS Y8, Y10, Y1
	VFMADD231PS Y8, Y11, Y2
	VFMADD231PS Y8, Y12, Y3
	ADDQ        $16, R10
	ADDQ        $16, DI
	SUBQ        $8, BX
	JNZ         g4step

	HSUM8(Y0, X0, X15)
	HSUM8(Y1, X1, X14)
	HSUM8(Y2, X2, X13)
	HSUM8(Y3, X3, X12)
	VMOVSS X0, 0(AX)
	VMOVSS X1, 4(AX)
	VMOVSS X2, 8(AX)
	VMOVSS X3, 12(AX)
	LEAQ   (SI)(R11*4), SI
	ADDQ   $16, AX
	SUBQ   $4, R8

g1:
	TESTQ R8, R8
	JZ    gdone
	VXORPS Y0, Y0, Y0
	MOVQ  SI, R10
	MOVQ  DX, DI
	MOVQ  CX, BX

g1step:
	VCVTPH2PS   (DI), Y8
	VCVTPH2PS   (R10), Y9
	VFMADD231PS Y8, Y9, Y0
	ADDQ        $16, R10
	ADDQ        $16, DI
	SUBQ        $8, BX
	JNZ         g1step

	HSUM8(Y0, X0, X15)
	VMOVSS X0, 0(AX)
	ADDQ   R11, SI
	ADDQ   $4, AX
	DECQ   R8
	JMP    g1

gdone:
	VZEROUPPER
	RET
