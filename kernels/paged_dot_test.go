package kernels

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
)

// pagedLayout places rows rows of n elements in pieces of seg, the way a
// paged KV pool stores values: each piece is a block of rows × stride
// elements (row r of the piece at r·stride), the blocks in scrambled order
// among as many blocks of other data, plus a few elements of lead-in so that
// offsets are not multiples of the block size.
type pagedLayout struct {
	offs []int
	size int // elements of the store
}

func newPagedLayout(rng *rand.Rand, rows, n, seg, stride int) pagedLayout {
	pieces := (n + seg - 1) / seg
	block := rows * stride
	slots := rng.Perm(2*pieces + 1)
	const lead = 5
	l := pagedLayout{offs: make([]int, pieces), size: lead + len(slots)*block}
	for s := range l.offs {
		l.offs[s] = lead + slots[s]*block
	}
	return l
}

// gather is row r of the layout as one contiguous row of n elements.
func gather[T any](base []T, offs []int, seg, stride, r, n int) []T {
	row := make([]T, 0, len(offs)*seg)
	for _, off := range offs {
		row = append(row, base[off+r*stride:][:seg]...)
	}
	return row[:n]
}

// mixedF32 draws n values whose magnitudes span 2^-lo … 2^hi with random
// signs, so that sums round differently when summed in another order.
func mixedF32(rng *rand.Rand, n int, lo, hi int) []float32 {
	x := make([]float32, n)
	for i := range x {
		e := rng.IntN(lo+hi+1) - lo
		x[i] = float32(math.Ldexp(rng.Float64()*2-1, e))
	}
	return x
}

// pagedCase is one shape of the paged tests.
type pagedCase struct {
	rows, seg, stride, n int
}

func pagedCases() []pagedCase {
	var cases []pagedCase
	// Row counts: fewer than the rows the assembly does a call, and a
	// number whose last group overlaps the one before.
	for _, rows := range []int{5, 19} {
		for _, seg := range []int{32, 64} {
			for _, stride := range []int{seg, seg + 24} { // dense blocks, and rows with other data between them
				for _, n := range []int{8, 24, 32, 40, 64, 71, 96, 136, 3 * seg, 5*seg - 3, 5*seg - 8, 1000} {
					cases = append(cases, pagedCase{rows, seg, stride, n})
				}
			}
		}
	}
	return cases
}

// TestDotHalvesPaged checks every row of the paged F16 products bit for bit
// against VecDotHalves and GemmDotHalves of the gathered contiguous row, for
// the dispatched form and the pure-Go twin, and that the data is such that
// reducing piece by piece would have been caught.
func TestDotHalvesPaged(t *testing.T) {
	logSIMD(t)
	rng := rand.New(rand.NewPCG(61, 62))
	orderSensitive := 0
	for _, c := range pagedCases() {
		rows := c.rows
		l := newPagedLayout(rng, rows, c.n, c.seg, c.stride)
		base := make([]uint16, l.size)
		FP32ToFP16Row(mixedF32(rng, len(base), 6, 6), base)
		x := make([]uint16, c.n)
		FP32ToFP16Row(mixedF32(rng, c.n, 6, 6), x)
		for _, gemm := range []bool{false, true} {
			t.Run(fmt.Sprintf("rows=%d/seg=%d/stride=%d/n=%d/gemm=%v", rows, c.seg, c.stride, c.n, gemm), func(t *testing.T) {
				got := make([]float32, rows)
				twin := make([]float32, rows)
				DotHalvesPaged(base, l.offs, c.seg, c.stride, x, got, gemm)
				dotHalvesPagedGeneric(base, l.offs, c.seg, c.stride, x, twin, gemm)
				for r := range rows {
					row := gather(base, l.offs, c.seg, c.stride, r, c.n)
					want := VecDotHalves(row, x)
					if gemm {
						want = GemmDotHalves(row, x)
					}
					if math.Float32bits(got[r]) != math.Float32bits(want) {
						t.Errorf("row %d: %g (%#08x), want %g (%#08x)", r, got[r], math.Float32bits(got[r]), want, math.Float32bits(want))
					}
					if math.Float32bits(twin[r]) != math.Float32bits(got[r]) {
						t.Errorf("row %d: pure Go %g, dispatched %g", r, twin[r], got[r])
					}
					if len(l.offs) > 1 && !gemm {
						var perPiece float32
						for s := 0; s < c.n; s += c.seg {
							e := min(s+c.seg, c.n)
							perPiece += VecDotHalves(row[s:e], x[s:e])
						}
						if perPiece != want {
							orderSensitive++
						}
					}
				}
			})
		}
	}
	if orderSensitive == 0 {
		t.Error("no row of the test data tells a per-piece reduction from a single one")
	}
}

// TestDotFloatsPaged is TestDotHalvesPaged for float32 storage.
func TestDotFloatsPaged(t *testing.T) {
	logSIMD(t)
	rng := rand.New(rand.NewPCG(63, 64))
	orderSensitive := 0
	for _, c := range pagedCases() {
		rows := c.rows
		l := newPagedLayout(rng, rows, c.n, c.seg, c.stride)
		base := mixedF32(rng, l.size, 20, 20)
		x := mixedF32(rng, c.n, 20, 20)
		for _, gemm := range []bool{false, true} {
			t.Run(fmt.Sprintf("rows=%d/seg=%d/stride=%d/n=%d/gemm=%v", rows, c.seg, c.stride, c.n, gemm), func(t *testing.T) {
				got := make([]float32, rows)
				twin := make([]float32, rows)
				DotFloatsPaged(base, l.offs, c.seg, c.stride, x, got, gemm)
				dotFloatsPagedGeneric(base, l.offs, c.seg, c.stride, x, twin, gemm)
				for r := range rows {
					row := gather(base, l.offs, c.seg, c.stride, r, c.n)
					want := VecDotFloats(row, x)
					if gemm {
						want = GemmDotFloats(row, x)
					}
					if math.Float32bits(got[r]) != math.Float32bits(want) {
						t.Errorf("row %d: %g (%#08x), want %g (%#08x)", r, got[r], math.Float32bits(got[r]), want, math.Float32bits(want))
					}
					if math.Float32bits(twin[r]) != math.Float32bits(got[r]) {
						t.Errorf("row %d: pure Go %g, dispatched %g", r, twin[r], got[r])
					}
					if len(l.offs) > 1 && !gemm {
						var perPiece float32
						for s := 0; s < c.n; s += c.seg {
							e := min(s+c.seg, c.n)
							perPiece += VecDotFloats(row[s:e], x[s:e])
						}
						if perPiece != want {
							orderSensitive++
						}
					}
				}
			})
		}
	}
	if orderSensitive == 0 {
		t.Error("no row of the test data tells a per-piece reduction from a single one")
	}
}

// TestDotPagedEdges checks the shapes at the limits that must work: no
// elements at all, a last piece that ends the store with only the elements
// the row needs, one row, and pieces given in increasing order with stride
// 0 (every row the same).
func TestDotPagedEdges(t *testing.T) {
	rng := rand.New(rand.NewPCG(65, 66))
	t.Run("empty", func(t *testing.T) {
		out, outF := []float32{1, 2, 3}, []float32{4, 5}
		DotHalvesPaged(nil, nil, 32, 32, nil, out, false)
		DotFloatsPaged(nil, nil, 32, 32, nil, outF, true)
		for i, v := range append(out, outF...) {
			if math.Float32bits(v) != 0 {
				t.Errorf("out[%d] = %g after an empty product, want +0", i, v)
			}
		}
	})
	t.Run("short last piece at the end", func(t *testing.T) {
		const seg, stride, rows, n = 32, 32, 3, 40 // the last piece holds 8 elements of each row
		offs := []int{0, rows * stride}
		// The store ends just past the last row's 8 elements of piece 1.
		size := offs[1] + (rows-1)*stride + n - seg
		base := randF32(rng, size, 1)
		base16 := make([]uint16, size)
		FP32ToFP16Row(base, base16)
		x := randF32(rng, n, 1)
		x16 := make([]uint16, n)
		FP32ToFP16Row(x, x16)
		for _, gemm := range []bool{false, true} {
			got, got16 := make([]float32, rows), make([]float32, rows)
			DotFloatsPaged(base, offs, seg, stride, x, got, gemm)
			DotHalvesPaged(base16, offs, seg, stride, x16, got16, gemm)
			for r := range rows {
				// gather reads whole pieces: pad the copy of the store.
				row := gather(append(base[:size:size], make([]float32, seg)...), offs, seg, stride, r, n)
				row16 := gather(append(base16[:size:size], make([]uint16, seg)...), offs, seg, stride, r, n)
				want, want16 := VecDotFloats(row, x), VecDotHalves(row16, x16)
				if gemm {
					want, want16 = GemmDotFloats(row, x), GemmDotHalves(row16, x16)
				}
				if math.Float32bits(got[r]) != math.Float32bits(want) || math.Float32bits(got16[r]) != math.Float32bits(want16) {
					t.Errorf("gemm=%v row %d: %g, %g; want %g, %g", gemm, r, got[r], got16[r], want, want16)
				}
			}
		}
	})
	t.Run("one piece of a huge seg", func(t *testing.T) {
		base := randF32(rng, 100, 1)
		x := randF32(rng, 100, 1)
		out := make([]float32, 1)
		DotFloatsPaged(base, []int{0}, math.MaxInt-31, 0, x, out, false)
		if want := VecDotFloats(base, x); out[0] != want {
			t.Errorf("%g, want %g", out[0], want)
		}
	})
	t.Run("stride 0", func(t *testing.T) {
		const seg, n = 64, 128
		base := randF32(rng, 2*seg, 1)
		x := randF32(rng, n, 1)
		for _, rows := range []int{4, 11} {
			for _, gemm := range []bool{false, true} {
				out := make([]float32, rows)
				DotFloatsPaged(base, []int{0, seg}, seg, 0, x, out, gemm)
				want := VecDotFloats(base, x)
				if gemm {
					want = GemmDotFloats(base, x)
				}
				for r, v := range out {
					if v != want {
						t.Errorf("rows=%d gemm=%v row %d: %g, want %g", rows, gemm, r, v, want)
					}
				}
			}
		}
	})
}

// TestDotPagedPanics checks that every bad shape panics with a message
// naming the function, before anything is read.
func TestDotPagedPanics(t *testing.T) {
	const rows = 4
	base := make([]uint16, 1024)
	baseF := make([]float32, 1024)
	x := make([]uint16, 100) // pieces of 32: 4
	xF := make([]float32, 100)
	offs := []int{0, 256, 512, 768}
	cases := []struct {
		name        string
		base        int // elements of the store
		offs        []int
		seg, stride int
		n           int
	}{
		{"seg 0", 1024, offs, 0, 32, 100},
		{"negative seg", 1024, offs, -32, 32, 100},
		{"seg not a multiple of 32", 1024, offs, 48, 32, 100},
		{"too few pieces", 1024, offs[:3], 32, 32, 100},
		{"too many pieces", 1024, []int{0, 128, 256, 384, 512}, 32, 32, 100},
		{"pieces for no elements", 1024, offs[:1], 32, 32, 0},
		{"negative offset", 1024, []int{0, -1, 512, 768}, 32, 32, 100},
		{"last row past the store", 1024, []int{0, 256, 512, 1024 - 3*32 - 3}, 32, 32, 100},
		{"full piece past the store", 1024, []int{1024 - 3*32 - 31, 0, 256, 512}, 32, 32, 100},
		{"store too short", 860, offs, 32, 32, 100},
		{"negative stride", 1024, []int{300, 400, 500, 600}, 32, -32, 100},
		{"stride overflowing", 1024, offs, 32, math.MaxInt / 2, 100},
		{"offset overflowing", 1024, []int{0, math.MaxInt, 512, 768}, 32, 32, 100},
		{"seg overflowing", 1024, offs[:2], math.MaxInt - 31, 32, 100},
	}
	for _, c := range cases {
		for _, f16 := range []bool{true, false} {
			t.Run(fmt.Sprintf("%s/f16=%v", c.name, f16), func(t *testing.T) {
				name := "DotFloatsPaged"
				if f16 {
					name = "DotHalvesPaged"
				}
				defer func() {
					v := recover()
					if v == nil {
						t.Fatal("no panic")
					}
					if msg := fmt.Sprint(v); !strings.Contains(msg, "kernels: "+name) {
						t.Errorf("panic %q does not name %s", msg, name)
					}
				}()
				out := make([]float32, rows)
				if f16 {
					DotHalvesPaged(base[:c.base], c.offs, c.seg, c.stride, x[:c.n], out, false)
				} else {
					DotFloatsPaged(baseF[:c.base], c.offs, c.seg, c.stride, xF[:c.n], out, true)
				}
			})
		}
	}
	// The same shapes with good arguments do not panic.
	out := make([]float32, rows)
	DotHalvesPaged(base, offs, 32, 32, x, out, false)
	DotFloatsPaged(baseF, offs, 32, 32, xF, out, true)
}

// TestDotPagedAllocs checks that the paged products, dispatched and pure Go,
// allocate nothing: they run for every head of every decode step.
func TestDotPagedAllocs(t *testing.T) {
	rng := rand.New(rand.NewPCG(67, 68))
	const rows, seg, n = 64, 32, 1000
	l := newPagedLayout(rng, rows, n, seg, seg)
	base := randF16(rng, l.size, 1)
	baseF := randF32(rng, l.size, 1)
	x, xF := randF16(rng, n, 1), randF32(rng, n, 1)
	out := make([]float32, rows)
	for _, gemm := range []bool{false, true} {
		for name, f := range map[string]func(){
			"DotHalvesPaged":        func() { DotHalvesPaged(base, l.offs, seg, seg, x, out, gemm) },
			"DotFloatsPaged":        func() { DotFloatsPaged(baseF, l.offs, seg, seg, xF, out, gemm) },
			"dotHalvesPagedGeneric": func() { dotHalvesPagedGeneric(base, l.offs, seg, seg, x, out, gemm) },
			"dotFloatsPagedGeneric": func() { dotFloatsPagedGeneric(baseF, l.offs, seg, seg, xF, out, gemm) },
		} {
			if a := testing.AllocsPerRun(5, f); a != 0 {
				t.Errorf("%s gemm=%v: %v allocations a call", name, gemm, a)
			}
		}
	}
}

// BenchmarkDotHalvesPaged measures the value products of one head of decode
// attention (64 rows) over a paged store of 32-token blocks in scrambled
// order ("paged"), over the same kind of store with its blocks in order
// ("paged-in-order": the cost of the pieces alone, without the scatter), and
// by DotHalvesRows over one contiguous row per dimension ("contiguous").
func BenchmarkDotHalvesPaged(b *testing.B) {
	rng := rand.New(rand.NewPCG(69, 70))
	const hd, seg = 64, 32
	for _, n := range []int{512, 4096} {
		l := newPagedLayout(rng, hd, n, seg, seg)
		base := randF16(rng, l.size, 1)
		contiguous := randF16(rng, hd*n, 1)
		x := randF16(rng, n, 1)
		out := make([]float32, hd)
		// The same store read as blocks in order, one after the other.
		inOrder := make([]int, n/seg)
		for s := range inOrder {
			inOrder[s] = s * hd * seg
		}
		for _, gemm := range []bool{false, true} {
			b.Run(fmt.Sprintf("n=%d/gemm=%v/paged", n, gemm), func(b *testing.B) {
				b.SetBytes(int64(2 * hd * n))
				for b.Loop() {
					DotHalvesPaged(base, l.offs, seg, seg, x, out, gemm)
				}
			})
			b.Run(fmt.Sprintf("n=%d/gemm=%v/paged-in-order", n, gemm), func(b *testing.B) {
				b.SetBytes(int64(2 * hd * n))
				for b.Loop() {
					DotHalvesPaged(contiguous, inOrder, seg, seg, x, out, gemm)
				}
			})
			b.Run(fmt.Sprintf("n=%d/gemm=%v/contiguous", n, gemm), func(b *testing.B) {
				b.SetBytes(int64(2 * hd * n))
				for b.Loop() {
					DotHalvesRows(contiguous, n, x, out, gemm)
				}
			})
		}
	}
}
