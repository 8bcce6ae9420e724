//go:build amd64 && !purego

#include "textflag.h"

// AVX-512 VNNI token-group kernels for groups of 8 tokens (gemm.go): the
// narrow twins of the 16-token kernels of gemm_vnni_amd64.s, for MatMul of 2
// to 8 tokens (batched decode), where a 16-token group would be half zero
// padding. The integer products run on 512-bit registers holding 8 tokens
// by 8 bytes (where AVX-512 runs full width, a 256-bit instruction costs as
// much as a 512-bit one, so 8 tokens by 4 bytes would save nothing); each
// output gets exactly the integer and float work of its 16-token twin (and
// so of the format's VecDot), so every output rounds as VecDot does.

// KW_DY sets Z26 to the 8 token scales (float32) at am, each twice: dwords
// 2t and 2t+1 of Z26 = scale t.
#define KW_DY(am) \
	VPMOVZXDQ am, Z26; \
	VMOVSLDUP Z26, Z26

// KW_PAIRSUM sets the 8 floats of Yx to the sums of dwords 2t and 2t+1 of
// Zx (t = 0..7); clobbers Zt.
#define KW_PAIRSUM(Zx, Yx, Zt) \
	VMOVSHDUP Zx, Zt; \
	VADDPS    Zt, Zx, Zx; \
	VPMOVQD   Zx, Yx

// Q4_0 on the AVX2 kernel's groups (q4Groups8, gemm_q4_0_amd64.s): 320
// bytes a block, four 64-byte slots with every token's a[0:8], a[16:24],
// a[8:16], a[24:32], each slot two 32-byte halves of tokens (0, 1, 4, 5) and
// (2, 3, 6, 7) by 8 bytes; then the 8 da as float32 at 256 and the 8 8·Σa
// as int32 at 288. A VPDPBUSD of 8 broadcast nibble bytes by a whole slot
// gives every token two dword sums; one VPHADDD of the register's two
// halves puts each token's sum in its lane, in token order.

// Q4W_ROW adds one block of the row at rm (d f16, then 16 nibble bytes)
// against the group at DI to Yacc, token t in lane t. Z15 holds 0x0f bytes;
// clobbers Z4, Z5, Z8, Z9 (Y4, Y5 below Y16: VPHADDD has no EVEX form).
#define Q4W_ROW(rm, Yacc) \
	VPXORD        Z4, Z4, Z4; \
	VPBROADCASTQ  2+rm, Z8; \
	VPANDD        Z15, Z8, Z9; \
	VPSRLW        $4, Z8, Z8; \
	VPANDD        Z15, Z8, Z8; \
	VPDPBUSD      0(DI), Z9, Z4; \
	VPDPBUSD      64(DI), Z8, Z4; \
	VPBROADCASTQ  10+rm, Z8; \
	VPANDD        Z15, Z8, Z9; \
	VPSRLW        $4, Z8, Z8; \
	VPANDD        Z15, Z8, Z8; \
	VPDPBUSD      128(DI), Z9, Z4; \
	VPDPBUSD      192(DI), Z8, Z4; \
	VEXTRACTI64X4 $1, Z4, Y5; \
	VPHADDD       Y5, Y4, Y4; \
	VPSUBD        288(DI), Y4, Y4; \
	VCVTDQ2PS     Y4, Y4; \
	VPBROADCASTW  rm, X9; \
	VCVTPH2PS     X9, Y9; \
	VMULPS        256(DI), Y9, Y9; \
	VFMADD231PS   Y4, Y9, Yacc

// func gemmQ4_0Vx4x8(nb int, w *byte, wStride int, a *byte, out *float32, outStride int, nt int)
//
// 4 rows (w + r·wStride) by the group of 8 tokens at a: out[t·outStride +
// r] for the first nt tokens.
TEXT ·gemmQ4_0Vx4x8(SB), NOSPLIT, $128-56
	MOVL         $0x0f0f0f0f, AX
	VPBROADCASTD AX, Z15
	MOVQ         nb+0(FP), CX
	MOVQ         w+8(FP), SI
	MOVQ         wStride+16(FP), R8
	LEAQ         (SI)(R8*1), R9
	MOVQ         a+24(FP), DI
	VXORPS       Y0, Y0, Y0
	VXORPS       Y1, Y1, Y1
	VXORPS       Y2, Y2, Y2
	VXORPS       Y3, Y3, Y3

q4v8block:
	// The weights stream from memory too slowly for the hardware
	// prefetchers to run ahead of four interleaved rows: fetch the same
	// place in the next four rows now.
	PREFETCHT0 0(SI)(R8*4)
	PREFETCHT0 0(R9)(R8*4)
	LEAQ       (SI)(R8*2), R10
	LEAQ       (R9)(R8*2), R11
	PREFETCHT0 0(R10)(R8*4)
	PREFETCHT0 0(R11)(R8*4)
	Q4W_ROW(0(SI), Y0)
	Q4W_ROW(0(R9), Y1)
	Q4W_ROW(0(SI)(R8*2), Y2)
	Q4W_ROW(0(R9)(R8*2), Y3)
	ADDQ $18, SI
	ADDQ $18, R9
	ADDQ $320, DI
	DECQ CX
	JNZ  q4v8block

	VMOVUPS Y0, 0(SP)
	VMOVUPS Y1, 32(SP)
	VMOVUPS Y2, 64(SP)
	VMOVUPS Y3, 96(SP)
	MOVQ    out+32(FP), DX
	MOVQ    outStride+40(FP), R8
	SHLQ    $2, R8
	MOVQ    nt+48(FP), CX
	XORQ    BX, BX

q4v8store:
	MOVL 0(SP)(BX*4), AX
	MOVL AX, 0(DX)
	MOVL 32(SP)(BX*4), AX
	MOVL AX, 4(DX)
	MOVL 64(SP)(BX*4), AX
	MOVL AX, 8(DX)
	MOVL 96(SP)(BX*4), AX
	MOVL AX, 12(DX)
	ADDQ R8, DX
	INCQ BX
	CMPQ BX, CX
	JLT  q4v8store
	VZEROUPPER
	RET

// Q8_0 on 8-token groups for 512-bit registers (q8Pairs8): 288 bytes a
// block, for each lane pair k = 0..3 (weight bytes 8k..8k+7) a 64-byte slot
// with every token's a[8k:8k+8] biased by 128, token t at 8t; then the 8 da
// as float32 at 256. Lane m of token t sits in dword 2t + (m&1) of lane
// pair m/2. The accumulator of a pair starts at minus the bias, 128·(the
// lane's 4 weights' sum), so that after the VPDPBUSD it holds exactly
// vecDotQ8_0's lane sums; the float work and the final hsum8 are
// gemmQ8_0Vx1x16's.

// Q8W_PAIR adds lane pair k of the block (weights at wm, activations at am,
// the negated biases at cm) scaled by Z20 to Zacc; clobbers Z16-Z18.
#define Q8W_PAIR(wm, am, cm, Zacc) \
	VPBROADCASTQ cm, Z16; \
	VMOVDQU32    am, Z17; \
	VPBROADCASTQ wm, Z18; \
	VPDPBUSD     Z18, Z17, Z16; \
	VCVTDQ2PS    Z16, Z16; \
	VFMADD231PS  Z16, Z20, Zacc

// func gemmQ8_0Vx1x8(nb int, w *byte, wStride int, a *byte, out *float32, outStride int, nt int)
//
// One row (w) by the group of 8 tokens at a: out[t·outStride] for the
// first nt tokens.
TEXT ·gemmQ8_0Vx1x8(SB), NOSPLIT, $64-56
	MOVL         $0x80808080, AX
	VPBROADCASTD AX, Y30
	MOVQ         nb+0(FP), CX
	MOVQ         w+8(FP), SI
	MOVQ         a+24(FP), DI
	MOVQ         wStride+16(FP), R12
	VPXORD       Z0, Z0, Z0
	VPXORD       Z1, Z1, Z1
	VPXORD       Z2, Z2, Z2
	VPXORD       Z3, Z3, Z3
	VPXORD       Y21, Y21, Y21

q8wblock:
	// The next row's block (rows run one after the other).
	PREFETCHT0 0(SI)(R12*1)
	// Minus the bias of each lane m, -128·Σ of its 4 weights, at 4m(SP).
	VMOVDQU32    2(SI), Y18
	VPXORD       Y19, Y19, Y19
	VPDPBUSD     Y18, Y30, Y19
	VPSUBD       Y19, Y21, Y19
	VMOVDQU32    Y19, 0(SP)
	KW_DY(256(DI))
	VPBROADCASTW 0(SI), Y20
	VCVTPH2PS    Y20, Z20
	VMULPS       Z26, Z20, Z20
	Q8W_PAIR(2(SI), 0(DI), 0(SP), Z0)
	Q8W_PAIR(10(SI), 64(DI), 8(SP), Z1)
	Q8W_PAIR(18(SI), 128(DI), 16(SP), Z2)
	Q8W_PAIR(26(SI), 192(DI), 24(SP), Z3)
	ADDQ $34, SI
	ADDQ $288, DI
	DECQ CX
	JNZ  q8wblock

	// hsum8 of every token: (l0+l4 + l2+l6) + (l1+l5 + l3+l7).
	VADDPS  Z2, Z0, Z0
	VADDPS  Z3, Z1, Z1
	VADDPS  Z1, Z0, Z0
	KW_PAIRSUM(Z0, Y0, Z1)
	VMOVUPS Y0, 32(SP)
	MOVQ    out+32(FP), DX
	MOVQ    outStride+40(FP), R8
	SHLQ    $2, R8
	MOVQ    nt+48(FP), CX
	XORQ    BX, BX

q8wstore:
	MOVL 32(SP)(BX*4), AX
	MOVL AX, 0(DX)
	ADDQ R8, DX
	INCQ BX
	CMPQ BX, CX
	JLT  q8wstore
	VZEROUPPER
	RET

// Q4_K and Q6_K against groups of 8 tokens of Q8_K activations
// (q4kGroups8), 2208 bytes a super-block, a register holding the 8 tokens
// by a pair of 4-byte lanes (m, m+1), so that a weight qword broadcast meets
// 8 activation bytes of each token. For sub-block j and lane pair k = 0..3
// a 64-byte slot at 64·(4j+k) with every token's a[32j+8k : 32j+8k+8],
// token t at 8t; the 8 dy as float32 at 2048; at 2080 + 64h every token's
// P(4h), ..., P(4h+3) as int16 (P(j) the sum of sub-block j's 32
// activations), token t at 8t. The Q6_K groups (q6kGroups8, 4256 bytes)
// then hold at 2208 + 64·(4j+k) the slot of lane pair k of sub-block j as
// int16 pairs 32·(a[2i] + a[2i+1]), token t at 8t: the VPMADDUBSW by 0x20
// bytes that each row would otherwise repeat.
//
// The integer and float work per output is gemmQ4_KVx1x16's and
// gemmQ6_KVx1x16's: lane m's int32 sums and its float accumulator sit in
// dword 2t + (m&1) of accumulator m/2 (and min term i in dword 2t + (i&1)
// of min accumulator i/2), and the final hsum8 and hsum4 add the same pairs
// in the same order, the last add being dword 2t plus dword 2t+1.
//
// Registers: Z0-Z3 the lane-pair accumulators, Z8-Z11 the super-block's
// int32 sums, Z24 d·dy (twice per token), Z26 dy (twice per token).

// Q4KW_LANES adds one lane pair of the 32 nibble bytes of chunk k (its 8
// bytes at wm; sub-blocks 2k and 2k+1) against the slots at am0 (2k) and
// am1 (2k+1) to Zsum, with the scales at sm0, sm1. Clobbers Z16-Z18.
#define Q4KW_LANES(wm, am0, am1, sm0, sm1, Zsum) \
	VPBROADCASTQ  wm, Z16; \
	VPANDD        Z31, Z16, Z17; \
	VPSRLW        $4, Z16, Z16; \
	VPANDD        Z31, Z16, Z16; \
	VPMADDUBSW    am0, Z17, Z18; \
	VPDPWSSD.BCST sm0, Z18, Zsum; \
	VPMADDUBSW    am1, Z16, Z18; \
	VPDPWSSD.BCST sm1, Z18, Zsum

// Q4KW_CHUNK runs nibble chunk k (bytes 16+32k..) over the 4 lane pairs.
#define Q4KW_CHUNK(wo, ao0, ao1, so0, so1) \
	Q4KW_LANES(wo+0(SI), ao0+0(DI), ao1+0(DI), so0(SP), so1(SP), Z8); \
	Q4KW_LANES(wo+8(SI), ao0+64(DI), ao1+64(DI), so0(SP), so1(SP), Z9); \
	Q4KW_LANES(wo+16(SI), ao0+128(DI), ao1+128(DI), so0(SP), so1(SP), Z10); \
	Q4KW_LANES(wo+24(SI), ao0+192(DI), ao1+192(DI), so0(SP), so1(SP), Z11)

// Q4KW_MINS adds min terms 2h and 2h+1 (the P slot at am, the 4 mins from
// 2h on at sm) to Zacc; clobbers Z16, Z18.
#define Q4KW_MINS(am, sm, Zacc) \
	VPBROADCASTQ sm, Z18; \
	VPXORD       Z16, Z16, Z16; \
	VPDPWSSD     am, Z18, Z16; \
	VCVTDQ2PS    Z16, Z16; \
	VFNMADD231PS Z16, Z25, Zacc

// func gemmQ4_KVx1x8(nb int, w *byte, wStride int, a *byte, out *float32, outStride int, nt int)
//
// One row (w) by the group of 8 tokens at a: out[t·outStride] for the
// first nt tokens.
TEXT ·gemmQ4_KVx1x8(SB), NOSPLIT, $128-56
	MOVL         $0x0f0f0f0f, AX
	VPBROADCASTD AX, Z31
	MOVQ         nb+0(FP), CX
	MOVQ         w+8(FP), SI
	MOVQ         a+24(FP), DI
	VPXORD       Z0, Z0, Z0
	VPXORD       Z1, Z1, Z1
	VPXORD       Z2, Z2, Z2
	VPXORD       Z3, Z3, Z3
	VPXORD       Z20, Z20, Z20
	VPXORD       Z21, Z21, Z21
	MOVQ         wStride+16(FP), R12

q4kwblock:
	// The next row's super-block, as in gemmQ8_0Vx1x8.
	PREFETCHT0 0(SI)(R12*1)
	PREFETCHT0 64(SI)(R12*1)
	PREFETCHT0 128(SI)(R12*1)
	// The 6-bit scales and mins, as gemmQ4_KVx1x16 unpacks them.
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

	// (s_j, s_j) words at 4j(SP); the mins m(i) as words at 32+2i(SP).
	VMOVQ      R8, X16
	VPMOVZXBW  X16, X16
	VPUNPCKLWD X16, X16, X17
	VPUNPCKHWD X16, X16, X18
	VMOVDQU32  X17, 0(SP)
	VMOVDQU32  X18, 16(SP)
	VMOVQ      R9, X16
	VPMOVZXBW  X16, X16
	VMOVDQU32  X16, 32(SP)

	// d·dy and dmin·dy, each twice per token.
	KW_DY(2048(DI))
	VPBROADCASTW 0(SI), Y24
	VCVTPH2PS    Y24, Z24
	VMULPS       Z26, Z24, Z24
	VPBROADCASTW 2(SI), Y25
	VCVTPH2PS    Y25, Z25
	VMULPS       Z26, Z25, Z25

	VPXORD Z8, Z8, Z8
	VPXORD Z9, Z9, Z9
	VPXORD Z10, Z10, Z10
	VPXORD Z11, Z11, Z11
	Q4KW_CHUNK(16, 0, 256, 0, 4)
	Q4KW_CHUNK(48, 512, 768, 8, 12)
	Q4KW_CHUNK(80, 1024, 1280, 16, 20)
	Q4KW_CHUNK(112, 1536, 1792, 24, 28)

	VCVTDQ2PS   Z8, Z8
	VFMADD231PS Z8, Z24, Z0
	VCVTDQ2PS   Z9, Z9
	VFMADD231PS Z9, Z24, Z1
	VCVTDQ2PS   Z10, Z10
	VFMADD231PS Z10, Z24, Z2
	VCVTDQ2PS   Z11, Z11
	VFMADD231PS Z11, Z24, Z3

	Q4KW_MINS(2080(DI), 32(SP), Z20)
	Q4KW_MINS(2144(DI), 40(SP), Z21)

	ADDQ $144, SI
	ADDQ $2208, DI
	DECQ CX
	JNZ  q4kwblock

	// hsum8(lanes) + hsum4(mins), token by token.
	VADDPS Z2, Z0, Z0
	VADDPS Z3, Z1, Z1
	VADDPS Z1, Z0, Z0
	KW_PAIRSUM(Z0, Y0, Z1)
	VADDPS Z21, Z20, Z20
	KW_PAIRSUM(Z20, Y20, Z21)
	VADDPS  Y20, Y0, Y0
	VMOVUPS Y0, 64(SP)
	MOVQ    out+32(FP), DX
	MOVQ    outStride+40(FP), R8
	SHLQ    $2, R8
	MOVQ    nt+48(FP), CX
	XORQ    BX, BX

q4kwstore:
	MOVL 64(SP)(BX*4), AX
	MOVL AX, 0(DX)
	ADDQ R8, DX
	INCQ BX
	CMPQ BX, CX
	JLT  q4kwstore
	VZEROUPPER
	RET

// Q6KW_HALF unpacks 128 quants (ql at lq, qh at hq) to runs at r0(SP)..,
// as Q6KV_HALF does (Y28 0x0f bytes, Y29 0x30 bytes).
#define Q6KW_HALF(lq, hq, r0, r1, r2, r3) \
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

// Q6KW_LANES adds lanes (2k, 2k+1) of run r (quants at qm, activations at
// am, their 32·a pair sums at mm, scale pair at sm) to Zsum: (q-32)·a pairs
// as q·a less 32·a in int16, then a VPDPWSSD by (sc, sc). Clobbers Z16,
// Z17.
#define Q6KW_LANES(qm, am, mm, sm, Zsum) \
	VPBROADCASTQ  qm, Z16; \
	VPMADDUBSW    am, Z16, Z17; \
	VPSUBW        mm, Z17, Z17; \
	VPDPWSSD.BCST sm, Z17, Zsum

// Q6KW_RUN runs the 4 lane pairs of run r: the first scale for lanes 0-3,
// the second for 4-7.
#define Q6KW_RUN(qo, ao, s0, s1) \
	Q6KW_LANES(qo+0(SP), ao+0(DI), ao+2208(DI), s0(SP), Z8); \
	Q6KW_LANES(qo+8(SP), ao+64(DI), ao+2272(DI), s0(SP), Z9); \
	Q6KW_LANES(qo+16(SP), ao+128(DI), ao+2336(DI), s1(SP), Z10); \
	Q6KW_LANES(qo+24(SP), ao+192(DI), ao+2400(DI), s1(SP), Z11)

// func gemmQ6_KVx1x8(nb int, w *byte, wStride int, a *byte, out *float32, outStride int, nt int)
//
// One row (w) by the group of 8 tokens at a: out[t·outStride] for the
// first nt tokens.
TEXT ·gemmQ6_KVx1x8(SB), NOSPLIT, $384-56
	MOVL         $0x0f0f0f0f, AX
	VPBROADCASTD AX, Y28
	MOVL         $0x30303030, AX
	VPBROADCASTD AX, Y29
	MOVQ         nb+0(FP), CX
	MOVQ         w+8(FP), SI
	MOVQ         a+24(FP), DI
	MOVQ         wStride+16(FP), R12
	VPXORD       Z0, Z0, Z0
	VPXORD       Z1, Z1, Z1
	VPXORD       Z2, Z2, Z2
	VPXORD       Z3, Z3, Z3

q6kwblock:
	// The next row's super-block, as in gemmQ8_0Vx1x8.
	PREFETCHT0 0(SI)(R12*1)
	PREFETCHT0 64(SI)(R12*1)
	PREFETCHT0 128(SI)(R12*1)
	PREFETCHT0 192(SI)(R12*1)
	Q6KW_HALF(0(SI), 128(SI), 0, 32, 64, 96)
	Q6KW_HALF(64(SI), 160(SI), 128, 160, 192, 224)

	// (sc_i, sc_i) as int16 pairs at 256 + 4i.
	VPMOVSXBW  192(SI), X16
	VPUNPCKLWD X16, X16, X17
	VPUNPCKHWD X16, X16, X18
	VMOVDQU32  X17, 256(SP)
	VMOVDQU32  X18, 272(SP)
	VPMOVSXBW  200(SI), X16
	VPUNPCKLWD X16, X16, X17
	VPUNPCKHWD X16, X16, X18
	VMOVDQU32  X17, 288(SP)
	VMOVDQU32  X18, 304(SP)

	KW_DY(2048(DI))
	VPBROADCASTW 208(SI), Y24
	VCVTPH2PS    Y24, Z24
	VMULPS       Z26, Z24, Z24

	VPXORD Z8, Z8, Z8
	VPXORD Z9, Z9, Z9
	VPXORD Z10, Z10, Z10
	VPXORD Z11, Z11, Z11
	Q6KW_RUN(0, 0, 256, 260)
	Q6KW_RUN(32, 256, 264, 268)
	Q6KW_RUN(64, 512, 272, 276)
	Q6KW_RUN(96, 768, 280, 284)
	Q6KW_RUN(128, 1024, 288, 292)
	Q6KW_RUN(160, 1280, 296, 300)
	Q6KW_RUN(192, 1536, 304, 308)
	Q6KW_RUN(224, 1792, 312, 316)

	VCVTDQ2PS   Z8, Z8
	VFMADD231PS Z8, Z24, Z0
	VCVTDQ2PS   Z9, Z9
	VFMADD231PS Z9, Z24, Z1
	VCVTDQ2PS   Z10, Z10
	VFMADD231PS Z10, Z24, Z2
	VCVTDQ2PS   Z11, Z11
	VFMADD231PS Z11, Z24, Z3

	ADDQ $210, SI
	ADDQ $4256, DI
	DECQ CX
	JNZ  q6kwblock

	// hsum8 token by token: (l0+l4 + l2+l6) + (l1+l5 + l3+l7).
	VADDPS  Z2, Z0, Z0
	VADDPS  Z3, Z1, Z1
	VADDPS  Z1, Z0, Z0
	KW_PAIRSUM(Z0, Y0, Z1)
	VMOVUPS Y0, 320(SP)
	MOVQ    out+32(FP), DX
	MOVQ    outStride+40(FP), R8
	SHLQ    $2, R8
	MOVQ    nt+48(FP), CX
	XORQ    BX, BX

q6kwstore:
	MOVL 320(SP)(BX*4), AX
	MOVL AX, 0(DX)
	ADDQ R8, DX
	INCQ BX
	CMPQ BX, CX
	JLT  q6kwstore
	VZEROUPPER
	RET
