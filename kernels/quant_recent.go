package kernels

// The products of recent ggml's CPU backend (the llama.cpp of
// node-llama-cpp 3.22.1) where they differ from the vec_dot kernels the
// rest of this package follows: Q4_K matrices of rows in multiples of 8 it
// repacks 8 rows at a time (as Q4_0, IQ4_NL and MXFP4, whose VecDot here
// already follows the repacked products), and IQ4_XS matrices it
// multiplies by 8 or more tokens through its "IQ panel", which decodes 8
// rows at a time into int8. Both sum each super-block exactly as an
// integer and add it to one float per output by a fused multiply-add with
// the super-block's dw·da, super-block after super-block (Q4_K's mins in a
// second float, subtracted at the end). ExpertMatMul uses them, as
// llama.cpp's mixtures of experts take them.

// vecDotQ4_KRepackGeneric is the Q4_K·Q8_K product of ggml's repacked
// Q4_K gemv and gemm (q4_K_8x8_q8_K).
func vecDotQ4_KRepackGeneric(n int, w, a []byte) float32 {
	checkDot(Q4_K, Q8_K, n, w, a)
	var acc, accM float32
	for b := 0; b < n/QKK; b++ {
		x, y := w[b*bytesQ4_K:(b+1)*bytesQ4_K], a[b*bytesQ8_K:(b+1)*bytesQ8_K]
		var isum, imin int32
		for j := range 8 {
			sc, m := scaleMinK4(j, x[4:16])
			qs, ys := x[16+32*(j/2):16+32*(j/2)+32], y[4+32*j:4+32*j+32]
			var s int32
			for l, v := range qs {
				if j%2 == 1 {
					v >>= 4
				}
				s += int32(v&0xf) * int32(int8(ys[l]))
			}
			isum += int32(sc) * s
			imin += int32(m) * (bsum(y, 2*j) + bsum(y, 2*j+1))
		}
		dy := q8K(y)
		acc = fmaf(float32(isum), halfAt(x, 0)*dy, acc)
		accM = fmaf(float32(imin), halfAt(x, 2)*dy, accM)
	}
	return acc - accM
}

// vecDotQ4_KGemmGeneric is the Q4_K·Q8_K product of ggml's repacked Q4_K
// gemm (q4_K_8x8_q8_K of 4 tokens at once), which adds every 64 weights'
// integer sum (and its mins') into the floats where the gemv adds every
// super-block's.
func vecDotQ4_KGemmGeneric(n int, w, a []byte) float32 {
	checkDot(Q4_K, Q8_K, n, w, a)
	var acc, accM float32
	for b := 0; b < n/QKK; b++ {
		x, y := w[b*bytesQ4_K:(b+1)*bytesQ4_K], a[b*bytesQ8_K:(b+1)*bytesQ8_K]
		dy := q8K(y)
		dd, dm := halfAt(x, 0)*dy, halfAt(x, 2)*dy
		for k := range 4 {
			var isum, imin int32
			for j := 2 * k; j < 2*k+2; j++ {
				sc, m := scaleMinK4(j, x[4:16])
				qs, ys := x[16+32*k:16+32*k+32], y[4+32*j:4+32*j+32]
				var s int32
				for l, v := range qs {
					if j%2 == 1 {
						v >>= 4
					}
					s += int32(v&0xf) * int32(int8(ys[l]))
				}
				isum += int32(sc) * s
				imin += int32(m) * (bsum(y, 2*j) + bsum(y, 2*j+1))
			}
			acc = fmaf(float32(isum), dd, acc)
			accM = fmaf(float32(imin), dm, accM)
		}
	}
	return acc - accM
}

// vecDotIQ4_XSPanelGeneric is the IQ4_XS·Q8_K product of ggml's IQ panel
// gemm (iqp_gemm_8x8_q8_K).
func vecDotIQ4_XSPanelGeneric(n int, w, a []byte) float32 {
	checkDot(IQ4_XS, Q8_K, n, w, a)
	var acc float32
	for b := 0; b < n/QKK; b++ {
		x, y := w[b*bytesIQ4_XS:(b+1)*bytesIQ4_XS], a[b*bytesQ8_K:(b+1)*bytesQ8_K]
		var isum int32
		for i := range QKK / 32 {
			isum += (iq4xsScale(x, i) - 32) * dotNibbles(&iq4nlValues, x[8+16*i:8+16*(i+1)], y[4+32*i:4+32*(i+1)])
		}
		acc = fmaf(float32(isum), halfAt(x, 0)*q8K(y), acc)
	}
	return acc
}

// iqPanelMinTokens is the fewest tokens ggml multiplies IQ4_XS weights by
// through its IQ panel (per expert in a mixture's products).
const iqPanelMinTokens = 8

// ExpertMatMul is MatMul as recent ggml's CPU backend computes a mixture of
// experts' product (MUL_MAT_ID) of n tokens by one expert's (rows, cols)
// matrix w of type t: Q4_K (rows in multiples of 8) by its repacked
// products, IQ4_XS by its IQ panel from 8 tokens on, float weights by
// vec_dot token after token (never tinyBLAS), the other formats as MatMul.
// Every output is the VecDot-like product of its row and token, so the
// outputs do not depend on how tokens are grouped. scratch holds at least
// MatScratchBytes(t, cols, n) bytes; it does not allocate.
func ExpertMatMul(p *Pool, t DType, w []byte, rows, cols int, x []float32, n int, out []float32, scratch []byte) {
	var dot func(n int, w, a []byte) float32
	switch {
	case t == Q4_K && rows%8 == 0:
		dot = vecDotQ4_KRepack
	case t == IQ4_XS && rows%8 == 0 && n >= iqPanelMinTokens:
		dot = vecDotIQ4_XSPanel
	case t == F32 || t == F16 || t == BF16:
		dot, _ = vecDotOf(t)
	default:
		MatMul(p, t, w, rows, cols, x, n, out, scratch)
		return
	}
	tr := checkMatMul("ExpertMatMul", t, len(w), rows, cols, len(x), n, len(out), len(scratch), MatScratchBytes(t, cols, n))
	if rows == 0 || n == 0 {
		return
	}
	j := prepareVecDot(p, tr, t, w, rows, cols, x, n, out, scratch)
	j.vecDot = dot
	j.dot4, j.dot4s, j.dot8s, j.rows4 = nil, nil, nil, nil // prepareVecDot's go with VecDot, not dot
	if t == Q4_K {
		j.dot8, j.dot4 = vecDotQ4_KRepack8, vecDotQ4_KRepack4
	}
	runMatJob(p, j)
}

// MatMulRecent is MatMul as recent ggml's CPU backend computes a matrix
// product (MUL_MAT) of n tokens by the (rows, cols) matrix w of type t,
// where it differs from the vec_dot products MatMul follows (the older
// llama.cpp of ../shared's references): float weights by tinyBLAS from 2
// tokens on, Q4_K (rows in multiples of 8) repacked, by its gemm for the
// first n − n%4 tokens and its gemv for the rest, IQ4_XS by its IQ panel
// from 8 tokens on. The backend runs the models only that llama.cpp knows
// (the mixtures of experts) this way. scratch holds at least
// MatScratchBytes(t, cols, n) bytes; it does not allocate.
func MatMulRecent(p *Pool, t DType, w []byte, rows, cols int, x []float32, n int, out []float32, scratch []byte) {
	var dot, rest func(n int, w, a []byte) float32
	split := n // tokens [0, split) take dot, [split, n) rest
	switch {
	case (t == F32 || t == F16 || t == BF16) && n >= 2:
		dot = GemmVecDot(t)
	case t == Q4_K && rows%8 == 0:
		dot, rest, split = vecDotQ4_KGemm, vecDotQ4_KRepack, n-n%4
	case t == IQ4_XS && rows%8 == 0 && n >= iqPanelMinTokens:
		dot = vecDotIQ4_XSPanel
	default:
		MatMul(p, t, w, rows, cols, x, n, out, scratch)
		return
	}
	tr := checkMatMul("MatMulRecent", t, len(w), rows, cols, len(x), n, len(out), len(scratch), MatScratchBytes(t, cols, n))
	if rows == 0 || n == 0 {
		return
	}
	j := prepareVecDot(p, tr, t, w, rows, cols, x, n, out, scratch)
	j.vecDot, j.rest, j.split = dot, rest, split
	j.dot4, j.dot4s, j.dot8s, j.rows4 = nil, nil, nil, nil // prepareVecDot's go with VecDot, not dot
	if t == Q4_K {
		j.dot8, j.dot4 = vecDotQ4_KGemm8, vecDotQ4_KGemm4
	}
	runMatJob(p, j)
}

// runMatJob runs j over its rows and tokens on p (nil: the caller alone).
func runMatJob(p *Pool, j matJob) {
	nTasks := (j.rows + matRowBlock - 1) / matRowBlock * j.nTokBlocks
	if p == nil {
		for task := range nTasks {
			j.Do(task, 0)
		}
		return
	}
	p.mu.Lock()
	p.mat = j
	p.run(nTasks, &p.mat)
	p.mat = matJob{}
	p.mu.Unlock()
}

// vecDotOf is the VecDot of t.
func vecDotOf(t DType) (func(n int, w, a []byte) float32, bool) {
	tr, ok := TraitsOf(t)
	if !ok {
		return nil, false
	}
	return tr.VecDot, true
}
