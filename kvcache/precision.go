package kvcache

import (
	"fmt"

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
)

// DType is the kernels format of one element.
func (p Precision) DType() kernels.DType {
	if p == F32 {
		return kernels.F32
	}
	return kernels.F16
}

func (p Precision) String() string { return p.DType().String() }

// ParsePrecision reads "f16" or "f32" (any case), as a flag or config file
// names a cache type.
func ParsePrecision(s string) (Precision, error) {
	if t, ok := kernels.ParseDType(s); ok {
		switch t {
		case kernels.F16:
			return F16, nil
		case kernels.F32:
			return F32, nil
		}
	}
	return 0, fmt.Errorf("kvcache: cache type %q is not supported (f16, f32)", s)
}

// maxBytes bounds one pool so that a hostile size is an error, not an
// allocation that kills the process.
const maxBytes = 1 << 40
