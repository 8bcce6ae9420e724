package kernels

import "fmt"

// Paged dot products: attention over a paged KV cache stores the values of a
// block transposed, (kv_heads·head_dim, block_tokens), so the value row of one
// sequence lies in pieces of block_tokens elements, one per block. llama.cpp
// sums each row as one dot product over a contiguous row; to match it bit for
// bit the paged forms carry the same accumulators from piece to piece and
// reduce once, at the end. Pieces are whole multiples of 32 elements, so every
// piece starts on a step boundary of the 32-element (vec_dot) and 8-element
// (tinyBLAS) steps, and the tail past the last whole 32 lies in the last piece.

// DotHalvesPaged is DotHalvesRows over rows stored in pieces: row r, for r <
// len(out), is the concatenation over s of base[offs[s]+r·stride:][:seg], cut
// to its first len(x) elements, and out[r] is its dot product with x exactly
// as VecDotHalves (or GemmDotHalves when gemm is set) computes it on the
// contiguous row. seg must be a positive multiple of 32 and len(offs) the
// number of pieces len(x) needs, (len(offs)-1)·seg < len(x) ≤ len(offs)·seg;
// every piece read must lie inside base. Other shapes panic.
func DotHalvesPaged(base []uint16, offs []int, seg, stride int, x []uint16, out []float32, gemm bool) {
	checkPaged("DotHalvesPaged", len(base), offs, seg, stride, len(x), len(out))
	if len(x) == 0 {
		clear(out) // the empty sum, as VecDotHalves of empty rows
		return
	}
	if len(out) == 0 {
		return
	}
	dotHalvesPaged(base, offs, seg, stride, x, out, gemm)
}

// DotFloatsPaged is DotHalvesPaged for float32 storage: out[r] is
// VecDotFloats (or GemmDotFloats when gemm is set) of the gathered row r and x.
func DotFloatsPaged(base []float32, offs []int, seg, stride int, x []float32, out []float32, gemm bool) {
	checkPaged("DotFloatsPaged", len(base), offs, seg, stride, len(x), len(out))
	if len(x) == 0 {
		clear(out)
		return
	}
	if len(out) == 0 {
		return
	}
	dotFloatsPaged(base, offs, seg, stride, x, out, gemm)
}

// checkPaged panics unless rows rows of n elements, in pieces of seg at
// offs[s]+r·stride, lie inside a base of baseLen elements. It is written so
// that no product can overflow, whatever the arguments.
func checkPaged(op string, baseLen int, offs []int, seg, stride, n, rows int) {
	if seg <= 0 || seg%32 != 0 {
		panic(fmt.Sprintf("kernels: %s: piece length %d is not a positive multiple of 32", op, seg))
	}
	need := 0 // pieces n elements fill: ceil(n/seg), without overflow
	if n > 0 {
		need = (n-1)/seg + 1
	}
	if len(offs) != need {
		panic(fmt.Sprintf("kernels: %s: %d elements in pieces of %d need %d pieces, got %d", op, n, seg, need, len(offs)))
	}
	if rows == 0 || n == 0 {
		return
	}
	if stride < 0 {
		panic(fmt.Sprintf("kernels: %s: negative row stride %d", op, stride))
	}
	if rows > 1 && stride > baseLen/(rows-1) {
		panic(fmt.Sprintf("kernels: %s: %d rows of stride %d do not fit in %d elements", op, rows, stride, baseLen))
	}
	span := (rows - 1) * stride // ≤ baseLen by the check above
	last := len(offs) - 1
	for s, off := range offs {
		size := seg
		if s == last {
			size = n - s*seg
		}
		if off < 0 || off > baseLen-span-size {
			panic(fmt.Sprintf("kernels: %s: piece %d of %d elements at %d, %d rows of stride %d, outside %d elements",
				op, s, size, off, rows, stride, baseLen))
		}
	}
}

// dotHalvesPagedGeneric is the pure-Go twin of DotHalvesPaged on checked
// shapes with len(x) > 0.
func dotHalvesPagedGeneric(base []uint16, offs []int, seg, stride int, x []uint16, out []float32, gemm bool) {
	dotPagedGeneric(base, offs, seg, stride, x, out, gemm, halfBytes, f16At, dotTailF16)
}

// dotFloatsPagedGeneric is the pure-Go twin of DotFloatsPaged on checked
// shapes with len(x) > 0. Its tail: body is a multiple of 4, so dotTailF32
// groups the tail counted from 0 as it groups it counted from body.
func dotFloatsPagedGeneric(base []float32, offs []int, seg, stride int, x []float32, out []float32, gemm bool) {
	dotPagedGeneric(base, offs, seg, stride, x, out, gemm, floatBytes, f32At, dotTailF32)
}

// dotPagedGeneric is the paged dot of elements of type T, seen as bytes by
// asBytes and read by at; tail adds the elements past the last whole 32 as
// the format's contiguous dot does.
func dotPagedGeneric[T uint16 | float32](base []T, offs []int, seg, stride int, x []T, out []float32, gemm bool,
	asBytes func([]T) []byte, at func([]byte, int) float32, tail func(s float32, from, n int, w, a []byte) float32) {
	n := len(x)
	for r := range out {
		row := r * stride
		if gemm && n%8 == 0 {
			var acc [8]float32
			for s, off := range offs {
				lo, size := s*seg, min(seg, n-s*seg)
				gemmSteps(&acc, size, asBytes(base[off+row:][:size]), asBytes(x[lo:][:size]), at)
			}
			out[r] = hsum8(&acc)
			continue
		}
		var acc floatLanes
		body := n &^ 31
		for s, off := range offs {
			lo := s * seg
			size := min(seg, body-lo)
			if size <= 0 {
				break
			}
			laneSteps(&acc, size, asBytes(base[off+row:][:size]), asBytes(x[lo:][:size]), at)
		}
		t := acc.combine()
		sum := reduceF32x8(&t)
		if rest := n - body; rest > 0 {
			w := base[offs[len(offs)-1]+row+body-(len(offs)-1)*seg:][:rest]
			sum = tail(sum, 0, rest, asBytes(w), asBytes(x[body:]))
		}
		out[r] = sum
	}
}

// gemmSteps runs tinyBLAS's 8-element steps over elements [0, n) of w and a
// (n a multiple of 8) into acc, element i in lane i%8, as gemmDotGeneric
// does before its reduction.
func gemmSteps(acc *[8]float32, n int, w, a []byte, at func([]byte, int) float32) {
	for i := 0; i < n; i += 8 {
		for l := range acc {
			acc[l] = fmaf(at(w, i+l), at(a, i+l), acc[l])
		}
	}
}
