//go:build amd64 && !purego

#include "textflag.h"

// The quantizer of KV tiles (kvtile.go's QuantizeKVTile): the ranges of a
// tile's groups and its elements' levels, eight halves at a time. Minimum
// and maximum keep the first operand's comparison, as the pure-Go twin's
// "if v < lo" does, so a NaN never enters a range; a level is
// trunc(min(max((x−m)·iv, 0), levels) + ½) in float32 with a NaN x as 0,
// as quantLevel computes it. Rows of halves are stride elements apart;
// cols is a positive multiple of 8.

DATA kvqPosInf<>+0(SB)/4, $0x7f800000
GLOBL kvqPosInf<>(SB), RODATA|NOPTR, $4
DATA kvqNegInf<>+0(SB)/4, $0xff800000
GLOBL kvqNegInf<>(SB), RODATA|NOPTR, $4
DATA kvqHalf<>+0(SB)/4, $0x3f000000
GLOBL kvqHalf<>(SB), RODATA|NOPTR, $4
// Byte 0 of each dword of a 128-bit lane into bytes 0-3, the rest zero.
DATA kvqPick<>+0(SB)/8, $0x808080800c080400
DATA kvqPick<>+8(SB)/8, $0x8080808080808080
DATA kvqPick<>+16(SB)/8, $0x808080800c080400
DATA kvqPick<>+24(SB)/8, $0x8080808080808080
GLOBL kvqPick<>(SB), RODATA|NOPTR, $32

// LEVELS8 turns the eight halves at (DI) into levels, with the mins in Ym
// and the inverse scales in Yi, and stores them as eight bytes at (DX).
// Y12 holds levels, Y13 ½, Y11 the byte pick, Y10 zero.
#define LEVELS8(Ym, Yi) \
	VCVTPH2PS    (DI), Y2; \
	VCMPPS       $3, Y2, Y2, Y3; \
	VANDNPS      Y2, Y3, Y2; \
	VSUBPS       Ym, Y2, Y2; \
	VMULPS       Yi, Y2, Y2; \
	VMAXPS       Y10, Y2, Y2; \
	VMINPS       Y12, Y2, Y2; \
	VADDPS       Y13, Y2, Y2; \
	VCVTTPS2DQ   Y2, Y2; \
	VPSHUFB      Y11, Y2, Y2; \
	VEXTRACTI128 $1, Y2, X3; \
	VPUNPCKLDQ   X3, X2, X2; \
	VMOVQ        X2, (DX)

#define LEVELS_ARGS \
	MOVQ         src+0(FP), SI; \
	MOVQ         stride+8(FP), R11; \
	SHLQ         $1, R11; \
	MOVQ         rows+16(FP), R8; \
	MOVQ         cols+24(FP), R9; \
	MOVQ         m+32(FP), AX; \
	MOVQ         iv+40(FP), BX; \
	VBROADCASTSS levels+48(FP), Y12; \
	MOVQ         u+56(FP), R10; \
	MOVQ         uStride+64(FP), R12; \
	VBROADCASTSS kvqHalf<>(SB), Y13; \
	VMOVDQU      kvqPick<>(SB), Y11; \
	VXORPS       Y10, Y10, Y10

// func kvRangeRowsAVX2(src *uint16, stride, rows, cols int, lo, hi *float32)
// lo[r] and hi[r]: the smallest and largest non-NaN element of row r.
TEXT ·kvRangeRowsAVX2(SB), NOSPLIT, $0-48
	MOVQ src+0(FP), SI
	MOVQ stride+8(FP), R11
	SHLQ $1, R11
	MOVQ rows+16(FP), R8
	MOVQ cols+24(FP), R9
	MOVQ lo+32(FP), AX
	MOVQ hi+40(FP), BX
	VBROADCASTSS kvqPosInf<>(SB), Y14
	VBROADCASTSS kvqNegInf<>(SB), Y15

rrow:
	VMOVAPS Y14, Y0
	VMOVAPS Y15, Y1
	MOVQ    SI, DI
	MOVQ    R9, CX

rcol:
	VCVTPH2PS (DI), Y2
	VMINPS    Y0, Y2, Y0 // Y0 = Y2 < Y0 ? Y2 : Y0
	VMAXPS    Y1, Y2, Y1 // Y1 = Y2 > Y1 ? Y2 : Y1
	ADDQ      $16, DI
	SUBQ      $8, CX
	JNZ       rcol

	// Fold the lanes: min and max are exact in any order.
	VEXTRACTF128 $1, Y0, X2
	VMINPS       X2, X0, X0
	VEXTRACTF128 $1, Y1, X3
	VMAXPS       X3, X1, X1
	VMOVHLPS     X0, X2, X2
	VMINPS       X2, X0, X0
	VMOVHLPS     X1, X3, X3
	VMAXPS       X3, X1, X1
	VMOVSHDUP    X0, X2
	VMINSS       X2, X0, X0
	VMOVSHDUP    X1, X3
	VMAXSS       X3, X1, X1
	VMOVSS       X0, (AX)
	VMOVSS       X1, (BX)
	ADDQ         $4, AX
	ADDQ         $4, BX
	ADDQ         R11, SI
	DECQ         R8
	JNZ          rrow
	VZEROUPPER
	RET

// func kvRangeColsAVX2(src *uint16, stride, rows, cols int, lo, hi *float32)
// lo[c] and hi[c]: the smallest and largest non-NaN element of column c.
TEXT ·kvRangeColsAVX2(SB), NOSPLIT, $0-48
	MOVQ src+0(FP), SI
	MOVQ stride+8(FP), R11
	SHLQ $1, R11
	MOVQ rows+16(FP), R8
	MOVQ cols+24(FP), R9
	MOVQ lo+32(FP), AX
	MOVQ hi+40(FP), BX
	VBROADCASTSS kvqPosInf<>(SB), Y14
	VBROADCASTSS kvqNegInf<>(SB), Y15

ccol:
	VMOVAPS Y14, Y0
	VMOVAPS Y15, Y1
	MOVQ    SI, DI
	MOVQ    R8, CX

crow:
	VCVTPH2PS (DI), Y2
	VMINPS    Y0, Y2, Y0
	VMAXPS    Y1, Y2, Y1
	ADDQ      R11, DI
	DECQ      CX
	JNZ       crow

	VMOVUPS Y0, (AX)
	VMOVUPS Y1, (BX)
	ADDQ    $32, AX
	ADDQ    $32, BX
	ADDQ    $16, SI
	SUBQ    $8, R9
	JNZ     ccol
	VZEROUPPER
	RET

// func kvLevelsRowsAVX2(src *uint16, stride, rows, cols int, m, iv *float32, levels float32, u *byte, uStride int)
// The levels of rows whose group is the row: m[r], iv[r].
TEXT ·kvLevelsRowsAVX2(SB), NOSPLIT, $0-72
	LEVELS_ARGS

lrow:
	VBROADCASTSS (AX), Y4
	VBROADCASTSS (BX), Y5
	MOVQ         SI, DI
	MOVQ         R10, DX
	MOVQ         R9, CX

lcol:
	LEVELS8(Y4, Y5)
	ADDQ $16, DI
	ADDQ $8, DX
	SUBQ $8, CX
	JNZ  lcol

	ADDQ $4, AX
	ADDQ $4, BX
	ADDQ R11, SI
	ADDQ R12, R10
	DECQ R8
	JNZ  lrow
	VZEROUPPER
	RET

// func kvLevelsColsAVX2(src *uint16, stride, rows, cols int, m, iv *float32, levels float32, u *byte, uStride int)
// The levels of rows whose groups are the columns: m[c], iv[c].
TEXT ·kvLevelsColsAVX2(SB), NOSPLIT, $0-72
	LEVELS_ARGS

lccol:
	VMOVUPS (AX), Y4
	VMOVUPS (BX), Y5
	MOVQ    SI, DI
	MOVQ    R10, DX
	MOVQ    R8, CX

lcrow:
	LEVELS8(Y4, Y5)
	ADDQ R11, DI
	ADDQ R12, DX
	DECQ CX
	JNZ  lcrow

	ADDQ $32, AX
	ADDQ $32, BX
	ADDQ $16, SI
	ADDQ $8, R10
	SUBQ $8, R9
	JNZ  lccol
	VZEROUPPER
	RET
