//go:build amd64 && !purego

#include "textflag.h"

// F16 weights against the blocked kernels' F16 activations, which are the
// half-precision values as float32 (gemm.go), so that they go straight into
// the multiply-adds. Each output rounds as vecDotF16AVX2: 32 elements a step
// into four 8-lane accumulators, element i in accumulator i/8%4, lane i%8,
// one fused multiply-add each; then (0+2)+(1+3), the upper half of the lanes
// onto the lower, and two horizontal adds. nb is the number of 32-element
// steps.

// F16_REDUCE sums the four accumulators Ya..Yd into the low float of Xa as
// vecDotF16AVX2 does; clobbers Yb, Yc, Yd.
#define F16_REDUCE(Ya, Yb, Yc, Yd, Xa, Xb) \
	VADDPS       Yc, Ya, Ya; \
	VADDPS       Yd, Yb, Yb; \
	VADDPS       Yb, Ya, Ya; \
	VEXTRACTF128 $1, Ya, Xb; \
	VADDPS       Xb, Xa, Xa; \
	VHADDPS      Xa, Xa, Xa; \
	VHADDPS      Xa, Xa, Xa

// func gemvF16(nb int, w *byte, wStride int, a *byte, out *float32, rows int)
//
// The activations as float32 (the AVX2 tiles' rows).
TEXT ·gemvF16(SB), NOSPLIT, $0-48
	MOVQ w+8(FP), R14
	MOVQ out+32(FP), DX
	MOVQ rows+40(FP), R12

row:
	MOVQ   nb+0(FP), CX
	MOVQ   R14, SI
	MOVQ   a+24(FP), DI
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	VXORPS Y2, Y2, Y2
	VXORPS Y3, Y3, Y3

step:
	VCVTPH2PS   0(SI), Y4
	VFMADD231PS 0(DI), Y4, Y0
	VCVTPH2PS   16(SI), Y5
	VFMADD231PS 32(DI), Y5, Y1
	VCVTPH2PS   32(SI), Y6
	VFMADD231PS 64(DI), Y6, Y2
	VCVTPH2PS   48(SI), Y7
	VFMADD231PS 96(DI), Y7, Y3
	ADDQ        $64, SI
	ADDQ        $128, DI
	DECQ        CX
	JNZ         step

	F16_REDUCE(Y0, Y1, Y2, Y3, X0, X1)
	VMOVSS X0, 0(DX)
	ADDQ   $4, DX
	ADDQ   wStride+16(FP), R14
	DECQ   R12
	JNZ    row
	VZEROUPPER
	RET

// F16_STEP8 multiplies 8 weights (converted in Y12) by 8 activations of
// each token at offset off of the three token rows (DI, R8, R9) into the
// tokens' accumulators for that position.
#define F16_STEP8(wm, off, acc0, acc1, acc2) \
	VCVTPH2PS   wm, Y12; \
	VFMADD231PS off(DI), Y12, acc0; \
	VFMADD231PS off(R8), Y12, acc1; \
	VFMADD231PS off(R9), Y12, acc2

// func gemmF16x1x3(nb int, w *byte, wStride int, a *byte, aStride int, out *float32, outStride int)
//
// One row (w) by 3 tokens (a + t·aStride): out[t·outStride]. Token t's
// accumulators are Y(t), Y(t+3), Y(t+6), Y(t+9).
TEXT ·gemmF16x1x3(SB), NOSPLIT, $0-56
	MOVQ   nb+0(FP), CX
	MOVQ   w+8(FP), SI
	MOVQ   a+24(FP), DI
	MOVQ   aStride+32(FP), R8
	LEAQ   (DI)(R8*2), R9
	ADDQ   DI, R8
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	VXORPS Y2, Y2, Y2
	VXORPS Y3, Y3, Y3
	VXORPS Y4, Y4, Y4
	VXORPS Y5, Y5, Y5
	VXORPS Y6, Y6, Y6
	VXORPS Y7, Y7, Y7
	VXORPS Y8, Y8, Y8
	VXORPS Y9, Y9, Y9
	VXORPS Y10, Y10, Y10
	VXORPS Y11, Y11, Y11

tstep:
	F16_STEP8(0(SI), 0, Y0, Y1, Y2)
	F16_STEP8(16(SI), 32, Y3, Y4, Y5)
	F16_STEP8(32(SI), 64, Y6, Y7, Y8)
	F16_STEP8(48(SI), 96, Y9, Y10, Y11)
	ADDQ $64, SI
	ADDQ $128, DI
	ADDQ $128, R8
	ADDQ $128, R9
	DECQ CX
	JNZ  tstep

	MOVQ   out+40(FP), DX
	MOVQ   outStride+48(FP), R8
	SHLQ   $2, R8
	F16_REDUCE(Y0, Y3, Y6, Y9, X0, X3)
	VMOVSS X0, 0(DX)
	ADDQ   R8, DX
	F16_REDUCE(Y1, Y4, Y7, Y10, X1, X4)
	VMOVSS X1, 0(DX)
	ADDQ   R8, DX
	F16_REDUCE(Y2, Y5, Y8, Y11, X2, X5)
	VMOVSS X2, 0(DX)
	VZEROUPPER
	RET

// func gemvF16h(nb int, w *byte, wStride int, a *byte, out *float32, rows int)
//
// gemvF16 with the activations as halves (a single token's row): next to
// the weights streaming from memory, float32 activations of a long row
// (5632) crowd the first-level cache and cost a third of the speed.
TEXT ·gemvF16h(SB), NOSPLIT, $0-48
	MOVQ w+8(FP), R14
	MOVQ out+32(FP), DX
	MOVQ rows+40(FP), R12

hrow:
	MOVQ   nb+0(FP), CX
	MOVQ   R14, SI
	MOVQ   a+24(FP), DI
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	VXORPS Y2, Y2, Y2
	VXORPS Y3, Y3, Y3

hstep:
	VCVTPH2PS   0(SI), Y4
	VCVTPH2PS   0(DI), Y8
	VFMADD231PS Y8, Y4, Y0
	VCVTPH2PS   16(SI), Y5
	VCVTPH2PS   16(DI), Y9
	VFMADD231PS Y9, Y5, Y1
	VCVTPH2PS   32(SI), Y6
	VCVTPH2PS   32(DI), Y10
	VFMADD231PS Y10, Y6, Y2
	VCVTPH2PS   48(SI), Y7
	VCVTPH2PS   48(DI), Y11
	VFMADD231PS Y11, Y7, Y3
	ADDQ        $64, SI
	ADDQ        $64, DI
	DECQ        CX
	JNZ         hstep

	F16_REDUCE(Y0, Y1, Y2, Y3, X0, X1)
	VMOVSS X0, 0(DX)
	ADDQ   $4, DX
	ADDQ   wStride+16(FP), R14
	DECQ   R12
	JNZ    hrow
	VZEROUPPER
	RET
