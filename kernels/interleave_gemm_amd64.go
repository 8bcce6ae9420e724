//go:build amd64 && !purego

package kernels

// gemmInterleaved is gemmInterleavedGeneric, in assembly where it runs.
func gemmInterleaved(t DType, nb int, w, a []byte, aStride int, out []float32, outStride, nt int) {
	groups := len(w) / (nb * interleavedGroupBytes(t))
	if !quantAsm || nb == 0 || groups == 0 || nt == 0 {
		gemmInterleavedGeneric(t, nb, w, a, aStride, out, outStride, nt)
		return
	}
	if t != Q4_0 {
		gemmKInterleaved(t, nb, w, a, aStride, out, outStride, groups, nt)
		return
	}
	_ = a[(nt-1)*aStride+nb*(bytesQ8_0+8)-1]
	_ = out[(nt-1)*outStride+8*groups-1]
	if vnni && groups >= 2 {
		// Two groups a 512-bit register, the odd one with AVX2.
		gemmQ4_0P16VNNI(nb, &w[0], &a[0], aStride, &out[0], outStride, groups/2, nt)
		if groups%2 == 0 {
			return
		}
		g := groups - 1
		gemmQ4_0P8AVX2(nb, &w[g*nb*bytesQ4_0x8], &a[0], aStride, &out[8*g], outStride, 1, nt)
		return
	}
	gemmQ4_0P8AVX2(nb, &w[0], &a[0], aStride, &out[0], outStride, groups, nt)
}

//go:noescape
func gemmQ4_0P8AVX2(nb int, w, a *byte, aStride int, out *float32, outStride int, groups, nt int)

//go:noescape
func gemmQ4_0P16VNNI(nb int, w, a *byte, aStride int, out *float32, outStride int, pairs, nt int)

// gemmKInterleaved is gemmInterleaved of Q4_K and Q5_K: pairs of groups
// with AVX-512 VNNI, the rest with the one-token kernel per token.
func gemmKInterleaved(t DType, nb int, w, a []byte, aStride int, out []float32, outStride, groups, nt int) {
	_ = a[(nt-1)*aStride+nb*bytesQ8_K-1]
	_ = out[(nt-1)*outStride+8*groups-1]
	g := 0
	if vnni && groups >= 2 {
		if t == Q4_K {
			gemmQ4_KP16VNNI(nb, &w[0], &a[0], aStride, &out[0], outStride, groups/2, nt)
		} else {
			gemmQ5_KP16VNNI(nb, &w[0], &a[0], aStride, &out[0], outStride, groups/2, nt)
		}
		g = groups / 2 * 2
	}
	if g == groups {
		return
	}
	gb := nb * interleavedGroupBytes(t)
	for k := range nt {
		gemvInterleaved(t, nb, w[g*gb:], a[k*aStride:], out[k*outStride+8*g:k*outStride+8*groups])
	}
}

//go:noescape
func gemmQ4_KP16VNNI(nb int, w, a *byte, aStride int, out *float32, outStride int, pairs, nt int)

//go:noescape
func gemmQ5_KP16VNNI(nb int, w, a *byte, aStride int, out *float32, outStride int, pairs, nt int)
