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
	// The next four rows, as in gemmQ4_0Vx4x8.
	PREFETCHT0 0(SI)(R8*4)
	PREFETCHT0 0(R9)(R8*4)
	LEAQ       (SI)(R8*2), R10
	LEAQ       (R9)(R8*2), R11
	PREFETCHT0 0(R10)(R8*4)
	PREFETCHT0 0(R11)(R8*4)
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

// Q4_K against groups of 16 tokens of Q8_K activations, 4416 bytes a
// super-block: for sub-block j (32 weights) and 4-byte lane m a 64-byte slot
// at 64·(8j+m) with every token's a[32j+4m : 32j+4m+4]; the 16 dy as
// float32 at 4096; at 4160 + 64i every token's pair (P(2i), P(2i+1)) as two
// int16, P(j) the sum of sub-block j's 32 activations.
//
// vecDotQ4_K's arithmetic per output: lane m of the super-block's int32 sums
// is Σ_j s_j·(Σ of the 4 products of lane m in sub-block j), which a
// VPMADDUBSW (the products in pairs, int16) and a VPDPWSSD by (s_j, s_j)
// form exactly; it becomes a float and adds into accumulator m with one
// fused multiply-add by d·dy. The min terms, l_i = m(2i)·P(2i) +
// m(2i+1)·P(2i+1), go into 4 accumulators with one fused multiply-add by
// -(dmin·dy) each. At the end hsum8 of the 8 plus hsum4 of the 4.
//
// Registers: Z0-Z7 the 8 lane accumulators (16 tokens each), Z8-Z15 the
// super-block's int32 sums, Z20-Z23 the min accumulators, Z24 d·dy, Z25
// dmin·dy, Z31 0x0f bytes. The stack holds (s_j, s_j) at 4j and
// (m(2i), m(2i+1)) at 32 + 4i.

// Q4KV_LANE adds lane m of the 32 nibble bytes at wm (sub-blocks 2k and
// 2k+1) against the slots at am0 (2k) and am1 (2k+1) to Zsum, with the
// scales at sm0, sm1. Clobbers Z16-Z18.
#define Q4KV_LANE(wm, am0, am1, sm0, sm1, Zsum) \
	VPBROADCASTD      wm, Z16; \
	VPANDD            Z31, Z16, Z17; \
	VPSRLW            $4, Z16, Z16; \
	VPANDD            Z31, Z16, Z16; \
	VPMADDUBSW        am0, Z17, Z18; \
	VPDPWSSD.BCST     sm0, Z18, Zsum; \
	VPMADDUBSW        am1, Z16, Z18; \
	VPDPWSSD.BCST     sm1, Z18, Zsum

// Q4KV_CHUNK runs nibble chunk k (bytes 16+32k..) over the 8 lanes.
#define Q4KV_CHUNK(wo, ao0, ao1, so0, so1) \
	Q4KV_LANE(wo+0(SI), ao0+0(DI), ao1+0(DI), so0(SP), so1(SP), Z8); \
	Q4KV_LANE(wo+4(SI), ao0+64(DI), ao1+64(DI), so0(SP), so1(SP), Z9); \
	Q4KV_LANE(wo+8(SI), ao0+128(DI), ao1+128(DI), so0(SP), so1(SP), Z10); \
	Q4KV_LANE(wo+12(SI), ao0+192(DI), ao1+192(DI), so0(SP), so1(SP), Z11); \
	Q4KV_LANE(wo+16(SI), ao0+256(DI), ao1+256(DI), so0(SP), so1(SP), Z12); \
	Q4KV_LANE(wo+20(SI), ao0+320(DI), ao1+320(DI), so0(SP), so1(SP), Z13); \
	Q4KV_LANE(wo+24(SI), ao0+384(DI), ao1+384(DI), so0(SP), so1(SP), Z14); \
	Q4KV_LANE(wo+28(SI), ao0+448(DI), ao1+448(DI), so0(SP), so1(SP), Z15)

// Q4KV_MIN adds the min term i to Zacc; clobbers Z16, Z17.
#define Q4KV_MIN(am, sm, Zacc) \
	VMOVDQU32      am, Z17; \
	VPXORD         Z16, Z16, Z16; \
	VPDPWSSD.BCST  sm, Z17, Z16; \
	VCVTDQ2PS      Z16, Z16; \
	VFNMADD231PS   Z16, Z25, Zacc

// func gemmQ4_KVx1x16(nb int, w *byte, wStride int, a *byte, out *float32, outStride int, nt int)
//
// One row (w) by the group of 16 tokens at a: out[t·outStride] for the
// first nt tokens.
TEXT ·gemmQ4_KVx1x16(SB), NOSPLIT, $128-56
	MOVL         $0x0f0f0f0f, AX
	VPBROADCASTD AX, Z31
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
	VPXORD       Z20, Z20, Z20
	VPXORD       Z21, Z21, Z21
	VPXORD       Z22, Z22, Z22
	VPXORD       Z23, Z23, Z23

q4kvblock:
	// The 6-bit scales and mins, as vecDotQ4_KAVX2 unpacks them: R8 the 8
	// scale bytes, R9 the 8 min bytes.
	MOVL 4(SI), AX
	MOVL 8(SI), BX
	MOVL 12(SI), DX
	MOVL AX, R8
	ANDL $0x3f3f3f3f, R8
	MOVL BX, R9
	ANDL $0x3f3f3f3f, R9
	MOVL DX, R10
	ANDL $0x0f0f0f0f, R10
	SHRL $6, AX
	ANDL $0x03030303, AX
	SHLL $4, AX
	ORL  AX, R10
	SHRL $4, DX
	ANDL $0x0f0f0f0f, DX
	SHRL $6, BX
	ANDL $0x03030303, BX
	SHLL $4, BX
	ORL  BX, DX
	SHLQ $32, R10
	ORQ  R10, R8
	SHLQ $32, DX
	ORQ  DX, R9

	// (s_j, s_j) words at 4j(SP); (m(2i), m(2i+1)) at 32+4i(SP).
	VMOVQ       R8, X16
	VPMOVZXBW   X16, X16
	VPUNPCKLWD  X16, X16, X17
	VPUNPCKHWD  X16, X16, X18
	VMOVDQU32   X17, 0(SP)
	VMOVDQU32   X18, 16(SP)
	VMOVQ       R9, X16
	VPMOVZXBW   X16, X16
	VMOVDQU32   X16, 32(SP)

	// d·dy and dmin·dy for the 16 tokens.
	VPBROADCASTW 0(SI), Y24
	VCVTPH2PS    Y24, Z24
	VMULPS       4096(DI), Z24, Z24
	VPBROADCASTW 2(SI), Y25
	VCVTPH2PS    Y25, Z25
	VMULPS       4096(DI), Z25, Z25

	VPXORD Z8, Z8, Z8
	VPXORD Z9, Z9, Z9
	VPXORD Z10, Z10, Z10
	VPXORD Z11, Z11, Z11
	VPXORD Z12, Z12, Z12
	VPXORD Z13, Z13, Z13
	VPXORD Z14, Z14, Z14
	VPXORD Z15, Z15, Z15
	Q4KV_CHUNK(16, 0, 512, 0, 4)
	Q4KV_CHUNK(48, 1024, 1536, 8, 12)
	Q4KV_CHUNK(80, 2048, 2560, 16, 20)
	Q4KV_CHUNK(112, 3072, 3584, 24, 28)

	VCVTDQ2PS   Z8, Z8
	VFMADD231PS Z8, Z24, Z0
	VCVTDQ2PS   Z9, Z9
	VFMADD231PS Z9, Z24, Z1
	VCVTDQ2PS   Z10, Z10
	VFMADD231PS Z10, Z24, Z2
	VCVTDQ2PS   Z11, Z11
	VFMADD231PS Z11, Z24, Z3
	VCVTDQ2PS   Z12, Z12
	VFMADD231PS Z12, Z24, Z4
	VCVTDQ2PS   Z13, Z13
	VFMADD231PS Z13, Z24, Z5
	VCVTDQ2PS   Z14, Z14
	VFMADD231PS Z14, Z24, Z6
	VCVTDQ2PS   Z15, Z15
	VFMADD231PS Z15, Z24, Z7

	Q4KV_MIN(4160(DI), 32(SP), Z20)
	Q4KV_MIN(4224(DI), 36(SP), Z21)
	Q4KV_MIN(4288(DI), 40(SP), Z22)
	Q4KV_MIN(4352(DI), 44(SP), Z23)

	ADDQ $144, SI
	ADDQ $4416, DI
	DECQ CX
	JNZ  q4kvblock

	// hsum8(lanes) + hsum4(mins), token by token.
	VADDPS  Z4, Z0, Z0
	VADDPS  Z5, Z1, Z1
	VADDPS  Z6, Z2, Z2
	VADDPS  Z7, Z3, Z3
	VADDPS  Z2, Z0, Z0
	VADDPS  Z3, Z1, Z1
	VADDPS  Z1, Z0, Z0
	VADDPS  Z22, Z20, Z20
	VADDPS  Z23, Z21, Z21
	VADDPS  Z21, Z20, Z20
	VADDPS  Z20, Z0, Z0
	VMOVUPS Z0, 64(SP)
	MOVQ    out+32(FP), DX
	MOVQ    outStride+40(FP), R8
	SHLQ    $2, R8
	MOVQ    nt+48(FP), CX
	XORQ    BX, BX

q4kvstore:
	MOVL 64(SP)(BX*4), AX
	MOVL AX, 0(DX)
	ADDQ R8, DX
	INCQ BX
	CMPQ BX, CX
	JLT  q4kvstore
	VZEROUPPER
	RET

// Q6_K against the same groups as Q4_K (the min pairs unused).
//
// vecDotQ6_K's arithmetic per output: lane m of the super-block's int32
// sums is Σ_r sc·(Σ of the 4 products (q-32)·a of lane m in run r), sc the
// run's first scale for lanes 0-3 and its second for lanes 4-7. The 6-bit
// quants are unpacked once per super-block to the stack (run r at 32r); a
// VPMADDUBSW of q by a less one of 32 by a gives the (q-32)·a pairs in
// int16, a VPDPWSSD by (sc, sc) adds them to the lane exactly; then one
// fused multiply-add by d·dy per lane, and hsum8 at the end.
//
// Registers: Z0-Z7 the lane accumulators, Z8-Z15 the super-block's sums,
// Z24 d·dy, Z28 0x0f bytes, Z29 0x30 bytes, Z30 0x20 bytes. The stack holds
// the unpacked quants at 0-255 and the (sc_i, sc_i) pairs at 256 + 4i.

// Q6KV_HALF unpacks 128 quants (ql at lq, qh at hq) to runs at r0(SP)..
#define Q6KV_HALF(lq, hq, r0, r1, r2, r3) \
	VMOVDQU32 lq, Y16; \
	VMOVDQU32 32+lq, Y17; \
	VMOVDQU32 hq, Y18; \
	VPANDD    Y28, Y16, Y19; \
	VPSLLW    $4, Y18, Y20; \
	VPANDD    Y29, Y20, Y20; \
	VPORD     Y20, Y19, Y19; \
	VMOVDQU32 Y19, r0(SP); \
	VPANDD    Y28, Y17, Y19; \
	VPSLLW    $2, Y18, Y20; \
	VPANDD    Y29, Y20, Y20; \
	VPORD     Y20, Y19, Y19; \
	VMOVDQU32 Y19, r1(SP); \
	VPSRLW    $4, Y16, Y19; \
	VPANDD    Y28, Y19, Y19; \
	VPANDD    Y29, Y18, Y20; \
	VPORD     Y20, Y19, Y19; \
	VMOVDQU32 Y19, r2(SP); \
	VPSRLW    $4, Y17, Y19; \
	VPANDD    Y28, Y19, Y19; \
	VPSRLW    $2, Y18, Y20; \
	VPANDD    Y29, Y20, Y20; \
	VPORD     Y20, Y19, Y19; \
	VMOVDQU32 Y19, r3(SP)

// Q6KV_LANE adds lane m of run r (quants at qm, activations at am, scale
// pair at sm) to Zsum; clobbers Z16-Z18.
#define Q6KV_LANE(qm, am, sm, Zsum) \
	VPBROADCASTD  qm, Z16; \
	VPMADDUBSW    am, Z16, Z17; \
	VPMADDUBSW    am, Z30, Z18; \
	VPSUBW        Z18, Z17, Z17; \
	VPDPWSSD.BCST sm, Z17, Zsum

// Q6KV_RUN runs the 8 lanes of run r.
#define Q6KV_RUN(qo, ao, s0, s1) \
	Q6KV_LANE(qo+0(SP), ao+0(DI), s0(SP), Z8); \
	Q6KV_LANE(qo+4(SP), ao+64(DI), s0(SP), Z9); \
	Q6KV_LANE(qo+8(SP), ao+128(DI), s0(SP), Z10); \
	Q6KV_LANE(qo+12(SP), ao+192(DI), s0(SP), Z11); \
	Q6KV_LANE(qo+16(SP), ao+256(DI), s1(SP), Z12); \
	Q6KV_LANE(qo+20(SP), ao+320(DI), s1(SP), Z13); \
	Q6KV_LANE(qo+24(SP), ao+384(DI), s1(SP), Z14); \
	Q6KV_LANE(qo+28(SP), ao+448(DI), s1(SP), Z15)

// func gemmQ6_KVx1x16(nb int, w *byte, wStride int, a *byte, out *float32, outStride int, nt int)
//
// One row (w) by the group of 16 tokens at a: out[t·outStride] for the
// first nt tokens.
TEXT ·gemmQ6_KVx1x16(SB), NOSPLIT, $384-56
	MOVL         $0x0f0f0f0f, AX
	VPBROADCASTD AX, Z28
	MOVL         $0x30303030, AX
	VPBROADCASTD AX, Z29
	MOVL         $0x20202020, AX
	VPBROADCASTD AX, Z30
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

q6kvblock:
	Q6KV_HALF(0(SI), 128(SI), 0, 32, 64, 96)
	Q6KV_HALF(64(SI), 160(SI), 128, 160, 192, 224)

	// (sc_i, sc_i) as int16 pairs at 256 + 4i.
	VPMOVSXBW   192(SI), X16
	VPUNPCKLWD  X16, X16, X17
	VPUNPCKHWD  X16, X16, X18
	VMOVDQU32   X17, 256(SP)
	VMOVDQU32   X18, 272(SP)
	VPMOVSXBW   200(SI), X16
	VPUNPCKLWD  X16, X16, X17
	VPUNPCKHWD  X16, X16, X18
	VMOVDQU32   X17, 288(SP)
	VMOVDQU32   X18, 304(SP)

	VPBROADCASTW 208(SI), Y24
	VCVTPH2PS    Y24, Z24
	VMULPS       4096(DI), Z24, Z24

	VPXORD Z8, Z8, Z8
	VPXORD Z9, Z9, Z9
	VPXORD Z10, Z10, Z10
	VPXORD Z11, Z11, Z11
	VPXORD Z12, Z12, Z12
	VPXORD Z13, Z13, Z13
	VPXORD Z14, Z14, Z14
	VPXORD Z15, Z15, Z15
	Q6KV_RUN(0, 0, 256, 260)
	Q6KV_RUN(32, 512, 264, 268)
	Q6KV_RUN(64, 1024, 272, 276)
	Q6KV_RUN(96, 1536, 280, 284)
	Q6KV_RUN(128, 2048, 288, 292)
	Q6KV_RUN(160, 2560, 296, 300)
	Q6KV_RUN(192, 3072, 304, 308)
	Q6KV_RUN(224, 3584, 312, 316)

	VCVTDQ2PS   Z8, Z8
	VFMADD231PS Z8, Z24, Z0
	VCVTDQ2PS   Z9, Z9
	VFMADD231PS Z9, Z24, Z1
	VCVTDQ2PS   Z10, Z10
	VFMADD231PS Z10, Z24, Z2
	VCVTDQ2PS   Z11, Z11
	VFMADD231PS Z11, Z24, Z3
	VCVTDQ2PS   Z12, Z12
	VFMADD231PS Z12, Z24, Z4
	VCVTDQ2PS   Z13, Z13
	VFMADD231PS Z13, Z24, Z5
	VCVTDQ2PS   Z14, Z14
	VFMADD231PS Z14, Z24, Z6
	VCVTDQ2PS   Z15, Z15
	VFMADD231PS Z15, Z24, Z7

	ADDQ $210, SI
	ADDQ $4416, DI
	DECQ CX
	JNZ  q6kvblock

	VADDPS  Z4, Z0, Z0
	VADDPS  Z5, Z1, Z1
	VADDPS  Z6, Z2, Z2
	VADDPS  Z7, Z3, Z3
	VADDPS  Z2, Z0, Z0
	VADDPS  Z3, Z1, Z1
	VADDPS  Z1, Z0, Z0
	VMOVUPS Z0, 320(SP)
	MOVQ    out+32(FP), DX
	MOVQ    outStride+40(FP), R8
	SHLQ    $2, R8
	MOVQ    nt+48(FP), CX
	XORQ    BX, BX

q6kvstore:
	MOVL 320(SP)(BX*4), AX
	MOVL AX, 0(DX)
	ADDQ R8, DX
	INCQ BX
	CMPQ BX, CX
	JLT  q6kvstore
	VZEROUPPER
	RET
