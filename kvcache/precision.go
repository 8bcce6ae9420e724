package kvcache

import (
	"fmt"
	"strings"

	"github.com/ruvllm/ruvllm/kernels"
)

// Precision is the element format of cached keys and values.
type Precision int

const (
	// F16 halves the memory of F32 and is llama.cpp's default cache type;
	// the zero value, so that options default to it.
	F16 Precision = iota
	// F32 keeps keys and values exactly as computed.
	F32
	// Q8 keeps every full block at 8 bits, the block being filled at F16.
	Q8
	// Q4 keeps every full block at 4 bits, the block being filled at F16.
	Q4
	// Tiered keeps a sequence's most recent blocks at F16
	// (PoolOptions.HotTokens), the ones before them at 8 bits (WarmTokens)
	// and older ones at 4 bits.
	Tiered
)

// precisionNames are the names flags and files give the precisions.
var precisionNames = [...]string{F16: "f16", F32: "f32", Q8: "q8", Q4: "q4", Tiered: "tiered"}

// DType is the kernels format of one element of an F16 or F32 pool, and of
// the exact form of a tiered pool's blocks (F16).
func (p Precision) DType() kernels.DType {
	if p == F32 {
		return kernels.F32
	}
	return kernels.F16
}

// Quantized reports whether blocks of this precision have tiers (Q8, Q4,
// Tiered).
func (p Precision) Quantized() bool { return p == Q8 || p == Q4 || p == Tiered }

func (p Precision) String() string {
	if p >= 0 && int(p) < len(precisionNames) {
		return precisionNames[p]
	}
	return fmt.Sprintf("Precision(%d)", int(p))
}

// ParsePrecision reads "f16", "f32", "q8", "q4" or "tiered" (any case), as
// a flag or config file names a cache type.
func ParsePrecision(s string) (Precision, error) {
	for p, name := range precisionNames {
		if strings.EqualFold(s, name) {
			return Precision(p), nil
		}
	}
	return 0, fmt.Errorf("kvcache: cache type %q is not supported (%s)", s, strings.Join(precisionNames[:], ", "))
}

// maxBytes bounds one pool so that a hostile size is an error, not an
// allocation that kills the process.
const maxBytes = 1 << 40
