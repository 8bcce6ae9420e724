# Writes kernels/interleave_vnni_amd64.s to stdout: python3 kernels/asmgen/q4_0_vnni.py > kernels/interleave_vnni_amd64.s
# (the several-token products of packed rows; the tiles differ only in their token count).
import sys
out = []
def e(s=""): out.append(s)
# tokens 0-3 off base R11/R14 with idx; 4-7 off R12/R15
def addr(off, t, q=True):
    base = ("R11" if t < 4 else "R12") if q else ("R14" if t < 4 else "R15")
    idx = ["", "(R8*1)", "(R8*2)", "(R13*1)"][t % 4]
    return f"{off}({base}){idx}"

def ztile(T, label):
    e(f"{label}:")
    for t in range(T):
        e(f"\tVPXORD Z{16+t}, Z{16+t}, Z{16+t}")
    e("\tMOVQ 0(SP), SI")
    e("\tMOVQ DI, R11")
    e("\tMOVQ 8(SP), AX")
    e("\tLEAQ (DI)(AX*1), R14")
    if T > 4:
        e("\tLEAQ (DI)(R8*4), R12")
        e("\tLEAQ (R12)(AX*1), R15")
    e("\tMOVQ CX, AX")
    e(f"{label}_block:")
    for t in range(T):
        e(f"\tVPXORD Z{t}, Z{t}, Z{t}")
    for k in range(4):
        e(f"\tVMOVDQU {16+32*k}(SI), Y8")
        e(f"\tVINSERTI64X4 $1, {16+32*k}(SI)(R10*1), Z8, Z8")
        e("\tVPSRLW $4, Z8, Z9")
        e("\tVPANDD Z15, Z8, Z8")
        e("\tVPANDD Z15, Z9, Z9")
        for t in range(T):
            e(f"\tVPDPBUSD.BCST {addr(2+4*k, t)}, Z8, Z{t}")
            e(f"\tVPDPBUSD.BCST {addr(18+4*k, t)}, Z9, Z{t}")
    e("\tVCVTPH2PS (SI), Y12")
    e("\tVCVTPH2PS (SI)(R10*1), Y13")
    e("\tVINSERTF32X8 $1, Y13, Z12, Z12")
    for t in range(T):
        e(f"\tVPSUBD.BCST {addr(4, t, False)}, Z{t}, Z{t}")
        e(f"\tVCVTDQ2PS Z{t}, Z{t}")
        e(f"\tVMULPS.BCST {addr(0, t, False)}, Z12, Z10")
        e(f"\tVFMADD231PS Z10, Z{t}, Z{16+t}")
    e("\tADDQ $144, SI")
    e("\tADDQ $34, R11")
    e("\tADDQ $8, R14")
    if T > 4:
        e("\tADDQ $34, R12")
        e("\tADDQ $8, R15")
    e("\tDECQ AX")
    e(f"\tJNZ {label}_block")
    e("\tLEAQ (R9)(R9*2), AX")
    for t in range(T):
        if t == 4:
            e("\tLEAQ (DX)(R9*4), DX")
        idx = ["", "(R9*1)", "(R9*2)", "(AX*1)"][t % 4]
        e(f"\tVMOVUPS Z{16+t}, (DX){idx}")
    if T > 4:
        for _ in range(T - 4):
            e("\tADDQ R9, DX")
    else:
        for _ in range(T):
            e("\tADDQ R9, DX")
    for _ in range(T):
        e("\tADDQ R8, DI")
    e(f"\tSUBQ ${T}, BX")

e("""//go:build amd64 && !purego

#include "textflag.h"

// The several-token product of Q4_0 rows packed 8 at a time with AVX-512
// VNNI (interleave_gemm_amd64.s has the AVX2 one, and the layout): a
// 512-bit register holds two groups' 16 rows, one VPDPBUSD of a broadcast
// activation dword by the nibbles of a chunk adds 4 products to each row's
// int32 sum, and a tile runs up to 8 tokens (in lanes of their own), so a
// weight block is loaded and split once for 8 tokens. Each token's integer
// sum is exact and its float work the one-token kernel's, in the same
// order: every output rounds as vecDotQ4_0. Written by asmgen/q4_0_vnni.py; the
// tiles differ only in the number of tokens.
//
// Token t of a tile has its quants at R11 (t < 4) or R12 (t ≥ 4) plus
// (t%4)·aStride (R8: aStride, R13: 3·aStride), its side table (da, 8·Σa)
// likewise at R14 and R15.

// func gemmQ4_0P16VNNI(nb int, w, a *byte, aStride int, out *float32, outStride int, pairs, nt int)
//
// out[t·outStride/4 + 16p + r] for the pairs p < pairs of groups of 8
// packed Q4_0 rows at w (nb blocks of 144 bytes a group) and the tokens
// t < nt, whose blocked kernels' activations lie at a + t·aStride; nb,
// pairs, nt ≥ 1. Per pair the tokens go in tiles of 8, 4, 2, 1.
TEXT ·gemmQ4_0P16VNNI(SB), NOSPLIT, $32-64
	MOVQ nb+0(FP), CX
	MOVQ w+8(FP), AX
	MOVQ AX, 0(SP)
	MOVQ aStride+24(FP), R8
	LEAQ (R8)(R8*2), R13
	MOVQ out+32(FP), DX
	MOVQ DX, 16(SP)
	MOVQ outStride+40(FP), R9
	SHLQ $2, R9
	MOVQ pairs+48(FP), AX
	MOVQ AX, 24(SP)
	// The side table at 34·nb; a group is 144·nb bytes.
	MOVQ CX, AX
	SHLQ $4, AX
	ADDQ CX, AX
	SHLQ $1, AX
	MOVQ AX, 8(SP)
	MOVQ CX, R10
	SHLQ $4, R10
	LEAQ (R10)(R10*8), R10
	MOVL         $0x0f0f0f0f, AX
	VPBROADCASTD AX, Z15

zpair:
	MOVQ a+16(FP), DI
	MOVQ 16(SP), DX
	MOVQ nt+56(FP), BX

ztiles:
	CMPQ BX, $8
	JLT  zfour""")
ztile(8, "zt8")
e("\tJMP ztiles")
e("zfour:")
e("\tCMPQ BX, $4")
e("\tJLT ztwo")
ztile(4, "zt4")
e("ztwo:")
e("\tCMPQ BX, $2")
e("\tJLT zone")
ztile(2, "zt2")
e("zone:")
e("\tCMPQ BX, $1")
e("\tJLT znext")
ztile(1, "zt1")
e("""znext:
	// The next pair: two groups of weights on, 16 outputs on.
	MOVQ R10, AX
	SHLQ $1, AX
	ADDQ AX, 0(SP)
	ADDQ $64, 16(SP)
	DECQ 24(SP)
	JNZ  zpair
	VZEROUPPER
	RET
""")
sys.stdout.write("\n".join(l for l in out if l != "") + "\n")
