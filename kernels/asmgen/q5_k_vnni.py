# Writes kernels/interleave_vnni_q5k_amd64.s to stdout: python3 kernels/asmgen/q5_k_vnni.py > kernels/interleave_vnni_q5k_amd64.s
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
    Q5 = True
    e(f"{L}:")
    e("\tVPXORD Z29, Z29, Z29")
    for t in range(T):
        for m in range(8):
            e(f"\tVMOVUPS Z29, {FA(t,m)}(SP)")
        e(f"\tVMOVUPS Z29, {FM(t,0)}(SP)")
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
    e("\tMOVL $0x10101010, R14")
    e("\tVPBROADCASTD R14, Z8")
    for m in range(8):
        for t in range(T):
            e(f"\tVPXORD Z{t}, Z{t}, Z{t}")
        e(f"\tVMOVDQU32 {1184+32*m}(SI), Y28")
        e(f"\tVINSERTI64X4 $1, {1184+32*m}(SI)(R10*1), Z28, Z28")
        for k in range(4):
            off = 160 + 256*k + 32*m
            e(f"\tVMOVDQU32 {off}(SI), Y24")
            e(f"\tVINSERTI64X4 $1, {off}(SI)(R10*1), Z24, Z24")
            e("\tVPSRLW $4, Z24, Z25")
            e("\tVPANDD Z31, Z24, Z24")
            e("\tVPANDD Z31, Z25, Z25")
            for (dst, b) in (("Z24", 2*k), ("Z25", 2*k+1)):
                if b < 4:
                    e(f"\tVPSLLW ${4-b}, Z28, Z9")
                elif b > 4:
                    e(f"\tVPSRLW ${b-4}, Z28, Z9")
                else:
                    e("\tVMOVDQA64 Z28, Z9")
                e(f"\tVPTERNLOGD $0xF8, Z8, Z9, {dst}")
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
    for t in range(T):
        e(f"\tVPXORD Z{t}, Z{t}, Z{t}")
    for i in range(4):
        e(f"\tVPMOVZXBW {96+16*i}(SI), Y28")
        e(f"\tVPMOVZXBW {96+16*i}(SI)(R10*1), Y29")
        e("\tVINSERTI64X4 $1, Y29, Z28, Z28")
        for t in range(T):
            e(f"\tVPBROADCASTD {PP(t) + 4*(i%2) + 16*(i//2)}(SP), Z30")
            e("\tVPMADDWD Z30, Z28, Z30")
            e(f"\tVPADDD Z30, Z{t}, Z{t}")
    for t in range(T):
        e(f"\tVCVTDQ2PS Z{t}, Z{t}")
        e(f"\tVMOVUPS {FM(t,0)}(SP), Z29")
        e(f"\tVFMADD231PS {DM(t)}(SP), Z{t}, Z29")
        e(f"\tVMOVUPS Z29, {FM(t,0)}(SP)")
    e("\tADDQ $1440, SI")
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
        e(f"\tVADDPS {FM(t,0)}(SP), Z0, Z0")
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

// The several-token product of Q5_K rows packed 8 at a time (interleave.go)
// with AVX-512 VNNI: the Q4_K kernel (interleave_vnni_q4k_amd64.s) with
// each chunk's nibbles given their fifth bits (from the high-bit bytes at
// 1184+32m, shifted to bit 4 and merged by one VPTERNLOGD each) once for
// the tile, and the min terms summed as vecDotQ5_K sums them: one integer
// sum of the 4 min products per super-block and token, one VFMADD231PS into
// the token's min lane (at 4096+64·4t). Every output rounds as vecDotQ5_K.
// Written by asmgen/q5_k_vnni.py; the tiles differ only in the number of tokens.
//
// Token t of a tile has its Q8_K row at R11 (t < 4) or R12 (t ≥ 4) plus
// (t%4)·aStride (R8: aStride, R13: 3·aStride).

// func gemmQ5_KP16VNNI(nb int, w, a *byte, aStride int, out *float32, outStride int, pairs, nt int)
//
// out[t·outStride/4 + 16p + r] for the pairs p < pairs of groups of 8
// packed Q5_K rows at w (nb super-blocks of 1440 bytes a group) and the
// tokens t < nt, whose Q8_K rows lie at a + t·aStride; nb, pairs, nt ≥ 1.
// Per pair the tokens go in tiles of 8, 4, 2, 1.
TEXT ·gemmQ5_KP16VNNI(SB), 0, $7456-64
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
	// A group is 1440·nb bytes.
	IMUL3Q $1440, CX, R10
	MOVL         $0x0f0f0f0f, AX
	VPBROADCASTD AX, Z31

q5pair:
	MOVQ a+16(FP), DI
	MOVQ {OB}(SP), DX
	MOVQ nt+56(FP), BX

q5tiles:
	CMPQ BX, $8
	JLT  q5four""")
ktile(8, "q5t8")
e("\tJMP q5tiles")
e("q5four:")
e("\tCMPQ BX, $4")
e("\tJLT q5two")
ktile(4, "q5t4")
e("q5two:")
e("\tCMPQ BX, $2")
e("\tJLT q5one")
ktile(2, "q5t2")
e("q5one:")
e("\tCMPQ BX, $1")
e("\tJLT q5next")
ktile(1, "q5t1")
e(f"""q5next:
	MOVQ R10, AX
	SHLQ $1, AX
	ADDQ AX, {WB}(SP)
	ADDQ $64, {OB}(SP)
	DECQ {PC}(SP)
	JNZ  q5pair
	VZEROUPPER
	RET
""")
sys.stdout.write("\n".join(l for l in out if l != "") + "\n")
