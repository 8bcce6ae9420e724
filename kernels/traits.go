package kernels

// Traits are the row operations of one format.
//
// A Traits value returned by TraitsOf is shared: do not modify it.
type Traits struct {
	VecDotType    DType                            // the format activations are quantized to for VecDot
	DequantizeRow func(src []byte, dst []float32)  // len(dst) elements; len(src) == RowBytes(len(dst))
	QuantizeRow   func(src []float32, dst []byte)  // len(src) multiple of BlockSize
	VecDot        func(n int, w, a []byte) float32 // w: n weights in this format; a: n activations in VecDotType
}

// traitsTable is indexed by DType; nil for formats we cannot compute with.
// The VecDot entries of formats with assembly kernels are dispatchers that
// pick the kernel for this CPU (quant_amd64.go, quant_noasm.go).
var traitsTable = [MXFP4 + 1]*Traits{
	F32:  {F32, dequantizeRowF32, quantizeRowF32, vecDotF32},
	F16:  {F16, dequantizeRowF16, quantizeRowF16, vecDotF16},
	BF16: {BF16, dequantizeRowBF16, quantizeRowBF16, vecDotBF16},
	Q4_0: {Q8_0, dequantizeRowQ4_0, quantizeRowQ4_0, vecDotQ4_0},
	Q4_1: {Q8_1, dequantizeRowQ4_1, quantizeRowQ4_1, vecDotQ4_1},
	Q5_0: {Q8_0, dequantizeRowQ5_0, quantizeRowQ5_0, vecDotQ5_0},
	Q5_1: {Q8_1, dequantizeRowQ5_1, quantizeRowQ5_1, vecDotQ5_1},
	Q8_0: {Q8_0, dequantizeRowQ8_0, quantizeRowQ8_0, vecDotQ8_0},
	Q8_1: {Q8_1, dequantizeRowQ8_1, quantizeRowQ8_1, vecDotQ8_1Generic},
	Q2_K: {Q8_K, dequantizeRowQ2_K, quantizeRowQ2_K, vecDotQ2_K},
	Q3_K: {Q8_K, dequantizeRowQ3_K, quantizeRowQ3_K, vecDotQ3_K},
	Q4_K: {Q8_K, dequantizeRowQ4_K, quantizeRowQ4_K, vecDotQ4_K},
	Q5_K: {Q8_K, dequantizeRowQ5_K, quantizeRowQ5_K, vecDotQ5_K},
	Q6_K: {Q8_K, dequantizeRowQ6_K, quantizeRowQ6_K, vecDotQ6_K},
	Q8_K: {Q8_K, dequantizeRowQ8_K, quantizeRowQ8_K, vecDotQ8_KGeneric},
	// The formats of mixtures of experts' files (quant_iq4.go).
	IQ4_NL: {Q8_0, dequantizeRowIQ4_NL, quantizeRowIQ4_NL, vecDotIQ4_NL},
	IQ4_XS: {Q8_K, dequantizeRowIQ4_XS, quantizeRowIQ4_XS, vecDotIQ4_XS},
	MXFP4:  {Q8_0, dequantizeRowMXFP4, quantizeRowMXFP4, vecDotMXFP4},
}

// TraitsOf returns the row operations of t, or false for formats we cannot
// compute with (the grid IQ and ternary formats, integer types, unknown
// values).
func TraitsOf(t DType) (*Traits, bool) {
	if int(t) >= len(traitsTable) || traitsTable[t] == nil {
		return nil, false
	}
	return traitsTable[t], true
}

// QuantizeActivations quantizes an activation row for a dot product the way
// ggml's SIMD CPU code does. It is t's QuantizeRow for every format but Q8_0,
// whose QuantizeRow is the reference quantizer that writes model files
// (rounding half away from zero); for activations ggml rounds half to even.
// The two differ only on exact ties.
func QuantizeActivations(t DType, src []float32, dst []byte) {
	switch t {
	case Q8_0:
		quantizeRowQ8_0Act(src, dst)
		return
	case Q8_K:
		quantRowQ8_K(src, dst) // in assembly where it runs, the same bytes
		return
	}
	tr, ok := TraitsOf(t)
	if !ok {
		panic("kernels: QuantizeActivations: no traits for " + t.String())
	}
	tr.QuantizeRow(src, dst)
}
