# Writes kernels/interleave_vnni_q4k_amd64.s to stdout: python3 kernels/asmgen/q4_k_vnni.py > kernels/interleave_vnni_q4k_amd64.s
# (the several-token products of packed rows; the tiles differ only in their token count).
import sys
out = []
def e(s=""): out.append(s)
def act(off, t):
    base = "R11" if t < 4 else "R12"
    idx = ["", "(R8*1)", "(R8*2)", "(R13*1)"][t % 4]
    return f"{off}({base}){idx}"
FA = lambda t, m: 64*(8*t+m)
FM = lambda t, i: 4096 + 64*(4*t+i)
DD = lambda t: 6144 + 64*t
DM = lambda t: 6656 + 64*t
PP = lambda t: 7168 + 32*t
WB, OB, PC = 7424, 7432, 7440

def ktile(T, L):
    e(f"{L}:")
    e("\tVPXORD Z29, Z29, Z29")
    for t in range(T):
        for m in range(8):
            e(f"\tVMOVUPS Z29, {FA(t,m)}(SP)")
        for i in range(4):
            e(f"\tVMOVUPS Z29, {FM(t,i)}(SP)")
    e(f"\tMOVQ {WB}(SP), SI")
    e("\tMOVQ DI, R11")
    if T > 4:
        e("\tLEAQ (DI)(R8*4), R12")
    e("\tMOVQ CX, AX")
    e(f"{L}_block:")
    # P per token: pairs of bsum pairs
    e("\tMOVL $0x00010001, R14")
    e("\tVPBROADCASTD R14, Y30")
    for t in range(T):
        e(f"\tVMOVDQU32 {act(260, t)}, Y26")
        e("\tVPMADDWD Y30, Y26, Y26")
        e("\tVPACKSSDW Y26, Y26, Y26")
        e(f"\tVMOVDQU32 Y26, {PP(t)}(SP)")
    # d and dmin
    e("\tVCVTPH2PS (SI), Y28")
    e("\tVCVTPH2PS (SI)(R10*1), Y29")
    e("\tVINSERTF32X8 $1, Y29, Z28, Z28")
    for t in range(T):
        e(f"\tVMULPS.BCST {act(0, t)}, Z28, Z29")
        e(f"\tVMOVUPS Z29, {DD(t)}(SP)")
    e("\tVCVTPH2PS 16(SI), Y28")
    e("\tVCVTPH2PS 16(SI)(R10*1), Y29")
    e("\tVINSERTF32X8 $1, Y29, Z28, Z28")
    e("\tMOVL $0x80000000, R14")
    e("\tVPBROADCASTD R14, Z30")
    for t in range(T):
        e(f"\tVMULPS.BCST {act(0, t)}, Z28, Z29")
        e("\tVXORPS Z30, Z29, Z29")
        e(f"\tVMOVUPS Z29, {DM(t)}(SP)")
    # scales of the 8 sub-blocks
    for j in range(8):
        e(f"\tVPMOVZXBD {32+8*j}(SI), Y26")
        e(f"\tVPMOVZXBD {32+8*j}(SI)(R10*1), Y27")
        e("\tVINSERTI64X4 $1, Y27, Z26, Z26")
        e("\tVPSLLD $16, Z26, Z27")
        e(f"\tVPORD Z27, Z26, Z{16+j}")
    for m in range(8):
        for t in range(T):
            e(f"\tVPXORD Z{t}, Z{t}, Z{t}")
        for k in range(4):
            off = 160 + 256*k + 32*m
            e(f"\tVMOVDQU32 {off}(SI), Y24")
            e(f"\tVINSERTI64X4 $1, {off}(SI)(R10*1), Z24, Z24")
            e("\tVPSRLW $4, Z24, Z25")
            e("\tVPANDD Z31, Z24, Z24")
            e("\tVPANDD Z31, Z25, Z25")
            for t in range(T):
                e(f"\tVPBROADCASTD {act(4+64*k+4*m, t)}, Z26")
                e("\tVPMADDUBSW Z26, Z24, Z26")
                e(f"\tVPDPWSSD Z{16+2*k}, Z26, Z{t}")
                e(f"\tVPBROADCASTD {act(36+64*k+4*m, t)}, Z27")
                e("\tVPMADDUBSW Z27, Z25, Z27")
                e(f"\tVPDPWSSD Z{17+2*k}, Z27, Z{t}")
        for t in range(T):
            e(f"\tVCVTDQ2PS Z{t}, Z{t}")
            e(f"\tVMOVUPS {FA(t,m)}(SP), Z29")
            e(f"\tVFMADD231PS {DD(t)}(SP), Z{t}, Z29")
            e(f"\tVMOVUPS Z29, {FA(t,m)}(SP)")
    for i in range(4):
        e(f"\tVPMOVZXBW {96+16*i}(SI), Y28")
        e(f"\tVPMOVZXBW {96+16*i}(SI)(R10*1), Y29")
        e("\tVINSERTI64X4 $1, Y29, Z28, Z28")
        for t in range(T):
            e(f"\tVPBROADCASTD {PP(t) + 4*(i%2) + 16*(i//2)}(SP), Z30")
            e("\tVPMADDWD Z30, Z28, Z30")
            e("\tVCVTDQ2PS Z30, Z30")
            e(f"\tVMOVUPS {FM(t,i)}(SP), Z29")
            e(f"\tVFMADD231PS {DM(t)}(SP), Z30, Z29")
            e(f"\tVMOVUPS Z29, {FM(t,i)}(SP)")
    e("\tADDQ $1184, SI")
    e("\tADDQ $292, R11")
    if T > 4:
        e("\tADDQ $292, R12")
    e("\tDECQ AX")
    e(f"\tJNZ {L}_block")
    # sums and stores
    e("\tLEAQ (R9)(R9*2), AX")
    for t in range(T):
        e(f"\tVMOVUPS {FA(t,0)}(SP), Z0")
        e(f"\tVADDPS {FA(t,4)}(SP), Z0, Z0")
        e(f"\tVMOVUPS {FA(t,1)}(SP), Z1")
        e(f"\tVADDPS {FA(t,5)}(SP), Z1, Z1")
        e(f"\tVMOVUPS {FA(t,2)}(SP), Z2")
        e(f"\tVADDPS {FA(t,6)}(SP), Z2, Z2")
        e(f"\tVMOVUPS {FA(t,3)}(SP), Z3")
        e(f"\tVADDPS {FA(t,7)}(SP), Z3, Z3")
        e("\tVADDPS Z2, Z0, Z0")
        e("\tVADDPS Z3, Z1, Z1")
        e("\tVADDPS Z1, Z0, Z0")
        e(f"\tVMOVUPS {FM(t,0)}(SP), Z4")
        e(f"\tVADDPS {FM(t,2)}(SP), Z4, Z4")
        e(f"\tVMOVUPS {FM(t,1)}(SP), Z5")
        e(f"\tVADDPS {FM(t,3)}(SP), Z5, Z5")
        e("\tVADDPS Z5, Z4, Z4")
        e("\tVADDPS Z4, Z0, Z0")
        if t == 4:
            e("\tLEAQ (DX)(R9*4), DX")
        idx = ["", "(R9*1)", "(R9*2)", "(AX*1)"][t % 4]
        e(f"\tVMOVUPS Z0, (DX){idx}")
    n = T - 4 if T > 4 else T
    for _ in range(n):
        e("\tADDQ R9, DX")
    for _ in range(T):
        e("\tADDQ R8, DI")
    e(f"\tSUBQ ${T}, BX")

e(f"""//go:build amd64 && !purego

#include "textflag.h"

// The several-token product of Q4_K rows packed 8 at a time (interleave.go)
// with AVX-512 VNNI: a 512-bit register holds two groups' 16 rows, and a
// tile runs up to 8 tokens. Per super-block the 8 sub-blocks' scales (each
// byte widened to a word pair) are loaded once for the tile, each chunk of nibbles
// once for its tokens; per token a VPMADDUBSW of the nibbles by a broadcast
// activation dword gives word pairs, which one VPDPWSSD scales by the
// sub-block's scale and adds to the token's int32 lane m, exactly as the
// one-token kernel's VPMADDWD and VPADDD (interleave_amd64.s). The float
// work per token is that kernel's, lane by lane and in its order, with its
// lanes on the stack: 8 lanes acc m at 64(8t+m), 4 min lanes at
// 4096+64(4t+i), then per token d·dy at 6144+64t, -dy·dmin at 6656+64t and
// the pairs of block-sum pairs at 7168+32t. Every output rounds as
// vecDotQ4_K. Written by asmgen/q4_k_vnni.py; the tiles differ only in the number
// of tokens.
//
// Token t of a tile has its Q8_K row at R11 (t < 4) or R12 (t ≥ 4) plus
// (t%4)·aStride (R8: aStride, R13: 3·aStride).

// func gemmQ4_KP16VNNI(nb int, w, a *byte, aStride int, out *float32, outStride int, pairs, nt int)
//
// out[t·outStride/4 + 16p + r] for the pairs p < pairs of groups of 8
// packed Q4_K rows at w (nb super-blocks of 1184 bytes a group) and the
// tokens t < nt, whose Q8_K rows lie at a + t·aStride; nb, pairs, nt ≥ 1.
// Per pair the tokens go in tiles of 8, 4, 2, 1.
TEXT ·gemmQ4_KP16VNNI(SB), 0, $7456-64
	MOVQ nb+0(FP), CX
	MOVQ w+8(FP), AX
	MOVQ AX, {WB}(SP)
	MOVQ aStride+24(FP), R8
	LEAQ (R8)(R8*2), R13
	MOVQ out+32(FP), DX
	MOVQ DX, {OB}(SP)
	MOVQ outStride+40(FP), R9
	SHLQ $2, R9
	MOVQ pairs+48(FP), AX
	MOVQ AX, {PC}(SP)
	// A group is 1184·nb bytes.
	IMUL3Q $1184, CX, R10
	MOVL         $0x0f0f0f0f, AX
	VPBROADCASTD AX, Z31

kpair:
	MOVQ a+16(FP), DI
	MOVQ {OB}(SP), DX
	MOVQ nt+56(FP), BX

ktiles:
	CMPQ BX, $8
	JLT  kfour""")
ktile(8, "kt8")
e("\tJMP ktiles")
e("kfour:")
e("\tCMPQ BX, $4")
e("\tJLT ktwo")
ktile(4, "kt4")
e("ktwo:")
e("\tCMPQ BX, $2")
e("\tJLT kone")
ktile(2, "kt2")
e("kone:")
e("\tCMPQ BX, $1")
e("\tJLT knext")
ktile(1, "kt1")
e(f"""knext:
	MOVQ R10, AX
	SHLQ $1, AX
	ADDQ AX, {WB}(SP)
	ADDQ $64, {OB}(SP)
	DECQ {PC}(SP)
	JNZ  kpair
	VZEROUPPER
	RET
""")
sys.stdout.write("\n".join(l for l in out if l != "") + "\n")
