# Writes kernels/interleave_q6k_amd64.s to stdout: python3 kernels/asmgen/q6_k_avx2.py > kernels/interleave_q6k_amd64.s
# (the one-token mat-vec of packed Q6_K rows; every run and lane is spelled out).
import sys
out = []
def e(s=""): out.append(s)

e("""//go:build amd64 && !purego

#include "textflag.h"

// The mat-vec of Q6_K rows packed 8 at a time (interleave.go) against a
// Q8_K row. Lane r of every register is row r of the group. Y0-Y7 gather
// the integer lanes m = 0..7 of the super-block (each the scaled sums of 4
// products, as vecDotQ6_K's 8 lanes); the float lanes live on the stack
// (acc m at 32m(SP)) and each output rounds as vecDotQ6_K.
//
// The quants q are stored biased by 32: the unsigned q go into VPMADDUBSW
// against the broadcast activation dword, and 32·(a0+a1), 32·(a2+a3) come
// off each word pair (the table at 768(SP), made per super-block by
// VPMADDUBSW of 32s by the activations), so that every int32 lane holds
// exactly the products of its own bytes. The 16 scales become word pairs
// (sc, sc) per row at 256+32s(SP), which VPMADDWD multiplies by.
// Written by asmgen/q6_k_avx2.py.

#define PACK6_AHEAD 2048

DATA pack6Twos<>+0(SB)/8, $0x2020202020202020
DATA pack6Twos<>+8(SB)/8, $0x2020202020202020
DATA pack6Twos<>+16(SB)/8, $0x2020202020202020
DATA pack6Twos<>+24(SB)/8, $0x2020202020202020
GLOBL pack6Twos<>(SB), RODATA|NOPTR, $32

// PACK6_RUN adds lane m of a run (its quants in Yq, unsigned) to Yacc:
// the activation dword at aoff(DI), its bias pair at boff(SP), the scale
// pair at soff(SP).
#define PACK6_RUN(Yq, aoff, boff, soff, Yacc) \\
	VPBROADCASTD aoff(DI), Y12; \\
	VPMADDUBSW   Y12, Yq, Yq; \\
	VPBROADCASTD boff(SP), Y13; \\
	VPSUBW       Y13, Yq, Yq; \\
	VPMADDWD     soff(SP), Yq, Yq; \\
	VPADDD       Yq, Yacc, Yacc

// func gemvQ6_KP8AVX2(nb int, w, a *byte, out *float32, groups int)
//
// out[8g+r] for the groups g < groups of 8 packed Q6_K rows at w (nb
// super-blocks of 1680 bytes each) against the Q8_K row at a; nb ≥ 1,
// groups ≥ 1.
TEXT ·gemvQ6_KP8AVX2(SB), 0, $1024-40
	MOVQ         nb+0(FP), CX
	MOVQ         w+8(FP), SI
	MOVQ         out+24(FP), DX
	MOVQ         groups+32(FP), R9
	MOVL         $0x0f0f0f0f, AX
	VMOVD        AX, X15
	VPBROADCASTD X15, Y15
	MOVL         $0x30303030, AX
	VMOVD        AX, X14
	VPBROADCASTD X14, Y14

k6group:
	VXORPS Y8, Y8, Y8""")
for m in range(8):
    e(f"\tVMOVUPS Y8, {32*m}(SP)")
e("""	MOVQ a+16(FP), DI
	MOVQ CX, BX

k6block:""")
for off in (1536, 1600, 1664):
    e(f"\tPREFETCHT0 PACK6_AHEAD+{off}(SI)")
e("\t// The scales as word pairs.")
for s in range(16):
    e(f"\tVPMOVSXBD {1536+8*s}(SI), Y8")
    e("\tVPSLLD $16, Y8, Y9")
    e("\tVPBLENDW $0xAA, Y9, Y8, Y8")
    e(f"\tVMOVDQU Y8, {256+32*s}(SP)")
e("\t// 32·a by pairs, run j at 768+32j.")
e("\tVMOVDQU pack6Twos<>(SB), Y9")
for j in range(8):
    e(f"\tVPMADDUBSW {4+32*j}(DI), Y9, Y8")
    e(f"\tVMOVDQU Y8, {768+32*j}(SP)")
for m in range(8):
    e(f"\tVPXOR Y{m}, Y{m}, Y{m}")

def run(j, m):
    e(f"\tPACK6_RUN(Y10, {4+32*j+4*m}, {768+32*j+4*m}, {256+32*(2*j+m//4)}, Y{m})")

for h in range(2):
    for m in range(8):
        if m % 2 == 0:
            e(f"\tPREFETCHT0 PACK6_AHEAD+{256*(2*h)+32*m}(SI)")
            e(f"\tPREFETCHT0 PACK6_AHEAD+{256*(2*h+1)+32*m}(SI)")
            e(f"\tPREFETCHT0 PACK6_AHEAD+{1024+256*h+32*m}(SI)")
        e(f"\tVMOVDQU {1024+256*h+32*m}(SI), Y8")
        for c in range(2):
            e(f"\tVMOVDQU {256*(2*h+c)+32*m}(SI), Y9")
            # Run 4h+c: the low nibbles, top bits 2c..2c+1 moved to bit 4.
            e("\tVPAND Y15, Y9, Y10")
            e(f"\tVPSLLW ${4-2*c}, Y8, Y11")
            e("\tVPAND Y14, Y11, Y11")
            e("\tVPOR Y11, Y10, Y10")
            run(4*h+c, m)
            # Run 4h+c+2: the high nibbles, top bits 2c+4..2c+5.
            e("\tVPSRLW $4, Y9, Y10")
            e("\tVPAND Y15, Y10, Y10")
            if c == 0:
                e("\tVPAND Y14, Y8, Y11")
            else:
                e("\tVPSRLW $2, Y8, Y11")
                e("\tVPAND Y14, Y11, Y11")
            e("\tVPOR Y11, Y10, Y10")
            run(4*h+c+2, m)
e("""	// d·dy per row.
	VCVTPH2PS    1664(SI), Y8
	VBROADCASTSS 0(DI), Y9
	VMULPS       Y9, Y8, Y8""")
for m in range(8):
    e(f"\tVCVTDQ2PS Y{m}, Y{m}")
    e(f"\tVMOVUPS {32*m}(SP), Y9")
    e(f"\tVFMADD231PS Y8, Y{m}, Y9")
    e(f"\tVMOVUPS Y9, {32*m}(SP)")
e("""	ADDQ $1680, SI
	ADDQ $292, DI
	DECQ BX
	JNZ  k6block

	// hsum8(acc), lane by lane.
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
	VMOVUPS Y0, (DX)
	ADDQ    $32, DX
	DECQ    R9
	JNZ     k6group
	VZEROUPPER
	RET""")
sys.stdout.write("\n".join(out) + "\n")
