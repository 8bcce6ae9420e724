//go:build amd64 && !purego

#include "textflag.h"

// Float vector kernels with AVX2 and FMA (and F16C for the half-precision
// ones). Every kernel takes its length in elements as a multiple of 8; the Go
// wrappers in float_amd64.go do the remainder. Sums use four 8-lane
// accumulators so that the adds of one iteration do not wait on each other.

// HSUM0 adds the 8 lanes of Y0 into the low lane of X0, clobbering X1.
#define HSUM0 \
	VEXTRACTF128 $1, Y0, X1; \
	VADDPS       X1, X0, X0; \
	VPERMILPS    $0x4e, X0, X1; \
	VADDPS       X1, X0, X0; \
	VPERMILPS    $0xb1, X0, X1; \
	VADDPS       X1, X0, X0

// func dotF32AVX2(x, y *float32, n int) float32
TEXT ·dotF32AVX2(SB), NOSPLIT, $0-28
	MOVQ   x+0(FP), SI
	MOVQ   y+8(FP), DI
	MOVQ   n+16(FP), CX
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	VXORPS Y2, Y2, Y2
	VXORPS Y3, Y3, Y3

dotf32_loop32:
	CMPQ        CX, $32
	JL          dotf32_loop8
	VMOVUPS     (SI), Y4
	VMOVUPS     32(SI), Y5
	VMOVUPS     64(SI), Y6
	VMOVUPS     96(SI), Y7
	VFMADD231PS (DI), Y4, Y0
	VFMADD231PS 32(DI), Y5, Y1
	VFMADD231PS 64(DI), Y6, Y2
	VFMADD231PS 96(DI), Y7, Y3
	ADDQ        $128, SI
	ADDQ        $128, DI
	SUBQ        $32, CX
	JMP         dotf32_loop32

dotf32_loop8:
	TESTQ       CX, CX
	JZ          dotf32_done
	VMOVUPS     (SI), Y4
	VFMADD231PS (DI), Y4, Y0
	ADDQ        $32, SI
	ADDQ        $32, DI
	SUBQ        $8, CX
	JMP         dotf32_loop8

dotf32_done:
	VADDPS Y1, Y0, Y0
	VADDPS Y3, Y2, Y2
	VADDPS Y2, Y0, Y0
	HSUM0
	VZEROUPPER
	MOVSS  X0, ret+24(FP)
	RET

// func dotF16AVX2(x, y *uint16, n int) float32
TEXT ·dotF16AVX2(SB), NOSPLIT, $0-28
	MOVQ   x+0(FP), SI
	MOVQ   y+8(FP), DI
	MOVQ   n+16(FP), CX
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	VXORPS Y2, Y2, Y2
	VXORPS Y3, Y3, Y3

dotf16_loop32:
	CMPQ        CX, $32
	JL          dotf16_loop8
	VCVTPH2PS   (SI), Y4
	VCVTPH2PS   16(SI), Y5
	VCVTPH2PS   32(SI), Y6
	VCVTPH2PS   48(SI), Y7
	VCVTPH2PS   (DI), Y8
	VCVTPH2PS   16(DI), Y9
	VCVTPH2PS   32(DI), Y10
	VCVTPH2PS   48(DI), Y11
	VFMADD231PS Y8, Y4, Y0
	VFMADD231PS Y9, Y5, Y1
	VFMADD231PS Y10, Y6, Y2
	VFMADD231PS Y11, Y7, Y3
	ADDQ        $64, SI
	ADDQ        $64, DI
	SUBQ        $32, CX
	JMP         dotf16_loop32

dotf16_loop8:
	TESTQ       CX, CX
	JZ          dotf16_done
	VCVTPH2PS   (SI), Y4
	VCVTPH2PS   (DI), Y8
	VFMADD231PS Y8, Y4, Y0
	ADDQ        $16, SI
	ADDQ        $16, DI
	SUBQ        $8, CX
	JMP         dotf16_loop8

dotf16_done:
	VADDPS Y1, Y0, Y0
	VADDPS Y3, Y2, Y2
	VADDPS Y2, Y0, Y0
	HSUM0
	VZEROUPPER
	MOVSS  X0, ret+24(FP)
	RET

// func sumSquaresAVX2(x *float32, n int) float32
TEXT ·sumSquaresAVX2(SB), NOSPLIT, $0-20
	MOVQ   x+0(FP), SI
	MOVQ   n+8(FP), CX
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	VXORPS Y2, Y2, Y2
	VXORPS Y3, Y3, Y3

sumsq_loop32:
	CMPQ        CX, $32
	JL          sumsq_loop8
	VMOVUPS     (SI), Y4
	VMOVUPS     32(SI), Y5
	VMOVUPS     64(SI), Y6
	VMOVUPS     96(SI), Y7
	VFMADD231PS Y4, Y4, Y0
	VFMADD231PS Y5, Y5, Y1
	VFMADD231PS Y6, Y6, Y2
	VFMADD231PS Y7, Y7, Y3
	ADDQ        $128, SI
	SUBQ        $32, CX
	JMP         sumsq_loop32

sumsq_loop8:
	TESTQ       CX, CX
	JZ          sumsq_done
	VMOVUPS     (SI), Y4
	VFMADD231PS Y4, Y4, Y0
	ADDQ        $32, SI
	SUBQ        $8, CX
	JMP         sumsq_loop8

sumsq_done:
	VADDPS Y1, Y0, Y0
	VADDPS Y3, Y2, Y2
	VADDPS Y2, Y0, Y0
	HSUM0
	VZEROUPPER
	MOVSS  X0, ret+16(FP)
	RET

// func maxAVX2(x *float32, n int) float32
// n >= 8.
TEXT ·maxAVX2(SB), NOSPLIT, $0-20
	MOVQ    x+0(FP), SI
	MOVQ    n+8(FP), CX
	VMOVUPS (SI), Y0
	VMOVAPS Y0, Y1
	VMOVAPS Y0, Y2
	VMOVAPS Y0, Y3
	ADDQ    $32, SI
	SUBQ    $8, CX

max_loop32:
	CMPQ    CX, $32
	JL      max_loop8
	VMAXPS  (SI), Y0, Y0
	VMAXPS  32(SI), Y1, Y1
	VMAXPS  64(SI), Y2, Y2
	VMAXPS  96(SI), Y3, Y3
	ADDQ    $128, SI
	SUBQ    $32, CX
	JMP     max_loop32

max_loop8:
	TESTQ  CX, CX
	JZ     max_done
	VMAXPS (SI), Y0, Y0
	ADDQ   $32, SI
	SUBQ   $8, CX
	JMP    max_loop8

max_done:
	VMAXPS       Y1, Y0, Y0
	VMAXPS       Y3, Y2, Y2
	VMAXPS       Y2, Y0, Y0
	VEXTRACTF128 $1, Y0, X1
	VMAXPS       X1, X0, X0
	VPERMILPS    $0x4e, X0, X1
	VMAXPS       X1, X0, X0
	VPERMILPS    $0xb1, X0, X1
	VMAXPS       X1, X0, X0
	VZEROUPPER
	MOVSS        X0, ret+16(FP)
	RET

// func axpyAVX2(a float32, x, y *float32, n int)
TEXT ·axpyAVX2(SB), NOSPLIT, $0-32
	VBROADCASTSS a+0(FP), Y15
	MOVQ         x+8(FP), SI
	MOVQ         y+16(FP), DI
	MOVQ         n+24(FP), CX

axpy_loop32:
	CMPQ        CX, $32
	JL          axpy_loop8
	VMOVUPS     (DI), Y0
	VMOVUPS     32(DI), Y1
	VMOVUPS     64(DI), Y2
	VMOVUPS     96(DI), Y3
	VFMADD231PS (SI), Y15, Y0
	VFMADD231PS 32(SI), Y15, Y1
	VFMADD231PS 64(SI), Y15, Y2
	VFMADD231PS 96(SI), Y15, Y3
	VMOVUPS     Y0, (DI)
	VMOVUPS     Y1, 32(DI)
	VMOVUPS     Y2, 64(DI)
	VMOVUPS     Y3, 96(DI)
	ADDQ        $128, SI
	ADDQ        $128, DI
	SUBQ        $32, CX
	JMP         axpy_loop32

axpy_loop8:
	TESTQ       CX, CX
	JZ          axpy_done
	VMOVUPS     (DI), Y0
	VFMADD231PS (SI), Y15, Y0
	VMOVUPS     Y0, (DI)
	ADDQ        $32, SI
	ADDQ        $32, DI
	SUBQ        $8, CX
	JMP         axpy_loop8

axpy_done:
	VZEROUPPER
	RET

// func axpyF16AVX2(a float32, x *uint16, y *float32, n int)
TEXT ·axpyF16AVX2(SB), NOSPLIT, $0-32
	VBROADCASTSS a+0(FP), Y15
	MOVQ         x+8(FP), SI
	MOVQ         y+16(FP), DI
	MOVQ         n+24(FP), CX

axpyf16_loop32:
	CMPQ        CX, $32
	JL          axpyf16_loop8
	VCVTPH2PS   (SI), Y4
	VCVTPH2PS   16(SI), Y5
	VCVTPH2PS   32(SI), Y6
	VCVTPH2PS   48(SI), Y7
	VMOVUPS     (DI), Y0
	VMOVUPS     32(DI), Y1
	VMOVUPS     64(DI), Y2
	VMOVUPS     96(DI), Y3
	VFMADD231PS Y4, Y15, Y0
	VFMADD231PS Y5, Y15, Y1
	VFMADD231PS Y6, Y15, Y2
	VFMADD231PS Y7, Y15, Y3
	VMOVUPS     Y0, (DI)
	VMOVUPS     Y1, 32(DI)
	VMOVUPS     Y2, 64(DI)
	VMOVUPS     Y3, 96(DI)
	ADDQ        $64, SI
	ADDQ        $128, DI
	SUBQ        $32, CX
	JMP         axpyf16_loop32

axpyf16_loop8:
	TESTQ       CX, CX
	JZ          axpyf16_done
	VCVTPH2PS   (SI), Y4
	VMOVUPS     (DI), Y0
	VFMADD231PS Y4, Y15, Y0
	VMOVUPS     Y0, (DI)
	ADDQ        $16, SI
	ADDQ        $32, DI
	SUBQ        $8, CX
	JMP         axpyf16_loop8

axpyf16_done:
	VZEROUPPER
	RET

// func scaleAVX2(a float32, x *float32, n int)
TEXT ·scaleAVX2(SB), NOSPLIT, $0-24
	VBROADCASTSS a+0(FP), Y15
	MOVQ         x+8(FP), SI
	MOVQ         n+16(FP), CX

scale_loop32:
	CMPQ    CX, $32
	JL      scale_loop8
	VMULPS  (SI), Y15, Y0
	VMULPS  32(SI), Y15, Y1
	VMULPS  64(SI), Y15, Y2
	VMULPS  96(SI), Y15, Y3
	VMOVUPS Y0, (SI)
	VMOVUPS Y1, 32(SI)
	VMOVUPS Y2, 64(SI)
	VMOVUPS Y3, 96(SI)
	ADDQ    $128, SI
	SUBQ    $32, CX
	JMP     scale_loop32

scale_loop8:
	TESTQ   CX, CX
	JZ      scale_done
	VMULPS  (SI), Y15, Y0
	VMOVUPS Y0, (SI)
	ADDQ    $32, SI
	SUBQ    $8, CX
	JMP     scale_loop8

scale_done:
	VZEROUPPER
	RET

// func addAVX2(dst, x, y *float32, n int)
TEXT ·addAVX2(SB), NOSPLIT, $0-32
	MOVQ dst+0(FP), DI
	MOVQ x+8(FP), SI
	MOVQ y+16(FP), DX
	MOVQ n+24(FP), CX

add_loop32:
	CMPQ    CX, $32
	JL      add_loop8
	VMOVUPS (SI), Y0
	VMOVUPS 32(SI), Y1
	VMOVUPS 64(SI), Y2
	VMOVUPS 96(SI), Y3
	VADDPS  (DX), Y0, Y0
	VADDPS  32(DX), Y1, Y1
	VADDPS  64(DX), Y2, Y2
	VADDPS  96(DX), Y3, Y3
	VMOVUPS Y0, (DI)
	VMOVUPS Y1, 32(DI)
	VMOVUPS Y2, 64(DI)
	VMOVUPS Y3, 96(DI)
	ADDQ    $128, SI
	ADDQ    $128, DX
	ADDQ    $128, DI
	SUBQ    $32, CX
	JMP     add_loop32

add_loop8:
	TESTQ   CX, CX
	JZ      add_done
	VMOVUPS (SI), Y0
	VADDPS  (DX), Y0, Y0
	VMOVUPS Y0, (DI)
	ADDQ    $32, SI
	ADDQ    $32, DX
	ADDQ    $32, DI
	SUBQ    $8, CX
	JMP     add_loop8

add_done:
	VZEROUPPER
	RET

// func mulAVX2(dst, x, y *float32, n int)
TEXT ·mulAVX2(SB), NOSPLIT, $0-32
	MOVQ dst+0(FP), DI
	MOVQ x+8(FP), SI
	MOVQ y+16(FP), DX
	MOVQ n+24(FP), CX

mul_loop32:
	CMPQ    CX, $32
	JL      mul_loop8
	VMOVUPS (SI), Y0
	VMOVUPS 32(SI), Y1
	VMOVUPS 64(SI), Y2
	VMOVUPS 96(SI), Y3
	VMULPS  (DX), Y0, Y0
	VMULPS  32(DX), Y1, Y1
	VMULPS  64(DX), Y2, Y2
	VMULPS  96(DX), Y3, Y3
	VMOVUPS Y0, (DI)
	VMOVUPS Y1, 32(DI)
	VMOVUPS Y2, 64(DI)
	VMOVUPS Y3, 96(DI)
	ADDQ    $128, SI
	ADDQ    $128, DX
	ADDQ    $128, DI
	SUBQ    $32, CX
	JMP     mul_loop32

mul_loop8:
	TESTQ   CX, CX
	JZ      mul_done
	VMOVUPS (SI), Y0
	VMULPS  (DX), Y0, Y0
	VMOVUPS Y0, (DI)
	ADDQ    $32, SI
	ADDQ    $32, DX
	ADDQ    $32, DI
	SUBQ    $8, CX
	JMP     mul_loop8

mul_done:
	VZEROUPPER
	RET

// func mulScaleAVX2(dst, x, w *float32, s float32, n int)
// dst = (x·s)·w, rounded in that order as ggml's RMS norm followed by its
// weight multiply rounds.
TEXT ·mulScaleAVX2(SB), NOSPLIT, $0-40
	MOVQ         dst+0(FP), DI
	MOVQ         x+8(FP), SI
	MOVQ         w+16(FP), DX
	VBROADCASTSS s+24(FP), Y15
	MOVQ         n+32(FP), CX

mulscale_loop32:
	CMPQ    CX, $32
	JL      mulscale_loop8
	VMULPS  (SI), Y15, Y0
	VMULPS  32(SI), Y15, Y1
	VMULPS  64(SI), Y15, Y2
	VMULPS  96(SI), Y15, Y3
	VMULPS  (DX), Y0, Y0
	VMULPS  32(DX), Y1, Y1
	VMULPS  64(DX), Y2, Y2
	VMULPS  96(DX), Y3, Y3
	VMOVUPS Y0, (DI)
	VMOVUPS Y1, 32(DI)
	VMOVUPS Y2, 64(DI)
	VMOVUPS Y3, 96(DI)
	ADDQ    $128, SI
	ADDQ    $128, DX
	ADDQ    $128, DI
	SUBQ    $32, CX
	JMP     mulscale_loop32

mulscale_loop8:
	TESTQ   CX, CX
	JZ      mulscale_done
	VMULPS  (SI), Y15, Y0
	VMULPS  (DX), Y0, Y0
	VMOVUPS Y0, (DI)
	ADDQ    $32, SI
	ADDQ    $32, DX
	ADDQ    $32, DI
	SUBQ    $8, CX
	JMP     mulscale_loop8

mulscale_done:
	VZEROUPPER
	RET

// func fp16ToFP32AVX2(src *uint16, dst *float32, n int)
TEXT ·fp16ToFP32AVX2(SB), NOSPLIT, $0-24
	MOVQ src+0(FP), SI
	MOVQ dst+8(FP), DI
	MOVQ n+16(FP), CX

h2f_loop32:
	CMPQ      CX, $32
	JL        h2f_loop8
	VCVTPH2PS (SI), Y0
	VCVTPH2PS 16(SI), Y1
	VCVTPH2PS 32(SI), Y2
	VCVTPH2PS 48(SI), Y3
	VMOVUPS   Y0, (DI)
	VMOVUPS   Y1, 32(DI)
	VMOVUPS   Y2, 64(DI)
	VMOVUPS   Y3, 96(DI)
	ADDQ      $64, SI
	ADDQ      $128, DI
	SUBQ      $32, CX
	JMP       h2f_loop32

h2f_loop8:
	TESTQ     CX, CX
	JZ        h2f_done
	VCVTPH2PS (SI), Y0
	VMOVUPS   Y0, (DI)
	ADDQ      $16, SI
	ADDQ      $32, DI
	SUBQ      $8, CX
	JMP       h2f_loop8

h2f_done:
	VZEROUPPER
	RET

// func fp32ToFP16AVX2(src *float32, dst *uint16, n int)
// Rounds to nearest even (immediate 0), as FP32ToFP16.
TEXT ·fp32ToFP16AVX2(SB), NOSPLIT, $0-24
	MOVQ src+0(FP), SI
	MOVQ dst+8(FP), DI
	MOVQ n+16(FP), CX

f2h_loop32:
	CMPQ      CX, $32
	JL        f2h_loop8
	VMOVUPS   (SI), Y0
	VMOVUPS   32(SI), Y1
	VMOVUPS   64(SI), Y2
	VMOVUPS   96(SI), Y3
	VCVTPS2PH $0, Y0, (DI)
	VCVTPS2PH $0, Y1, 16(DI)
	VCVTPS2PH $0, Y2, 32(DI)
	VCVTPS2PH $0, Y3, 48(DI)
	ADDQ      $128, SI
	ADDQ      $64, DI
	SUBQ      $32, CX
	JMP       f2h_loop32

f2h_loop8:
	TESTQ     CX, CX
	JZ        f2h_done
	VMOVUPS   (SI), Y0
	VCVTPS2PH $0, Y0, (DI)
	ADDQ      $32, SI
	ADDQ      $16, DI
	SUBQ      $8, CX
	JMP       f2h_loop8

f2h_done:
	VZEROUPPER
	RET

// func ropeNormAVX2(x, cos, sin *float32, pairs int)
// Rotates the adjacent pairs (x[2i], x[2i+1]) by the angle whose cosine and
// sine are cos[i], sin[i]; pairs is a multiple of 4. With x0 and x1 spread
// over both lanes of their pair, (c, s) interleaved in Y1 and (s, c) in Y2,
// VFMADDSUB subtracts in the even lanes and adds in the odd ones:
// x0·c − x1·s and x0·s + x1·c, the x0 products fused, as ggml's compiled
// rope rounds them (ropeNormGo is the twin).
TEXT ·ropeNormAVX2(SB), NOSPLIT, $0-32
	MOVQ x+0(FP), SI
	MOVQ cos+8(FP), DX
	MOVQ sin+16(FP), BX
	MOVQ pairs+24(FP), CX

ropenorm_loop:
	TESTQ          CX, CX
	JZ             ropenorm_done
	VMOVUPS        (SI), Y0
	VMOVUPS        (DX), X4
	VMOVUPS        (BX), X5
	VUNPCKLPS      X5, X4, X1
	VUNPCKHPS      X5, X4, X2
	VINSERTF128    $1, X2, Y1, Y1
	VPERMILPS      $0xb1, Y1, Y2
	VMOVSLDUP      Y0, Y4
	VMOVSHDUP      Y0, Y3
	VMULPS         Y2, Y3, Y3
	VFMADDSUB231PS Y1, Y4, Y3
	VMOVUPS        Y3, (SI)
	ADDQ           $32, SI
	ADDQ           $16, DX
	ADDQ           $16, BX
	SUBQ           $4, CX
	JMP            ropenorm_loop

ropenorm_done:
	VZEROUPPER
	RET

// func ropeNeoxAVX2(x0, x1, cos, sin *float32, n int)
// Rotates the pairs (x0[i], x1[i]); n is a multiple of 8.
TEXT ·ropeNeoxAVX2(SB), NOSPLIT, $0-40
	MOVQ x0+0(FP), SI
	MOVQ x1+8(FP), DI
	MOVQ cos+16(FP), DX
	MOVQ sin+24(FP), BX
	MOVQ n+32(FP), CX

ropeneox_loop:
	TESTQ       CX, CX
	JZ          ropeneox_done
	VMOVUPS     (SI), Y0
	VMOVUPS     (DI), Y1
	VMOVUPS     (DX), Y2
	VMOVUPS     (BX), Y3
	VMULPS      Y3, Y1, Y4
	VFMSUB231PS Y2, Y0, Y4
	VMULPS      Y2, Y1, Y5
	VFMADD231PS Y3, Y0, Y5
	VMOVUPS     Y4, (SI)
	VMOVUPS     Y5, (DI)
	ADDQ        $32, SI
	ADDQ        $32, DI
	ADDQ        $32, DX
	ADDQ        $32, BX
	SUBQ        $8, CX
	JMP         ropeneox_loop

ropeneox_done:
	VZEROUPPER
	RET
