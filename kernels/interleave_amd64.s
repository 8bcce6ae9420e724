//go:build amd64 && !purego

#include "textflag.h"

// The mat-vec of Q4_0 rows packed 8 at a time (packed.go) against the
// blocked kernels' Q8_0 activations (gemm.go: nb 34-byte blocks, then per
// block da as float32 and 8·Σa as int32). Lane r of the float sum is row r
// of the group; per block it gets one VFMADD231PS, as vecDotQ4_0 rounds.

// PACK_AHEAD is how far ahead of the block being summed the kernels ask
// for the weights (PREFETCHT0): the hardware prefetchers alone left one
// thread's mat-vec from memory at 11-15 GB/s, with them 16-21 GB/s
// (BenchmarkMatVecInterleaved/Q4_0/65536x2048, where a plain read of memory
// makes about 20-22).
#define PACK_AHEAD 2048

DATA packOnes16<>+0(SB)/8, $0x0001000100010001
DATA packOnes16<>+8(SB)/8, $0x0001000100010001
DATA packOnes16<>+16(SB)/8, $0x0001000100010001
DATA packOnes16<>+24(SB)/8, $0x0001000100010001
GLOBL packOnes16<>(SB), RODATA|NOPTR, $32

// PACK_CHUNK adds to Yacc the int16 pair sums of chunk k of the block at SI
// (nibble bytes 4k..4k+3 of the 8 rows at 16+32k) against the activation
// quants 4k..4k+3 (low nibbles) and 16+4k..16+4k+3 (high nibbles) of the
// block at R11. Each lane sums at most 8 pairs of 15·127: no overflow.
#define PACK_CHUNK(off, alo, ahi, Ylo, Yhi, Ya, Yacc) \
	VMOVDQU      off(SI), Ylo; \
	VPSRLW       $4, Ylo, Yhi; \
	VPAND        Y15, Ylo, Ylo; \
	VPAND        Y15, Yhi, Yhi; \
	VPBROADCASTD alo(R11), Ya; \
	VPMADDUBSW   Ya, Ylo, Ylo; \
	VPBROADCASTD ahi(R11), Ya; \
	VPMADDUBSW   Ya, Yhi, Yhi; \
	VPADDW       Ylo, Yacc, Yacc; \
	VPADDW       Yhi, Yacc, Yacc

// func gemvQ4_0P8AVX2(nb int, w, a *byte, out *float32, groups int)
//
// out[8g+r] for the groups g < groups of 8 packed rows at w (nb blocks of
// 144 bytes each), nb ≥ 1, groups ≥ 1.
TEXT ·gemvQ4_0P8AVX2(SB), NOSPLIT, $0-40
	MOVQ nb+0(FP), CX
	MOVQ w+8(FP), SI
	MOVQ a+16(FP), DI
	MOVQ out+24(FP), DX
	MOVQ groups+32(FP), R9
	// The side table at a + 34·nb.
	MOVQ CX, R10
	SHLQ $4, R10
	ADDQ CX, R10
	SHLQ $1, R10
	ADDQ DI, R10
	MOVL         $0x0f0f0f0f, AX
	VMOVD        AX, X15
	VPBROADCASTD X15, Y15
	VMOVDQU      packOnes16<>(SB), Y14

group:
	VXORPS Y0, Y0, Y0
	MOVQ   DI, R11
	MOVQ   R10, R12
	MOVQ   CX, BX

block:
	PREFETCHT0 PACK_AHEAD(SI)
	PREFETCHT0 PACK_AHEAD+64(SI)
	PREFETCHT0 PACK_AHEAD+128(SI)
	VPXOR Y1, Y1, Y1
	VPXOR Y2, Y2, Y2
	PACK_CHUNK(16, 2, 18, Y3, Y4, Y5, Y1)
	PACK_CHUNK(48, 6, 22, Y6, Y7, Y8, Y2)
	PACK_CHUNK(80, 10, 26, Y9, Y10, Y11, Y1)
	PACK_CHUNK(112, 14, 30, Y3, Y4, Y5, Y2)
	VPADDW       Y2, Y1, Y1
	VPMADDWD     Y14, Y1, Y1
	VPBROADCASTD 4(R12), Y2
	VPSUBD       Y2, Y1, Y1
	VCVTDQ2PS    Y1, Y1
	VCVTPH2PS    (SI), Y12
	VBROADCASTSS (R12), Y13
	VMULPS       Y13, Y12, Y12
	VFMADD231PS  Y12, Y1, Y0
	ADDQ         $144, SI
	ADDQ         $34, R11
	ADDQ         $8, R12
	DECQ         BX
	JNZ          block

	VMOVUPS Y0, (DX)
	ADDQ    $32, DX
	DECQ    R9
	JNZ     group
	VZEROUPPER
	RET

// Q4_K: per super-block and group, Y0-Y7 gather the integer lanes m = 0..7
// (scaled sums of 4 products, as vecDotQ4_K's 8 lanes) of the 8 rows; the
// float lanes live on the stack: acc m at 32m(SP), the min lanes i at
// 256+32i(SP), and the activation's 4 pairs of block-sum pairs at 384(SP).

// PACKK_M adds lane m of sub-blocks 2k (low nibbles, scales Y8) and 2k+1
// (high nibbles, scales Y9) to Yi.
#define PACKK_M(noff, aoff, Yi) \
	VMOVDQU      noff(SI), Y10; \
	VPSRLW       $4, Y10, Y11; \
	VPAND        Y15, Y10, Y10; \
	VPAND        Y15, Y11, Y11; \
	VPBROADCASTD aoff(DI), Y12; \
	VPMADDUBSW   Y12, Y10, Y10; \
	VPMADDWD     Y8, Y10, Y10; \
	VPADDD       Y10, Yi, Yi; \
	VPBROADCASTD 32+aoff(DI), Y13; \
	VPMADDUBSW   Y13, Y11, Y11; \
	VPMADDWD     Y9, Y11, Y11; \
	VPADDD       Y11, Yi, Yi

// PACKK_K adds sub-blocks 2k and 2k+1 (nibbles at 160+256k, activations at
// 4+64k; scales at 32+16k and 40+16k, each byte widened to the word pair
// sc, sc) to Y0-Y7, and asks for the same nibbles PACK_AHEAD bytes on.
#define PACKK_K(k) \
	PREFETCHT0 PACK_AHEAD+160+256*k(SI); \
	PREFETCHT0 PACK_AHEAD+224+256*k(SI); \
	PREFETCHT0 PACK_AHEAD+288+256*k(SI); \
	PREFETCHT0 PACK_AHEAD+352+256*k(SI); \
	VPMOVZXBD 32+16*k(SI), Y8; \
	VPSLLD    $16, Y8, Y10; \
	VPOR      Y10, Y8, Y8; \
	VPMOVZXBD 40+16*k(SI), Y9; \
	VPSLLD    $16, Y9, Y10; \
	VPOR      Y10, Y9, Y9; \
	PACKK_M(160+256*k, 4+64*k, Y0); \
	PACKK_M(192+256*k, 8+64*k, Y1); \
	PACKK_M(224+256*k, 12+64*k, Y2); \
	PACKK_M(256+256*k, 16+64*k, Y3); \
	PACKK_M(288+256*k, 20+64*k, Y4); \
	PACKK_M(320+256*k, 24+64*k, Y5); \
	PACKK_M(352+256*k, 28+64*k, Y6); \
	PACKK_M(384+256*k, 32+64*k, Y7)

// PACKK_ACC adds d·float(Yi) to the float lane m on the stack (Y14: d).
#define PACKK_ACC(m, Yi) \
	VCVTDQ2PS   Yi, Yi; \
	VMOVUPS     (32*m)(SP), Y10; \
	VFMADD231PS Y14, Yi, Y10; \
	VMOVUPS     Y10, (32*m)(SP)

// PACKK_MIN adds dmin·(m2i·P2i + m2i+1·P2i+1) to the min lane i (Y14:
// -dy·dmin).
#define PACKK_MIN(i) \
	VPMOVZXBW    96+16*i(SI), Y10; \
	VPBROADCASTD (384+4*(i%2)+16*(i/2))(SP), Y11; \
	VPMADDWD     Y11, Y10, Y10; \
	VCVTDQ2PS    Y10, Y10; \
	VMOVUPS      (256+32*i)(SP), Y11; \
	VFMADD231PS  Y14, Y10, Y11; \
	VMOVUPS      Y11, (256+32*i)(SP)

// func gemvQ4_KP8AVX2(nb int, w, a *byte, out *float32, groups int)
//
// out[8g+r] for the groups g < groups of 8 packed Q4_K rows at w (nb
// super-blocks of 1184 bytes each) against the Q8_K row at a; nb ≥ 1,
// groups ≥ 1.
TEXT ·gemvQ4_KP8AVX2(SB), NOSPLIT, $416-40
	MOVQ         nb+0(FP), CX
	MOVQ         w+8(FP), SI
	MOVQ         out+24(FP), DX
	MOVQ         groups+32(FP), R9
	MOVL         $0x0f0f0f0f, AX
	VMOVD        AX, X15
	VPBROADCASTD X15, Y15

kgroup:
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
	VMOVUPS Y10, 288(SP)
	VMOVUPS Y10, 320(SP)
	VMOVUPS Y10, 352(SP)
	MOVQ    a+16(FP), DI
	MOVQ    CX, BX

kblock:
	PREFETCHT0 PACK_AHEAD(SI)
	PREFETCHT0 PACK_AHEAD+64(SI)
	PREFETCHT0 PACK_AHEAD+128(SI)
	PREFETCHT0 PACK_AHEAD+192(SI)

	// The pairs of block-sum pairs: P0..P3 at 384, P4..P7 at 400 (int16).
	VMOVDQU   260(DI), Y10
	VPCMPEQW  Y11, Y11, Y11
	VPSRLW    $15, Y11, Y11
	VPMADDWD  Y11, Y10, Y10
	VPACKSSDW Y10, Y10, Y10
	VMOVDQU   Y10, 384(SP)

	VPXOR Y0, Y0, Y0
	VPXOR Y1, Y1, Y1
	VPXOR Y2, Y2, Y2
	VPXOR Y3, Y3, Y3
	VPXOR Y4, Y4, Y4
	VPXOR Y5, Y5, Y5
	VPXOR Y6, Y6, Y6
	VPXOR Y7, Y7, Y7
	PACKK_K(0)
	PACKK_K(1)
	PACKK_K(2)
	PACKK_K(3)

	// d·dy per row.
	VCVTPH2PS    0(SI), Y14
	VBROADCASTSS 0(DI), Y13
	VMULPS       Y13, Y14, Y14
	PACKK_ACC(0, Y0)
	PACKK_ACC(1, Y1)
	PACKK_ACC(2, Y2)
	PACKK_ACC(3, Y3)
	PACKK_ACC(4, Y4)
	PACKK_ACC(5, Y5)
	PACKK_ACC(6, Y6)
	PACKK_ACC(7, Y7)

	// -dy·dmin per row.
	VCVTPH2PS    16(SI), Y14
	MOVL         $0x80000000, AX
	VMOVD        AX, X12
	VPBROADCASTD X12, Y12
	VXORPS       Y12, Y13, Y13
	VMULPS       Y13, Y14, Y14
	PACKK_MIN(0)
	PACKK_MIN(1)
	PACKK_MIN(2)
	PACKK_MIN(3)

	ADDQ $1184, SI
	ADDQ $292, DI
	DECQ BX
	JNZ  kblock

	// hsum8(acc) + hsum4(accM), lane by lane.
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
	VMOVUPS 256(SP), Y4
	VADDPS  320(SP), Y4, Y4
	VMOVUPS 288(SP), Y5
	VADDPS  352(SP), Y5, Y5
	VADDPS  Y5, Y4, Y4
	VADDPS  Y4, Y0, Y0
	VMOVUPS Y0, (DX)
	ADDQ    $32, DX
	DECQ    R9
	JNZ     kgroup
	VZEROUPPER
	RET
