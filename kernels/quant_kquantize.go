package kernels

import "math"

// The k-quant quantizers, following ggml's reference quantizers (the ones
// llama-quantize uses without an importance matrix): a search for each
// sub-block's scale (and min) that minimises a weighted error, then the
// sub-block scales quantized against the super-block's largest, then every
// weight re-quantized with the scale it will actually be read back with.

// groupMaxEps is the |x| under which a group counts as all zero.
const groupMaxEps = 1e-15

func abs32(f float32) float32 { return float32(math.Abs(float64(f))) }

func sqrt32(f float32) float32 { return float32(math.Sqrt(float64(f))) }

func clampInt(v, lo, hi int) int { return max(lo, min(hi, v)) }

// searchSymmetric picks a scale for x with quants in [-nmax, nmax-1],
// weighting errors by x², by trying 19 reciprocal scales around nmax/max and
// keeping the least-squares scale of the best. L receives the quants biased by
// nmax. (ggml: make_qx_quants with rmse_type 1.)
func searchSymmetric(x []float32, nmax int, L []int8) float32 {
	amax, max := absMaxSigned(x)
	if amax < groupMaxEps {
		clear(L[:len(x)])
		return 0
	}
	fnmax := float32(nmax)
	sums := func(iscale float32, store bool) (sumlx, suml2 float32) {
		for i, v := range x {
			l := clampInt(nearestInt(float32(iscale*v)), -nmax, nmax-1)
			if store {
				L[i] = int8(l + nmax)
			}
			w := float32(v * v)
			fl := float32(l)
			sumlx += float32(float32(w*v) * fl)
			suml2 += float32(float32(w*fl) * fl)
		}
		return sumlx, suml2
	}
	sumlx, suml2 := sums(-fnmax/max, true)
	var scale float32
	if suml2 != 0 {
		scale = sumlx / suml2
	}
	best := float32(scale * sumlx)
	for is := -9; is <= 9; is++ {
		if is == 0 {
			continue
		}
		iscale := -(fnmax + float32(0.1*float32(is))) / max
		slx, sl2 := sums(iscale, false)
		if sl2 > 0 && float32(slx*slx) > float32(best*sl2) {
			sums(iscale, true)
			scale = slx / sl2
			best = float32(scale * slx)
		}
	}
	return scale
}

// searchSymmetricRefine picks a scale for x with quants in [-nmax, nmax-1] by
// starting from nmax/max and then moving single quants while that improves
// the x²-weighted fit, up to five sweeps. L receives the quants biased by
// nmax. (ggml: make_q3_quants with do_rmse.)
func searchSymmetricRefine(x []float32, nmax int, L []int8) float32 {
	amax, max := absMaxSigned(x)
	if amax < groupMaxEps {
		clear(L[:len(x)])
		return 0
	}
	iscale := -float32(nmax) / max
	var sumlx, suml2 float32
	for i, v := range x {
		l := clampInt(nearestInt(float32(iscale*v)), -nmax, nmax-1)
		L[i] = int8(l)
		w := float32(v * v)
		sumlx += float32(float32(w*v) * float32(l))
		suml2 += float32(float32(w*float32(l)) * float32(l))
	}
	for range 5 {
		changed := false
		for i, v := range x {
			w := float32(v * v)
			li := float32(L[i])
			slx := sumlx - float32(float32(w*v)*li)
			if slx <= 0 {
				continue
			}
			sl2 := suml2 - float32(float32(w*li)*li)
			nl := clampInt(nearestInt(float32(float32(v*sl2)/slx)), -nmax, nmax-1)
			if nl == int(L[i]) {
				continue
			}
			fl := float32(nl)
			slx += float32(float32(w*v) * fl)
			sl2 += float32(float32(w*fl) * fl)
			if sl2 > 0 && float32(float32(slx*slx)*suml2) > float32(float32(sumlx*sumlx)*sl2) {
				L[i] = int8(nl)
				sumlx, suml2 = slx, sl2
				changed = true
			}
		}
		if !changed {
			break
		}
	}
	for i := range x {
		L[i] += int8(nmax)
	}
	if suml2 > 0 {
		return sumlx / suml2
	}
	return 0
}

// searchAffine fits x ≈ scale·L + min with L in [0, nmax] and min ≤ 0: it
// tries nstep+1 reciprocal scales (nmax+rmin+rdelta·i)/(max-min), solves the
// weighted least squares for scale and min at each rounding, and keeps the
// one with the least weighted squared (or absolute, useMAD) error. It returns
// scale and -min. (ggml: make_qkx2_quants.)
func searchAffine(x, weights []float32, nmax int, L, Laux []uint8, rmin, rdelta float32, nstep int, useMAD bool) (scale, negMin float32) {
	lo, hi := x[0], x[0]
	sumW := weights[0]
	sumX := float32(sumW * x[0])
	for i := 1; i < len(x); i++ {
		if x[i] < lo {
			lo = x[i]
		}
		if x[i] > hi {
			hi = x[i]
		}
		sumW += weights[i]
		sumX += float32(weights[i] * x[i])
	}
	if lo > 0 {
		lo = 0
	}
	if hi == lo {
		clear(L[:len(x)])
		return 0, -lo
	}
	errOf := func(diff float32) float32 {
		if useMAD {
			return abs32(diff)
		}
		return float32(diff * diff)
	}
	fnmax := float32(nmax)
	iscale := fnmax / (hi - lo)
	scale = 1 / iscale
	var bestErr float32
	for i, v := range x {
		L[i] = uint8(clampInt(nearestInt(float32(iscale*(v-lo))), 0, nmax))
		diff := float32(float32(scale*float32(L[i]))+lo) - v
		bestErr += float32(weights[i] * errOf(diff))
	}
	if nstep < 1 {
		return scale, -lo
	}
	for is := 0; is <= nstep; is++ {
		iscale = float32(rmin+float32(rdelta*float32(is))+fnmax) / (hi - lo)
		var sumL, sumL2, sumXL float32
		for i, v := range x {
			l := clampInt(nearestInt(float32(iscale*(v-lo))), 0, nmax)
			Laux[i] = uint8(l)
			w, fl := weights[i], float32(l)
			sumL += float32(w * fl)
			sumL2 += float32(float32(w*fl) * fl)
			sumXL += float32(float32(w*fl) * v)
		}
		D := float32(sumW*sumL2) - float32(sumL*sumL)
		if D <= 0 {
			continue
		}
		thisScale := (float32(sumW*sumXL) - float32(sumX*sumL)) / D
		thisMin := (float32(sumL2*sumX) - float32(sumL*sumXL)) / D
		if thisMin > 0 {
			thisMin = 0
			thisScale = sumXL / sumL2
		}
		var curErr float32
		for i, v := range x {
			diff := float32(float32(thisScale*float32(Laux[i]))+thisMin) - v
			curErr += float32(weights[i] * errOf(diff))
		}
		if curErr < bestErr {
			copy(L[:len(x)], Laux[:len(x)])
			bestErr, scale, lo = curErr, thisScale, thisMin
		}
	}
	return scale, -lo
}

// ---- Q2_K

func quantizeRowQ2_K(src []float32, dst []byte) {
	checkRow(Q2_K, len(src), len(dst))
	var (
		L              [QKK]uint8
		Laux           [16]uint8
		weights        [16]float32
		scales, mins   [QKK / 16]float32
		maxScale, maxM float32
	)
	const q4scale = 15
	for b := 0; b < len(src)/QKK; b++ {
		x, y := src[b*QKK:(b+1)*QKK], dst[b*bytesQ2_K:(b+1)*bytesQ2_K]
		maxScale, maxM = 0, 0
		for j := range QKK / 16 {
			xs := x[16*j : 16*j+16]
			for l, v := range xs {
				weights[l] = abs32(v)
			}
			scales[j], mins[j] = searchAffine(xs, weights[:], 3, L[16*j:16*j+16], Laux[:], -0.5, 0.1, 15, true)
			maxScale = max(maxScale, scales[j])
			maxM = max(maxM, mins[j])
		}
		clear(y)
		if maxScale > 0 {
			iscale := q4scale / maxScale
			for j := range QKK / 16 {
				y[j] = uint8(nearestInt(float32(iscale * scales[j])))
			}
			putHalf(y, 80, maxScale/q4scale)
		}
		if maxM > 0 {
			iscale := q4scale / maxM
			for j := range QKK / 16 {
				y[j] |= uint8(nearestInt(float32(iscale*mins[j]))) << 4
			}
			putHalf(y, 82, maxM/q4scale)
		}
		d, dmin := halfAt(y, 80), halfAt(y, 82)
		for j := range QKK / 16 {
			dl := d * float32(y[j]&0xf)
			if dl == 0 {
				continue
			}
			ml := dmin * float32(y[j]>>4)
			for i := 16 * j; i < 16*j+16; i++ {
				L[i] = uint8(clampInt(nearestInt((x[i]+ml)/dl), 0, 3))
			}
		}
		pack2Bit(L[:], y[16:80])
	}
}

// pack2Bit stores 256 two-bit values: byte l of each 32-byte group holds
// values l, l+32, l+64, l+96 of its 128.
func pack2Bit(L []uint8, qs []byte) {
	for h := 0; h < QKK; h += 128 {
		for l := range 32 {
			qs[h/4+l] = L[h+l] | L[h+l+32]<<2 | L[h+l+64]<<4 | L[h+l+96]<<6
		}
	}
}

// ---- Q3_K

func quantizeRowQ3_K(src []float32, dst []byte) {
	checkRow(Q3_K, len(src), len(dst))
	var (
		L      [QKK]int8
		scales [QKK / 16]float32
	)
	for b := 0; b < len(src)/QKK; b++ {
		x, y := src[b*QKK:(b+1)*QKK], dst[b*bytesQ3_K:(b+1)*bytesQ3_K]
		var maxScale, amax float32
		for j := range QKK / 16 {
			scales[j] = searchSymmetricRefine(x[16*j:16*j+16], 4, L[16*j:16*j+16])
			if a := abs32(scales[j]); a > amax {
				amax, maxScale = a, scales[j]
			}
		}
		clear(y)
		sc := y[96:108]
		if maxScale != 0 {
			iscale := -32 / maxScale
			for j := range QKK / 16 {
				l := uint8(clampInt(int(int8(nearestInt(float32(iscale*scales[j])))), -32, 31) + 32)
				if j < 8 {
					sc[j] = l & 0xf
				} else {
					sc[j-8] |= (l & 0xf) << 4
				}
				sc[8+j%4] |= (l >> 4) << (2 * (j / 4))
			}
			putHalf(y, 108, 1/iscale)
		}
		d := halfAt(y, 108)
		for j := range QKK / 16 {
			dl := d * float32(scaleQ3K(j, sc))
			if dl == 0 {
				continue
			}
			for i := 16 * j; i < 16*j+16; i++ {
				L[i] = int8(clampInt(nearestInt(x[i]/dl), -4, 3) + 4)
			}
		}
		var U [QKK]uint8
		for i, l := range L {
			if l > 3 {
				y[i%32] |= 1 << (i / 32)
				l -= 4
			}
			U[i] = uint8(l)
		}
		pack2Bit(U[:], y[32:96])
	}
}

// ---- Q4_K and Q5_K

// quantizeK4 fills the scales and mins of a Q4_K/Q5_K super-block (d, dmin
// and the 12 scale bytes at y[0:16]) and returns the quants in L, in [0, nmax].
func quantizeK4(x []float32, y []byte, nmax int, rmin float32, nstep int, L *[QKK]uint8) {
	var (
		Laux          [32]uint8
		weights       [32]float32
		scales, mins  [QKK / 32]float32
		maxScale, mxM float32
	)
	for j := range QKK / 32 {
		xs := x[32*j : 32*j+32]
		var sumX2 float32
		for _, v := range xs {
			sumX2 += float32(v * v)
		}
		av := sqrt32(sumX2 / 32)
		for l, v := range xs {
			weights[l] = av + abs32(v)
		}
		scales[j], mins[j] = searchAffine(xs, weights[:], nmax, L[32*j:32*j+32], Laux[:], rmin, 0.1, nstep, false)
		maxScale = max(maxScale, scales[j])
		mxM = max(mxM, mins[j])
	}
	var invScale, invMin float32
	if maxScale > 0 {
		invScale = 63 / maxScale
	}
	if mxM > 0 {
		invMin = 63 / mxM
	}
	s := y[4:16]
	clear(s)
	for j := range QKK / 32 {
		ls := min(63, uint8(nearestInt(float32(invScale*scales[j]))))
		lm := min(63, uint8(nearestInt(float32(invMin*mins[j]))))
		if j < 4 {
			s[j], s[j+4] = ls, lm
		} else {
			s[j+4] = ls&0xf | (lm&0xf)<<4
			s[j-4] |= (ls >> 4) << 6
			s[j] |= (lm >> 4) << 6
		}
	}
	putHalf(y, 0, maxScale/63)
	putHalf(y, 2, mxM/63)
	d, dmin := halfAt(y, 0), halfAt(y, 2)
	for j := range QKK / 32 {
		sc, m := scaleMinK4(j, s)
		dl := d * float32(sc)
		if dl == 0 {
			continue
		}
		ml := dmin * float32(m)
		for i := 32 * j; i < 32*j+32; i++ {
			L[i] = uint8(clampInt(nearestInt((x[i]+ml)/dl), 0, nmax))
		}
	}
}

func quantizeRowQ4_K(src []float32, dst []byte) {
	checkRow(Q4_K, len(src), len(dst))
	var L [QKK]uint8
	for b := 0; b < len(src)/QKK; b++ {
		x, y := src[b*QKK:(b+1)*QKK], dst[b*bytesQ4_K:(b+1)*bytesQ4_K]
		quantizeK4(x, y, 15, -1, 20, &L)
		q := y[16:]
		for h := 0; h < QKK; h += 64 {
			for l := range 32 {
				q[h/2+l] = L[h+l] | L[h+l+32]<<4
			}
		}
	}
}

func quantizeRowQ5_K(src []float32, dst []byte) {
	checkRow(Q5_K, len(src), len(dst))
	var L [QKK]uint8
	for b := 0; b < len(src)/QKK; b++ {
		x, y := src[b*QKK:(b+1)*QKK], dst[b*bytesQ5_K:(b+1)*bytesQ5_K]
		quantizeK4(x, y, 31, -0.5, 15, &L)
		qh, q := y[16:48], y[48:]
		clear(qh)
		for h := 0; h < QKK; h += 64 {
			bit := uint(h / 32) // sub-block index of the low nibbles
			for l := range 32 {
				l1, l2 := L[h+l], L[h+l+32]
				qh[l] |= (l1>>4)<<bit | (l2>>4)<<(bit+1)
				q[h/2+l] = l1&0xf | (l2&0xf)<<4
			}
		}
	}
}

// ---- Q6_K

func quantizeRowQ6_K(src []float32, dst []byte) {
	checkRow(Q6_K, len(src), len(dst))
	var (
		L      [QKK]int8
		scales [QKK / 16]float32
	)
	for b := 0; b < len(src)/QKK; b++ {
		x, y := src[b*QKK:(b+1)*QKK], dst[b*bytesQ6_K:(b+1)*bytesQ6_K]
		var maxScale, maxAbs float32
		for j := range QKK / 16 {
			scales[j] = searchSymmetric(x[16*j:16*j+16], 32, L[16*j:16*j+16])
			if a := abs32(scales[j]); a > maxAbs {
				maxAbs, maxScale = a, scales[j]
			}
		}
		clear(y)
		if maxAbs < groupMaxEps {
			continue
		}
		iscale := -128 / maxScale
		putHalf(y, 208, 1/iscale)
		for j := range QKK / 16 {
			y[192+j] = uint8(int8(min(127, nearestInt(float32(iscale*scales[j])))))
		}
		d := halfAt(y, 208)
		for j := range QKK / 16 {
			dl := d * float32(int8(y[192+j]))
			if dl == 0 {
				continue
			}
			for i := 16 * j; i < 16*j+16; i++ {
				L[i] = int8(clampInt(nearestInt(x[i]/dl), -32, 31) + 32)
			}
		}
		ql, qh := y[0:128], y[128:192]
		for h := 0; h < QKK; h += 128 {
			for l := range 32 {
				q1, q2, q3, q4 := uint8(L[h+l]), uint8(L[h+l+32]), uint8(L[h+l+64]), uint8(L[h+l+96])
				ql[h/2+l] = q1&0xf | (q3&0xf)<<4
				ql[h/2+l+32] = q2&0xf | (q4&0xf)<<4
				qh[h/4+l] = q1>>4 | (q2>>4)<<2 | (q3>>4)<<4 | (q4>>4)<<6
			}
		}
	}
}
