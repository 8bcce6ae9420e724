//go:build amd64 && !purego

#include "textflag.h"

// Dot products of Q5_0 against Q8_0, and of Q4_1 and Q5_1 against Q8_1
// activations (36-byte blocks: d f16, s f16 = d·Σq, 32 int8). One block per
// iteration: the quants are expanded to 32 bytes, multiplied through
// VPMADDUBSW, widened to 8 int32 lane sums, and added to the accumulator as
// floats scaled by dw·da. The min terms of Q4_1/Q5_1 are mw·sa per block,
// summed in a scalar with a fused multiply-add (ggml's compiler fuses it).

// bitsToBytes: byte i of the 32 gets byte i/8 of the 32-bit qh word.
DATA bitsToBytes<>+0(SB)/8, $0x0000000000000000
DATA bitsToBytes<>+8(SB)/8, $0x0101010101010101
DATA bitsToBytes<>+16(SB)/8, $0x0202020202020202
DATA bitsToBytes<>+24(SB)/8, $0x0303030303030303
GLOBL bitsToBytes<>(SB), RODATA|NOPTR, $32

// SETUP_CONSTANTS: Y15 int16 ones, Y14 0x0f bytes, Y13 the bitsToBytes
// shuffle, Y12 bit i%8 of byte i, Y11 0x10 bytes, Y10 0xf0 bytes.
#define SETUP_CONSTANTS \
	VPCMPEQW     Y15, Y15, Y15; \
	VPSRLW       $15, Y15, Y15; \
	MOVL         $0x0f0f0f0f, AX; \
	VMOVD        AX, X14; \
	VPBROADCASTD X14, Y14; \
	VMOVDQU      bitsToBytes<>(SB), Y13; \
	MOVQ         $0x8040201008040201, AX; \
	VMOVQ        AX, X12; \
	VPBROADCASTQ X12, Y12; \
	MOVL         $0x10101010, AX; \
	VMOVD        AX, X11; \
	VPBROADCASTD X11, Y11; \
	MOVL         $0xf0f0f0f0, AX; \
	VMOVD        AX, X10; \
	VPBROADCASTD X10, Y10

// NIBBLES loads the 16 bytes at m as 32 nibbles into Yq: low nibbles (weights
// 0-15) in the low lane, high nibbles (16-31) in the high lane.
#define NIBBLES(m, Xq, Yq, Xt) \
	VMOVDQU     m, Xq; \
	VPSRLW      $4, Xq, Xt; \
	VINSERTI128 $1, Xt, Yq, Yq; \
	VPAND       Y14, Yq, Yq

// HIGH_BITS sets byte i of Yh to 0xff where bit i of the 32-bit word at m is set.
#define HIGH_BITS(m, Yh) \
	VPBROADCASTD m, Yh; \
	VPSHUFB      Y13, Yh, Yh; \
	VPAND        Y12, Yh, Yh; \
	VPCMPEQB     Y12, Yh, Yh

#define HSUM_Y0 \
	VEXTRACTF128 $1, Y0, X1; \
	VADDPS       X1, X0, X0; \
	VMOVHLPS     X0, X0, X1; \
	VADDPS       X1, X0, X0; \
	VMOVSHDUP    X0, X1; \
	VADDSS       X1, X0, X0

// func vecDotQ5_0AVX2(nb int, w, a *byte) float32
// Q5_0 block (22 B): d f16 @0, qh u32 @2, qs[16] @6; w = d·(q-16). The signed
// q-16 is the nibble with 0xf0 ORed in where the 5th bit is clear.
TEXT ·vecDotQ5_0AVX2(SB), NOSPLIT, $0-28
	MOVQ   nb+0(FP), CX
	MOVQ   w+8(FP), SI
	MOVQ   a+16(FP), DI
	VXORPS Y0, Y0, Y0
	SETUP_CONSTANTS

q50loop:
	MOVWLZX      0(SI), AX
	MOVWLZX      0(DI), BX
	VMOVD        AX, X1
	VPINSRW      $1, BX, X1, X1
	VCVTPH2PS    X1, X1
	VMOVSHDUP    X1, X2
	VMULSS       X2, X1, X1
	VBROADCASTSS X1, Y1
	NIBBLES(6(SI), X2, Y2, X3)
	HIGH_BITS(2(SI), Y3)
	VPANDN       Y10, Y3, Y3
	VPOR         Y3, Y2, Y2
	VMOVDQU      2(DI), Y4
	VPSIGNB      Y2, Y4, Y4
	VPSIGNB      Y2, Y2, Y2
	VPMADDUBSW   Y4, Y2, Y2
	VPMADDWD     Y15, Y2, Y2
	VCVTDQ2PS    Y2, Y2
	VFMADD231PS  Y2, Y1, Y0
	ADDQ         $22, SI
	ADDQ         $34, DI
	DECQ         CX
	JNZ          q50loop

	HSUM_Y0
	VZEROUPPER
	MOVSS X0, ret+24(FP)
	RET

// SCALES_MIN sets Y1 to the broadcast of dw·da and adds mw·sa to X9 in one
// rounding, from the half pairs (d, m) at wp and (d, s) at ap; clobbers X2-X4.
#define SCALES_MIN(wp, ap) \
	MOVL         wp, AX; \
	MOVL         ap, BX; \
	VMOVD        AX, X1; \
	VPINSRD      $1, BX, X1, X1; \
	VCVTPH2PS    X1, X1; \
	VMOVHLPS     X1, X1, X2; \
	VMOVSHDUP    X1, X3; \
	VMOVSHDUP    X2, X4; \
	VFMADD231SS  X4, X3, X9; \
	VMULSS       X2, X1, X1; \
	VBROADCASTSS X1, Y1

// DOT_U8 adds Y1 · (unsigned Yq · int8 at m, in 8 lanes) to Y0.
#define DOT_U8(Yq, m) \
	VPMADDUBSW  m, Yq, Yq; \
	VPMADDWD    Y15, Yq, Yq; \
	VCVTDQ2PS   Yq, Yq; \
	VFMADD231PS Yq, Y1, Y0

// func vecDotQ4_1AVX2(nb int, w, a *byte) float32
// Q4_1 block (20 B): d f16 @0, m f16 @2, qs[16] @4; w = d·q + m.
TEXT ·vecDotQ4_1AVX2(SB), NOSPLIT, $0-28
	MOVQ   nb+0(FP), CX
	MOVQ   w+8(FP), SI
	MOVQ   a+16(FP), DI
	VXORPS Y0, Y0, Y0
	VXORPS X9, X9, X9
	SETUP_CONSTANTS

q41loop:
	SCALES_MIN(0(SI), 0(DI))
	NIBBLES(4(SI), X2, Y2, X3)
	DOT_U8(Y2, 4(DI))
	ADDQ $20, SI
	ADDQ $36, DI
	DECQ CX
	JNZ  q41loop

	HSUM_Y0
	VADDSS X9, X0, X0
	VZEROUPPER
	MOVSS  X0, ret+24(FP)
	RET

// func vecDotQ5_1AVX2(nb int, w, a *byte) float32
// Q5_1 block (24 B): d f16 @0, m f16 @2, qh u32 @4, qs[16] @8; w = d·q + m.
TEXT ·vecDotQ5_1AVX2(SB), NOSPLIT, $0-28
	MOVQ   nb+0(FP), CX
	MOVQ   w+8(FP), SI
	MOVQ   a+16(FP), DI
	VXORPS Y0, Y0, Y0
	VXORPS X9, X9, X9
	SETUP_CONSTANTS

q51loop:
	SCALES_MIN(0(SI), 0(DI))
	NIBBLES(8(SI), X2, Y2, X3)
	HIGH_BITS(4(SI), Y3)
	VPAND Y11, Y3, Y3
	VPOR  Y3, Y2, Y2
	DOT_U8(Y2, 4(DI))
	ADDQ  $24, SI
	ADDQ  $36, DI
	DECQ  CX
	JNZ   q51loop

	HSUM_Y0
	VADDSS X9, X0, X0
	VZEROUPPER
	MOVSS  X0, ret+24(FP)
	RET
