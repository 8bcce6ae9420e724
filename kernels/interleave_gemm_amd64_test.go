//go:build amd64 && !purego

package kernels

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
)

// TestGemmInterleavedAVX2MatchesGeneric runs the several-token kernels
// with the AVX-512 ones turned off, so that the AVX2 ones (which a CPU
// without AVX-512 VNNI takes for every group) meet their twins on many
// groups and every tile on any machine.
func TestGemmInterleavedAVX2MatchesGeneric(t *testing.T) {
	if !quantAsm {
		t.Skip("no AVX2 kernels on this CPU")
	}
	defer func(v bool) { vnni = v }(vnni)
	vnni = false
	r := rand.New(rand.NewPCG(69, 70))
	for _, dt := range interleavedTypes {
		for _, tc := range []struct{ groups, nb, nt int }{{4, 2, 1}, {3, 3, 2}, {6, 2, 3}, {2, 5, 7}, {5, 1, 16}} {
			t.Run(fmt.Sprintf("%v/%dgroups/%dblocks/%dtokens", dt, tc.groups, tc.nb, tc.nt), func(t *testing.T) {
				rows, cols := 8*tc.groups, dt.BlockSize()*tc.nb
				w, _, a, aStride := gemmOperands(r, dt, rows, cols, 0, tc.nt, 40)
				packed := make([]byte, InterleavedBytes(dt, rows, cols))
				Interleave(dt, packed, w, rows, cols)
				outStride := rows + 3
				got, want := make([]float32, tc.nt*outStride), make([]float32, tc.nt*outStride)
				gemmInterleaved(dt, tc.nb, packed, a, aStride, got, outStride, tc.nt)
				gemmInterleavedGeneric(dt, tc.nb, packed, a, aStride, want, outStride, tc.nt)
				for i := range want {
					if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
						t.Fatalf("output %d (token %d, row %d): kernel %v, twin %v", i, i/outStride, i%outStride, got[i], want[i])
					}
				}
			})
		}
	}
}

// BenchmarkMatMulInterleavedAVX2 is BenchmarkMatMulInterleaved with the
// AVX-512 kernels of both sides turned off, as on a CPU with AVX2 alone:
// Q4_0's packed tiles against the 4-row by 8-token group kernel of the
// file's layout.
func BenchmarkMatMulInterleavedAVX2(b *testing.B) {
	if !quantAsm {
		b.Skip("no AVX2 kernels on this CPU")
	}
	defer func(v bool, f *gemmFormat) { vnni, gemmFormats[Q4_0] = v, f }(vnni, gemmFormats[Q4_0])
	vnni = false
	gemmFormats[Q4_0] = &gemmFormat{blockSize: QK, gemv: gemvQ4_0, gemv2: gemvQ4_0x2,
		group: gemmQ4_0x4x8, groupR: 4, layout: q4Groups8}
	benchMatMulInterleaved(b, []DType{Q4_0})
}
