//go:build amd64 && !purego

package kernels

import "golang.org/x/sys/cpu"

// The blocked kernels (gemm.go) in assembly: AVX2 for every CPU the VecDot
// kernels run on (quantAsm), and AVX-512 (F16) and AVX-512 VNNI (Q4_0,
// Q8_0, Q4_K, Q6_K) token-group kernels where those run: groups of 16
// tokens, and of 8 for MatMul of at most 8 tokens. Every output of every
// kernel rounds exactly as the format's VecDot.

// avx512 reports whether the AVX-512 kernels run (F, VL and DQ; x/sys/cpu
// sets them only when the OS saves the 512-bit state).
var avx512 = quantAsm && cpu.X86.HasAVX512F && cpu.X86.HasAVX512VL && cpu.X86.HasAVX512DQ

// vnni reports whether the AVX-512 VNNI kernels run.
var vnni = avx512 && cpu.X86.HasAVX512BW && cpu.X86.HasAVX512VNNI

func init() {
	if !quantAsm {
		return
	}
	// F16 "blocks" are the 32-element steps of vecDotF16AVX2.
	f16 := &gemmFormat{blockSize: 32, gemv: gemvF16h, gemvTiles: gemvF16, gemm: gemmF16x1x3, tileR: 1, tileT: 3}
	q4 := &gemmFormat{blockSize: QK, gemv: gemvQ4_0, gemv2: gemvQ4_0x2,
		group: gemmQ4_0x4x8, groupR: 4, layout: q4Groups8}
	q8 := &gemmFormat{blockSize: QK, gemv: gemvQ8_0, gemv2: gemvQ8_0x2,
		group: gemmQ8_0x1x8, groupR: 1, layout: q8Groups8}
	q4k := &gemmFormat{blockSize: QKK, gemv: gemvQ4_K}
	q6k := &gemmFormat{blockSize: QKK, gemv: gemvQ6_K}
	if avx512 {
		f16.group, f16.groupTile, f16.groupTiles, f16.groupR = gemmF16Zx2x2, gemmF16Zx2x6, 3, 2
		f16.group1, f16.groupTile1, f16.layout = gemmF16Zx1x2, gemmF16Zx1x6, f16Groups2
	}
	if vnni {
		f16Floats = new([1 << 16]float32)
		halves := make([]uint16, 1<<16)
		for i := range halves {
			halves[i] = uint16(i)
		}
		fp16ToFP32Row(halves, f16Floats[:])
		q4.group, q4.layout = gemmQ4_0Vx4x16, q4Groups16
		q8.gemv2, q8.group, q8.layout = gemvQ8_0Vx2, gemmQ8_0Vx1x16, q8Groups16
		q4k.group, q4k.groupR, q4k.layout = gemmQ4_KVx1x16, 1, q4kGroups16
		q6k.group, q6k.groupR, q6k.layout = gemmQ6_KVx1x16, 1, q4kGroups16
		// 2 to 8 tokens (batched decode): groups of 8 (gemm_vnni8).
		q4.narrow = &gemmFormat{blockSize: QK, gemv: gemvQ4_0, gemv2: gemvQ4_0x2,
			group: gemmQ4_0Vx4x8, groupR: 4, layout: q4Groups8}
		q8.narrow = &gemmFormat{blockSize: QK, gemv: gemvQ8_0, gemv2: gemvQ8_0Vx2,
			group: gemmQ8_0Vx1x8, groupR: 1, layout: q8Pairs8}
		q4k.narrow = &gemmFormat{blockSize: QKK, gemv: gemvQ4_K,
			group: gemmQ4_KVx1x8, groupR: 1, layout: q4kGroups8}
		q6k.narrow = &gemmFormat{blockSize: QKK, gemv: gemvQ6_K,
			group: gemmQ6_KVx1x8, groupR: 1, layout: q6kGroups8}
	}
	gemmFormats[F16], gemmFormats[Q4_0], gemmFormats[Q8_0] = f16, q4, q8
	gemmFormats[Q4_K], gemmFormats[Q6_K] = q4k, q6k
}

// f16Floats, where the AVX-512 VNNI kernels run, is the float of every
// half, as VCVTPH2PS converts it (fp16ToFP32Row): 256 KB, from which
// gemvQ8_0Vx2 reads the weight scales with two loads instead of converting
// them (a shuffle and a conversion, on the ports its products need).
var f16Floats *[1 << 16]float32

// quantRowQ8_0Act is quantRowQ8_0ActGeneric, in assembly where it runs.
func quantRowQ8_0Act(x []float32, dst, side []byte) {
	nb := len(x) / QK
	if !quantAsm || nb == 0 {
		quantRowQ8_0ActGeneric(x, dst, side)
		return
	}
	checkRow(Q8_0, len(x), len(dst))
	_ = side[8*nb-1]
	quantRowQ8_0ActAVX2(&x[0], nb, &dst[0], &side[0])
}

// quantRowQ8_K is quantizeRowQ8_K, in assembly where it runs.
func quantRowQ8_K(x []float32, dst []byte) {
	nb := len(x) / QKK
	if !quantAsm || nb == 0 {
		quantizeRowQ8_K(x, dst)
		return
	}
	checkRow(Q8_K, len(x), len(dst))
	quantRowQ8_KAVX2(&x[0], nb, &dst[0])
}

// Activation quantizers (gemm_quant_amd64.s).

//go:noescape
func quantRowQ8_0ActAVX2(x *float32, nb int, dst *byte, side *byte)

//go:noescape
func quantRowQ8_KAVX2(x *float32, nb int, dst *byte)

// AVX2 (gemm_q8_0, gemm_q4_0, gemm_q4_k, gemm_q6_k, gemm_f16).

//go:noescape
func gemvQ8_0(nb int, w *byte, wStride int, a *byte, out *float32, rows int)

//go:noescape
func gemvQ8_0x2(nb int, w0, w1 *byte, wStride int, a *byte, out0, out1 *float32, rows int)

//go:noescape
func gemvQ8_0Vx2(nb int, w0, w1 *byte, wStride int, a *byte, out0, out1 *float32, rows int)

//go:noescape
func gemmQ8_0x1x8(nb int, w *byte, wStride int, a *byte, out *float32, outStride int, nt int)

//go:noescape
func gemvQ4_0(nb int, w *byte, wStride int, a *byte, out *float32, rows int)

//go:noescape
func gemvQ4_0x2(nb int, w0, w1 *byte, wStride int, a *byte, out0, out1 *float32, rows int)

//go:noescape
func gemmQ4_0x4x8(nb int, w *byte, wStride int, a *byte, out *float32, outStride int, nt int)

//go:noescape
func gemvQ4_K(nb int, w *byte, wStride int, a *byte, out *float32, rows int)

//go:noescape
func gemvQ6_K(nb int, w *byte, wStride int, a *byte, out *float32, rows int)

//go:noescape
func gemvF16h(nb int, w *byte, wStride int, a *byte, out *float32, rows int)

//go:noescape
func gemvF16(nb int, w *byte, wStride int, a *byte, out *float32, rows int)

//go:noescape
func gemmF16x1x3(nb int, w *byte, wStride int, a *byte, aStride int, out *float32, outStride int)

// AVX-512 (gemm_f16_avx512) and AVX-512 VNNI (gemm_vnni, gemm_vnni8).

//go:noescape
func gemmF16Zx1x2(nb int, w *byte, wStride int, a *byte, out *float32, outStride int, nt int)

//go:noescape
func gemmF16Zx1x6(nb int, w *byte, wStride int, a *byte, aStride int, out *float32, outStride int)

//go:noescape
func gemmF16Zx2x2(nb int, w *byte, wStride int, a *byte, out *float32, outStride int, nt int)

//go:noescape
func gemmF16Zx2x6(nb int, w *byte, wStride int, a *byte, aStride int, out *float32, outStride int)

//go:noescape
func gemmQ4_0Vx4x16(nb int, w *byte, wStride int, a *byte, out *float32, outStride int, nt int)

//go:noescape
func gemmQ8_0Vx1x16(nb int, w *byte, wStride int, a *byte, out *float32, outStride int, nt int)

//go:noescape
func gemmQ4_KVx1x16(nb int, w *byte, wStride int, a *byte, out *float32, outStride int, nt int)

//go:noescape
func gemmQ6_KVx1x16(nb int, w *byte, wStride int, a *byte, out *float32, outStride int, nt int)

//go:noescape
func gemmQ4_0Vx4x8(nb int, w *byte, wStride int, a *byte, out *float32, outStride int, nt int)

//go:noescape
func gemmQ4_KVx1x8(nb int, w *byte, wStride int, a *byte, out *float32, outStride int, nt int)

//go:noescape
func gemmQ6_KVx1x8(nb int, w *byte, wStride int, a *byte, out *float32, outStride int, nt int)

//go:noescape
func gemmQ8_0Vx1x8(nb int, w *byte, wStride int, a *byte, out *float32, outStride int, nt int)
