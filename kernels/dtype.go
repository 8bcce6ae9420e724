package kernels

import (
	"fmt"
	"strings"
)

// DType is a tensor element format, numbered as ggml numbers them so that the
// value read from a GGUF tensor info is the DType itself.
type DType uint32

// The ggml tensor types. Gaps in the numbering are types ggml has removed.
const (
	F32     DType = 0
	F16     DType = 1
	Q4_0    DType = 2
	Q4_1    DType = 3
	Q5_0    DType = 6
	Q5_1    DType = 7
	Q8_0    DType = 8
	Q8_1    DType = 9
	Q2_K    DType = 10
	Q3_K    DType = 11
	Q4_K    DType = 12
	Q5_K    DType = 13
	Q6_K    DType = 14
	Q8_K    DType = 15
	IQ2_XXS DType = 16
	IQ2_XS  DType = 17
	IQ3_XXS DType = 18
	IQ1_S   DType = 19
	IQ4_NL  DType = 20
	IQ3_S   DType = 21
	IQ2_S   DType = 22
	IQ4_XS  DType = 23
	I8      DType = 24
	I16     DType = 25
	I32     DType = 26
	I64     DType = 27
	F64     DType = 28
	IQ1_M   DType = 29
	BF16    DType = 30
	TQ1_0   DType = 34
	TQ2_0   DType = 35
	MXFP4   DType = 39
)

// QK is the number of weights in a block of the legacy formats (Q4_0 .. Q8_1).
const QK = 32

// QKK is the number of weights in a super-block of the k-quant formats.
const QKK = 256

type dtypeInfo struct {
	name       string
	blockSize  int // elements per block
	blockBytes int // bytes per block
}

// dtypeTable holds every format a GGUF file may name, including the ones we
// cannot compute with yet, so that such files can still be read and inspected.
var dtypeTable = map[DType]dtypeInfo{
	F32:     {"F32", 1, 4},
	F16:     {"F16", 1, 2},
	Q4_0:    {"Q4_0", QK, 2 + QK/2},
	Q4_1:    {"Q4_1", QK, 4 + QK/2},
	Q5_0:    {"Q5_0", QK, 2 + 4 + QK/2},
	Q5_1:    {"Q5_1", QK, 4 + 4 + QK/2},
	Q8_0:    {"Q8_0", QK, 2 + QK},
	Q8_1:    {"Q8_1", QK, 4 + QK},
	Q2_K:    {"Q2_K", QKK, QKK/16 + QKK/4 + 4},
	Q3_K:    {"Q3_K", QKK, QKK/8 + QKK/4 + 12 + 2},
	Q4_K:    {"Q4_K", QKK, 4 + 12 + QKK/2},
	Q5_K:    {"Q5_K", QKK, 4 + 12 + QKK/8 + QKK/2},
	Q6_K:    {"Q6_K", QKK, QKK/2 + QKK/4 + QKK/16 + 2},
	Q8_K:    {"Q8_K", QKK, 4 + QKK + QKK/16*2},
	IQ2_XXS: {"IQ2_XXS", QKK, 2 + QKK/8*2},
	IQ2_XS:  {"IQ2_XS", QKK, 2 + QKK/8*2 + QKK/32},
	IQ3_XXS: {"IQ3_XXS", QKK, 2 + 3*QKK/8},
	IQ1_S:   {"IQ1_S", QKK, 2 + QKK/8 + QKK/16},
	IQ4_NL:  {"IQ4_NL", QK, 2 + QK/2},
	IQ3_S:   {"IQ3_S", QKK, 2 + QKK/4 + QKK/32 + QKK/8 + QKK/64},
	IQ2_S:   {"IQ2_S", QKK, 2 + QKK/4 + QKK/32 + QKK/32},
	IQ4_XS:  {"IQ4_XS", QKK, 2 + 2 + QKK/64 + QKK/2},
	I8:      {"I8", 1, 1},
	I16:     {"I16", 1, 2},
	I32:     {"I32", 1, 4},
	I64:     {"I64", 1, 8},
	F64:     {"F64", 1, 8},
	IQ1_M:   {"IQ1_M", QKK, QKK/8 + QKK/16 + QKK/32},
	BF16:    {"BF16", 1, 2},
	TQ1_0:   {"TQ1_0", QKK, 2 + (QKK-4*QKK/64)/5 + QKK/64},
	TQ2_0:   {"TQ2_0", QKK, 2 + QKK/4},
	MXFP4:   {"MXFP4", QK, 1 + QK/2},
}

// Known reports whether t is a format ggml defines.
func (t DType) Known() bool { _, ok := dtypeTable[t]; return ok }

// String returns ggml's name of the format.
func (t DType) String() string {
	if i, ok := dtypeTable[t]; ok {
		return i.name
	}
	return fmt.Sprintf("DType(%d)", uint32(t))
}

// BlockSize is the number of elements one block of t holds; a row's length
// must be a multiple of it. It is 0 for an unknown type.
func (t DType) BlockSize() int { return dtypeTable[t].blockSize }

// BlockBytes is the encoded size of one block of t. It is 0 for an unknown type.
func (t DType) BlockBytes() int { return dtypeTable[t].blockBytes }

// RowBytes is the encoded size of n elements of t, or -1 when n is not a whole
// number of blocks or t is unknown.
func (t DType) RowBytes(n int) int {
	i, ok := dtypeTable[t]
	if !ok || n < 0 || n%i.blockSize != 0 {
		return -1
	}
	return n / i.blockSize * i.blockBytes
}

// ParseDType returns the format with ggml's name s (as "Q4_K" or "f16").
func ParseDType(s string) (DType, bool) {
	for t, i := range dtypeTable {
		if strings.EqualFold(i.name, s) {
			return t, true
		}
	}
	return 0, false
}
