//go:build amd64 && !purego

#include "textflag.h"

// The AVX2 kernels of the channel-major layout (layout.go). Their pure-Go
// twins are blockQuantGeneric and packRowsGeneric.

DATA sparseOnes16<>+0(SB)/8, $0x0001000100010001
DATA sparseOnes16<>+8(SB)/8, $0x0001000100010001
DATA sparseOnes16<>+16(SB)/8, $0x0001000100010001
DATA sparseOnes16<>+24(SB)/8, $0x0001000100010001
GLOBL sparseOnes16<>(SB), RODATA|NOPTR, $32

DATA sparseNibble<>+0(SB)/8, $0x0f0f0f0f0f0f0f0f
DATA sparseNibble<>+8(SB)/8, $0x0f0f0f0f0f0f0f0f
DATA sparseNibble<>+16(SB)/8, $0x0f0f0f0f0f0f0f0f
DATA sparseNibble<>+24(SB)/8, $0x0f0f0f0f0f0f0f0f
GLOBL sparseNibble<>(SB), RODATA|NOPTR, $32

// Shift counts that leave the low 128-bit half and move the high one down
// by a nibble.
DATA sparseHalfShift<>+0(SB)/8, $0
DATA sparseHalfShift<>+8(SB)/8, $0
DATA sparseHalfShift<>+16(SB)/8, $0x0000000400000004
DATA sparseHalfShift<>+24(SB)/8, $0x0000000400000004
GLOBL sparseHalfShift<>(SB), RODATA|NOPTR, $32

// INTERLEAVE turns the four 32-row column pieces in Y4..Y7 into 8 rows by
// 4 channels a register: rows 8i … 8i+7 in Y(4+i), by the layout's row
// order. Clobbers Y8..Y11.
#define INTERLEAVE \
	VPUNPCKLBW Y5, Y4, Y8;  \
	VPUNPCKHBW Y5, Y4, Y9;  \
	VPUNPCKLBW Y7, Y6, Y10; \
	VPUNPCKHBW Y7, Y6, Y11; \
	VPUNPCKLWD Y10, Y8, Y4; \
	VPUNPCKHWD Y10, Y8, Y5; \
	VPUNPCKLWD Y11, Y9, Y6; \
	VPUNPCKHWD Y11, Y9, Y7

// ACCUMULATE adds the pairs of int16 products in Yw to the int32 sums of
// Yacc.
#define ACCUMULATE(Yw, Yacc) \
	VPMADDWD sparseOnes16<>(SB), Yw, Yw; \
	VPADDD   Yw, Yacc, Yacc

// ADDY adds the float sums of Yacc times the rows' scales (8 halves at
// doff(BX)) times dx (Y15) to the 8 floats at yoff(DX):
// y = fma(float(acc), f16(d)·dx, y). SETY stores float(acc)·(f16(d)·dx).
#define ADDY(Yacc, doff, yoff) \
	VCVTPH2PS   doff(BX), Y10;  \
	VMULPS      Y15, Y10, Y10;  \
	VCVTDQ2PS   Yacc, Yacc;     \
	VMOVUPS     yoff(DX), Y11;  \
	VFMADD231PS Y10, Yacc, Y11; \
	VMOVUPS     Y11, yoff(DX)

#define SETY(Yacc, doff, yoff) \
	VCVTPH2PS doff(BX), Y10;  \
	VMULPS    Y15, Y10, Y10;  \
	VCVTDQ2PS Yacc, Yacc;     \
	VMULPS    Y10, Yacc, Y11; \
	VMOVUPS   Y11, yoff(DX)

// FINISH writes the 32 rows' sums of Y0..Y3 into y (the rows' scales at
// DI + 2·R11, their outputs at R9 + 4·R11): set on a task's first block
// (R10 ≠ 0), added on the others.
#define FINISH(set, done) \
	LEAQ  (DI)(R11*2), BX; \
	LEAQ  (R9)(R11*4), DX; \
	TESTQ R10, R10;        \
	JNZ   set;             \
	ADDY(Y0, 0, 0);        \
	ADDY(Y1, 16, 32);      \
	ADDY(Y2, 32, 64);      \
	ADDY(Y3, 48, 96);      \
	JMP   done;            \
set:                       \
	SETY(Y0, 0, 0);        \
	SETY(Y1, 16, 32);      \
	SETY(Y2, 32, 64);      \
	SETY(Y3, 48, 96);      \
done:

// PREFETCHNEXT starts reading the first 256 bytes of the columns of the
// nextN quads that the next call will take (offsets at next, in nextBlk), so that their
// heads, which the prefetches ahead within a column never reach, are on
// their way while this block runs.
#define PREFETCHNEXT \
	MOVQ       next+64(FP), R12;   \
	MOVQ       nextN+72(FP), R13;  \
	MOVQ       nextBlk+80(FP), DX; \
	TESTQ      R13, R13;           \
	JZ         nextdone;           \
nextloop:                          \
	MOVLQSX    0(R12), AX;         \
	ADDQ       DX, AX;             \
	PREFETCHT0 (AX);               \
	PREFETCHT0 64(AX);             \
	PREFETCHT0 128(AX);            \
	PREFETCHT0 192(AX);            \
	MOVLQSX    4(R12), AX;         \
	ADDQ       DX, AX;             \
	PREFETCHT0 (AX);               \
	PREFETCHT0 64(AX);             \
	PREFETCHT0 128(AX);            \
	PREFETCHT0 192(AX);            \
	MOVLQSX    8(R12), AX;         \
	ADDQ       DX, AX;             \
	PREFETCHT0 (AX);               \
	PREFETCHT0 64(AX);             \
	PREFETCHT0 128(AX);            \
	PREFETCHT0 192(AX);            \
	MOVLQSX    12(R12), AX;        \
	ADDQ       DX, AX;             \
	PREFETCHT0 (AX);               \
	PREFETCHT0 64(AX);             \
	PREFETCHT0 128(AX);            \
	PREFETCHT0 192(AX);            \
	ADDQ       $16, R12;           \
	DECQ       R13;                \
	JNZ        nextloop;           \
nextdone:

// func blockQ8_0AVX2(offs *int32, xs *int8, nq int, blk *byte, rows int, dx float32, corr int32, y *float32, first bool, next *int32, nextN int, nextBlk *byte)
//
// Adds (first: sets) to y one block's products over its rows, 32 at a
// time: for each quad the four columns' 32 int8 quants, interleaved,
// given the signs of their activations (VPSIGNB: once a register after the
// interleaving, whose every 4 bytes are the quad's 4 channels, as a
// broadcast of the 4 activations is) and multiplied by the activations'
// magnitudes (VPMADDUBSW, VPMADDWD) into int32 sums; then
// y = fma(float(sum), f16(d)·dx, y). Each column is read 128 bytes (4
// steps) ahead, as the 64-row Q4_0 kernel reads (see PAIR64).
TEXT ·blockQ8_0AVX2(SB), NOSPLIT, $0-88
	PREFETCHNEXT
	MOVQ         offs+0(FP), SI
	MOVQ         blk+24(FP), DI
	MOVQ         rows+32(FP), R8
	VBROADCASTSS dx+40(FP), Y15
	MOVQ         y+48(FP), R9
	MOVBQZX      first+56(FP), R10
	XORQ         R11, R11            // g: the first row of the 32

q8rows:
	VPXOR Y0, Y0, Y0
	VPXOR Y1, Y1, Y1
	VPXOR Y2, Y2, Y2
	VPXOR Y3, Y3, Y3
	MOVQ  SI, R12
	MOVQ  xs+8(FP), CX
	MOVQ  nq+16(FP), R13

q8quads:
	MOVLQSX      0(R12), AX
	MOVLQSX      4(R12), BX
	MOVLQSX      8(R12), DX
	MOVLQSX      12(R12), R14
	ADDQ         DI, AX
	ADDQ         DI, BX
	ADDQ         DI, DX
	ADDQ         DI, R14
	VMOVDQU      (AX)(R11*1), Y4
	VMOVDQU      (BX)(R11*1), Y5
	VMOVDQU      (DX)(R11*1), Y6
	VMOVDQU      (R14)(R11*1), Y7
	PREFETCHT0   128(AX)(R11*1)
	PREFETCHT0   128(BX)(R11*1)
	PREFETCHT0   128(DX)(R11*1)
	PREFETCHT0   128(R14)(R11*1)
	VPBROADCASTD 0(CX), Y12          // x of the four channels, in each 4 bytes as INTERLEAVE puts the columns
	INTERLEAVE
	VPSIGNB      Y12, Y4, Y4
	VPSIGNB      Y12, Y5, Y5
	VPSIGNB      Y12, Y6, Y6
	VPSIGNB      Y12, Y7, Y7
	VPABSB       Y12, Y13            // |x|
	VPMADDUBSW   Y4, Y13, Y4
	VPMADDUBSW   Y5, Y13, Y5
	VPMADDUBSW   Y6, Y13, Y6
	VPMADDUBSW   Y7, Y13, Y7
	ACCUMULATE(Y4, Y0)
	ACCUMULATE(Y5, Y1)
	ACCUMULATE(Y6, Y2)
	ACCUMULATE(Y7, Y3)
	ADDQ         $16, R12
	ADDQ         $4, CX
	DECQ         R13
	JNZ          q8quads

	FINISH(q8set, q8done)
	ADDQ $32, R11
	CMPQ R11, R8
	JLT  q8rows
	VZEROUPPER
	RET

// func blockQ4_0AVX2(offs *int32, xs *int8, nq int, blk *byte, rows int, dx float32, corr int32, y *float32, first bool, next *int32, nextN int, nextBlk *byte)
//
// blockQ8_0AVX2 for Q4_0: a column's 32 rows are 16 bytes of nibbles
// (0..15), spread to bytes, multiplied unsigned by the signed activations;
// the pairs' sums (at most 2·15·127) add up as int16 over a block's at
// most 8 quads before they widen; the sums less corr (8·Σx) make the
// weights d·(n−8).
TEXT ·blockQ4_0AVX2(SB), NOSPLIT, $0-88
	PREFETCHNEXT
	MOVQ         offs+0(FP), SI
	MOVQ         blk+24(FP), DI
	MOVQ         rows+32(FP), R8
	VBROADCASTSS dx+40(FP), Y15
	MOVQ         y+48(FP), R9
	VMOVDQU      sparseHalfShift<>(SB), Y14
	VMOVDQU      sparseNibble<>(SB), Y12
	XORQ         R11, R11            // g: the first row of the 32

q4rows:
	VPXOR Y0, Y0, Y0
	VPXOR Y1, Y1, Y1
	VPXOR Y2, Y2, Y2
	VPXOR Y3, Y3, Y3
	MOVQ  SI, R12
	MOVQ  xs+8(FP), CX
	MOVQ  nq+16(FP), R13
	MOVQ  R11, R14
	SHRQ  $1, R14
	ADDQ  DI, R14                    // the block plus the pieces' offset in their columns

q4quads:
	MOVLQSX        0(R12), AX
	MOVLQSX        4(R12), BX
	MOVLQSX        8(R12), DX
	MOVLQSX        12(R12), R10
	VBROADCASTI128 (R14)(AX*1), Y4
	VBROADCASTI128 (R14)(BX*1), Y5
	VBROADCASTI128 (R14)(DX*1), Y6
	VBROADCASTI128 (R14)(R10*1), Y7
	PREFETCHT0     256(R14)(AX*1)
	PREFETCHT0     256(R14)(BX*1)
	PREFETCHT0     256(R14)(DX*1)
	PREFETCHT0     256(R14)(R10*1)
	VPSRLVD        Y14, Y4, Y4
	VPSRLVD        Y14, Y5, Y5
	VPSRLVD        Y14, Y6, Y6
	VPSRLVD        Y14, Y7, Y7
	VPAND          Y12, Y4, Y4
	VPAND          Y12, Y5, Y5
	VPAND          Y12, Y6, Y6
	VPAND          Y12, Y7, Y7
	VPBROADCASTD   0(CX), Y13        // x of the four channels
	INTERLEAVE
	VPMADDUBSW     Y13, Y4, Y4
	VPMADDUBSW     Y13, Y5, Y5
	VPMADDUBSW     Y13, Y6, Y6
	VPMADDUBSW     Y13, Y7, Y7
	VPADDW         Y4, Y0, Y0        // int16: at most 8 quads of 2·15·127
	VPADDW         Y5, Y1, Y1
	VPADDW         Y6, Y2, Y2
	VPADDW         Y7, Y3, Y3
	ADDQ           $16, R12
	ADDQ           $4, CX
	DECQ           R13
	JNZ            q4quads
	VPMADDWD       sparseOnes16<>(SB), Y0, Y0
	VPMADDWD       sparseOnes16<>(SB), Y1, Y1
	VPMADDWD       sparseOnes16<>(SB), Y2, Y2
	VPMADDWD       sparseOnes16<>(SB), Y3, Y3

	MOVBQZX      first+56(FP), R10
	MOVL         corr+44(FP), AX     // the weights are d·(n−8)
	VMOVD        AX, X13
	VPBROADCASTD X13, Y13
	VPSUBD       Y13, Y0, Y0
	VPSUBD       Y13, Y1, Y1
	VPSUBD       Y13, Y2, Y2
	VPSUBD       Y13, Y3, Y3
	FINISH(q4set, q4done)
	ADDQ         $32, R11
	CMPQ         R11, R8
	JLT          q4rows
	VZEROUPPER
	RET

// TRANSPOSE8 transposes the 8 registers Y0..Y7, each 32 positions (bytes)
// of one column, into qwords of 8 columns: afterwards the register of
// w(m) (W0 … W7 below) holds in its 128-bit half L the 8 columns of
// positions 16L+2m (low qword) and 16L+2m+1 (high qword). Uses Y8.
#define TRANSPOSE8 \
	VPUNPCKLBW Y1, Y0, Y8; \
	VPUNPCKHBW Y1, Y0, Y1; \
	VPUNPCKLBW Y3, Y2, Y0; \
	VPUNPCKHBW Y3, Y2, Y3; \
	VPUNPCKLBW Y5, Y4, Y2; \
	VPUNPCKHBW Y5, Y4, Y5; \
	VPUNPCKLBW Y7, Y6, Y4; \
	VPUNPCKHBW Y7, Y6, Y7; \
	VPUNPCKLWD Y0, Y8, Y6; \
	VPUNPCKHWD Y0, Y8, Y0; \
	VPUNPCKLWD Y3, Y1, Y8; \
	VPUNPCKHWD Y3, Y1, Y3; \
	VPUNPCKLWD Y4, Y2, Y1; \
	VPUNPCKHWD Y4, Y2, Y4; \
	VPUNPCKLWD Y7, Y5, Y2; \
	VPUNPCKHWD Y7, Y5, Y7; \
	VPUNPCKLDQ Y1, Y6, Y5; \
	VPUNPCKHDQ Y1, Y6, Y1; \
	VPUNPCKLDQ Y4, Y0, Y6; \
	VPUNPCKHDQ Y4, Y0, Y4; \
	VPUNPCKLDQ Y2, Y8, Y0; \
	VPUNPCKHDQ Y2, Y8, Y2; \
	VPUNPCKLDQ Y7, Y3, Y8; \
	VPUNPCKHDQ Y7, Y3, Y7

// STORE2 stores the four qwords of Y (Xr its low half) at DI plus the row
// offsets of positions 2m, 2m+1, 16+2m and 17+2m, which the table at R9
// holds at o0 … o3. Uses AX and X3.
#define STORE2(Y, Xr, o0, o1, o2, o3) \
	MOVQ         o0(R9), AX;     \
	VMOVQ        Xr, (DI)(AX*1); \
	MOVQ         o1(R9), AX;     \
	VMOVHPS      Xr, (DI)(AX*1); \
	VEXTRACTI128 $1, Y, X3;      \
	MOVQ         o2(R9), AX;     \
	VMOVQ        X3, (DI)(AX*1); \
	MOVQ         o3(R9), AX;     \
	VMOVHPS      X3, (DI)(AX*1)

#define STORE8 \
	STORE2(Y5, X5, 0, 8, 128, 136);    \
	STORE2(Y1, X1, 16, 24, 144, 152);  \
	STORE2(Y6, X6, 32, 40, 160, 168);  \
	STORE2(Y4, X4, 48, 56, 176, 184);  \
	STORE2(Y0, X0, 64, 72, 192, 200);  \
	STORE2(Y2, X2, 80, 88, 208, 216);  \
	STORE2(Y8, X8, 96, 104, 224, 232); \
	STORE2(Y7, X7, 112, 120, 240, 248)

// PREFETCHPIECES starts reading the 32 column pieces at R14 (stride CX
// apart) and their 32 rows' scales at R15, a later block's, so that they
// come from memory while this block is transposed; nothing when R14 is
// nil. Uses AX, R11.
#define PREFETCHPIECES \
	TESTQ      R14, R14;     \
	JZ         8(PC);        \
	PREFETCHT0 (R15);        \
	MOVQ       R14, AX;      \
	MOVQ       $32, R11;     \
	PREFETCHT0 (AX);         \
	ADDQ       CX, AX;       \
	DECQ       R11;          \
	JNZ        -3(PC)

// SCALES4 copies the scales of four rows (at off(BX)) to the first two
// bytes of their blocks (R10, rows R8 bytes apart; R11 = 3·R8) and moves
// R10 on four rows. Uses AX.
#define SCALES4(off) \
	MOVQ off(BX), AX;       \
	MOVW AX, (R10);         \
	SHRQ $16, AX;           \
	MOVW AX, (R10)(R8*1);   \
	SHRQ $16, AX;           \
	MOVW AX, (R10)(R8*2);   \
	SHRQ $16, AX;           \
	MOVW AX, (R10)(R11*1);  \
	LEAQ (R10)(R8*4), R10

// SCALES copies the 32 rows' scales (halves at BX) to the first two bytes
// of each row's block (DI, rows R8 bytes apart), four rows a load. Uses
// AX, R10, R11.
#define SCALES \
	MOVQ DI, R10;          \
	LEAQ (R8)(R8*2), R11;  \
	SCALES4(0);            \
	SCALES4(8);            \
	SCALES4(16);           \
	SCALES4(24);           \
	SCALES4(32);           \
	SCALES4(40);           \
	SCALES4(48);           \
	SCALES4(56)

// func packQ8_0AVX2(cols *byte, stride int, scales *byte, dst *byte, rowBytes int, rowOff *[32]int, next, nextScales *byte)
//
// Writes one block of 32 rows row-major: the block's 32 column pieces of
// 32 quants (the first at cols, stride bytes apart) and the rows' scales,
// to the rows' Q8_0 blocks (row r's at dst + r·rowBytes, position p's at
// dst + rowOff[p]). It starts reading next's pieces and scales (a later
// block's; nil: none).
TEXT ·packQ8_0AVX2(SB), NOSPLIT, $0-64
	MOVQ cols+0(FP), SI
	MOVQ stride+8(FP), CX
	MOVQ scales+16(FP), BX
	MOVQ dst+24(FP), DI
	MOVQ rowBytes+32(FP), R8
	MOVQ rowOff+40(FP), R9
	MOVQ next+48(FP), R14
	MOVQ nextScales+56(FP), R15
	PREFETCHPIECES
	SCALES
	ADDQ $2, DI
	MOVQ $4, R12

q8chunk:
	VMOVDQU (SI), Y0
	ADDQ    CX, SI
	VMOVDQU (SI), Y1
	ADDQ    CX, SI
	VMOVDQU (SI), Y2
	ADDQ    CX, SI
	VMOVDQU (SI), Y3
	ADDQ    CX, SI
	VMOVDQU (SI), Y4
	ADDQ    CX, SI
	VMOVDQU (SI), Y5
	ADDQ    CX, SI
	VMOVDQU (SI), Y6
	ADDQ    CX, SI
	VMOVDQU (SI), Y7
	ADDQ    CX, SI
	TRANSPOSE8
	STORE8
	ADDQ    $8, DI
	DECQ    R12
	JNZ     q8chunk
	VZEROUPPER
	RET

// sparseHalfShiftL: shift counts that move the low 128-bit half up by a
// nibble and leave the high one.
DATA sparseHalfShiftL<>+0(SB)/8, $0x0000000400000004
DATA sparseHalfShiftL<>+8(SB)/8, $0x0000000400000004
DATA sparseHalfShiftL<>+16(SB)/8, $0
DATA sparseHalfShiftL<>+24(SB)/8, $0
GLOBL sparseHalfShiftL<>(SB), RODATA|NOPTR, $32

// NIBBLES sets Y to byte j of the 32 positions' rows, given the 16 bytes
// of column j at m1 and of column j+16 at m2: position p < 16 (low half)
// the low nibbles of byte p of each, 16+p (high half) their high nibbles,
// column j's in the low nibble. Uses Y9; Y12, Y14 hold the shifts, Y15
// and Y13 the masks 0x0f and 0xf0.
#define NIBBLES(m1, m2, Y) \
	VBROADCASTI128 m1, Y;        \
	VPSRLVD        Y14, Y, Y;    \
	VPAND          Y15, Y, Y;    \
	VBROADCASTI128 m2, Y9;       \
	VPSLLVD        Y12, Y9, Y9;  \
	VPAND          Y13, Y9, Y9;  \
	VPOR           Y9, Y, Y

// NIBBLES8 fills Y0 … Y7 with bytes j … j+7 of the positions' rows, the
// first column's piece at R10 (CX bytes apart, column j+16 R13 on). Moves
// R10 on 8 columns.
#define NIBBLES8 \
	NIBBLES((R10), (R10)(R13*1), Y0); \
	ADDQ CX, R10;                     \
	NIBBLES((R10), (R10)(R13*1), Y1); \
	ADDQ CX, R10;                     \
	NIBBLES((R10), (R10)(R13*1), Y2); \
	ADDQ CX, R10;                     \
	NIBBLES((R10), (R10)(R13*1), Y3); \
	ADDQ CX, R10;                     \
	NIBBLES((R10), (R10)(R13*1), Y4); \
	ADDQ CX, R10;                     \
	NIBBLES((R10), (R10)(R13*1), Y5); \
	ADDQ CX, R10;                     \
	NIBBLES((R10), (R10)(R13*1), Y6); \
	ADDQ CX, R10;                     \
	NIBBLES((R10), (R10)(R13*1), Y7); \
	ADDQ CX, R10

// ROWS4 stores the 16 bytes of four rows: Yw holds (TRANSPOSE8's w(m))
// bytes 0…7 of positions 16L+2m and 16L+2m+1 in half L, the frame at off
// their bytes 8…15; those positions are rows base, base+1 (L = 0) and
// base+4, base+5 (L = 1), rows R8 bytes apart (R9 = 5·R8). Uses Y9, Y10.
#define ROWS4(Yw, off, base) \
	VPUNPCKLQDQ  off(SP), Yw, Y9;      \
	VPUNPCKHQDQ  off(SP), Yw, Y10;     \
	VMOVDQU      X9, (base);           \
	VEXTRACTI128 $1, Y9, (base)(R8*4); \
	VMOVDQU      X10, (base)(R8*1);    \
	VEXTRACTI128 $1, Y10, (base)(R9*1)

// SCALES8 copies 8 rows' scales (halves at off(BX)) to the first two
// bytes of their blocks (R10, rows R8 bytes apart; R11 = 3·R8) and moves
// R10 on 8 rows. Uses X9.
#define SCALES8(off) \
	VMOVDQU off(BX), X9;             \
	VPEXTRW $0, X9, (R10);           \
	VPEXTRW $1, X9, (R10)(R8*1);     \
	VPEXTRW $2, X9, (R10)(R8*2);     \
	VPEXTRW $3, X9, (R10)(R11*1);    \
	LEAQ    (R10)(R8*4), R10;        \
	VPEXTRW $4, X9, (R10);           \
	VPEXTRW $5, X9, (R10)(R8*1);     \
	VPEXTRW $6, X9, (R10)(R8*2);     \
	VPEXTRW $7, X9, (R10)(R11*1);    \
	LEAQ    (R10)(R8*4), R10

// func packQ4_0AVX2(cols *byte, stride int, scales *byte, dst *byte, rowBytes int, rowOff *[32]int, next, nextScales *byte)
//
// packQ8_0AVX2 for Q4_0: the column pieces are 16 bytes of nibbles, and a
// row's block byte j holds columns j and j+16. The bytes 8…15 of the rows
// are transposed first and kept in the frame, then bytes 0…7, and each
// row's 16 bytes are stored at once, at addresses that follow from the
// layout's row order (rowAt: position 16L+2m is row 8·(m/2) + 4L +
// 2·(m%2)); rowOff is not read.
TEXT ·packQ4_0AVX2(SB), NOSPLIT, $256-64
	MOVQ    cols+0(FP), SI
	MOVQ    stride+8(FP), CX
	MOVQ    scales+16(FP), BX
	MOVQ    dst+24(FP), DI
	MOVQ    rowBytes+32(FP), R8
	MOVQ    next+48(FP), R14
	MOVQ    nextScales+56(FP), R15
	PREFETCHPIECES
	MOVQ    DI, R10
	LEAQ    (R8)(R8*2), R11
	SCALES8(0)
	SCALES8(16)
	SCALES8(32)
	SCALES8(48)
	ADDQ    $2, DI
	VMOVDQU sparseHalfShift<>(SB), Y14
	VMOVDQU sparseHalfShiftL<>(SB), Y12
	VMOVDQU sparseNibble<>(SB), Y15
	VPSLLW  $4, Y15, Y13
	MOVQ    CX, R13
	SHLQ    $4, R13                   // 16 columns on
	MOVQ    CX, R10
	SHLQ    $3, R10
	ADDQ    SI, R10                   // column 8
	NIBBLES8
	TRANSPOSE8
	VMOVDQU Y5, 0(SP)
	VMOVDQU Y1, 32(SP)
	VMOVDQU Y6, 64(SP)
	VMOVDQU Y4, 96(SP)
	VMOVDQU Y0, 128(SP)
	VMOVDQU Y2, 160(SP)
	VMOVDQU Y8, 192(SP)
	VMOVDQU Y7, 224(SP)
	MOVQ    SI, R10                   // column 0
	NIBBLES8
	TRANSPOSE8
	LEAQ    (R8)(R8*1), R11           // 2 rows
	LEAQ    (R8)(R8*4), R9            // 5 rows
	MOVQ    DI, R10                   // rows 0, 8, 16, 24
	ROWS4(Y5, 0, R10)
	LEAQ    (R10)(R11*1), AX          // rows 2, 10, 18, 26
	ROWS4(Y1, 32, AX)
	LEAQ    (R10)(R8*8), R10
	ROWS4(Y6, 64, R10)
	LEAQ    (R10)(R11*1), AX
	ROWS4(Y4, 96, AX)
	LEAQ    (R10)(R8*8), R10
	ROWS4(Y0, 128, R10)
	LEAQ    (R10)(R11*1), AX
	ROWS4(Y2, 160, AX)
	LEAQ    (R10)(R8*8), R10
	ROWS4(Y8, 192, R10)
	LEAQ    (R10)(R11*1), AX
	ROWS4(Y7, 224, AX)
	VZEROUPPER
	RET

DATA sparseAbs<>+0(SB)/4, $0x7fffffff
GLOBL sparseAbs<>(SB), RODATA|NOPTR, $4

// func thresholdAVX2(dst, x *float32, n int, threshold float32) int
//
// dst[i] = x[i] where |x[i]| > threshold, else 0 (NaNs too), 8 at a time;
// n is a multiple of 8. It returns how many entries it kept.
TEXT ·thresholdAVX2(SB), NOSPLIT, $0-40
	MOVQ         dst+0(FP), DI
	MOVQ         x+8(FP), SI
	MOVQ         n+16(FP), CX
	VBROADCASTSS threshold+24(FP), Y3
	VBROADCASTSS sparseAbs<>(SB), Y2
	XORQ         DX, DX
	SHRQ         $3, CX
	JZ           thrdone

thrloop:
	VMOVUPS   (SI), Y0
	VANDPS    Y2, Y0, Y1
	VCMPPS    $0x1e, Y3, Y1, Y1      // |x| > threshold, ordered
	VANDPS    Y1, Y0, Y0
	VMOVUPS   Y0, (DI)
	VMOVMSKPS Y1, AX
	POPCNTL   AX, AX
	ADDQ      AX, DX
	ADDQ      $32, SI
	ADDQ      $32, DI
	DECQ      CX
	JNZ       thrloop

thrdone:
	MOVQ DX, ret+32(FP)
	VZEROUPPER
	RET

// func planQ8AVX2(act *byte, nb int, cols *int32, table *uint64, offs *int32, xs *int8, counts *int32)
//
// planBlocksGeneric: for each Q8_0 block of act, 8 quants at a time, the
// non-zero ones' indices (table[mask]: the set bits' positions, a byte
// each) gather their columns' offsets (cols: the block's 32, the first 8 in
// the low half) with VPERMD and their quants with VPSHUFB, stored at the
// running count (8 at a time: offs and xs have 8 entries of slack); the
// block's last quad is then padded.
TEXT ·planQ8AVX2(SB), NOSPLIT, $0-56
	MOVQ    act+0(FP), SI
	MOVQ    nb+8(FP), CX
	MOVQ    cols+16(FP), AX
	MOVQ    table+24(FP), R8
	MOVQ    offs+32(FP), DI
	MOVQ    xs+40(FP), DX
	MOVQ    counts+48(FP), R9
	VMOVDQU 0(AX), Y8
	VMOVDQU 32(AX), Y9
	VMOVDQU 64(AX), Y10
	VMOVDQU 96(AX), Y11
	VPXOR   X15, X15, X15
	XORQ    R10, R10                  // k: the entries written

#define PLAN8(off, Ycols) \
	VMOVQ     off(SI), X0;      \
	VPCMPEQB  X15, X0, X1;      \
	VPMOVMSKB X1, AX;           \
	NOTL      AX;               \
	ANDL      $0xff, AX;        \
	VMOVQ     (R8)(AX*8), X2;   \
	VPSHUFB   X2, X0, X3;       \
	VMOVQ     X3, (DX)(R10*1);  \
	VPMOVZXBD X2, Y4;           \
	VPERMD    Ycols, Y4, Y5;    \
	VMOVDQU   Y5, (DI)(R10*4);  \
	POPCNTL   AX, AX;           \
	ADDQ      AX, R10

planblock:
	MOVQ R10, R11                     // the block's first entry
	PLAN8(2, Y8)
	PLAN8(10, Y9)
	PLAN8(18, Y10)
	PLAN8(26, Y11)
	// Pad the last quad: the last column, activation 0.
planpad:
	TESTQ $3, R10
	JZ    planpadded
	MOVL  -4(DI)(R10*4), AX
	MOVL  AX, (DI)(R10*4)
	MOVB  $0, (DX)(R10*1)
	INCQ  R10
	JMP   planpad

planpadded:
	MOVQ R10, AX
	SUBQ R11, AX
	SHRQ $2, AX
	MOVL AX, (R9)
	ADDQ $4, R9
	ADDQ $34, SI
	DECQ CX
	JNZ  planblock
	VZEROUPPER
	RET

// PAIR64 adds, for the 64 rows at R14 of the columns at offsets Ra and Rb
// (a pair of a quad), the pairs' products with their two activations (at
// xoff(CX)) to the int16 sums of positions 0…7, 8…15, 16…23, 24…31 of
// both groups of 32 rows in Yp0 … Yp3 (one group a 128-bit half). Uses
// Y8 … Y13. Each column is asked for 128 bytes (4 steps) ahead: 256, as
// the other kernels, ran past the end of the short columns of 2048-row
// matrices (1 KiB) into the next column's head for a quarter of their
// length, read for nothing when that channel is off, and decoded
// tinyllama's shape 5–15% slower at 2 threads, sparsity 0.25–0.5.
#define PAIR64(Ra, Rb, xoff, Yp0, Yp1, Yp2, Yp3) \
	VMOVDQU      (R14)(Ra*1), Y8;   \
	VMOVDQU      (R14)(Rb*1), Y9;   \
	PREFETCHT0   128(R14)(Ra*1);    \
	PREFETCHT0   128(R14)(Rb*1);    \
	VPSRLW       $4, Y8, Y10;       \
	VPSRLW       $4, Y9, Y11;       \
	VPAND        Y14, Y8, Y8;       \
	VPAND        Y14, Y9, Y9;       \
	VPAND        Y14, Y10, Y10;     \
	VPAND        Y14, Y11, Y11;     \
	VPBROADCASTW xoff(CX), Y13;     \
	VPUNPCKLBW   Y9, Y8, Y12;       \
	VPMADDUBSW   Y13, Y12, Y12;     \
	VPADDW       Y12, Yp0, Yp0;     \
	VPUNPCKHBW   Y9, Y8, Y12;       \
	VPMADDUBSW   Y13, Y12, Y12;     \
	VPADDW       Y12, Yp1, Yp1;     \
	VPUNPCKLBW   Y11, Y10, Y12;     \
	VPMADDUBSW   Y13, Y12, Y12;     \
	VPADDW       Y12, Yp2, Yp2;     \
	VPUNPCKHBW   Y11, Y10, Y12;     \
	VPMADDUBSW   Y13, Y12, Y12;     \
	VPADDW       Y12, Yp3, Yp3

// WIDEN sums the int16 sums of positions of the quads' first pairs (Ya)
// and second pairs (Yb) into int32: Ylo gets positions 4k…4k+3, Yhi the
// next four (k: 0 for Yp0, 2 for Yp1, … as PAIR64 fills them).
#define WIDEN(Ya, Yb, Ylo, Yhi) \
	VPUNPCKLWD Yb, Ya, Ylo;                \
	VPUNPCKHWD Yb, Ya, Yhi;                \
	VPMADDWD   sparseOnes16<>(SB), Ylo, Ylo; \
	VPMADDWD   sparseOnes16<>(SB), Yhi, Yhi

// func blockQ4_0x64AVX2(offs *int32, xs *int8, nq int, blk *byte, rows int, dx float32, corr int32, y *float32, first bool, next *int32, nextN int, nextBlk *byte)
//
// blockQ4_0AVX2 for rows a multiple of 64, with fewer instructions per
// weight: a 32-byte load holds the nibbles of 64 rows of a column (two
// groups of 32, a group a 128-bit half), and each quad is taken as two
// pairs of columns, interleaved once (bytes) and multiplied by their two
// activations into int16 sums per row, one set of sums for the quads'
// first pairs and one for their second (a block's at most 8 quads add at
// most 8·2·15·127 to each). At the block's end the two sets are added as
// int32 and the positions put back in row order (the layout's rowAt):
// rows 8i…8i+7 of a group are positions 4i…4i+3 and 16+4i…16+4i+3.
TEXT ·blockQ4_0x64AVX2(SB), NOSPLIT, $0-88
	PREFETCHNEXT
	MOVQ         offs+0(FP), SI
	MOVQ         blk+24(FP), DI
	MOVQ         rows+32(FP), R8
	VBROADCASTSS dx+40(FP), Y15
	MOVQ         y+48(FP), R9
	VMOVDQU      sparseNibble<>(SB), Y14
	XORQ         R11, R11            // g: the first row of the 64

q64rows:
	VPXOR Y0, Y0, Y0
	VPXOR Y1, Y1, Y1
	VPXOR Y2, Y2, Y2
	VPXOR Y3, Y3, Y3
	VPXOR Y4, Y4, Y4
	VPXOR Y5, Y5, Y5
	VPXOR Y6, Y6, Y6
	VPXOR Y7, Y7, Y7
	MOVQ  SI, R12
	MOVQ  xs+8(FP), CX
	MOVQ  nq+16(FP), R13
	MOVQ  R11, R14
	SHRQ  $1, R14
	ADDQ  DI, R14                    // the block plus the pieces' offset in their columns

q64quads:
	MOVLQSX 0(R12), AX
	MOVLQSX 4(R12), BX
	MOVLQSX 8(R12), DX
	MOVLQSX 12(R12), R10
	PAIR64(AX, BX, 0, Y0, Y1, Y2, Y3)
	PAIR64(DX, R10, 2, Y4, Y5, Y6, Y7)
	ADDQ    $16, R12
	ADDQ    $4, CX
	DECQ    R13
	JNZ     q64quads

	WIDEN(Y0, Y4, Y8, Y9)            // positions 0…3, 4…7
	WIDEN(Y1, Y5, Y10, Y11)          // 8…11, 12…15
	WIDEN(Y2, Y6, Y12, Y13)          // 16…19, 20…23
	WIDEN(Y3, Y7, Y0, Y1)            // 24…27, 28…31
	VPERM2I128 $0x20, Y12, Y8, Y2    // first group: rows 0…7
	VPERM2I128 $0x31, Y12, Y8, Y3    // second group: rows 0…7
	VPERM2I128 $0x20, Y13, Y9, Y4    // rows 8…15
	VPERM2I128 $0x31, Y13, Y9, Y5
	VPERM2I128 $0x20, Y0, Y10, Y6    // rows 16…23
	VPERM2I128 $0x31, Y0, Y10, Y7
	VPERM2I128 $0x20, Y1, Y11, Y8    // rows 24…31
	VPERM2I128 $0x31, Y1, Y11, Y9

	MOVL         corr+44(FP), AX     // the weights are d·(n−8)
	VMOVD        AX, X13
	VPBROADCASTD X13, Y13
	VPSUBD       Y13, Y2, Y2
	VPSUBD       Y13, Y3, Y3
	VPSUBD       Y13, Y4, Y4
	VPSUBD       Y13, Y5, Y5
	VPSUBD       Y13, Y6, Y6
	VPSUBD       Y13, Y7, Y7
	VPSUBD       Y13, Y8, Y8
	VPSUBD       Y13, Y9, Y9

	LEAQ    (DI)(R11*2), BX
	LEAQ    (R9)(R11*4), DX
	MOVBQZX first+56(FP), R10
	TESTQ   R10, R10
	JNZ     q64set
	ADDY(Y2, 0, 0)
	ADDY(Y4, 16, 32)
	ADDY(Y6, 32, 64)
	ADDY(Y8, 48, 96)
	ADDY(Y3, 64, 128)
	ADDY(Y5, 80, 160)
	ADDY(Y7, 96, 192)
	ADDY(Y9, 112, 224)
	JMP     q64done

q64set:
	SETY(Y2, 0, 0)
	SETY(Y4, 16, 32)
	SETY(Y6, 32, 64)
	SETY(Y8, 48, 96)
	SETY(Y3, 64, 128)
	SETY(Y5, 80, 160)
	SETY(Y7, 96, 192)
	SETY(Y9, 112, 224)

q64done:
	ADDQ $64, R11
	CMPQ R11, R8
	JLT  q64rows
	VZEROUPPER
	RET
