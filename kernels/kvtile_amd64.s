//go:build amd64 && !purego

#include "textflag.h"

// The row accumulation of the tiered KV cache's attention (kvtile.go's
// KVAccumRows): out_j[c] += Σ_r coef_j[r]·u[r][c] for four heads j (or
// one), sixteen columns a pass, every row read and widened once for all the
// heads. Column c of a pass is lane c%8 of the head's register c/8; each
// lane sums its rows in order with one FMA a row, which is the pure-Go
// twin's order. Each kernel takes
//
//	data+0(FP)      the first row
//	rowBytes+8(FP)  the bytes from one row to the next
//	rows+16(FP)     the rows, positive
//	chunks+24(FP)   the passes: columns / 16, positive
//	c0+32(FP) ...   each head's coefficients, one float32 a row
//	o0+..(FP) ...   each head's outputs, one float32 a column

// UNPACK_Q4 widens the sixteen 4-bit elements of a chunk at (DI) into
// Y8 (elements 0-7, the low nibbles) and Y9 (8-15, the high ones).
#define UNPACK_Q4 \
	VPMOVZXBD (DI), Y8; \
	VPSRLD    $4, Y8, Y9; \
	VPAND     Y15, Y8, Y8; \
	VCVTDQ2PS Y8, Y8; \
	VCVTDQ2PS Y9, Y9

// UNPACK_Q8 widens the sixteen bytes at (DI) into Y8 and Y9.
#define UNPACK_Q8 \
	VPMOVZXBD (DI), Y8; \
	VPMOVZXBD 8(DI), Y9; \
	VCVTDQ2PS Y8, Y8; \
	VCVTDQ2PS Y9, Y9

// UNPACK_F16 widens the sixteen halves at (DI) into Y8 and Y9.
#define UNPACK_F16 \
	VCVTPH2PS (DI), Y8; \
	VCVTPH2PS 16(DI), Y9

// HEAD adds coef[row]·(Y8, Y9) to the head's accumulators Ya, Yb; the
// coefficients are at (C), the row is CX.
#define HEAD(C, Ya, Yb) \
	VBROADCASTSS (C)(CX*4), Y10; \
	VFMADD231PS  Y10, Y8, Ya; \
	VFMADD231PS  Y10, Y9, Yb

// LOAD_OUT and STORE_OUT move a head's sixteen outputs of the pass (byte
// offset R10) between its output array, whose pointer is at off(FP), and
// Ya, Yb.
#define LOAD_OUT(off, Ya, Yb) \
	MOVQ    off(FP), R13; \
	VMOVUPS (R13)(R10*1), Ya; \
	VMOVUPS 32(R13)(R10*1), Yb

#define STORE_OUT(off, Ya, Yb) \
	MOVQ    off(FP), R13; \
	VMOVUPS Ya, (R13)(R10*1); \
	VMOVUPS Yb, 32(R13)(R10*1)

// ARGS4 loads SI data, R11 rowBytes, R8 rows, R9 chunks, AX BX DX R12 the
// four heads' coefficients, and clears R10, the pass's output offset.
#define ARGS4 \
	MOVQ data+0(FP), SI; \
	MOVQ rowBytes+8(FP), R11; \
	MOVQ rows+16(FP), R8; \
	MOVQ chunks+24(FP), R9; \
	MOVQ c0+32(FP), AX; \
	MOVQ c1+40(FP), BX; \
	MOVQ c2+48(FP), DX; \
	MOVQ c3+56(FP), R12; \
	XORQ R10, R10

// KERNEL4 is the body of a four-head kernel: UNPACK widens a chunk, whose
// byte offset in the row is the output offset R10 shifted right by SHIFT.
#define KERNEL4(UNPACK, SHIFT, LCHUNK, LROW) \
	ARGS4; \
LCHUNK: \
	LOAD_OUT(o0+64(FP), Y0, Y1); \
	LOAD_OUT(o1+72(FP), Y2, Y3); \
	LOAD_OUT(o2+80(FP), Y4, Y5); \
	LOAD_OUT(o3+88(FP), Y6, Y7); \
	MOVQ R10, DI; \
	SHRQ $SHIFT, DI; \
	ADDQ SI, DI; \
	XORQ CX, CX; \
LROW: \
	UNPACK; \
	HEAD(AX, Y0, Y1); \
	HEAD(BX, Y2, Y3); \
	HEAD(DX, Y4, Y5); \
	HEAD(R12, Y6, Y7); \
	ADDQ R11, DI; \
	INCQ CX; \
	CMPQ CX, R8; \
	JLT  LROW; \
	STORE_OUT(o0+64(FP), Y0, Y1); \
	STORE_OUT(o1+72(FP), Y2, Y3); \
	STORE_OUT(o2+80(FP), Y4, Y5); \
	STORE_OUT(o3+88(FP), Y6, Y7); \
	ADDQ $64, R10; \
	DECQ R9; \
	JNZ  LCHUNK; \
	VZEROUPPER; \
	RET

// KERNEL1 is the body of a one-head kernel.
#define KERNEL1(UNPACK, SHIFT, LCHUNK, LROW) \
	MOVQ data+0(FP), SI; \
	MOVQ rowBytes+8(FP), R11; \
	MOVQ rows+16(FP), R8; \
	MOVQ chunks+24(FP), R9; \
	MOVQ c0+32(FP), AX; \
	XORQ R10, R10; \
LCHUNK: \
	LOAD_OUT(o0+40(FP), Y0, Y1); \
	MOVQ R10, DI; \
	SHRQ $SHIFT, DI; \
	ADDQ SI, DI; \
	XORQ CX, CX; \
LROW: \
	UNPACK; \
	HEAD(AX, Y0, Y1); \
	ADDQ R11, DI; \
	INCQ CX; \
	CMPQ CX, R8; \
	JLT  LROW; \
	STORE_OUT(o0+40(FP), Y0, Y1); \
	ADDQ $64, R10; \
	DECQ R9; \
	JNZ  LCHUNK; \
	VZEROUPPER; \
	RET

// The tail kernels add the last eight columns of rows whose length is 16k+8
// (a head_dim of 8, 24, ...): one register a head. A 4-bit tail is four
// bytes, element i in the low nibble of byte i and element i+4 in the high.

// UNPACK8_Q4 widens the eight 4-bit elements at (DI) into Y8.
#define UNPACK8_Q4 \
	VMOVD       (DI), X8; \
	VPMOVZXBD   X8, X8; \
	VPSRLD      $4, X8, X9; \
	VPAND       X15, X8, X8; \
	VINSERTI128 $1, X9, Y8, Y8; \
	VCVTDQ2PS   Y8, Y8

// UNPACK8_Q8 widens the eight bytes at (DI) into Y8.
#define UNPACK8_Q8 \
	VPMOVZXBD (DI), Y8; \
	VCVTDQ2PS Y8, Y8

// UNPACK8_F16 widens the eight halves at (DI) into Y8.
#define UNPACK8_F16 \
	VCVTPH2PS (DI), Y8

// HEAD8 adds coef[row]·Y8 to Ya.
#define HEAD8(C, Ya) \
	VBROADCASTSS (C)(CX*4), Y10; \
	VFMADD231PS  Y10, Y8, Ya

// TAIL4 is the body of a four-head tail kernel.
#define TAIL4(UNPACK, LROW) \
	MOVQ    data+0(FP), DI; \
	MOVQ    rowBytes+8(FP), R11; \
	MOVQ    rows+16(FP), R8; \
	MOVQ    c0+24(FP), AX; \
	MOVQ    c1+32(FP), BX; \
	MOVQ    c2+40(FP), DX; \
	MOVQ    c3+48(FP), R12; \
	MOVQ    o0+56(FP), R13; \
	VMOVUPS (R13), Y0; \
	MOVQ    o1+64(FP), R13; \
	VMOVUPS (R13), Y1; \
	MOVQ    o2+72(FP), R13; \
	VMOVUPS (R13), Y2; \
	MOVQ    o3+80(FP), R13; \
	VMOVUPS (R13), Y3; \
	XORQ    CX, CX; \
LROW: \
	UNPACK; \
	HEAD8(AX, Y0); \
	HEAD8(BX, Y1); \
	HEAD8(DX, Y2); \
	HEAD8(R12, Y3); \
	ADDQ    R11, DI; \
	INCQ    CX; \
	CMPQ    CX, R8; \
	JLT     LROW; \
	MOVQ    o0+56(FP), R13; \
	VMOVUPS Y0, (R13); \
	MOVQ    o1+64(FP), R13; \
	VMOVUPS Y1, (R13); \
	MOVQ    o2+72(FP), R13; \
	VMOVUPS Y2, (R13); \
	MOVQ    o3+80(FP), R13; \
	VMOVUPS Y3, (R13); \
	VZEROUPPER; \
	RET

// TAIL1 is the body of a one-head tail kernel.
#define TAIL1(UNPACK, LROW) \
	MOVQ    data+0(FP), DI; \
	MOVQ    rowBytes+8(FP), R11; \
	MOVQ    rows+16(FP), R8; \
	MOVQ    c0+24(FP), AX; \
	MOVQ    o0+32(FP), R13; \
	VMOVUPS (R13), Y0; \
	XORQ    CX, CX; \
LROW: \
	UNPACK; \
	HEAD8(AX, Y0); \
	ADDQ    R11, DI; \
	INCQ    CX; \
	CMPQ    CX, R8; \
	JLT     LROW; \
	VMOVUPS Y0, (R13); \
	VZEROUPPER; \
	RET


DATA kvNibbleMask<>+0(SB)/4, $0x0f
GLOBL kvNibbleMask<>(SB), RODATA|NOPTR, $4

// func kvRowsQ4x4AVX2(data *byte, rowBytes, rows, chunks int, c0, c1, c2, c3, o0, o1, o2, o3 *float32)
TEXT ·kvRowsQ4x4AVX2(SB), NOSPLIT, $0-96
	VPBROADCASTD kvNibbleMask<>(SB), Y15
	KERNEL4(UNPACK_Q4, 3, q4x4chunk, q4x4row)

// func kvRowsQ8x4AVX2(data *byte, rowBytes, rows, chunks int, c0, c1, c2, c3, o0, o1, o2, o3 *float32)
TEXT ·kvRowsQ8x4AVX2(SB), NOSPLIT, $0-96
	KERNEL4(UNPACK_Q8, 2, q8x4chunk, q8x4row)

// func kvRowsF16x4AVX2(data *uint16, rowBytes, rows, chunks int, c0, c1, c2, c3, o0, o1, o2, o3 *float32)
TEXT ·kvRowsF16x4AVX2(SB), NOSPLIT, $0-96
	KERNEL4(UNPACK_F16, 1, f16x4chunk, f16x4row)

// func kvRowsQ4x1AVX2(data *byte, rowBytes, rows, chunks int, c0, o0 *float32)
TEXT ·kvRowsQ4x1AVX2(SB), NOSPLIT, $0-48
	VPBROADCASTD kvNibbleMask<>(SB), Y15
	KERNEL1(UNPACK_Q4, 3, q4x1chunk, q4x1row)

// func kvRowsQ8x1AVX2(data *byte, rowBytes, rows, chunks int, c0, o0 *float32)
TEXT ·kvRowsQ8x1AVX2(SB), NOSPLIT, $0-48
	KERNEL1(UNPACK_Q8, 2, q8x1chunk, q8x1row)

// func kvRowsF16x1AVX2(data *uint16, rowBytes, rows, chunks int, c0, o0 *float32)
TEXT ·kvRowsF16x1AVX2(SB), NOSPLIT, $0-48
	KERNEL1(UNPACK_F16, 1, f16x1chunk, f16x1row)

// func kvTailQ4x4AVX2(data *byte, rowBytes, rows int, c0, c1, c2, c3, o0, o1, o2, o3 *float32)
TEXT ·kvTailQ4x4AVX2(SB), NOSPLIT, $0-88
	VPBROADCASTD kvNibbleMask<>(SB), Y15
	TAIL4(UNPACK8_Q4, tq4x4row)

// func kvTailQ8x4AVX2(data *byte, rowBytes, rows int, c0, c1, c2, c3, o0, o1, o2, o3 *float32)
TEXT ·kvTailQ8x4AVX2(SB), NOSPLIT, $0-88
	TAIL4(UNPACK8_Q8, tq8x4row)

// func kvTailF16x4AVX2(data *uint16, rowBytes, rows int, c0, c1, c2, c3, o0, o1, o2, o3 *float32)
TEXT ·kvTailF16x4AVX2(SB), NOSPLIT, $0-88
	TAIL4(UNPACK8_F16, tf16x4row)

// func kvTailQ4x1AVX2(data *byte, rowBytes, rows int, c0, o0 *float32)
TEXT ·kvTailQ4x1AVX2(SB), NOSPLIT, $0-40
	VPBROADCASTD kvNibbleMask<>(SB), Y15
	TAIL1(UNPACK8_Q4, tq4x1row)

// func kvTailQ8x1AVX2(data *byte, rowBytes, rows int, c0, o0 *float32)
TEXT ·kvTailQ8x1AVX2(SB), NOSPLIT, $0-40
	TAIL1(UNPACK8_Q8, tq8x1row)

// func kvTailF16x1AVX2(data *uint16, rowBytes, rows int, c0, o0 *float32)
TEXT ·kvTailF16x1AVX2(SB), NOSPLIT, $0-40
	TAIL1(UNPACK8_F16, tf16x1row)
