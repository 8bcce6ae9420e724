//go:build amd64 && !purego

#include "textflag.h"
#include "iq4_amd64.h"

// Dot products of the table formats (quant_iq4.go) against their
// activations (the layout of iq4_amd64.h). A block's 16 nibble bytes become 32 indices (low nibbles to
// the low lane: weights 0-15; high nibbles to the high lane: 16-31), which
// VPSHUFB turns into the signed values of the format's table; they multiply
// the int8 activations through VPMADDUBSW as |w|·(a·sign w), and VPMADDWD
// widens the int16 pair sums to 8 int32 lanes. IQ4_NL and MXFP4 sum the
// lanes to the block's integer and add it to a scalar by a fused
// multiply-add with dw·da, block after block, as ggml's repacked products
// do; IQ4_XS scales each sub-block's pair sums by its six-bit scale into
// int32 lanes and adds them, per super-block, into 8 float lanes, summed by
// hsum at the end, as ggml's vec_dot_iq4_xs_q8_K does. No int16 pair sum
// saturates: |w| ≤ 127 and the activations are within ±127.

// PAIRS sets Yw to the int16 pair sums of the signed bytes Yw and Ya;
// clobbers Ya.
#define PAIRS(Yw, Ya) \
	VPSIGNB    Yw, Ya, Ya; \
	VPSIGNB    Yw, Yw, Yw; \
	VPMADDUBSW Ya, Yw, Yw

// HSUM_I32 sums the 8 int32 lanes of Yx into the low lane of Xx; clobbers
// Xt.
#define HSUM_I32(Yx, Xx, Xt) \
	VEXTRACTI128 $1, Yx, Xt; \
	VPADDD       Xt, Xx, Xx; \
	VPHADDD      Xx, Xx, Xx; \
	VPHADDD      Xx, Xx, Xx

// func vecDotIQ4_NLAVX2(nb int, w, a *byte) float32
TEXT ·vecDotIQ4_NLAVX2(SB), NOSPLIT, $0-28
	MOVQ   nb+0(FP), CX
	MOVQ   w+8(FP), SI
	MOVQ   a+16(FP), DI
	VXORPS X0, X0, X0
	TABLESETUP(·iq4nlValues(SB))

nlloop:
	// dw·da
	MOVWLZX   0(SI), AX
	MOVWLZX   0(DI), BX
	VMOVD     AX, X1
	VPINSRW   $1, BX, X1, X1
	VCVTPH2PS X1, X1
	VMOVSHDUP X1, X2
	VMULSS    X2, X1, X1

	NIBBLES4X(2(SI), X2, Y2, X3, Y14)
	VPSHUFB     Y2, Y13, Y2
	VMOVDQU     2(DI), Y3
	PAIRS(Y2, Y3)
	VPMADDWD    Y15, Y2, Y2
	HSUM_I32(Y2, X2, X3)
	VCVTDQ2PS   X2, X2
	VFMADD231SS X1, X2, X0
	ADDQ        $18, SI
	ADDQ        $34, DI
	DECQ        CX
	JNZ         nlloop

	VZEROUPPER
	MOVSS X0, ret+24(FP)
	RET

// func vecDotMXFP4AVX2(nb int, w, a *byte) float32
TEXT ·vecDotMXFP4AVX2(SB), NOSPLIT, $0-28
	MOVQ   nb+0(FP), CX
	MOVQ   w+8(FP), SI
	MOVQ   a+16(FP), DI
	LEAQ   ·e8m0Halves(SB), R8
	VXORPS X0, X0, X0
	TABLESETUP(·fp4Values(SB))

mxloop:
	// dw·da, dw = 2^(e−128) from the table
	MOVBLZX   0(SI), AX
	VMOVSS    (R8)(AX*4), X1
	MOVWLZX   0(DI), BX
	VMOVD     BX, X2
	VCVTPH2PS X2, X2
	VMULSS    X2, X1, X1

	NIBBLES4X(1(SI), X2, Y2, X3, Y14)
	VPSHUFB     Y2, Y13, Y2
	VMOVDQU     2(DI), Y3
	PAIRS(Y2, Y3)
	VPMADDWD    Y15, Y2, Y2
	HSUM_I32(Y2, X2, X3)
	VCVTDQ2PS   X2, X2
	VFMADD231SS X1, X2, X0
	ADDQ        $17, SI
	ADDQ        $34, DI
	DECQ        CX
	JNZ         mxloop

	VZEROUPPER
	MOVSS X0, ret+24(FP)
	RET

// XS_SUB adds sub-block ib's pair sums, times its scale, to the int32 lanes
// Y4: its scale is nibble (shl/4) of the byte at sl(SI) and bits sh, sh+1
// of DX (scales_h), minus 32; its weights at qs(SI), activations at q8(DI).
#define XS_SUB(sl, shl, sh, qs, q8) \
	MOVBLZX      sl(SI), AX; \
	SHRL         $shl, AX; \
	ANDL         $15, AX; \
	MOVL         DX, BX; \
	SHRL         $sh, BX; \
	ANDL         $3, BX; \
	SHLL         $4, BX; \
	ORL          BX, AX; \
	SUBL         $32, AX; \
	VMOVD        AX, X5; \
	VPBROADCASTW X5, Y5; \
	NIBBLES4X(qs(SI), X2, Y2, X3, Y14); \
	VPSHUFB      Y2, Y13, Y2; \
	VMOVDQU      q8(DI), Y3; \
	PAIRS(Y2, Y3); \
	VPMADDWD     Y5, Y2, Y2; \
	VPADDD       Y2, Y4, Y4

// XS_SUPERBLOCK sets Y4 to the int32 lanes of the super-block at SI
// against the activations at DI: its 8 sub-blocks' pair sums times their
// scales. Clobbers AX, BX, DX, Y2, Y3, Y5.
#define XS_SUPERBLOCK \
	VPXOR   Y4, Y4, Y4; \
	MOVWLZX 2(SI), DX; \
	XS_SUB(4, 0, 0, 8, 4); \
	XS_SUB(4, 4, 2, 24, 36); \
	XS_SUB(5, 0, 4, 40, 68); \
	XS_SUB(5, 4, 6, 56, 100); \
	XS_SUB(6, 0, 8, 72, 132); \
	XS_SUB(6, 4, 10, 88, 164); \
	XS_SUB(7, 0, 12, 104, 196); \
	XS_SUB(7, 4, 14, 120, 228)

// func vecDotIQ4_XSAVX2(nb int, w, a *byte) float32
TEXT ·vecDotIQ4_XSAVX2(SB), NOSPLIT, $0-28
	MOVQ   nb+0(FP), CX
	MOVQ   w+8(FP), SI
	MOVQ   a+16(FP), DI
	VXORPS Y0, Y0, Y0
	TABLESETUP(·iq4nlValues(SB))

xsloop:
	XS_SUPERBLOCK

	// d = f16(dw)·da (Q8_K's scale is a float32)
	MOVWLZX      0(SI), AX
	VMOVD        AX, X1
	VCVTPH2PS    X1, X1
	VMULSS       0(DI), X1, X1
	VBROADCASTSS X1, Y1
	VCVTDQ2PS    Y4, Y4
	VFMADD231PS  Y4, Y1, Y0
	ADDQ         $136, SI
	ADDQ         $292, DI
	DECQ         CX
	JNZ          xsloop

	VEXTRACTF128 $1, Y0, X1
	VADDPS       X1, X0, X0
	VMOVHLPS     X0, X0, X1
	VADDPS       X1, X0, X0
	VMOVSHDUP    X0, X1
	VADDSS       X1, X0, X0
	VZEROUPPER
	MOVSS        X0, ret+24(FP)
	RET

// func vecDotIQ4_XSPanelAVX2(nb int, w, a *byte) float32
//
// The IQ4_XS product of ggml's IQ panel (vecDotIQ4_XSPanelGeneric): the
// super-block's integer, as vecDotIQ4_XSAVX2 sums it, reaches a scalar
// float by one fused multiply-add with dw·da.
TEXT ·vecDotIQ4_XSPanelAVX2(SB), NOSPLIT, $0-28
	MOVQ   nb+0(FP), CX
	MOVQ   w+8(FP), SI
	MOVQ   a+16(FP), DI
	VXORPS X0, X0, X0
	TABLESETUP(·iq4nlValues(SB))

panelloop:
	XS_SUPERBLOCK

	MOVWLZX     0(SI), AX
	VMOVD       AX, X1
	VCVTPH2PS   X1, X1
	VMULSS      0(DI), X1, X1
	HSUM_I32(Y4, X4, X3)
	VCVTDQ2PS   X4, X4
	VFMADD231SS X1, X4, X0
	ADDQ        $136, SI
	ADDQ        $292, DI
	DECQ        CX
	JNZ         panelloop

	VZEROUPPER
	MOVSS X0, ret+24(FP)
	RET
