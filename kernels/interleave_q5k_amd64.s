//go:build amd64 && !purego

#include "textflag.h"

// The mat-vec of Q5_K rows packed 8 at a time (interleave.go) against a
// Q8_K row: the Q4_K kernel (interleave_amd64.s) with each nibble given its
// fifth bit from the high-bit bytes of its chunk (1184+32m), and the min
// terms summed as vecDotQ5_K sums them: per super-block one integer sum of
// the 4 min products, one VFMADD231PS into the row's min lane (at 256(SP)).
// Lane r of every float register is row r of the group; each output rounds
// as vecDotQ5_K.

#define PACK5_AHEAD 2048

// PACK5_M adds lane m of sub-blocks 2k (low nibbles, scales Y8) and 2k+1
// (high nibbles, scales Y9) to Yi: the nibbles at noff, their high bits at
// hoff, shifted to bit 4 by LOSH $losh (low) and HISH $hish (high).
// Y14 holds 0x10 bytes, Y15 0x0f bytes.
#define PACK5_M(noff, hoff, aoff, LOSH, losh, HISH, hish, Yi) \
	VMOVDQU      noff(SI), Y10; \
	VPSRLW       $4, Y10, Y11; \
	VPAND        Y15, Y10, Y10; \
	VPAND        Y15, Y11, Y11; \
	VMOVDQU      hoff(SI), Y12; \
	LOSH         $losh, Y12, Y13; \
	VPAND        Y14, Y13, Y13; \
	VPOR         Y13, Y10, Y10; \
	HISH         $hish, Y12, Y12; \
	VPAND        Y14, Y12, Y12; \
	VPOR         Y12, Y11, Y11; \
	VPBROADCASTD aoff(DI), Y12; \
	VPMADDUBSW   Y12, Y10, Y10; \
	VPMADDWD     Y8, Y10, Y10; \
	VPADDD       Y10, Yi, Yi; \
	VPBROADCASTD 32+aoff(DI), Y13; \
	VPMADDUBSW   Y13, Y11, Y11; \
	VPMADDWD     Y9, Y11, Y11; \
	VPADDD       Y11, Yi, Yi

// PACK5_K adds sub-blocks 2k and 2k+1 (nibbles at 160+256k, activations at
// 4+64k; scales at 32+16k and 40+16k, widened to word pairs) to Y0-Y7.
#define PACK5_K(k, LOSH, losh, HISH, hish) \
	PREFETCHT0 PACK5_AHEAD+160+256*k(SI); \
	PREFETCHT0 PACK5_AHEAD+224+256*k(SI); \
	PREFETCHT0 PACK5_AHEAD+288+256*k(SI); \
	PREFETCHT0 PACK5_AHEAD+352+256*k(SI); \
	VPMOVZXBD 32+16*k(SI), Y8; \
	VPSLLD    $16, Y8, Y10; \
	VPOR      Y10, Y8, Y8; \
	VPMOVZXBD 40+16*k(SI), Y9; \
	VPSLLD    $16, Y9, Y10; \
	VPOR      Y10, Y9, Y9; \
	PACK5_M(160+256*k, 1184, 4+64*k, LOSH, losh, HISH, hish, Y0); \
	PACK5_M(192+256*k, 1216, 8+64*k, LOSH, losh, HISH, hish, Y1); \
	PACK5_M(224+256*k, 1248, 12+64*k, LOSH, losh, HISH, hish, Y2); \
	PACK5_M(256+256*k, 1280, 16+64*k, LOSH, losh, HISH, hish, Y3); \
	PACK5_M(288+256*k, 1312, 20+64*k, LOSH, losh, HISH, hish, Y4); \
	PACK5_M(320+256*k, 1344, 24+64*k, LOSH, losh, HISH, hish, Y5); \
	PACK5_M(352+256*k, 1376, 28+64*k, LOSH, losh, HISH, hish, Y6); \
	PACK5_M(384+256*k, 1408, 32+64*k, LOSH, losh, HISH, hish, Y7)

// PACK5_ACC adds d·float(Yi) to the float lane m on the stack (Y14: d).
#define PACK5_ACC(m, Yi) \
	VCVTDQ2PS   Yi, Yi; \
	VMOVUPS     (32*m)(SP), Y10; \
	VFMADD231PS Y14, Yi, Y10; \
	VMOVUPS     Y10, (32*m)(SP)

// PACK5_MIN adds m2i·P2i + m2i+1·P2i+1 to Y0.
#define PACK5_MIN(i) \
	VPMOVZXBW    96+16*i(SI), Y10; \
	VPBROADCASTD (384+4*(i%2)+16*(i/2))(SP), Y11; \
	VPMADDWD     Y11, Y10, Y10; \
	VPADDD       Y10, Y0, Y0

// func gemvQ5_KP8AVX2(nb int, w, a *byte, out *float32, groups int)
//
// out[8g+r] for the groups g < groups of 8 packed Q5_K rows at w (nb
// super-blocks of 1440 bytes each) against the Q8_K row at a; nb ≥ 1,
// groups ≥ 1.
TEXT ·gemvQ5_KP8AVX2(SB), NOSPLIT, $416-40
	MOVQ         nb+0(FP), CX
	MOVQ         w+8(FP), SI
	MOVQ         out+24(FP), DX
	MOVQ         groups+32(FP), R9
	MOVL         $0x0f0f0f0f, AX
	VMOVD        AX, X15
	VPBROADCASTD X15, Y15

k5group:
	VXORPS  Y10, Y10, Y10
	VMOVUPS Y10, 0(SP)
	VMOVUPS Y10, 32(SP)
	VMOVUPS Y10, 64(SP)
	VMOVUPS Y10, 96(SP)
	VMOVUPS Y10, 128(SP)
	VMOVUPS Y10, 160(SP)
	VMOVUPS Y10, 192(SP)
	VMOVUPS Y10, 224(SP)
	VMOVUPS Y10, 256(SP)
	MOVQ    a+16(FP), DI
	MOVQ    CX, BX

k5block:
	PREFETCHT0 PACK5_AHEAD(SI)
	PREFETCHT0 PACK5_AHEAD+64(SI)
	PREFETCHT0 PACK5_AHEAD+128(SI)
	PREFETCHT0 PACK5_AHEAD+192(SI)
	PREFETCHT0 PACK5_AHEAD+1184(SI)
	PREFETCHT0 PACK5_AHEAD+1248(SI)
	PREFETCHT0 PACK5_AHEAD+1312(SI)
	PREFETCHT0 PACK5_AHEAD+1376(SI)

	// The pairs of block-sum pairs: P0..P3 at 384, P4..P7 at 400 (int16).
	VMOVDQU   260(DI), Y10
	VPCMPEQW  Y11, Y11, Y11
	VPSRLW    $15, Y11, Y11
	VPMADDWD  Y11, Y10, Y10
	VPACKSSDW Y10, Y10, Y10
	VMOVDQU   Y10, 384(SP)

	MOVL         $0x10101010, AX
	VMOVD        AX, X14
	VPBROADCASTD X14, Y14
	VPXOR Y0, Y0, Y0
	VPXOR Y1, Y1, Y1
	VPXOR Y2, Y2, Y2
	VPXOR Y3, Y3, Y3
	VPXOR Y4, Y4, Y4
	VPXOR Y5, Y5, Y5
	VPXOR Y6, Y6, Y6
	VPXOR Y7, Y7, Y7
	PACK5_K(0, VPSLLW, 4, VPSLLW, 3)
	PACK5_K(1, VPSLLW, 2, VPSLLW, 1)
	PACK5_K(2, VPSLLW, 0, VPSRLW, 1)
	PACK5_K(3, VPSRLW, 2, VPSRLW, 3)

	// d·dy per row.
	VCVTPH2PS    0(SI), Y14
	VBROADCASTSS 0(DI), Y13
	VMULPS       Y13, Y14, Y14
	PACK5_ACC(0, Y0)
	PACK5_ACC(1, Y1)
	PACK5_ACC(2, Y2)
	PACK5_ACC(3, Y3)
	PACK5_ACC(4, Y4)
	PACK5_ACC(5, Y5)
	PACK5_ACC(6, Y6)
	PACK5_ACC(7, Y7)

	// The min term: -dy·dmin per row times the sum of the 4 min products.
	VPXOR Y0, Y0, Y0
	PACK5_MIN(0)
	PACK5_MIN(1)
	PACK5_MIN(2)
	PACK5_MIN(3)
	VCVTDQ2PS    Y0, Y0
	VCVTPH2PS    16(SI), Y14
	MOVL         $0x80000000, AX
	VMOVD        AX, X12
	VPBROADCASTD X12, Y12
	VXORPS       Y12, Y13, Y13
	VMULPS       Y13, Y14, Y14
	VMOVUPS      256(SP), Y10
	VFMADD231PS  Y14, Y0, Y10
	VMOVUPS      Y10, 256(SP)

	ADDQ $1440, SI
	ADDQ $292, DI
	DECQ BX
	JNZ  k5block

	// hsum8(acc) + summs, lane by lane.
	VMOVUPS 0(SP), Y0
	VADDPS  128(SP), Y0, Y0
	VMOVUPS 32(SP), Y1
	VADDPS  160(SP), Y1, Y1
	VMOVUPS 64(SP), Y2
	VADDPS  192(SP), Y2, Y2
	VMOVUPS 96(SP), Y3
	VADDPS  224(SP), Y3, Y3
	VADDPS  Y2, Y0, Y0
	VADDPS  Y3, Y1, Y1
	VADDPS  Y1, Y0, Y0
	VADDPS  256(SP), Y0, Y0
	VMOVUPS Y0, (DX)
	ADDQ    $32, DX
	DECQ    R9
	JNZ     k5group
	VZEROUPPER
	RET
