//go:build amd64 && !purego

#include "textflag.h"

// Dot products of 32-weight blocks against Q8_0 activations (34-byte blocks:
// d f16, 32 int8). Per block: the signed bytes w and a multiply through
// VPMADDUBSW as |w| · (a·sign w), the int16 pair sums widen to 8 int32 lane
// sums, which become floats and add into the accumulator scaled by dw·da.
// The quants of a Q8_0 block are within ±127 (ggml's quantizers guarantee
// it), so no int16 pair sum saturates.

// BLOCK_SCALE sets Yd to the 8-fold broadcast of f16(dw)·f16(da), the halves
// at wptr and aptr; clobbers AX, BX, Xt.
#define BLOCK_SCALE(wptr, aptr, Xt, Xd, Yd) \
	MOVWLZX      wptr, AX; \
	MOVWLZX      aptr, BX; \
	VMOVD        AX, Xd; \
	VPINSRW      $1, BX, Xd, Xd; \
	VCVTPH2PS    Xd, Xd; \
	VMOVSHDUP    Xd, Xt; \
	VMULSS       Xt, Xd, Xd; \
	VBROADCASTSS Xd, Yd

// DOT_I8 adds dscale · (int8 Yw · int8 Ya, summed in 8 lanes of 4) to Yacc;
// Yones holds int16 ones; clobbers Yw, Ya.
#define DOT_I8(Yw, Ya, Yones, Yd, Yacc) \
	VPSIGNB     Yw, Ya, Ya; \
	VPSIGNB     Yw, Yw, Yw; \
	VPMADDUBSW  Ya, Yw, Yw; \
	VPMADDWD    Yones, Yw, Yw; \
	VCVTDQ2PS   Yw, Yw; \
	VFMADD231PS Yw, Yd, Yacc

#define HSUM_Y0 \
	VEXTRACTF128 $1, Y0, X1; \
	VADDPS       X1, X0, X0; \
	VMOVHLPS     X0, X0, X1; \
	VADDPS       X1, X0, X0; \
	VMOVSHDUP    X0, X1; \
	VADDSS       X1, X0, X0

// func vecDotQ8_0AVX2(nb int, w, a *byte) float32
TEXT ·vecDotQ8_0AVX2(SB), NOSPLIT, $0-28
	MOVQ     nb+0(FP), CX
	MOVQ     w+8(FP), SI
	MOVQ     a+16(FP), DI
	VXORPS   Y0, Y0, Y0
	VXORPS   Y8, Y8, Y8
	VPCMPEQW Y15, Y15, Y15
	VPSRLW   $15, Y15, Y15
	SUBQ     $2, CX
	JLT      q8tail

q8pair:
	BLOCK_SCALE(0(SI), 0(DI), X2, X1, Y1)
	VMOVDQU 2(SI), Y2
	VMOVDQU 2(DI), Y3
	DOT_I8(Y2, Y3, Y15, Y1, Y0)
	BLOCK_SCALE(34(SI), 34(DI), X5, X4, Y4)
	VMOVDQU 36(SI), Y5
	VMOVDQU 36(DI), Y6
	DOT_I8(Y5, Y6, Y15, Y4, Y8)
	ADDQ    $68, SI
	ADDQ    $68, DI
	SUBQ    $2, CX
	JGE     q8pair

q8tail:
	ADDQ $2, CX
	JZ   q8done
	BLOCK_SCALE(0(SI), 0(DI), X2, X1, Y1)
	VMOVDQU 2(SI), Y2
	VMOVDQU 2(DI), Y3
	DOT_I8(Y2, Y3, Y15, Y1, Y0)

q8done:
	VADDPS Y8, Y0, Y0
	HSUM_Y0
	VZEROUPPER
	MOVSS  X0, ret+24(FP)
	RET

// Q4_0_BYTES expands the 16 nibble bytes at m into 32 signed bytes q-8 in Yq:
// low nibbles to the low lane (weights 0-15), high nibbles to the high lane.
// Ymask holds 0x0f bytes, Yeight 0x08 bytes; clobbers Xt.
#define Q4_0_BYTES(m, Xq, Yq, Xt, Ymask, Yeight) \
	VMOVDQU     m, Xq; \
	VPSRLW      $4, Xq, Xt; \
	VINSERTI128 $1, Xt, Yq, Yq; \
	VPAND       Ymask, Yq, Yq; \
	VPSUBB      Yeight, Yq, Yq

// func vecDotQ4_0AVX2(nb int, w, a *byte) float32
TEXT ·vecDotQ4_0AVX2(SB), NOSPLIT, $0-28
	MOVQ         nb+0(FP), CX
	MOVQ         w+8(FP), SI
	MOVQ         a+16(FP), DI
	VXORPS       Y0, Y0, Y0
	VXORPS       Y8, Y8, Y8
	VPCMPEQW     Y15, Y15, Y15
	VPSRLW       $15, Y15, Y15
	MOVL         $0x0f0f0f0f, AX
	VMOVD        AX, X14
	VPBROADCASTD X14, Y14
	MOVL         $0x08080808, AX
	VMOVD        AX, X13
	VPBROADCASTD X13, Y13
	SUBQ         $2, CX
	JLT          q4tail

q4pair:
	BLOCK_SCALE(0(SI), 0(DI), X2, X1, Y1)
	Q4_0_BYTES(2(SI), X2, Y2, X3, Y14, Y13)
	VMOVDQU 2(DI), Y3
	DOT_I8(Y2, Y3, Y15, Y1, Y0)
	BLOCK_SCALE(18(SI), 34(DI), X5, X4, Y4)
	Q4_0_BYTES(20(SI), X5, Y5, X6, Y14, Y13)
	VMOVDQU 36(DI), Y6
	DOT_I8(Y5, Y6, Y15, Y4, Y8)
	ADDQ    $36, SI
	ADDQ    $68, DI
	SUBQ    $2, CX
	JGE     q4pair

q4tail:
	ADDQ $2, CX
	JZ   q4done
	BLOCK_SCALE(0(SI), 0(DI), X2, X1, Y1)
	Q4_0_BYTES(2(SI), X2, Y2, X3, Y14, Y13)
	VMOVDQU 2(DI), Y3
	DOT_I8(Y2, Y3, Y15, Y1, Y0)

q4done:
	VADDPS Y8, Y0, Y0
	HSUM_Y0
	VZEROUPPER
	MOVSS  X0, ret+24(FP)
	RET
