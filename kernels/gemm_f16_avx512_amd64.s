//go:build amd64 && !purego

#include "textflag.h"

// AVX-512 kernels for F16 weights against two or more tokens. The
// activations come in token pairs (gemm.go): per 8 floats of the row, the
// first token's 8 then the second's, 64 bytes, so that one 512-bit register
// holds the same 8 positions of two tokens. Each half of an accumulator is
// then one of vecDotF16AVX2's 8-lane accumulators of one output: a step of
// 32 weights converts 4 × 8 weights, each duplicated into both halves, and
// every output rounds exactly as vecDotF16AVX2 (accumulator i/8%4, lane
// i%8; then (0+2)+(1+3), upper half of the lanes onto the lower, two
// horizontal adds).

// F16Z_WEIGHTS sets Zw to 8 weights at wm converted, in both halves.
#define F16Z_WEIGHTS(wm, Yw, Zw) \
	VBROADCASTI128 wm, Yw; \
	VCVTPH2PS      Yw, Zw

// F16Z_ONE reduces the 8 lanes of Y into the low float of X (its low half)
// as vecDotF16AVX2 does; clobbers Xt.
#define F16Z_ONE(Y, X, Xt) \
	VEXTRACTF128 $1, Y, Xt; \
	VADDPS       Xt, X, X; \
	VHADDPS      X, X, X; \
	VHADDPS      X, X, X

// F16Z_PAIR sums the accumulators Za..Zd (positions i/8%4 = 0..3) of a
// token pair, (a+c)+(b+d), and stores the first token's dot at 0(DX), the
// second's at 0(DX)(R8). Clobbers Za..Zd and X15.
#define F16Z_PAIR(Za, Zb, Zc, Zd, Ya, Yb, Xa, Xb) \
	VADDPS        Zc, Za, Za; \
	VADDPS        Zd, Zb, Zb; \
	VADDPS        Zb, Za, Za; \
	VEXTRACTF64X4 $1, Za, Yb; \
	F16Z_ONE(Ya, Xa, X15); \
	VMOVSS        Xa, 0(DX); \
	F16Z_ONE(Yb, Xb, X15); \
	VMOVSS        Xb, 0(DX)(R8*1)

// func gemmF16Zx1x6(nb int, w *byte, wStride int, a *byte, aStride int, out *float32, outStride int)
//
// One row (w) by 3 token pairs (a + k·aStride): out[t·outStride] for tokens
// t = 0..5. Pair k's accumulators are Z(4k) .. Z(4k+3).
TEXT ·gemmF16Zx1x6(SB), NOSPLIT, $0-56
	MOVQ   nb+0(FP), CX
	MOVQ   w+8(FP), SI
	MOVQ   a+24(FP), DI
	MOVQ   aStride+32(FP), R8
	LEAQ   (DI)(R8*2), R9
	ADDQ   DI, R8
	VXORPS Z0, Z0, Z0
	VXORPS Z1, Z1, Z1
	VXORPS Z2, Z2, Z2
	VXORPS Z3, Z3, Z3
	VXORPS Z4, Z4, Z4
	VXORPS Z5, Z5, Z5
	VXORPS Z6, Z6, Z6
	VXORPS Z7, Z7, Z7
	VXORPS Z8, Z8, Z8
	VXORPS Z9, Z9, Z9
	VXORPS Z10, Z10, Z10
	VXORPS Z11, Z11, Z11

zstep:
	F16Z_WEIGHTS(0(SI), Y12, Z12)
	VFMADD231PS 0(DI), Z12, Z0
	VFMADD231PS 0(R8), Z12, Z4
	VFMADD231PS 0(R9), Z12, Z8
	F16Z_WEIGHTS(16(SI), Y13, Z13)
	VFMADD231PS 64(DI), Z13, Z1
	VFMADD231PS 64(R8), Z13, Z5
	VFMADD231PS 64(R9), Z13, Z9
	F16Z_WEIGHTS(32(SI), Y14, Z14)
	VFMADD231PS 128(DI), Z14, Z2
	VFMADD231PS 128(R8), Z14, Z6
	VFMADD231PS 128(R9), Z14, Z10
	F16Z_WEIGHTS(48(SI), Y15, Z15)
	VFMADD231PS 192(DI), Z15, Z3
	VFMADD231PS 192(R8), Z15, Z7
	VFMADD231PS 192(R9), Z15, Z11
	ADDQ $64, SI
	ADDQ $256, DI
	ADDQ $256, R8
	ADDQ $256, R9
	DECQ CX
	JNZ  zstep

	MOVQ out+40(FP), DX
	MOVQ outStride+48(FP), R8
	SHLQ $2, R8
	F16Z_PAIR(Z0, Z1, Z2, Z3, Y0, Y1, X0, X1)
	LEAQ (DX)(R8*2), DX
	F16Z_PAIR(Z4, Z5, Z6, Z7, Y4, Y5, X4, X5)
	LEAQ (DX)(R8*2), DX
	F16Z_PAIR(Z8, Z9, Z10, Z11, Y8, Y9, X8, X9)
	VZEROUPPER
	RET

// func gemmF16Zx1x2(nb int, w *byte, wStride int, a *byte, out *float32, outStride int, nt int)
//
// One row (w) by one token pair (a): out[t·outStride] for the first nt ≤ 2
// tokens.
TEXT ·gemmF16Zx1x2(SB), NOSPLIT, $0-56
	MOVQ   nb+0(FP), CX
	MOVQ   w+8(FP), SI
	MOVQ   a+24(FP), DI
	VXORPS Z0, Z0, Z0
	VXORPS Z1, Z1, Z1
	VXORPS Z2, Z2, Z2
	VXORPS Z3, Z3, Z3

z2step:
	F16Z_WEIGHTS(0(SI), Y12, Z12)
	VFMADD231PS 0(DI), Z12, Z0
	F16Z_WEIGHTS(16(SI), Y13, Z13)
	VFMADD231PS 64(DI), Z13, Z1
	F16Z_WEIGHTS(32(SI), Y14, Z14)
	VFMADD231PS 128(DI), Z14, Z2
	F16Z_WEIGHTS(48(SI), Y15, Z15)
	VFMADD231PS 192(DI), Z15, Z3
	ADDQ $64, SI
	ADDQ $256, DI
	DECQ CX
	JNZ  z2step

	VADDPS        Z2, Z0, Z0
	VADDPS        Z3, Z1, Z1
	VADDPS        Z1, Z0, Z0
	VEXTRACTF64X4 $1, Z0, Y1
	MOVQ          out+32(FP), DX
	F16Z_ONE(Y0, X0, X2)
	VMOVSS        X0, 0(DX)
	CMPQ          nt+48(FP), $2
	JLT           z2done
	MOVQ          outStride+40(FP), R8
	F16Z_ONE(Y1, X1, X2)
	VMOVSS        X1, 0(DX)(R8*4)

z2done:
	VZEROUPPER
	RET

// F16Z_PAIR2 is F16Z_PAIR for accumulators past Z15 (which the VEX-encoded
// reduction cannot name): they move to Z0-Z3 first.
#define F16Z_PAIR2(Za, Zb, Zc, Zd) \
	VMOVAPS Za, Z0; \
	VMOVAPS Zb, Z1; \
	VMOVAPS Zc, Z2; \
	VMOVAPS Zd, Z3; \
	F16Z_PAIR(Z0, Z1, Z2, Z3, Y0, Y1, X0, X1)

// F16Z_W2 sets Zw to 8 weights at wm converted, in both halves (EVEX, for
// the registers past 15).
#define F16Z_W2(wm, Yw, Zw) \
	VBROADCASTI32X4 wm, Yw; \
	VCVTPH2PS       Yw, Zw

// F16Z_2x3 runs positions 8j..8j+7 of a step: the three pairs' activations
// at off(DI), off(R8), off(R9) into Z24-Z26, the two rows' weights at wm0,
// wm1 into Z27, Z28, and the 6 products into acc(r, k) = Z(12r + 4k + j).
#define F16Z_2x3(off, wm0, wm1, a00, a01, a02, a10, a11, a12) \
	VMOVUPS     off(DI), Z24; \
	VMOVUPS     off(R8), Z25; \
	VMOVUPS     off(R9), Z26; \
	F16Z_W2(wm0, Y27, Z27); \
	F16Z_W2(wm1, Y28, Z28); \
	VFMADD231PS Z24, Z27, a00; \
	VFMADD231PS Z25, Z27, a01; \
	VFMADD231PS Z26, Z27, a02; \
	VFMADD231PS Z24, Z28, a10; \
	VFMADD231PS Z25, Z28, a11; \
	VFMADD231PS Z26, Z28, a12

// func gemmF16Zx2x6(nb int, w *byte, wStride int, a *byte, aStride int, out *float32, outStride int)
//
// Two rows (w, w + wStride) by 3 token pairs (a + k·aStride):
// out[t·outStride + r]. Each activation register serves both rows.
TEXT ·gemmF16Zx2x6(SB), NOSPLIT, $0-56
	MOVQ    nb+0(FP), CX
	MOVQ    w+8(FP), SI
	MOVQ    wStride+16(FP), R10
	MOVQ    R10, R11
	SHLQ    $1, R11
	ADDQ    SI, R10
	MOVQ    a+24(FP), DI
	MOVQ    aStride+32(FP), R8
	LEAQ    (DI)(R8*2), R9
	ADDQ    DI, R8
	VPXORD  Z0, Z0, Z0
	VMOVAPS Z0, Z1
	VMOVAPS Z0, Z2
	VMOVAPS Z0, Z3
	VMOVAPS Z0, Z4
	VMOVAPS Z0, Z5
	VMOVAPS Z0, Z6
	VMOVAPS Z0, Z7
	VMOVAPS Z0, Z8
	VMOVAPS Z0, Z9
	VMOVAPS Z0, Z10
	VMOVAPS Z0, Z11
	VMOVAPS Z0, Z12
	VMOVAPS Z0, Z13
	VMOVAPS Z0, Z14
	VMOVAPS Z0, Z15
	VMOVAPS Z0, Z16
	VMOVAPS Z0, Z17
	VMOVAPS Z0, Z18
	VMOVAPS Z0, Z19
	VMOVAPS Z0, Z20
	VMOVAPS Z0, Z21
	VMOVAPS Z0, Z22
	VMOVAPS Z0, Z23

z26step:
	// The next two rows (as the Q4_0 group kernels do four): the hardware
	// prefetchers fell behind these two slow interleaved streams.
	PREFETCHT0 0(SI)(R11*1)
	PREFETCHT0 0(R10)(R11*1)
	F16Z_2x3(0, 0(SI), 0(R10), Z0, Z4, Z8, Z12, Z16, Z20)
	F16Z_2x3(64, 16(SI), 16(R10), Z1, Z5, Z9, Z13, Z17, Z21)
	F16Z_2x3(128, 32(SI), 32(R10), Z2, Z6, Z10, Z14, Z18, Z22)
	F16Z_2x3(192, 48(SI), 48(R10), Z3, Z7, Z11, Z15, Z19, Z23)
	ADDQ $64, SI
	ADDQ $64, R10
	ADDQ $256, DI
	ADDQ $256, R8
	ADDQ $256, R9
	DECQ CX
	JNZ  z26step

	// Row 1's first pair goes first: the reductions use X15 as scratch.
	MOVQ out+40(FP), DX
	MOVQ outStride+48(FP), R8
	SHLQ $2, R8
	ADDQ $4, DX
	F16Z_PAIR(Z12, Z13, Z14, Z15, Y12, Y13, X12, X13)
	MOVQ out+40(FP), DX
	F16Z_PAIR(Z0, Z1, Z2, Z3, Y0, Y1, X0, X1)
	LEAQ (DX)(R8*2), DX
	F16Z_PAIR(Z4, Z5, Z6, Z7, Y4, Y5, X4, X5)
	LEAQ (DX)(R8*2), DX
	F16Z_PAIR(Z8, Z9, Z10, Z11, Y8, Y9, X8, X9)
	MOVQ out+40(FP), DX
	ADDQ $4, DX
	LEAQ (DX)(R8*2), DX
	F16Z_PAIR2(Z16, Z17, Z18, Z19)
	LEAQ (DX)(R8*2), DX
	F16Z_PAIR2(Z20, Z21, Z22, Z23)
	VZEROUPPER
	RET

// func gemmF16Zx2x2(nb int, w *byte, wStride int, a *byte, out *float32, outStride int, nt int)
//
// Two rows (w, w + wStride) by one token pair (a): out[t·outStride + r] for
// the first nt ≤ 2 tokens.
TEXT ·gemmF16Zx2x2(SB), NOSPLIT, $0-56
	MOVQ   nb+0(FP), CX
	MOVQ   w+8(FP), SI
	MOVQ   wStride+16(FP), R10
	MOVQ   R10, R11
	SHLQ   $1, R11
	ADDQ   SI, R10
	MOVQ   a+24(FP), DI
	VXORPS Z0, Z0, Z0
	VXORPS Z1, Z1, Z1
	VXORPS Z2, Z2, Z2
	VXORPS Z3, Z3, Z3
	VXORPS Z4, Z4, Z4
	VXORPS Z5, Z5, Z5
	VXORPS Z6, Z6, Z6
	VXORPS Z7, Z7, Z7

z22step:
	PREFETCHT0 0(SI)(R11*1)
	PREFETCHT0 0(R10)(R11*1)
	VMOVUPS 0(DI), Z8
	F16Z_WEIGHTS(0(SI), Y9, Z9)
	F16Z_WEIGHTS(0(R10), Y10, Z10)
	VFMADD231PS Z8, Z9, Z0
	VFMADD231PS Z8, Z10, Z4
	VMOVUPS 64(DI), Z8
	F16Z_WEIGHTS(16(SI), Y9, Z9)
	F16Z_WEIGHTS(16(R10), Y10, Z10)
	VFMADD231PS Z8, Z9, Z1
	VFMADD231PS Z8, Z10, Z5
	VMOVUPS 128(DI), Z8
	F16Z_WEIGHTS(32(SI), Y9, Z9)
	F16Z_WEIGHTS(32(R10), Y10, Z10)
	VFMADD231PS Z8, Z9, Z2
	VFMADD231PS Z8, Z10, Z6
	VMOVUPS 192(DI), Z8
	F16Z_WEIGHTS(48(SI), Y9, Z9)
	F16Z_WEIGHTS(48(R10), Y10, Z10)
	VFMADD231PS Z8, Z9, Z3
	VFMADD231PS Z8, Z10, Z7
	ADDQ $64, SI
	ADDQ $64, R10
	ADDQ $256, DI
	DECQ CX
	JNZ  z22step

	MOVQ          out+32(FP), DX
	MOVQ          outStride+40(FP), R8
	VADDPS        Z2, Z0, Z0
	VADDPS        Z3, Z1, Z1
	VADDPS        Z1, Z0, Z0
	VADDPS        Z6, Z4, Z4
	VADDPS        Z7, Z5, Z5
	VADDPS        Z5, Z4, Z4
	VEXTRACTF64X4 $1, Z0, Y1
	VEXTRACTF64X4 $1, Z4, Y5
	F16Z_ONE(Y0, X0, X2)
	F16Z_ONE(Y4, X4, X2)
	VMOVSS        X0, 0(DX)
	VMOVSS        X4, 4(DX)
	CMPQ          nt+48(FP), $2
	JLT           z22done
	F16Z_ONE(Y1, X1, X2)
	F16Z_ONE(Y5, X5, X2)
	VMOVSS        X1, 0(DX)(R8*4)
	VMOVSS        X5, 4(DX)(R8*4)

z22done:
	VZEROUPPER
	RET
