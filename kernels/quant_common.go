package kernels

import (
	"encoding/binary"
	"fmt"
	"math"
)

// le is the byte order of every ggml block field.
var le = binary.LittleEndian

// halfAt reads the IEEE half at b[off:off+2] as a float32.
func halfAt(b []byte, off int) float32 { return FP16ToFP32(le.Uint16(b[off:])) }

// putHalf stores f rounded to half precision at b[off:off+2].
func putHalf(b []byte, off int, f float32) { le.PutUint16(b[off:], FP32ToFP16(f)) }

// nearestInt rounds to the nearest integer, ties to even, the way ggml's
// k-quant code does it: adding 1.5·2^23 leaves the integer in the low mantissa
// bits. Valid for |f| < 2^22, which the quantizers guarantee for finite input.
func nearestInt(f float32) int {
	v := f + 12582912
	return int(math.Float32bits(v)&0x007fffff) - 0x00400000
}

// roundAway rounds half away from zero, as C's roundf.
func roundAway(f float32) float32 {
	return float32(math.Round(float64(f)))
}

// roundEven rounds half to even, as the SSE/AVX round instruction in its
// default mode.
func roundEven(f float32) float32 {
	return float32(math.RoundToEven(float64(f)))
}

// blockShapes holds the block size and bytes of every format, indexed by
// DType: the per-row size checks below run once per dot product, too often
// for DType's map lookup.
var blockShapes = func() (s [MXFP4 + 1]struct{ size, bytes int }) {
	for t := range s {
		s[t].size, s[t].bytes = DType(t).BlockSize(), DType(t).BlockBytes()
	}
	return s
}()

// rowBytes is t.RowBytes(n) for the formats with traits.
func rowBytes(t DType, n int) int {
	if int(t) >= len(blockShapes) {
		return -1
	}
	b := blockShapes[t]
	if b.size == 0 || n < 0 || n%b.size != 0 {
		return -1
	}
	return n / b.size * b.bytes
}

// checkRow panics unless src holds exactly the n elements of dst encoded as t.
// A wrong size is a bug in the caller (GGUF sizes are validated at load), and
// the assembly kernels must never read past their slices.
func checkRow(t DType, n, srcBytes int) {
	if want := rowBytes(t, n); want < 0 || want != srcBytes {
		panic(fmt.Sprintf("kernels: %v row of %d elements needs %d bytes, got %d", t, n, want, srcBytes))
	}
}

// checkDot panics unless w holds n weights of type wt and a holds n
// activations of type at.
func checkDot(wt, at DType, n int, w, a []byte) {
	ww, aw := rowBytes(wt, n), rowBytes(at, n)
	if ww < 0 || aw < 0 || len(w) < ww || len(a) < aw {
		panic(fmt.Sprintf("kernels: %v·%v dot of %d elements: got %d and %d bytes, need %d and %d",
			wt, at, n, len(w), len(a), ww, aw))
	}
}
