# Writes kernels/interleave_vnni_q6k_amd64.s to stdout: python3 kernels/asmgen/q6_k_vnni.py > kernels/interleave_vnni_q6k_amd64.s
# (the several-token products of packed Q6_K rows; the tiles differ only in their token count).
import sys
out = []
def e(s=""): out.append(s)
def act(off, t):
    base = "R11" if t < 4 else "R12"
    idx = ["", "(R8*1)", "(R8*2)", "(R13*1)"][t % 4]
    return f"{off}({base}){idx}"
FA = lambda t, m: 64*(8*t+m)        # float lane m of token t (16 rows)
DD = lambda t: 4096 + 64*t          # d·dy of token t (16 rows)
BI = lambda t, j, m: 4608 + 256*t + 32*j + 4*m  # -32·(a pair sums) of run j, lane m
WB, OB, PC = 6656, 6664, 6672
FRAME = 6688

def ktile(T, L):
    e(f"{L}:")
    e("\tVPXORD Z29, Z29, Z29")
    for t in range(T):
        for m in range(8):
            e(f"\tVMOVUPS Z29, {FA(t,m)}(SP)")
    e(f"\tMOVQ {WB}(SP), SI")
    e("\tMOVQ DI, R11")
    if T > 4:
        e("\tLEAQ (DI)(R8*4), R12")
    e("\tMOVQ CX, AX")
    e(f"{L}_block:")
    # The super-block after the next, of both groups, into the cache: a
    # batched decode step streams the matrices from memory.
    for off in range(0, 1680, 64):
        e(f"\tPREFETCHT0 {2*1680+off}(SI)")
        e(f"\tPREFETCHT0 {2*1680+off}(SI)(R10*1)")
    # The bias words -32·(a0+a1), -32·(a2+a3) of every 4 activations.
    e("\tMOVL $0x20202020, R14")
    e("\tVPBROADCASTD R14, Z24")
    e("\tVPXORD Z25, Z25, Z25")
    for t in range(T):
        for k in range(4):
            e(f"\tVPMADDUBSW {act(4+64*k, t)}, Z24, Z26")
            e("\tVPSUBW Z26, Z25, Z26")
            e(f"\tVMOVDQU32 Z26, {BI(t,0,0)+64*k}(SP)")
    # d·dy per token.
    e("\tVCVTPH2PS 1664(SI), Y28")
    e("\tVCVTPH2PS 1664(SI)(R10*1), Y29")
    e("\tVINSERTF32X8 $1, Y29, Z28, Z28")
    for t in range(T):
        e(f"\tVMULPS.BCST {act(0, t)}, Z28, Z29")
        e(f"\tVMOVUPS Z29, {DD(t)}(SP)")
    # The 16 scales as signed word pairs (sc, sc), scale s in Z(8+s).
    for s in range(16):
        e(f"\tVPMOVSXBD {1536+8*s}(SI), Y26")
        e(f"\tVPMOVSXBD {1536+8*s}(SI)(R10*1), Y27")
        e("\tVINSERTI64X4 $1, Y27, Z26, Z26")
        e("\tVPSLLD $16, Z26, Z27")
        e("\tVPSRLD $16, Z27, Z26")
        e(f"\tVPORD Z27, Z26, Z{8+s}")
    for m in range(8):
        for t in range(T):
            e(f"\tVPXORD Z{t}, Z{t}, Z{t}")
        for h in range(2):
            q = 28 + h
            e(f"\tVMOVDQU32 {1024+256*h+32*m}(SI), Y{q}")
            e(f"\tVINSERTI64X4 $1, {1024+256*h+32*m}(SI)(R10*1), Z{q}, Z{q}")
        for c in range(4):
            h, i = c // 2, c % 2
            qh = f"Z{28+h}"
            off = 256*c + 32*m
            e(f"\tVMOVDQU32 {off}(SI), Y24")
            e(f"\tVINSERTI64X4 $1, {off}(SI)(R10*1), Z24, Z24")
            e("\tVPSRLW $4, Z24, Z25")
            e("\tVPANDD Z31, Z24, Z24")
            e("\tVPANDD Z31, Z25, Z25")
            # Run 4h+i: the low nibbles, high bits 2i..2i+1 moved to bit 4.
            e(f"\tVPSLLW ${4-2*i}, {qh}, Z26")
            e("\tVPTERNLOGD $0xF8, Z30, Z26, Z24")
            # Run 4h+i+2: the high nibbles, high bits 2i+4..2i+5.
            if i == 0:
                e(f"\tVPTERNLOGD $0xF8, Z30, {qh}, Z25")
            else:
                e(f"\tVPSRLW $2, {qh}, Z26")
                e("\tVPTERNLOGD $0xF8, Z30, Z26, Z25")
            for (src, j) in (("Z24", 4*h+i), ("Z25", 4*h+i+2)):
                sc = f"Z{8 + 2*j + m//4}"
                tmp = "Z26" if src == "Z24" else "Z27"
                for t in range(T):
                    e(f"\tVPBROADCASTD {act(4+32*j+4*m, t)}, {tmp}")
                    e(f"\tVPMADDUBSW {tmp}, {src}, {tmp}")
                    e(f"\tVPDPWSSD {sc}, {tmp}, Z{t}")
                    e(f"\tVPDPWSSD.BCST {BI(t,j,m)}(SP), {sc}, Z{t}")
        for t in range(T):
            e(f"\tVCVTDQ2PS Z{t}, Z{t}")
            e(f"\tVMOVUPS {FA(t,m)}(SP), Z29")
            e(f"\tVFMADD231PS {DD(t)}(SP), Z{t}, Z29")
            e(f"\tVMOVUPS Z29, {FA(t,m)}(SP)")
    e("\tADDQ $1680, SI")
    e("\tADDQ $292, R11")
    if T > 4:
        e("\tADDQ $292, R12")
    e("\tDECQ AX")
    e(f"\tJNZ {L}_block")
    # hsum8 per row, and the stores.
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

// The several-token product of Q6_K rows packed 8 at a time (interleave.go)
// with AVX-512 VNNI. One 512-bit register holds the 16 rows of two groups.
// Per super-block and tile, each lane m's quants are loaded and given their
// two high bits (VPTERNLOGD) once for all the tile's tokens. The quants stay
// biased by 32 (unsigned, for VPMADDUBSW); a VPDPWSSD by the run's scale adds
// sc·(the 4 products), and a second, with its operand broadcast from a table
// of -32·(a0+a1), -32·(a2+a3) per 4 activations (made once per super-block and
// token), takes the bias off, so each int32 lane holds exactly vecDotQ6_K's
// lane m. Its float lanes sit on the stack and round as vecDotQ6_K's.
// Written by asmgen/q6_k_vnni.py; the tiles differ only in the number of tokens.
//
// Token t of a tile has its Q8_K row at R11 (t < 4) or R12 (t ≥ 4) plus
// (t%4)·aStride (R8: aStride, R13: 3·aStride).

// func gemmQ6_KP16VNNI(nb int, w, a *byte, aStride int, out *float32, outStride int, pairs, nt int)
//
// out[t·outStride/4 + 16p + r] for the pairs p < pairs of groups of 8
// packed Q6_K rows at w (nb super-blocks of 1680 bytes a group) and the
// tokens t < nt, whose Q8_K rows lie at a + t·aStride; nb, pairs, nt ≥ 1.
// Per pair the tokens go in tiles of 8, 4, 2, 1.
TEXT ·gemmQ6_KP16VNNI(SB), 0, ${FRAME}-64
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
	// A group is 1680·nb bytes.
	IMUL3Q $1680, CX, R10
	MOVL         $0x0f0f0f0f, AX
	VPBROADCASTD AX, Z31
	MOVL         $0x30303030, AX
	VPBROADCASTD AX, Z30

q6pair:
	MOVQ a+16(FP), DI
	MOVQ {OB}(SP), DX
	MOVQ nt+56(FP), BX

q6tiles:
	CMPQ BX, $8
	JLT  q6four""")
ktile(8, "q6t8")
e("\tJMP q6tiles")
e("q6four:")
e("\tCMPQ BX, $4")
e("\tJLT q6two")
ktile(4, "q6t4")
e("q6two:")
e("\tCMPQ BX, $2")
e("\tJLT q6one")
ktile(2, "q6t2")
e("q6one:")
e("\tCMPQ BX, $1")
e("\tJLT q6next")
ktile(1, "q6t1")
e(f"""q6next:
	MOVQ R10, AX
	SHLQ $1, AX
	ADDQ AX, {WB}(SP)
	ADDQ $64, {OB}(SP)
	DECQ {PC}(SP)
	JNZ  q6pair
	VZEROUPPER
	RET
""")
sys.stdout.write("\n".join(l for l in out if l != "") + "\n")
