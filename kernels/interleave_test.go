package kernels

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
)

// interleavedTypes are the formats with a packed layout.
var interleavedTypes = []DType{Q4_0, Q4_K, Q5_K}

// TestMatVecInterleavedMatchesMatVec checks the packed mat-vec against MatVec of
// the unpacked matrix (whose outputs equal the format's VecDot, itself
// checked against llama.cpp's), to the bit, with and without a pool, for
// row counts with and without a partial group.
func TestMatVecInterleavedMatchesMatVec(t *testing.T) {
	r := rand.New(rand.NewPCG(19, 20))
	pool := NewPool(3)
	defer pool.Close()
	for _, dt := range interleavedTypes {
		for _, tc := range []struct{ rows, blocks int }{
			{1, 1}, {7, 2}, {8, 1}, {9, 3}, {16, 8}, {45, 2}, {256, 4}, {1000, 1},
		} {
			for _, p := range []*Pool{nil, pool} {
				t.Run(fmt.Sprintf("%v/%dx%d/pool%d", dt, tc.rows, tc.blocks, p.Size()), func(t *testing.T) {
					cols := tc.blocks * dt.BlockSize()
					w, _ := randMatrix(t, r, dt, tc.rows, cols)
					x := randF32(r, cols, 1)
					scratch := make([]byte, MatScratchBytes(dt, cols, 1))
					want := make([]float32, tc.rows)
					MatVec(p, dt, w, tc.rows, cols, x, want, scratch)
					packed := make([]byte, InterleavedBytes(dt, tc.rows, cols))
					Interleave(dt, packed, w, tc.rows, cols)
					got := make([]float32, tc.rows)
					MatVecInterleaved(p, dt, packed, tc.rows, cols, x, got, scratch)
					for i := range want {
						if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
							t.Fatalf("row %d: packed %v, MatVec %v", i, got[i], want[i])
						}
					}
				})
			}
		}
	}
}

// TestGemvInterleavedMatchesGeneric compares the packed kernels (assembly where
// they run) with their pure-Go twins on random data, to the bit.
func TestGemvInterleavedMatchesGeneric(t *testing.T) {
	r := rand.New(rand.NewPCG(21, 22))
	for _, dt := range interleavedTypes {
		for _, tc := range []struct{ groups, nb int }{{1, 1}, {1, 3}, {2, 8}, {5, 9}} {
			t.Run(fmt.Sprintf("%v/%dgroups/%dblocks", dt, tc.groups, tc.nb), func(t *testing.T) {
				rows, cols := 8*tc.groups, dt.BlockSize()*tc.nb
				w, _, a, _ := gemmOperands(r, dt, rows, cols, 0, 1, 0)
				packed := make([]byte, InterleavedBytes(dt, rows, cols))
				Interleave(dt, packed, w, rows, cols)
				got, want := make([]float32, rows), make([]float32, rows)
				gemvInterleaved(dt, tc.nb, packed, a, got)
				gemvInterleavedGeneric(dt, tc.nb, packed, a, want)
				for i := range want {
					if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
						t.Fatalf("row %d: kernel %v, twin %v", i, got[i], want[i])
					}
				}
			})
		}
	}
}

func TestMatVecInterleavedDoesNotAllocate(t *testing.T) {
	r := rand.New(rand.NewPCG(23, 24))
	pool := NewPool(2)
	defer pool.Close()
	for _, dt := range interleavedTypes {
		const rows, cols = 100, 512
		w, _ := randMatrix(t, r, dt, rows, cols)
		packed := make([]byte, InterleavedBytes(dt, rows, cols))
		Interleave(dt, packed, w, rows, cols)
		x, out := randF32(r, cols, 1), make([]float32, rows)
		scratch := make([]byte, MatScratchBytes(dt, cols, 1))
		if n := testing.AllocsPerRun(20, func() { MatVecInterleaved(pool, dt, packed, rows, cols, x, out, scratch) }); n != 0 {
			t.Errorf("MatVecInterleaved of %v allocates %v times a call", dt, n)
		}
	}
}

// TestInterleavedPlanCoversEveryGroup checks the guided cuts of a packed
// mat-vec: the tasks cover the groups once, in order, at most
// maxInterleavedTasks of them, shrinking, none but the last below
// minInterleavedTask groups, and one thread gets one task.
func TestInterleavedPlanCoversEveryGroup(t *testing.T) {
	for _, groups := range []int{0, 1, 2, 3, 7, 32, 256, 704, 4000, 100000} {
		for _, threads := range []int{1, 2, 3, 8} {
			t.Run(fmt.Sprintf("%dgroups/%dthreads", groups, threads), func(t *testing.T) {
				var j interleavedJob
				n := j.plan(groups, threads)
				switch {
				case groups == 0 && n != 0:
					t.Fatalf("%d tasks for no groups", n)
				case groups > 0 && threads == 1 && n != 1:
					t.Fatalf("%d tasks on one thread", n)
				case n > maxInterleavedTasks || n != j.nGrouped:
					t.Fatalf("%d tasks (nGrouped %d), at most %d", n, j.nGrouped, maxInterleavedTasks)
				case j.start[0] != 0 || int(j.start[n]) != groups:
					t.Fatalf("tasks span groups %d..%d, want 0..%d", j.start[0], j.start[n], groups)
				}
				for i := range n {
					size := j.start[i+1] - j.start[i]
					if size <= 0 || (i < n-1 && size < minInterleavedTask) {
						t.Fatalf("task %d has %d groups", i, size)
					}
					if i > 0 && i < n-1 && size > j.start[i]-j.start[i-1] {
						t.Fatalf("task %d (%d groups) larger than task %d (%d)", i, size, i-1, j.start[i]-j.start[i-1])
					}
				}
			})
		}
	}
}

func TestInterleavedBytes(t *testing.T) {
	for _, tc := range []struct {
		t          DType
		rows, cols int
		want       int
	}{
		{Q4_0, 17, 64, 2*2*bytesQ4_0x8 + 1*2*bytesQ4_0},
		{Q4_K, 9, 512, 1*2*bytesQ4_Kx8 + 1*2*bytesQ4_K},
		{Q4_0, 8, 48, -1},
		{Q8_0, 8, 64, -1},
	} {
		t.Run(fmt.Sprintf("%v/%dx%d", tc.t, tc.rows, tc.cols), func(t *testing.T) {
			if got := InterleavedBytes(tc.t, tc.rows, tc.cols); got != tc.want {
				t.Errorf("InterleavedBytes = %d, want %d", got, tc.want)
			}
		})
	}
}

// BenchmarkMatVecInterleaved compares the packed mat-vec with MatVec on the same
// matrix, on one thread: in the caches (the first two shapes) and from
// memory.
func BenchmarkMatVecInterleaved(b *testing.B) {
	r := rand.New(rand.NewPCG(25, 26))
	for _, dt := range interleavedTypes {
		tr, _ := TraitsOf(dt)
		for _, sh := range []struct{ rows, cols int }{{256, 2048}, {5632, 2048}, {65536, 2048}} {
			rb := dt.RowBytes(sh.cols)
			w := make([]byte, sh.rows*rb)
			row := randF32(r, sh.cols, 1)
			for i := range sh.rows {
				row[i%sh.cols] = float32(i % 7)
				tr.QuantizeRow(row, w[i*rb:(i+1)*rb])
			}
			packed := make([]byte, InterleavedBytes(dt, sh.rows, sh.cols))
			Interleave(dt, packed, w, sh.rows, sh.cols)
			x, out := randF32(r, sh.cols, 1), make([]float32, sh.rows)
			scratch := make([]byte, MatScratchBytes(dt, sh.cols, 1))
			name := fmt.Sprintf("%v/%dx%d", dt, sh.rows, sh.cols)
			b.Run(name+"/matvec", func(b *testing.B) {
				b.SetBytes(int64(len(w)))
				for b.Loop() {
					MatVec(nil, dt, w, sh.rows, sh.cols, x, out, scratch)
				}
			})
			b.Run(name+"/packed", func(b *testing.B) {
				b.SetBytes(int64(len(w)))
				for b.Loop() {
					MatVecInterleaved(nil, dt, packed, sh.rows, sh.cols, x, out, scratch)
				}
			})
		}
	}
}
