//go:build amd64 && !purego

#include "textflag.h"

// AVX-512 VNNI token-group kernels for Q4_0 and Q8_0 weights: groups of 16
// tokens (gemm.go), one token per 32-bit lane of a 512-bit register, so that
// a VPDPBUSD multiplies 4 weight bytes, broadcast, by 4 activation bytes of
// each of the 16 tokens and adds the products into the token's lane. The
// integer sums are exact, and the float work per output is the same as
// VecDot's, so every output rounds exactly as VecDot does.

// Q4_0, 640 bytes a block: for nibble dword j = 0..3 (weight bytes 4j..4j+3)
// a 64-byte slot at 128j with every token's a[4j:4j+4] (the low nibbles'
// activations) and one at 128j+64 with a[16+4j:20+4j] (the high nibbles');
// then the 16 da as float32 at 512 and the 16 8·Σa as int32 at 576. The
// nibbles are the unsigned operand, the activations the signed one, and the
// block's dword lanes add up to Σ q·a; minus 8·Σa that is Σ (q-8)·a.

// Q4V_ROW adds one block of the row at rm (d f16, then 16 nibble bytes)
// against the group at DI to Zacc, token t in lane t. Z31 holds 0x0f bytes;
// clobbers Z16-Z20, Y20.
#define Q4V_ROW(rm, Zacc) \
	VPXORD       Z16, Z16, Z16; \
	VPBROADCASTD 2+rm, Z17; \
	VPANDD       Z31, Z17, Z18; \
	VPSRLW       $4, Z17, Z17; \
	VPANDD       Z31, Z17, Z17; \
	VPDPBUSD     0(DI), Z18, Z16; \
	VPDPBUSD     64(DI), Z17, Z16; \
	VPBROADCASTD 6+rm, Z17; \
	VPANDD       Z31, Z17, Z18; \
	VPSRLW       $4, Z17, Z17; \
	VPANDD       Z31, Z17, Z17; \
	VPDPBUSD     128(DI), Z18, Z16; \
	VPDPBUSD     192(DI), Z17, Z16; \
	VPBROADCASTD 10+rm, Z17; \
	VPANDD       Z31, Z17, Z18; \
	VPSRLW       $4, Z17, Z17; \
	VPANDD       Z31, Z17, Z17; \
	VPDPBUSD     256(DI), Z18, Z16; \
	VPDPBUSD     320(DI), Z17, Z16; \
	VPBROADCASTD 14+rm, Z17; \
	VPANDD       Z31, Z17, Z18; \
	VPSRLW       $4, Z17, Z17; \
	VPANDD       Z31, Z17, Z17; \
	VPDPBUSD     384(DI), Z18, Z16; \
	VPDPBUSD     448(DI), Z17, Z16; \
	VPSUBD       576(DI), Z16, Z16; \
	VCVTDQ2PS    Z16, Z16; \
	VPBROADCASTW rm, Y19; \
	VCVTPH2PS    Y19, Z19; \
	VMULPS       512(DI), Z19, Z19; \
	VFMADD231PS  Z16, Z19, Zacc

// func gemmQ4_0Vx4x16(nb int, w *byte, wStride int, a *byte, out *float32, outStride int, nt int)
//
// 4 rows (w + r·wStride) by the group of 16 tokens at a: out[t·outStride +
// r] for the first nt tokens.
TEXT ·gemmQ4_0Vx4x16(SB), NOSPLIT, $256-56
	MOVL         $0x0f0f0f0f, AX
	VPBROADCASTD AX, Z31
	MOVQ         nb+0(FP), CX
	MOVQ         w+8(FP), SI
	MOVQ         wStride+16(FP), R8
	LEAQ         (SI)(R8*1), R9
	MOVQ         a+24(FP), DI
	VPXORD       Z0, Z0, Z0
	VPXORD       Z1, Z1, Z1
	VPXORD       Z2, Z2, Z2
	VPXORD       Z3, Z3, Z3

q4vblock:
	Q4V_ROW(0(SI), Z0)
	Q4V_ROW(0(R9), Z1)
	Q4V_ROW(0(SI)(R8*2), Z2)
	Q4V_ROW(0(R9)(R8*2), Z3)
	ADDQ $18, SI
	ADDQ $18, R9
	ADDQ $640, DI
	DECQ CX
	JNZ  q4vblock

	VMOVUPS Z0, 0(SP)
	VMOVUPS Z1, 64(SP)
	VMOVUPS Z2, 128(SP)
	VMOVUPS Z3, 192(SP)
	MOVQ    out+32(FP), DX
	MOVQ    outStride+40(FP), R8
	SHLQ    $2, R8
	MOVQ    nt+48(FP), CX
	XORQ    BX, BX

q4vstore:
	MOVL 0(SP)(BX*4), AX
	MOVL AX, 0(DX)
	MOVL 64(SP)(BX*4), AX
	MOVL AX, 4(DX)
	MOVL 128(SP)(BX*4), AX
	MOVL AX, 8(DX)
	MOVL 192(SP)(BX*4), AX
	MOVL AX, 12(DX)
	ADDQ R8, DX
	INCQ BX
	CMPQ BX, CX
	JLT  q4vstore
	VZEROUPPER
	RET

// Q8_0, 576 bytes a block: for each 4-byte lane m of the block a 64-byte
// slot with that lane of the 16 tokens, biased by 128 (the unsigned
// operand; the weights are the signed one), then the 16 da as float32. The
// bias adds 128·(the 4 weights' sum) to lane m of every token: those 8 sums
// come from one VPDPBUSD of 0x80 bytes by the weight block and are taken
// off before lane m becomes a float, so each lane holds exactly vecDotQ8_0's
// integer, and lane m of every output gets its own accumulator Z(m).

// Q8V_LANE adds lane m of the block (weights at wm, activations at am,
// the bias at cm) scaled by Z20 to Zacc; clobbers Z16, Z17.
#define Q8V_LANE(wm, am, cm, Zacc) \
	VMOVDQU32         am, Z17; \
	VPXORD            Z16, Z16, Z16; \
	VPDPBUSD.BCST     wm, Z17, Z16; \
	VPSUBD.BCST       cm, Z16, Z16; \
	VCVTDQ2PS         Z16, Z16; \
	VFMADD231PS       Z16, Z20, Zacc

// func gemmQ8_0Vx1x16(nb int, w *byte, wStride int, a *byte, out *float32, outStride int, nt int)
//
// One row (w) by the group of 16 tokens at a: out[t·outStride] for the
// first nt tokens.
TEXT ·gemmQ8_0Vx1x16(SB), NOSPLIT, $64-56
	MOVL         $0x80808080, AX
	VPBROADCASTD AX, Y30
	MOVQ         nb+0(FP), CX
	MOVQ         w+8(FP), SI
	MOVQ         a+24(FP), DI
	VPXORD       Z0, Z0, Z0
	VPXORD       Z1, Z1, Z1
	VPXORD       Z2, Z2, Z2
	VPXORD       Z3, Z3, Z3
	VPXORD       Z4, Z4, Z4
	VPXORD       Z5, Z5, Z5
	VPXORD       Z6, Z6, Z6
	VPXORD       Z7, Z7, Z7

q8vblock:
	// The bias of each lane m: 128·Σ of its 4 weights, at 4m(SP).
	VMOVDQU32    2(SI), Y18
	VPXORD       Y19, Y19, Y19
	VPDPBUSD     Y18, Y30, Y19
	VMOVDQU32    Y19, 0(SP)
	VPBROADCASTW 0(SI), Y20
	VCVTPH2PS    Y20, Z20
	VMULPS       512(DI), Z20, Z20
	Q8V_LANE(2(SI), 0(DI), 0(SP), Z0)
	Q8V_LANE(6(SI), 64(DI), 4(SP), Z1)
	Q8V_LANE(10(SI), 128(DI), 8(SP), Z2)
	Q8V_LANE(14(SI), 192(DI), 12(SP), Z3)
	Q8V_LANE(18(SI), 256(DI), 16(SP), Z4)
	Q8V_LANE(22(SI), 320(DI), 20(SP), Z5)
	Q8V_LANE(26(SI), 384(DI), 24(SP), Z6)
	Q8V_LANE(30(SI), 448(DI), 28(SP), Z7)
	ADDQ $34, SI
	ADDQ $576, DI
	DECQ CX
	JNZ  q8vblock

	// hsum8 of every token: (l0+l4 + l2+l6) + (l1+l5 + l3+l7).
	VADDPS  Z4, Z0, Z0
	VADDPS  Z5, Z1, Z1
	VADDPS  Z6, Z2, Z2
	VADDPS  Z7, Z3, Z3
	VADDPS  Z2, Z0, Z0
	VADDPS  Z3, Z1, Z1
	VADDPS  Z1, Z0, Z0
	VMOVUPS Z0, 0(SP)
	MOVQ    out+32(FP), DX
	MOVQ    outStride+40(FP), R8
	SHLQ    $2, R8
	MOVQ    nt+48(FP), CX
	XORQ    BX, BX

q8vstore:
	MOVL 0(SP)(BX*4), AX
	MOVL AX, 0(DX)
	ADDQ R8, DX
	INCQ BX
	CMPQ BX, CX
	JLT  q8vstore
	VZEROUPPER
	RET
