//go:build amd64 && !purego

#include "textflag.h"

// Kernels built on a vector exp: an exp-and-sum and GELU.
// Lengths are multiples of 8; the Go wrappers in float_amd64.go do the rest
// with expf, the scalar twin of EXP0 in act.go.
//
// EXP0 computes e^x in the 8 lanes of Y0 as exp = 2^n · e^r with
// n = round(x·log2 e) and r = x − n·ln 2 (ln 2 split in two parts so that r
// keeps its low bits), e^r by a degree-7 polynomial (Cephes' expf
// coefficients). x is clamped to [LO, HI] so that 2^n stays a normal float32,
// and lanes below LO give 0. The clamps keep a NaN in the lane it came from.
// Needs Y13 = LO and Y14 = HI; clobbers Y1-Y4.

// log2(e)
#define C_LOG2E expconst<>+0(SB)
// ln 2 rounded to 9 significant bits, so that n·LN2HI is exact
#define C_LN2HI expconst<>+32(SB)
// ln 2 - LN2HI
#define C_LN2LO expconst<>+64(SB)
// polynomial for exp(r), r in ±ln2/2: 1.9875691500e-4
#define C_P0 expconst<>+96(SB)
// 1.3981999507e-3
#define C_P1 expconst<>+128(SB)
// 8.3334519073e-3
#define C_P2 expconst<>+160(SB)
// 4.1665795894e-2
#define C_P3 expconst<>+192(SB)
// 1.6666665459e-1
#define C_P4 expconst<>+224(SB)
// 5.0000001201e-1
#define C_P5 expconst<>+256(SB)
// 1
#define C_ONE expconst<>+288(SB)
// -126·ln 2: below it exp is 0
#define C_LO expconst<>+320(SB)
// 127·ln 2: larger x give 2^127
#define C_HI expconst<>+352(SB)
// float32 exponent bias, as int32
#define C_BIAS expconst<>+384(SB)
// sign bit
#define C_SIGN expconst<>+416(SB)
// 0.044715
#define C_GELUA expconst<>+448(SB)
// -2·sqrt(2/π)
#define C_GELUK expconst<>+480(SB)

#define EXP0 \
	VCMPPS       $1, Y13, Y0, Y4; \
	VMAXPS       Y0, Y13, Y0; \
	VMINPS       Y0, Y14, Y0; \
	VMULPS       C_LOG2E, Y0, Y1; \
	VROUNDPS     $0, Y1, Y1; \
	VFNMADD231PS C_LN2HI, Y1, Y0; \
	VFNMADD231PS C_LN2LO, Y1, Y0; \
	VMOVUPS      C_P0, Y2; \
	VFMADD213PS  C_P1, Y0, Y2; \
	VFMADD213PS  C_P2, Y0, Y2; \
	VFMADD213PS  C_P3, Y0, Y2; \
	VFMADD213PS  C_P4, Y0, Y2; \
	VFMADD213PS  C_P5, Y0, Y2; \
	VMULPS       Y0, Y0, Y3; \
	VFMADD213PS  Y0, Y3, Y2; \
	VADDPS       C_ONE, Y2, Y2; \
	VCVTPS2DQ    Y1, Y1; \
	VPADDD       C_BIAS, Y1, Y1; \
	VPSLLD       $23, Y1, Y1; \
	VMULPS       Y1, Y2, Y0; \
	VANDNPS      Y0, Y4, Y0

// func expSubSumAVX2(dst, x *float32, m float32, n int) float32
// dst[i] = e^(x[i]−m); returns the sum of dst.
TEXT ·expSubSumAVX2(SB), NOSPLIT, $0-36
	MOVQ         dst+0(FP), DI
	MOVQ         x+8(FP), SI
	VBROADCASTSS m+16(FP), Y15
	MOVQ         n+24(FP), CX
	VMOVUPS      C_LO, Y13
	VMOVUPS      C_HI, Y14
	VXORPS       Y12, Y12, Y12

expsum_loop:
	TESTQ   CX, CX
	JZ      expsum_done
	VMOVUPS (SI), Y0
	VSUBPS  Y15, Y0, Y0
	EXP0
	VMOVUPS Y0, (DI)
	VADDPS  Y0, Y12, Y12
	ADDQ    $32, SI
	ADDQ    $32, DI
	SUBQ    $8, CX
	JMP     expsum_loop

expsum_done:
	VEXTRACTF128 $1, Y12, X1
	VADDPS       X1, X12, X0
	VPERMILPS    $0x4e, X0, X1
	VADDPS       X1, X0, X0
	VPERMILPS    $0xb1, X0, X1
	VADDPS       X1, X0, X0
	VZEROUPPER
	MOVSS        X0, ret+32(FP)
	RET

// func geluAVX2(dst, x *float32, n int)
// dst = 0.5·x·(1 + tanh(z)) with z = sqrt(2/π)·x·(1 + 0.044715·x²), computed
// as x / (1 + e^−2z), which is the same function.
TEXT ·geluAVX2(SB), NOSPLIT, $0-24
	MOVQ    dst+0(FP), DI
	MOVQ    x+8(FP), SI
	MOVQ    n+16(FP), CX
	VMOVUPS C_LO, Y13
	VMOVUPS C_HI, Y14

gelu_loop:
	TESTQ       CX, CX
	JZ          gelu_done
	VMOVUPS     (SI), Y5
	VMULPS      Y5, Y5, Y1
	VMOVUPS     C_ONE, Y0
	VFMADD231PS C_GELUA, Y1, Y0
	VMULPS      C_GELUK, Y5, Y1
	VMULPS      Y1, Y0, Y0
	EXP0
	VADDPS      C_ONE, Y0, Y0
	VDIVPS      Y0, Y5, Y0
	VMOVUPS     Y0, (DI)
	ADDQ        $32, SI
	ADDQ        $32, DI
	SUBQ        $8, CX
	JMP         gelu_loop

gelu_done:
	VZEROUPPER
	RET

// The constants, each repeated in 8 lanes so that it can be a memory operand.
DATA expconst<>+0(SB)/8, $0x3fb8aa3b3fb8aa3b
DATA expconst<>+8(SB)/8, $0x3fb8aa3b3fb8aa3b
DATA expconst<>+16(SB)/8, $0x3fb8aa3b3fb8aa3b
DATA expconst<>+24(SB)/8, $0x3fb8aa3b3fb8aa3b
DATA expconst<>+32(SB)/8, $0x3f3180003f318000
DATA expconst<>+40(SB)/8, $0x3f3180003f318000
DATA expconst<>+48(SB)/8, $0x3f3180003f318000
DATA expconst<>+56(SB)/8, $0x3f3180003f318000
DATA expconst<>+64(SB)/8, $0xb95e8083b95e8083
DATA expconst<>+72(SB)/8, $0xb95e8083b95e8083
DATA expconst<>+80(SB)/8, $0xb95e8083b95e8083
DATA expconst<>+88(SB)/8, $0xb95e8083b95e8083
DATA expconst<>+96(SB)/8, $0x3950696739506967
DATA expconst<>+104(SB)/8, $0x3950696739506967
DATA expconst<>+112(SB)/8, $0x3950696739506967
DATA expconst<>+120(SB)/8, $0x3950696739506967
DATA expconst<>+128(SB)/8, $0x3ab743ce3ab743ce
DATA expconst<>+136(SB)/8, $0x3ab743ce3ab743ce
DATA expconst<>+144(SB)/8, $0x3ab743ce3ab743ce
DATA expconst<>+152(SB)/8, $0x3ab743ce3ab743ce
DATA expconst<>+160(SB)/8, $0x3c0889083c088908
DATA expconst<>+168(SB)/8, $0x3c0889083c088908
DATA expconst<>+176(SB)/8, $0x3c0889083c088908
DATA expconst<>+184(SB)/8, $0x3c0889083c088908
DATA expconst<>+192(SB)/8, $0x3d2aa9c13d2aa9c1
DATA expconst<>+200(SB)/8, $0x3d2aa9c13d2aa9c1
DATA expconst<>+208(SB)/8, $0x3d2aa9c13d2aa9c1
DATA expconst<>+216(SB)/8, $0x3d2aa9c13d2aa9c1
DATA expconst<>+224(SB)/8, $0x3e2aaaaa3e2aaaaa
DATA expconst<>+232(SB)/8, $0x3e2aaaaa3e2aaaaa
DATA expconst<>+240(SB)/8, $0x3e2aaaaa3e2aaaaa
DATA expconst<>+248(SB)/8, $0x3e2aaaaa3e2aaaaa
DATA expconst<>+256(SB)/8, $0x3f0000003f000000
DATA expconst<>+264(SB)/8, $0x3f0000003f000000
DATA expconst<>+272(SB)/8, $0x3f0000003f000000
DATA expconst<>+280(SB)/8, $0x3f0000003f000000
DATA expconst<>+288(SB)/8, $0x3f8000003f800000
DATA expconst<>+296(SB)/8, $0x3f8000003f800000
DATA expconst<>+304(SB)/8, $0x3f8000003f800000
DATA expconst<>+312(SB)/8, $0x3f8000003f800000
DATA expconst<>+320(SB)/8, $0xc2aeac50c2aeac50
DATA expconst<>+328(SB)/8, $0xc2aeac50c2aeac50
DATA expconst<>+336(SB)/8, $0xc2aeac50c2aeac50
DATA expconst<>+344(SB)/8, $0xc2aeac50c2aeac50
DATA expconst<>+352(SB)/8, $0x42b00f3442b00f34
DATA expconst<>+360(SB)/8, $0x42b00f3442b00f34
DATA expconst<>+368(SB)/8, $0x42b00f3442b00f34
DATA expconst<>+376(SB)/8, $0x42b00f3442b00f34
DATA expconst<>+384(SB)/8, $0x0000007f0000007f
DATA expconst<>+392(SB)/8, $0x0000007f0000007f
DATA expconst<>+400(SB)/8, $0x0000007f0000007f
DATA expconst<>+408(SB)/8, $0x0000007f0000007f
DATA expconst<>+416(SB)/8, $0x8000000080000000
DATA expconst<>+424(SB)/8, $0x8000000080000000
DATA expconst<>+432(SB)/8, $0x8000000080000000
DATA expconst<>+440(SB)/8, $0x8000000080000000
DATA expconst<>+448(SB)/8, $0x3d3727133d372713
DATA expconst<>+456(SB)/8, $0x3d3727133d372713
DATA expconst<>+464(SB)/8, $0x3d3727133d372713
DATA expconst<>+472(SB)/8, $0x3d3727133d372713
DATA expconst<>+480(SB)/8, $0xbfcc422abfcc422a
DATA expconst<>+488(SB)/8, $0xbfcc422abfcc422a
DATA expconst<>+496(SB)/8, $0xbfcc422abfcc422a
DATA expconst<>+504(SB)/8, $0xbfcc422abfcc422a
GLOBL expconst<>(SB), RODATA|NOPTR, $512
