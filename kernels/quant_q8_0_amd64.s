//go:build amd64 && !purego

#include "textflag.h"

// Dot products of 32-weight blocks against Q8_0 activations (34-byte blocks:
// d f16, 32 int8). Per block: the signed bytes w and a multiply through
// VPMADDUBSW as |w| · (a·sign w), the int16 pair sums widen to 8 int32 lane
// sums. Q8_0 adds them as floats into one 8-lane accumulator scaled by dw·da,
// block after block, as ggml's vec_dot does (and llamafile's Q8_0 gemm);
// Q4_0 sums each block's lanes to one integer and adds it to a scalar, as
// ggml's repacked Q4_0 products do (quant_legacy.go). The quants of a Q8_0
// block are within ±127 (ggml's quantizers guarantee it), so no int16 pair
// sum saturates.

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
	VPCMPEQW Y15, Y15, Y15
	VPSRLW   $15, Y15, Y15

q8loop:
	BLOCK_SCALE(0(SI), 0(DI), X2, X1, Y1)
	VMOVDQU 2(SI), Y2
	VMOVDQU 2(DI), Y3
	DOT_I8(Y2, Y3, Y15, Y1, Y0)
	ADDQ    $34, SI
	ADDQ    $34, DI
	DECQ    CX
	JNZ     q8loop

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
	VXORPS       X0, X0, X0
	VPCMPEQW     Y15, Y15, Y15
	VPSRLW       $15, Y15, Y15
	MOVL         $0x0f0f0f0f, AX
	VMOVD        AX, X14
	VPBROADCASTD X14, Y14
	MOVL         $0x08080808, AX
	VMOVD        AX, X13
	VPBROADCASTD X13, Y13

q4loop:
	BLOCK_SCALE(0(SI), 0(DI), X2, X1, Y1)
	Q4_0_BYTES(2(SI), X2, Y2, X3, Y14, Y13)
	VMOVDQU      2(DI), Y3
	VPSIGNB      Y2, Y3, Y3
	VPSIGNB      Y2, Y2, Y2
	VPMADDUBSW   Y3, Y2, Y2
	VPMADDWD     Y15, Y2, Y2
	VEXTRACTI128 $1, Y2, X3
	VPADDD       X3, X2, X2
	VPHADDD      X2, X2, X2
	VPHADDD      X2, X2, X2
	VCVTDQ2PS    X2, X2
	VFMADD231SS  X1, X2, X0
	ADDQ         $18, SI
	ADDQ         $34, DI
	DECQ         CX
	JNZ          q4loop

	VZEROUPPER
	MOVSS  X0, ret+24(FP)
	RET
