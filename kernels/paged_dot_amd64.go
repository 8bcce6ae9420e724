//go:build amd64 && !purego

package kernels

// The paged kernels (paged_dot_amd64.s) sum rows in pieces: the vec_dot
// forms two rows a call, the gemm forms eight, rows row, row+stride, ...
// of the store at base. n is the elements to sum, a positive multiple of 32
// (vec_dot) or 8 (gemm); out receives one sum a row.

//go:noescape
func dotPagedF16x2AVX2(base *uint16, offs *int, seg, n, row, stride int, x *uint16, out *float32)

//go:noescape
func gemmDotPagedF16x8AVX2(base *uint16, offs *int, seg, n, row, stride int, x *uint16, out *float32)

//go:noescape
func dotPagedF32x2AVX2(base *float32, offs *int, seg, n, row, stride int, x *float32, out *float32)

//go:noescape
func gemmDotPagedF32x8AVX2(base *float32, offs *int, seg, n, row, stride int, x *float32, out *float32)

// pagedGroup places the group of size rows that a kernel call computes,
// for rows r onwards of rows rows: the group starts at row g, its rows are
// step elements apart, and the call yields rows [r, end). When rows is
// smaller than a group, a call covers row r alone (step 0: each of the
// kernel's rows is row r); otherwise the last group is moved back to end at
// the last row, computing again rows of the group before it (to the same
// sums: each row has its own accumulators).
func pagedGroup(r, rows, size, stride int) (g, step, end int) {
	if rows < size {
		return r, 0, r + 1
	}
	g = min(r, rows-size)
	return g, stride, g + size
}

// dotHalvesPaged is DotHalvesPaged on checked shapes with len(x) > 0 and
// len(out) > 0. It and dotFloatsPaged stay two copies: one generic body
// taking the kernels as func values makes its sums escape, one allocation a
// call (TestDotPagedAllocs), where direct calls of the noescape assembly
// allocate nothing.
func dotHalvesPaged(base []uint16, offs []int, seg, stride int, x []uint16, out []float32, gemm bool) {
	if !quantAsm {
		dotHalvesPagedGeneric(base, offs, seg, stride, x, out, gemm)
		return
	}
	n, rows := len(x), len(out)
	if gemm && n%8 == 0 {
		var sums [8]float32
		for r := 0; r < rows; {
			g, step, end := pagedGroup(r, rows, len(sums), stride)
			gemmDotPagedF16x8AVX2(&base[0], &offs[0], seg, n, g*stride, step, &x[0], &sums[0])
			r += copy(out[r:end], sums[r-g:])
		}
		return
	}
	body, tail := n&^31, n%32
	// The tail lies in the last piece, which starts at element
	// (len(offs)-1)·seg of the row.
	tailAt := offs[len(offs)-1] + body - (len(offs)-1)*seg
	var sums [2]float32
	for r := 0; r < rows; {
		g, step, end := pagedGroup(r, rows, len(sums), stride)
		if body > 0 {
			dotPagedF16x2AVX2(&base[0], &offs[0], seg, body, g*stride, step, &x[0], &sums[0])
		}
		for ; r < end; r++ {
			s := sums[r-g]
			if tail > 0 {
				w := base[tailAt+r*stride:][:tail]
				s = dotTailF16(s, 0, tail, halfBytes(w), halfBytes(x[body:]))
			}
			out[r] = s
		}
	}
}

// dotFloatsPaged is DotFloatsPaged on checked shapes with len(x) > 0 and
// len(out) > 0.
func dotFloatsPaged(base []float32, offs []int, seg, stride int, x []float32, out []float32, gemm bool) {
	if !quantAsm {
		dotFloatsPagedGeneric(base, offs, seg, stride, x, out, gemm)
		return
	}
	n, rows := len(x), len(out)
	if gemm && n%8 == 0 {
		var sums [8]float32
		for r := 0; r < rows; {
			g, step, end := pagedGroup(r, rows, len(sums), stride)
			gemmDotPagedF32x8AVX2(&base[0], &offs[0], seg, n, g*stride, step, &x[0], &sums[0])
			r += copy(out[r:end], sums[r-g:])
		}
		return
	}
	body, tail := n&^31, n%32
	tailAt := offs[len(offs)-1] + body - (len(offs)-1)*seg
	var sums [2]float32
	for r := 0; r < rows; {
		g, step, end := pagedGroup(r, rows, len(sums), stride)
		if body > 0 {
			dotPagedF32x2AVX2(&base[0], &offs[0], seg, body, g*stride, step, &x[0], &sums[0])
		}
		for ; r < end; r++ {
			s := sums[r-g]
			if tail > 0 {
				w := base[tailAt+r*stride:][:tail]
				s = dotTailF32(s, 0, tail, floatBytes(w), floatBytes(x[body:]))
			}
			out[r] = s
		}
	}
}
