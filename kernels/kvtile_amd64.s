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

// The integer dot products of 4-bit tiles (kvDotQ4): out_j[c] +=
// d_jb·Σ_{r in block b} k_j[r]·u[r][c] for two heads j, whose coefficients
// k are Q8_0 rows (a block of 32 rows a Q8_0 block) and d their scales,
// thirty-two columns a pass. Four rows at a time: rows r and r+2 fill the
// lanes of one register, r+1 and r+3 of another; their nibbles, interleaved
// byte by byte, pair u[r][c] with u[r+1][c] in the low lane and u[r+2][c]
// with u[r+3][c] in the high one, so that VPMADDUBSW against the pairs
// (k[r], k[r+1]) | (k[r+2], k[r+3]) sums two rows a word. Eight steps (a
// block) stay within int16 (8·2·15·127); then the lanes are widened, added,
// and each column's sum is scaled into its output with one FMA, as the
// pure-Go twin does.
//
//	data+0(FP)      the first row, 16 bytes a pass of 32 columns
//	rowBytes+8(FP)  the bytes from one row to the next
//	blocks+16(FP)   the rows / 32, positive
//	chunks+24(FP)   the passes: columns / 32, positive
//	qa+32, qb+40    each head's Q8_0 coefficients, blocks × 34 bytes
//	sa+48, sb+56    each head's scales as float32, 8 bytes a block
//	oa+64, ob+72    each head's outputs, one float32 a column

DATA kvPairShuf<>+0(SB)/8, $0x0100010001000100
DATA kvPairShuf<>+8(SB)/8, $0x0100010001000100
DATA kvPairShuf<>+16(SB)/8, $0x0302030203020302
DATA kvPairShuf<>+24(SB)/8, $0x0302030203020302
GLOBL kvPairShuf<>(SB), RODATA|NOPTR, $32

// DOT_HEAD adds the four rows' products with the head's coefficients at
// (Q) to its accumulators Ya-Yd (columns 0-7, 8-15, 16-23, 24-31 of the
// pass); the rows' pairs are in Y8-Y11.
#define DOT_HEAD(Q, Ya, Yb, Yc, Yd) \
	VPBROADCASTD (Q), Y12; \
	VPSHUFB      Y14, Y12, Y12; \
	VPMADDUBSW   Y12, Y8, Y13; \
	VPADDW       Y13, Ya, Ya; \
	VPMADDUBSW   Y12, Y9, Y13; \
	VPADDW       Y13, Yb, Yb; \
	VPMADDUBSW   Y12, Y10, Y13; \
	VPADDW       Y13, Yc, Yc; \
	VPMADDUBSW   Y12, Y11, Y13; \
	VPADDW       Y13, Yd, Yd

// DOT_OUT widens Ya's two lanes of int16 sums to int32, adds them and adds
// Yd (the scale) times their float to the eight outputs at off(R13)(R10).
#define DOT_OUT(Ya, Xa, Yd, off) \
	VEXTRACTI128 $1, Ya, X12; \
	VPMOVSXWD    Xa, Ya; \
	VPMOVSXWD    X12, Y12; \
	VPADDD       Y12, Ya, Ya; \
	VCVTDQ2PS    Ya, Ya; \
	VMOVUPS      off(R13)(R10*1), Y13; \
	VFMADD231PS  Yd, Ya, Y13; \
	VMOVUPS      Y13, off(R13)(R10*1)

// func kvDotQ4x2AVX2(data *byte, rowBytes, blocks, chunks int, qa, qb *byte, sa, sb *float32, oa, ob *float32)
TEXT ·kvDotQ4x2AVX2(SB), NOSPLIT, $0-80
	MOVL         $0x0f0f0f0f, AX
	VMOVD        AX, X15
	VPBROADCASTD X15, Y15
	VMOVDQU      kvPairShuf<>(SB), Y14
	MOVQ         data+0(FP), SI
	MOVQ         rowBytes+8(FP), R11
	MOVQ         chunks+24(FP), R9
	XORQ         R10, R10

dotChunk:
	MOVQ SI, DI
	MOVQ qa+32(FP), AX
	MOVQ qb+40(FP), BX
	MOVQ sa+48(FP), DX
	MOVQ sb+56(FP), R12
	MOVQ blocks+16(FP), R8

dotBlock:
	VPXOR Y0, Y0, Y0
	VPXOR Y1, Y1, Y1
	VPXOR Y2, Y2, Y2
	VPXOR Y3, Y3, Y3
	VPXOR Y4, Y4, Y4
	VPXOR Y5, Y5, Y5
	VPXOR Y6, Y6, Y6
	VPXOR Y7, Y7, Y7
	ADDQ  $2, AX
	ADDQ  $2, BX
	MOVQ  $8, CX

dotGroup:
	LEAQ        (DI)(R11*2), R13
	VMOVDQU     (DI), X12
	VINSERTI128 $1, (R13), Y12, Y12
	VMOVDQU     (DI)(R11*1), X13
	VINSERTI128 $1, (R13)(R11*1), Y13, Y13
	VPAND       Y15, Y12, Y8
	VPAND       Y15, Y13, Y9
	VPSRLW      $4, Y12, Y12
	VPAND       Y15, Y12, Y12
	VPSRLW      $4, Y13, Y13
	VPAND       Y15, Y13, Y13
	VPUNPCKHBW  Y9, Y8, Y10
	VPUNPCKLBW  Y9, Y8, Y8
	VPUNPCKHBW  Y13, Y12, Y11
	VPUNPCKLBW  Y13, Y12, Y9
	DOT_HEAD(AX, Y0, Y1, Y2, Y3)
	DOT_HEAD(BX, Y4, Y5, Y6, Y7)
	ADDQ        $4, AX
	ADDQ        $4, BX
	LEAQ        (R13)(R11*2), DI
	DECQ        CX
	JNZ         dotGroup

	VBROADCASTSS (DX), Y8
	VBROADCASTSS (R12), Y9
	MOVQ         oa+64(FP), R13
	DOT_OUT(Y0, X0, Y8, 0)
	DOT_OUT(Y1, X1, Y8, 32)
	DOT_OUT(Y2, X2, Y8, 64)
	DOT_OUT(Y3, X3, Y8, 96)
	MOVQ         ob+72(FP), R13
	DOT_OUT(Y4, X4, Y9, 0)
	DOT_OUT(Y5, X5, Y9, 32)
	DOT_OUT(Y6, X6, Y9, 64)
	DOT_OUT(Y7, X7, Y9, 96)
	ADDQ         $8, DX
	ADDQ         $8, R12
	DECQ         R8
	JNZ          dotBlock

	ADDQ $16, SI
	ADDQ $128, R10
	DECQ R9
	JNZ  dotChunk
	VZEROUPPER
	RET

// func kvGroupsAVX2(codes *byte, groups int, dScale, dMin float32, s, m *float32)
// decodes a tile's groups, eight at a time (groups a positive multiple of
// 8): s[g] = dScale·scaleCode[g], m[g] = dMin·minCode[g], one rounding
// each, as KVTileGroups.
TEXT ·kvGroupsAVX2(SB), NOSPLIT, $0-40
	MOVQ         codes+0(FP), SI
	MOVQ         groups+8(FP), CX
	VBROADCASTSS dScale+16(FP), Y0
	VBROADCASTSS dMin+20(FP), Y1
	MOVQ         s+24(FP), DI
	MOVQ         m+32(FP), DX
	LEAQ         (SI)(CX*1), R8
	SHRQ         $3, CX

groupsLoop:
	VPMOVZXBD (SI), Y2
	VPMOVSXBD (R8), Y3
	VCVTDQ2PS Y2, Y2
	VCVTDQ2PS Y3, Y3
	VMULPS    Y0, Y2, Y2
	VMULPS    Y1, Y3, Y3
	VMOVUPS   Y2, (DI)
	VMOVUPS   Y3, (DX)
	ADDQ      $8, SI
	ADDQ      $8, R8
	ADDQ      $32, DI
	ADDQ      $32, DX
	DECQ      CX
	JNZ       groupsLoop
	VZEROUPPER
	RET
