//go:build amd64 && !purego

#include "textflag.h"

// The paged dot products: the contiguous kernels of quant_f16_amd64.s and
// quant_float_amd64.s over rows stored in pieces, several rows a call. Each
// kernel takes
//
//	base+0(FP)    the store's first element
//	offs+8(FP)    the pieces' offsets in elements (8-byte ints), in row order
//	seg+16(FP)    the elements of a whole piece, a multiple of 32
//	n+24(FP)      the elements to sum: a positive multiple of 32 (vec_dot) or 8 (gemm)
//	row+32(FP)    the element offset of the first row, added to every piece offset
//	stride+40(FP) the elements from one row to the next (0 repeats the first row)
//	x+48(FP)      the other operand, contiguous
//	out+56(FP)    where the rows' sums go, one float32 each
//
// Every row keeps its own accumulators across pieces: piece s holds
// elements [s·seg, s·seg+seg) of the row, so with seg a multiple of 32 each
// piece starts on a step and element i lands in the register and lane it
// does in the contiguous kernel, and every row is reduced once, in the
// contiguous kernel's order. The rows of a call share the loads and
// widening of x and give the FMA units independent chains: one row's sum is
// a chain of dependent FMAs, which alone would leave them idle most of the
// time. paged_dot.go has the twins.

// PAGED_ARGS loads the arguments: SI base, R8 offs, DX seg, CX n, R9 row,
// R11 stride in bytes (elements of size scale), DI x.
#define PAGED_ARGS(scale) \
	MOVQ base+0(FP), SI; \
	MOVQ offs+8(FP), R8; \
	MOVQ seg+16(FP), DX; \
	MOVQ n+24(FP), CX; \
	MOVQ row+32(FP), R9; \
	MOVQ stride+40(FP), R11; \
	SHLQ $scale, R11; \
	MOVQ x+48(FP), DI

// NEXT_PIECE points R10 at the next piece of the first row (elements of
// size scale bytes) and sets BX to the elements to take from it, min(seg,
// CX), taking them off CX.
#define NEXT_PIECE(scale) \
	MOVQ    (R8), AX; \
	ADDQ    R9, AX; \
	LEAQ    (SI)(AX*scale), R10; \
	ADDQ    $8, R8; \
	MOVQ    DX, BX; \
	CMPQ    CX, BX; \
	CMOVQLT CX, BX; \
	SUBQ    BX, CX

// REDUCE4 sums the four accumulators Y0..Y3 of one row into the low float
// of Xa as ggml's vec_dot: (Y0 + Y2) + (Y1 + Y3), then F32x8_REDUCE (the
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

// STORE8 reduces the eight one-register accumulators Y0..Y7 of the gemm
// kernels and stores them at out.
#define STORE8 \
	MOVQ  out+56(FP), AX; \
	HSUM8(Y0, X0, X15); \
	HSUM8(Y1, X1, X15); \
	HSUM8(Y2, X2, X15); \
	HSUM8(Y3, X3, X15); \
	HSUM8(Y4, X4, X15); \
	HSUM8(Y5, X5, X15); \
	HSUM8(Y6, X6, X15); \
	HSUM8(Y7, X7, X15); \
	VMOVSS X0, 0(AX); \
	VMOVSS X1, 4(AX); \
	VMOVSS X2, 8(AX); \
	VMOVSS X3, 12(AX); \
	VMOVSS X4, 16(AX); \
	VMOVSS X5, 20(AX); \
	VMOVSS X6, 24(AX); \
	VMOVSS X7, 28(AX)

// ZERO8 clears the accumulators Y0..Y7.
#define ZERO8 \
	VXORPS Y0, Y0, Y0; \
	VXORPS Y1, Y1, Y1; \
	VXORPS Y2, Y2, Y2; \
	VXORPS Y3, Y3, Y3; \
	VXORPS Y4, Y4, Y4; \
	VXORPS Y5, Y5, Y5; \
	VXORPS Y6, Y6, Y6; \
	VXORPS Y7, Y7, Y7

// func dotPagedF16x2AVX2(base *uint16, offs *int, seg, n, row, stride int, x *uint16, out *float32)
// vecDotF16AVX2 for two rows: row 0 in Y0-Y3, row 1 in Y4-Y7, element i in
// register i/8%4 of its row, lane i%8.
TEXT ·dotPagedF16x2AVX2(SB), NOSPLIT, $0-64
	PAGED_ARGS(1)
	ZERO8

f16piece:
	NEXT_PIECE(2)

f16step:
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
	JNZ         f16step
	TESTQ       CX, CX
	JNZ         f16piece

	REDUCE4(Y0, Y1, Y2, Y3, X0, X15)
	REDUCE4(Y4, Y5, Y6, Y7, X4, X15)
	MOVQ  out+56(FP), AX
	VMOVSS X0, 0(AX)
	VMOVSS X4, 4(AX)
	VZEROUPPER
	RET

// func gemmDotPagedF16x8AVX2(base *uint16, offs *int, seg, n, row, stride int, x *uint16, out *float32)
// gemmDotF16AVX2 for eight rows: row k in Yk, element i in lane i%8. Rows
// 0-3 are read from R10, rows 4-7 from R13 = R10 + 4·stride; R12 is
// 3·stride.
TEXT ·gemmDotPagedF16x8AVX2(SB), NOSPLIT, $0-64
	PAGED_ARGS(1)
	LEAQ (R11)(R11*2), R12
	ZERO8

gf16piece:
	NEXT_PIECE(2)
	LEAQ (R10)(R11*4), R13

gf16step:
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
	JNZ         gf16step
	TESTQ       CX, CX
	JNZ         gf16piece

	STORE8
	VZEROUPPER
	RET

// func dotPagedF32x2AVX2(base *float32, offs *int, seg, n, row, stride int, x *float32, out *float32)
// vecDotF32AVX2 for two rows, as dotPagedF16x2AVX2.
TEXT ·dotPagedF32x2AVX2(SB), NOSPLIT, $0-64
	PAGED_ARGS(2)
	ZERO8

f32piece:
	NEXT_PIECE(4)

f32step:
	VMOVUPS     0(DI), Y8
	VFMADD231PS 0(R10), Y8, Y0
	VFMADD231PS 0(R10)(R11*1), Y8, Y4
	VMOVUPS     32(DI), Y9
	VFMADD231PS 32(R10), Y9, Y1
	VFMADD231PS 32(R10)(R11*1), Y9, Y5
	VMOVUPS     64(DI), Y10
	VFMADD231PS 64(R10), Y10, Y2
	VFMADD231PS 64(R10)(R11*1), Y10, Y6
	VMOVUPS     96(DI), Y11
	VFMADD231PS 96(R10), Y11, Y3
	VFMADD231PS 96(R10)(R11*1), Y11, Y7
	ADDQ        $128, R10
	ADDQ        $128, DI
	SUBQ        $32, BX
	JNZ         f32step
	TESTQ       CX, CX
	JNZ         f32piece

	REDUCE4(Y0, Y1, Y2, Y3, X0, X15)
	REDUCE4(Y4, Y5, Y6, Y7, X4, X15)
	MOVQ  out+56(FP), AX
	VMOVSS X0, 0(AX)
	VMOVSS X4, 4(AX)
	VZEROUPPER
	RET

// func gemmDotPagedF32x8AVX2(base *float32, offs *int, seg, n, row, stride int, x *float32, out *float32)
// gemmDotF32AVX2 for eight rows, as gemmDotPagedF16x8AVX2.
TEXT ·gemmDotPagedF32x8AVX2(SB), NOSPLIT, $0-64
	PAGED_ARGS(2)
	LEAQ (R11)(R11*2), R12
	ZERO8

gf32piece:
	NEXT_PIECE(4)
	LEAQ (R10)(R11*4), R13

gf32step:
	VMOVUPS     (DI), Y8
	VFMADD231PS (R10), Y8, Y0
	VFMADD231PS (R10)(R11*1), Y8, Y1
	VFMADD231PS (R10)(R11*2), Y8, Y2
	VFMADD231PS (R10)(R12*1), Y8, Y3
	VFMADD231PS (R13), Y8, Y4
	VFMADD231PS (R13)(R11*1), Y8, Y5
	VFMADD231PS (R13)(R11*2), Y8, Y6
	VFMADD231PS (R13)(R12*1), Y8, Y7
	ADDQ        $32, R10
	ADDQ        $32, R13
	ADDQ        $32, DI
	SUBQ        $8, BX
	JNZ         gf32step
	TESTQ       CX, CX
	JNZ         gf32piece

	STORE8
	VZEROUPPER
	RET
