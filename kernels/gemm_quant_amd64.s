//go:build amd64 && !purego

#include "textflag.h"

// func quantRowQ8_0ActAVX2(x *float32, nb int, dst *byte, side *byte)
//
// quantizeRowQ8_0Act for nb blocks of 32 floats into dst (34-byte blocks),
// with the blocked kernels' side table: per block its scale as float32 and
// 8·Σq as int32. Per block: amax = the largest |x| (NaNs skipped), the scale
// f16(amax/127), the quants round-half-even(x·(127/amax)), a NaN product (a
// NaN input, or 0·∞ when amax is 0) becoming 0 as Go's conversion makes it.

DATA q8actAbs<>+0(SB)/4, $0x7fffffff
GLOBL q8actAbs<>(SB), RODATA|NOPTR, $4

DATA q8act127<>+0(SB)/4, $127.0
GLOBL q8act127<>(SB), RODATA|NOPTR, $4

// q8actOrder puts the dwords of VPACKSSWB's lane-wise result back in order.
DATA q8actOrder<>+0(SB)/4, $0
DATA q8actOrder<>+4(SB)/4, $4
DATA q8actOrder<>+8(SB)/4, $1
DATA q8actOrder<>+12(SB)/4, $5
DATA q8actOrder<>+16(SB)/4, $2
DATA q8actOrder<>+20(SB)/4, $6
DATA q8actOrder<>+24(SB)/4, $3
DATA q8actOrder<>+28(SB)/4, $7
GLOBL q8actOrder<>(SB), RODATA|NOPTR, $32

DATA q8actOnes8<>+0(SB)/8, $0x0101010101010101
DATA q8actOnes8<>+8(SB)/8, $0x0101010101010101
DATA q8actOnes8<>+16(SB)/8, $0x0101010101010101
DATA q8actOnes8<>+24(SB)/8, $0x0101010101010101
GLOBL q8actOnes8<>(SB), RODATA|NOPTR, $32

DATA q8actOnes16<>+0(SB)/8, $0x0001000100010001
DATA q8actOnes16<>+8(SB)/8, $0x0001000100010001
DATA q8actOnes16<>+16(SB)/8, $0x0001000100010001
DATA q8actOnes16<>+24(SB)/8, $0x0001000100010001
GLOBL q8actOnes16<>(SB), RODATA|NOPTR, $32

// Q8ACT_ABS sets Ya to |Yx| with NaN lanes as 0; Y15 holds the abs mask.
#define Q8ACT_ABS(Yx, Ya, Ym) \
	VANDPS   Y15, Yx, Ya; \
	VCMPPS   $7, Yx, Yx, Ym; \
	VANDPS   Ym, Ya, Ya

// Q8ACT_Q sets Yx to the int32 quants of Yx·Y12 (Y12: the inverse scale);
// NaN products become 0.
#define Q8ACT_Q(Yx, Ym) \
	VMULPS    Y12, Yx, Yx; \
	VROUNDPS  $0, Yx, Yx; \
	VCMPPS    $7, Yx, Yx, Ym; \
	VANDPS    Ym, Yx, Yx; \
	VCVTPS2DQ Yx, Yx

TEXT ·quantRowQ8_0ActAVX2(SB), NOSPLIT, $0-32
	MOVQ         x+0(FP), SI
	MOVQ         nb+8(FP), CX
	MOVQ         dst+16(FP), DI
	MOVQ         side+24(FP), DX
	VBROADCASTSS q8actAbs<>(SB), Y15
	VBROADCASTSS q8act127<>(SB), X14
	VMOVDQU      q8actOrder<>(SB), Y13
	VMOVDQU      q8actOnes8<>(SB), Y11

block:
	VMOVUPS 0(SI), Y0
	VMOVUPS 32(SI), Y1
	VMOVUPS 64(SI), Y2
	VMOVUPS 96(SI), Y3
	Q8ACT_ABS(Y0, Y4, Y8)
	Q8ACT_ABS(Y1, Y5, Y8)
	Q8ACT_ABS(Y2, Y6, Y8)
	Q8ACT_ABS(Y3, Y7, Y8)
	VMAXPS       Y5, Y4, Y4
	VMAXPS       Y7, Y6, Y6
	VMAXPS       Y6, Y4, Y4
	VEXTRACTF128 $1, Y4, X5
	VMAXPS       X5, X4, X4
	VMOVHLPS     X4, X4, X5
	VMAXPS       X5, X4, X4
	VMOVSHDUP    X4, X5
	VMAXSS       X5, X4, X4         // amax

	VDIVSS       X14, X4, X5        // d = amax/127
	VCVTPS2PH    $0, X5, X5
	VPEXTRW      $0, X5, 0(DI)
	VCVTPH2PS    X5, X5
	VMOVSS       X5, 0(DX)
	VDIVSS       X4, X14, X12       // 127/amax
	VBROADCASTSS X12, Y12

	Q8ACT_Q(Y0, Y8)
	Q8ACT_Q(Y1, Y8)
	Q8ACT_Q(Y2, Y8)
	Q8ACT_Q(Y3, Y8)
	VPACKSSDW    Y1, Y0, Y0
	VPACKSSDW    Y3, Y2, Y2
	VPACKSSWB    Y2, Y0, Y0
	VPERMD       Y0, Y13, Y0
	VMOVDQU      Y0, 2(DI)

	// 8·Σq
	VPMADDUBSW   Y0, Y11, Y1
	VPMADDWD     q8actOnes16<>(SB), Y1, Y1
	VEXTRACTI128 $1, Y1, X2
	VPADDD       X2, X1, X1
	VPSHUFD      $0x4e, X1, X2
	VPADDD       X2, X1, X1
	VPSHUFD      $0xb1, X1, X2
	VPADDD       X2, X1, X1
	VPSLLD       $3, X1, X1
	VMOVD        X1, 4(DX)

	ADDQ $128, SI
	ADDQ $34, DI
	ADDQ $8, DX
	DECQ CX
	JNZ  block
	VZEROUPPER
	RET

// func quantRowQ8_KAVX2(x *float32, nb int, dst *byte)
//
// quantizeRowQ8_K for nb blocks of 256 floats into dst (292-byte blocks:
// d float32, 256 int8, 16 int16 sums of 16). Per block: max = the x of the
// largest |x|, the first on ties (NaNs skipped); an all-zero block is all
// zeros; else iscale = -127/max, q = min(127, nearestInt(iscale·x)) with
// nearestInt's own bit trick (so that even NaN products give the same
// bytes), the low byte kept, d = 1/iscale.

DATA q8kMagic<>+0(SB)/4, $12582912.0
GLOBL q8kMagic<>(SB), RODATA|NOPTR, $4

DATA q8kMinus127<>+0(SB)/4, $-127.0
GLOBL q8kMinus127<>(SB), RODATA|NOPTR, $4

DATA q8kOne<>+0(SB)/4, $1.0
GLOBL q8kOne<>(SB), RODATA|NOPTR, $4

// Q8K_ABS sets Ya to |Yx| with NaN lanes 0; Y15 the abs mask; clobbers Ym.
#define Q8K_ABS(xm, Yx, Ya, Ym) \
	VMOVUPS  xm, Yx; \
	VANDPS   Y15, Yx, Ya; \
	VCMPPS   $7, Yx, Yx, Ym; \
	VANDPS   Ym, Ya, Ya

// Q8K_Q sets Yq to the int32 nearestInt(iscale·x) of the floats at xm,
// capped at 127 and cut to their low byte (Y12 iscale, Y11 the magic
// number, Y10 0x7fffff, Y9 0x400000, Y8 127, Y7 0xff).
#define Q8K_Q(xm, Yq) \
	VMULPS  xm, Y12, Yq; \
	VADDPS  Y11, Yq, Yq; \
	VPAND   Y10, Yq, Yq; \
	VPSUBD  Y9, Yq, Yq; \
	VPMINSD Y8, Yq, Yq; \
	VPAND   Y7, Yq, Yq

// Q8K_32 quantizes 32 floats at xm into 32 bytes at qm and stores the sums
// of their two 16s as int16 at sm and sm+2; clobbers Y0-Y6.
#define Q8K_32(xm0, xm1, xm2, xm3, qm, sm0, sm1) \
	Q8K_Q(xm0, Y0); \
	Q8K_Q(xm1, Y1); \
	Q8K_Q(xm2, Y2); \
	Q8K_Q(xm3, Y3); \
	VPACKUSDW    Y1, Y0, Y0; \
	VPACKUSDW    Y3, Y2, Y2; \
	VPACKUSWB    Y2, Y0, Y0; \
	VPERMD       Y0, Y13, Y0; \
	VMOVDQU      Y0, qm; \
	VPMADDUBSW   Y0, Y14, Y1; \
	VPMADDWD     q8actOnes16<>(SB), Y1, Y1; \
	VPHADDD      Y1, Y1, Y1; \
	VPHADDD      Y1, Y1, Y1; \
	VMOVD        X1, AX; \
	MOVW         AX, sm0; \
	VEXTRACTI128 $1, Y1, X1; \
	VMOVD        X1, AX; \
	MOVW         AX, sm1

TEXT ·quantRowQ8_KAVX2(SB), NOSPLIT, $0-24
	MOVQ         x+0(FP), SI
	MOVQ         nb+8(FP), CX
	MOVQ         dst+16(FP), DI
	VBROADCASTSS q8actAbs<>(SB), Y15
	VMOVDQU      q8actOnes8<>(SB), Y14
	VMOVDQU      q8actOrder<>(SB), Y13
	VBROADCASTSS q8kMagic<>(SB), Y11
	MOVL         $0x7fffff, AX
	VMOVD        AX, X10
	VPBROADCASTD X10, Y10
	MOVL         $0x400000, AX
	VMOVD        AX, X9
	VPBROADCASTD X9, Y9
	MOVL         $127, AX
	VMOVD        AX, X8
	VPBROADCASTD X8, Y8
	MOVL         $0xff, AX
	VMOVD        AX, X7
	VPBROADCASTD X7, Y7

kblock:
	// amax over the 256 floats, 32 at a time.
	VXORPS Y4, Y4, Y4
	XORQ   BX, BX

kmax:
	Q8K_ABS(0(SI)(BX*1), Y0, Y0, Y5)
	Q8K_ABS(32(SI)(BX*1), Y1, Y1, Y5)
	Q8K_ABS(64(SI)(BX*1), Y2, Y2, Y5)
	Q8K_ABS(96(SI)(BX*1), Y3, Y3, Y5)
	VMAXPS Y1, Y0, Y0
	VMAXPS Y3, Y2, Y2
	VMAXPS Y2, Y0, Y0
	VMAXPS Y0, Y4, Y4
	ADDQ   $128, BX
	CMPQ   BX, $1024
	JLT    kmax
	VEXTRACTF128 $1, Y4, X5
	VMAXPS       X5, X4, X4
	VMOVHLPS     X4, X4, X5
	VMAXPS       X5, X4, X4
	VMOVSHDUP    X4, X5
	VMAXSS       X5, X4, X4
	VXORPS       X5, X5, X5
	VUCOMISS     X5, X4
	JEQ          kzero
	VBROADCASTSS X4, Y4

	// The first x with |x| = amax.
	XORQ BX, BX

kfind:
	Q8K_ABS(0(SI)(BX*4), Y0, Y0, Y5)
	VCMPPS    $0, Y4, Y0, Y0
	VMOVMSKPS Y0, AX
	TESTL     AX, AX
	JNZ       kfound
	ADDQ      $8, BX
	JMP       kfind

kfound:
	BSFL         AX, AX
	ADDQ         AX, BX
	VMOVSS       q8kMinus127<>(SB), X12
	VDIVSS       0(SI)(BX*4), X12, X12      // iscale = -127/max
	VMOVSS       q8kOne<>(SB), X0
	VDIVSS       X12, X0, X0
	VMOVSS       X0, 0(DI)                  // d = 1/iscale
	VBROADCASTSS X12, Y12

	Q8K_32(0(SI), 32(SI), 64(SI), 96(SI), 4(DI), 260(DI), 262(DI))
	Q8K_32(128(SI), 160(SI), 192(SI), 224(SI), 36(DI), 264(DI), 266(DI))
	Q8K_32(256(SI), 288(SI), 320(SI), 352(SI), 68(DI), 268(DI), 270(DI))
	Q8K_32(384(SI), 416(SI), 448(SI), 480(SI), 100(DI), 272(DI), 274(DI))
	Q8K_32(512(SI), 544(SI), 576(SI), 608(SI), 132(DI), 276(DI), 278(DI))
	Q8K_32(640(SI), 672(SI), 704(SI), 736(SI), 164(DI), 280(DI), 282(DI))
	Q8K_32(768(SI), 800(SI), 832(SI), 864(SI), 196(DI), 284(DI), 286(DI))
	Q8K_32(896(SI), 928(SI), 960(SI), 992(SI), 228(DI), 288(DI), 290(DI))
	JMP kNext

kzero:
	// The whole 292-byte block is zeros.
	VXORPS  Y0, Y0, Y0
	XORQ    BX, BX

kclear:
	VMOVDQU Y0, 0(DI)(BX*1)
	ADDQ    $32, BX
	CMPQ    BX, $288
	JLT     kclear
	MOVL    $0, 288(DI)

kNext:
	ADDQ $1024, SI
	ADDQ $292, DI
	DECQ CX
	JNZ  kblock
	VZEROUPPER
	RET
