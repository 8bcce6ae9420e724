//go:build amd64 && !purego

package kernels

// gemvInterleaved is gemvInterleavedGeneric, in assembly where it runs.
func gemvInterleaved(t DType, nb int, w, a []byte, out []float32) {
	groups := len(out) / 8
	if !quantAsm || nb == 0 || groups == 0 {
		gemvInterleavedGeneric(t, nb, w, a, out)
		return
	}
	_ = w[groups*nb*interleavedGroupBytes(t)-1]
	if t == Q4_0 {
		_ = a[nb*(bytesQ8_0+8)-1]
		gemvQ4_0P8AVX2(nb, &w[0], &a[0], &out[0], groups)
		return
	}
	_ = a[nb*bytesQ8_K-1]
	if t == Q5_K {
		gemvQ5_KP8AVX2(nb, &w[0], &a[0], &out[0], groups)
		return
	}
	gemvQ4_KP8AVX2(nb, &w[0], &a[0], &out[0], groups)
}

//go:noescape
func gemvQ4_0P8AVX2(nb int, w, a *byte, out *float32, groups int)

//go:noescape
func gemvQ4_KP8AVX2(nb int, w, a *byte, out *float32, groups int)

//go:noescape
func gemvQ5_KP8AVX2(nb int, w, a *byte, out *float32, groups int)
