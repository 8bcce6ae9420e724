package kernels

import (
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"testing"
	"time"
)

// TestMatMulInterleavedMatchesMatVec checks the several-token product of
// packed rows against MatVec of the unpacked matrix token by token, to the
// bit, with and without a pool: row counts with and without a partial
// group, token counts of every tile (1 to 9), a batch of 16 and prompts
// past one chunk of tokens.
func TestMatMulInterleavedMatchesMatVec(t *testing.T) {
	r := rand.New(rand.NewPCG(61, 62))
	pool := NewPool(3)
	defer pool.Close()
	for _, dt := range interleavedTypes {
		for _, tc := range []struct{ rows, blocks, n int }{
			{8, 1, 2}, {7, 2, 3}, {9, 3, 4}, {16, 8, 5}, {45, 2, 6}, {64, 3, 7}, {24, 2, 8}, {40, 1, 9},
			{256, 4, 16}, {1000, 1, 3}, {104, 2, 65}, {57, 2, 130},
		} {
			for _, p := range []*Pool{nil, pool} {
				t.Run(fmt.Sprintf("%v/%dx%d/%dtokens/pool%d", dt, tc.rows, tc.blocks, tc.n, p.Size()), func(t *testing.T) {
					cols := tc.blocks * dt.BlockSize()
					w, _ := randMatrix(t, r, dt, tc.rows, cols)
					x := randF32(r, cols*tc.n, 1)
					packed := make([]byte, InterleavedBytes(dt, tc.rows, cols))
					Interleave(dt, packed, w, tc.rows, cols)
					got := make([]float32, tc.n*tc.rows)
					MatMulInterleaved(p, dt, packed, tc.rows, cols, x, tc.n, got, make([]byte, MatScratchBytes(dt, cols, tc.n)))
					want := make([]float32, tc.rows)
					scratch := make([]byte, MatScratchBytes(dt, cols, 1))
					for k := range tc.n {
						MatVec(nil, dt, w, tc.rows, cols, x[k*cols:(k+1)*cols], want, scratch)
						for i := range want {
							if g := got[k*tc.rows+i]; math.Float32bits(g) != math.Float32bits(want[i]) {
								t.Fatalf("token %d, row %d: packed %v, MatVec %v", k, i, g, want[i])
							}
						}
					}
				})
			}
		}
	}
}

// TestGemmInterleavedMatchesGeneric compares the several-token kernels
// (assembly where they run) with their pure-Go twins on random data, to
// the bit, with padded activation and output strides.
func TestGemmInterleavedMatchesGeneric(t *testing.T) {
	r := rand.New(rand.NewPCG(63, 64))
	for _, dt := range interleavedTypes {
		for _, tc := range []struct{ groups, nb, nt int }{{1, 1, 1}, {1, 3, 2}, {2, 8, 3}, {5, 9, 4}, {3, 2, 7}, {2, 4, 16}} {
			t.Run(fmt.Sprintf("%v/%dgroups/%dblocks/%dtokens", dt, tc.groups, tc.nb, tc.nt), func(t *testing.T) {
				rows, cols := 8*tc.groups, dt.BlockSize()*tc.nb
				w, _, a, aStride := gemmOperands(r, dt, rows, cols, 0, tc.nt, 24)
				packed := make([]byte, InterleavedBytes(dt, rows, cols))
				Interleave(dt, packed, w, rows, cols)
				outStride := rows + 5
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

func TestMatMulInterleavedDoesNotAllocate(t *testing.T) {
	r := rand.New(rand.NewPCG(65, 66))
	pool := NewPool(2)
	defer pool.Close()
	for _, dt := range interleavedTypes {
		const rows, cols, n = 100, 512, 5
		w, _ := randMatrix(t, r, dt, rows, cols)
		packed := make([]byte, InterleavedBytes(dt, rows, cols))
		Interleave(dt, packed, w, rows, cols)
		x, out := randF32(r, cols*n, 1), make([]float32, n*rows)
		scratch := make([]byte, MatScratchBytes(dt, cols, n))
		if a := testing.AllocsPerRun(20, func() { MatMulInterleaved(pool, dt, packed, rows, cols, x, n, out, scratch) }); a != 0 {
			t.Errorf("MatMulInterleaved of %v allocates %v times a call", dt, a)
		}
	}
}

// BenchmarkMatMulInterleaved compares the several-token product of packed
// rows with MatMul of the file's layout (the blocked kernels) on the same
// matrix and tokens, on one thread: a batched decode step's 2 to 16 tokens
// and a prompt's 128. Each iteration runs both, one after the other, timed
// by the thread's CPU time (which other work on a shared machine disturbs
// far less than the wall clock); Gweights/s is rows·cols·n over that time,
// x-matmul the packed product's speed over MatMul's.
func BenchmarkMatMulInterleaved(b *testing.B) { benchMatMulInterleaved(b, interleavedTypes) }

func benchMatMulInterleaved(b *testing.B, types []DType) {
	r := rand.New(rand.NewPCG(67, 68))
	for _, dt := range types {
		for _, sh := range []struct{ rows, cols int }{{2048, 2048}, {5632, 2048}, {2048, 5632}} {
			w, _ := randMatrix(b, r, dt, sh.rows, sh.cols)
			packed := make([]byte, InterleavedBytes(dt, sh.rows, sh.cols))
			Interleave(dt, packed, w, sh.rows, sh.cols)
			for _, n := range []int{1, 2, 4, 8, 16, 128} {
				x, out := randF32(r, sh.cols*n, 1), make([]float32, n*sh.rows)
				scratch := make([]byte, MatScratchBytes(dt, sh.cols, n))
				b.Run(fmt.Sprintf("%v/%dx%d/n=%d", dt, sh.rows, sh.cols, n), func(b *testing.B) {
					runtime.LockOSThread()
					defer runtime.UnlockOSThread()
					var took [2]time.Duration
					for b.Loop() {
						t0 := threadCPU()
						MatMul(nil, dt, w, sh.rows, sh.cols, x, n, out, scratch)
						t1 := threadCPU()
						MatMulInterleaved(nil, dt, packed, sh.rows, sh.cols, x, n, out, scratch)
						took[0], took[1] = took[0]+t1-t0, took[1]+threadCPU()-t1
					}
					weights := float64(sh.rows * sh.cols * n * b.N)
					b.ReportMetric(weights/took[0].Seconds()/1e9, "matmul-Gw/s")
					b.ReportMetric(weights/took[1].Seconds()/1e9, "packed-Gw/s")
					b.ReportMetric(took[0].Seconds()/took[1].Seconds(), "x-matmul")
				})
			}
		}
	}
}
