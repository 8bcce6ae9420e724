# Writes kernels/interleave_gemm_amd64.s to stdout: python3 kernels/asmgen/q4_0_avx2.py > kernels/interleave_gemm_amd64.s
# (the several-token products of packed rows; the tiles differ only in their token count).
import sys
out = []
def e(s=""): out.append(s)

e("""//go:build amd64 && !purego

#include "textflag.h"

// Several tokens against rows packed 8 at a time (interleave.go): the
// weights of a block are loaded and split into nibbles once for a tile of
// up to 4 tokens (Q4_0) or 2 (Q4_K), and each token's sums run exactly as
// the one-token kernels' (interleave_amd64.s) in lanes of its own: every
// output rounds as the format's VecDot. Written by asmgen/q4_0_avx2.py; the tiles
// differ only in the number of tokens.
//
// Token t of a tile has its activations at a + t·aStride and its outputs
// at out + t·outStride (bytes). R8 holds aStride, R13 3·aStride, so that
// token t's addresses are off(R11), off(R11)(R8*1), off(R11)(R8*2) and
// off(R11)(R13*1).
""")

IDX = ["", "(R8*1)", "(R8*2)", "(R13*1)"]

def q4tile(T, label):
    # Y15 mask, Y14 ones16. I_t = Y0..Y3, F_t = Y4..Y7, weights Y8 Y9,
    # temps Y10 Y11 Y13, d Y12.
    e(f"{label}:")
    for t in range(T):
        e(f"\tVXORPS Y{4+t}, Y{4+t}, Y{4+t}")
    e("\tMOVQ R15, SI")
    e("\tMOVQ DI, R11")
    e("\tLEAQ (DI)(R14*1), R12")
    e("\tMOVQ CX, AX")
    e(f"{label}_block:")
    for t in range(T):
        e(f"\tVPXOR Y{t}, Y{t}, Y{t}")
    for k in range(4):
        e(f"\tVMOVDQU {16+32*k}(SI), Y8")
        e("\tVPSRLW $4, Y8, Y9")
        e("\tVPAND Y15, Y8, Y8")
        e("\tVPAND Y15, Y9, Y9")
        for t in range(T):
            e(f"\tVPBROADCASTD {2+4*k}(R11){IDX[t]}, Y10")
            e("\tVPMADDUBSW Y10, Y8, Y10")
            e(f"\tVPADDW Y10, Y{t}, Y{t}")
            e(f"\tVPBROADCASTD {18+4*k}(R11){IDX[t]}, Y11")
            e("\tVPMADDUBSW Y11, Y9, Y11")
            e(f"\tVPADDW Y11, Y{t}, Y{t}")
    e("\tVCVTPH2PS (SI), Y12")
    for t in range(T):
        e(f"\tVPMADDWD Y14, Y{t}, Y{t}")
        e(f"\tVPBROADCASTD 4(R12){IDX[t]}, Y10")
        e(f"\tVPSUBD Y10, Y{t}, Y{t}")
        e(f"\tVCVTDQ2PS Y{t}, Y{t}")
        e(f"\tVBROADCASTSS (R12){IDX[t]}, Y11")
        e("\tVMULPS Y11, Y12, Y11")
        e(f"\tVFMADD231PS Y11, Y{t}, Y{4+t}")
    e("\tADDQ $144, SI")
    e("\tADDQ $34, R11")
    e("\tADDQ $8, R12")
    e("\tDECQ AX")
    e(f"\tJNZ {label}_block")
    # stores
    e("\tVMOVUPS Y4, (DX)")
    if T > 1:
        e("\tVMOVUPS Y5, (DX)(R9*1)")
    if T > 2:
        e("\tVMOVUPS Y6, (DX)(R9*2)")
    if T > 3:
        e("\tLEAQ (R9)(R9*2), AX")
        e("\tVMOVUPS Y7, (DX)(AX*1)")
    e(f"\tLEAQ (DI)(R8*{T if T!=3 else 1}), DI" if T in (1,2,4) and False else "")
    for _ in range(T):
        e("\tADDQ R8, DI")
        e("\tADDQ R9, DX")
    e(f"\tSUBQ ${T}, BX")

e("""// func gemmQ4_0P8AVX2(nb int, w, a *byte, aStride int, out *float32, outStride int, groups, nt int)
//
// out[t·outStride/4 + 8g + r] for the groups g < groups of 8 packed Q4_0
// rows at w (nb blocks of 144 bytes each) and the tokens t < nt, whose
// blocked kernels' activations (nb Q8_0 blocks, then per block da and
// 8·Σa) lie at a + t·aStride; nb, groups, nt ≥ 1. Per group the tokens go
// in tiles of 4, then 2, then 1.
TEXT ·gemmQ4_0P8AVX2(SB), NOSPLIT, $16-64
	MOVQ nb+0(FP), CX
	MOVQ w+8(FP), R15
	MOVQ aStride+24(FP), R8
	LEAQ (R8)(R8*2), R13
	MOVQ out+32(FP), DX
	MOVQ outStride+40(FP), R9
	SHLQ $2, R9
	MOVQ groups+48(FP), R10
	MOVQ R10, 8(SP)
	MOVQ DX, 0(SP)
	// The side table at 34·nb.
	MOVQ CX, R14
	SHLQ $4, R14
	ADDQ CX, R14
	SHLQ $1, R14
	MOVL         $0x0f0f0f0f, AX
	VMOVD        AX, X15
	VPBROADCASTD X15, Y15
	MOVL         $0x00010001, AX
	VMOVD        AX, X14
	VPBROADCASTD X14, Y14

q4group:
	MOVQ a+16(FP), DI
	MOVQ 0(SP), DX
	MOVQ nt+56(FP), BX

q4tiles:
	CMPQ BX, $4
	JLT  q4two""")
q4tile(4, "q4t4")
e("\tJMP q4tiles")
e("q4two:")
e("\tCMPQ BX, $2")
e("\tJLT q4one")
q4tile(2, "q4t2")
e("q4one:")
e("\tCMPQ BX, $1")
e("\tJLT q4next")
q4tile(1, "q4t1")
e("""q4next:
	// The next group: 144·nb bytes of weights on, 8 outputs on.
	MOVQ CX, AX
	SHLQ $4, AX
	LEAQ (AX)(AX*8), AX
	ADDQ AX, R15
	ADDQ $32, 0(SP)
	DECQ 8(SP)
	JNZ  q4group
	VZEROUPPER
	RET
""")
sys.stdout.write("\n".join(l for l in out if l != "") + "\n")
