package sparse

import (
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"github.com/ruvllm/ruvllm/kernels"
)

// layoutTypes are the formats with a channel-major layout.
var layoutTypes = []kernels.DType{kernels.F32, kernels.F16, kernels.Q8_0, kernels.Q4_0}

// randRowMajor quantizes a random (rows, cols) matrix to t, row-major, with
// weights of about 0.02 as a model's.
func randRowMajor(r *rand.Rand, t kernels.DType, rows, cols int) []byte {
	tr, _ := kernels.TraitsOf(t)
	rb := t.RowBytes(cols)
	w := make([]byte, rows*rb)
	row := make([]float32, cols)
	for i := range rows {
		for c := range row {
			row[c] = float32(r.NormFloat64() * 0.02)
		}
		tr.QuantizeRow(row, w[i*rb:(i+1)*rb])
	}
	return w
}

// randInput is an activation vector: mostly small, with a few large
// entries, as the inputs of a model's projections are.
func randInput(r *rand.Rand, n int) []float32 {
	x := make([]float32, n)
	for i := range x {
		x[i] = float32(r.NormFloat64())
		if r.IntN(50) == 0 {
			x[i] *= 20
		}
	}
	return x
}

func encoded(t kernels.DType, rows, cols int, rowMajor []byte) *Matrix {
	cm := make([]byte, len(rowMajor))
	Encode(t, rows, cols, rowMajor, cm)
	m, err := NewMatrix(t, rows, cols, cm, []float32{0, 0.5, 1, 2})
	if err != nil {
		panic(err)
	}
	return m
}

func thresholded(x []float32, thr float32) []float32 {
	xt := make([]float32, len(x))
	for i, v := range x {
		if v > thr || -v > thr {
			xt[i] = v
		}
	}
	return xt
}

func TestEncodeRoundTrip(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for _, dt := range layoutTypes {
		for _, shape := range [][2]int{{32, 32}, {64, 96}, {96, 64}, {256, 160}} {
			rows, cols := shape[0], shape[1]
			t.Run(fmt.Sprintf("%v/%dx%d", dt, rows, cols), func(t *testing.T) {
				src := randRowMajor(r, dt, rows, cols)
				m := encoded(dt, rows, cols, src)
				rb := dt.RowBytes(cols)
				for _, span := range [][2]int{{0, rows}, {0, 32}, {32, rows}, {rows - 32, rows}} {
					got := make([]byte, (span[1]-span[0])*rb)
					m.PackRows(span[0], span[1], got)
					if want := src[span[0]*rb : span[1]*rb]; string(got) != string(want) {
						t.Fatalf("rows %v do not come back as they were", span)
					}
				}
			})
		}
	}
	if Supported(kernels.Q8_0, 48, 64) == nil || Supported(kernels.Q4_K, 256, 256) == nil || Supported(kernels.F32, 7, 5) != nil {
		t.Error("Supported accepts or refuses the wrong shapes")
	}
}

// TestMulVecIsTheDenseProductOfTheThresholdedInput compares the sparse
// mat-vec with the dense kernels' product of the same matrix (row-major)
// and the input thresholded: the same integer sums, so they differ only by
// the order of float additions.
func TestMulVecIsTheDenseProductOfTheThresholdedInput(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	pools := map[string]*kernels.Pool{"nil": nil, "threads=1": kernels.NewPool(1), "threads=3": kernels.NewPool(3)}
	defer func() {
		for _, p := range pools {
			p.Close()
		}
	}()
	for _, dt := range layoutTypes {
		for _, shape := range [][2]int{{64, 256}, {256, 64}, {96, 1024}} {
			rows, cols := shape[0], shape[1]
			t.Run(fmt.Sprintf("%v/%dx%d", dt, rows, cols), func(t *testing.T) {
				w := randRowMajor(r, dt, rows, cols)
				m := encoded(dt, rows, cols, w)
				x := randInput(r, cols)
				for _, thr := range []float32{0, 0.5, 1.5, 1e9} {
					xt := thresholded(x, thr)
					want := make([]float32, rows)
					kernels.MatVec(nil, dt, w, rows, cols, xt, want, make([]byte, kernels.MatScratchBytes(dt, cols, 1)))
					var first []float32
					for name, p := range pools {
						var s Scratch
						s.Fit(m, 1, p.Size())
						out := make([]float32, rows)
						m.MulVec(p, x, thr, out, &s)
						for i := range out {
							if d := math.Abs(float64(out[i] - want[i])); d > 1e-5*math.Abs(float64(want[i]))+1e-6 {
								t.Fatalf("%s, threshold %g: row %d: %g, dense %g", name, thr, i, out[i], want[i])
							}
						}
						if first == nil {
							first = out
						}
						for i := range out {
							if out[i] != first[i] {
								t.Fatalf("%s, threshold %g: row %d differs between thread counts: %g, %g", name, thr, i, out[i], first[i])
							}
						}
					}
				}
			})
		}
	}
}

// TestMatMulIsTheDenseProduct checks MatMul against the dense product of
// the thresholded input: bit for bit where it packs rows back, and where a
// few tokens of a quantized matrix take the sparse mat-vec each, equal to
// MulVec on each token and close to the dense product.
func TestMatMulIsTheDenseProduct(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	p := kernels.NewPool(3)
	defer p.Close()
	for _, dt := range layoutTypes {
		for _, c := range []struct {
			n   int
			thr float32
		}{{2, 0.7}, {9, 0.7}, {70, 0.7}, {9, 0.1}} {
			n := c.n
			t.Run(fmt.Sprintf("%v/n=%d/thr=%g", dt, n, c.thr), func(t *testing.T) {
				const rows, cols = 320, 256
				w := randRowMajor(r, dt, rows, cols)
				m := encoded(dt, rows, cols, w)
				x := randInput(r, n*cols)
				dense := make([]float32, n*rows)
				kernels.MatMul(nil, dt, w, rows, cols, thresholded(x, c.thr), n, dense, make([]byte, kernels.MatScratchBytes(dt, cols, n)))
				var s Scratch
				s.Fit(m, n, p.Size())
				out := make([]float32, n*rows)
				m.MatMul(p, x, n, c.thr, out, &s)
				want := dense
				if m.takesMulVecs(keptFraction(x, c.thr), n) {
					want = make([]float32, n*rows)
					var one Scratch
					one.Fit(m, 1, p.Size())
					for tok := range n {
						m.MulVec(p, x[tok*cols:(tok+1)*cols], c.thr, want[tok*rows:(tok+1)*rows], &one)
					}
					for i := range want {
						if d := math.Abs(float64(want[i] - dense[i])); d > 1e-5*math.Abs(float64(dense[i]))+1e-6 {
							t.Fatalf("token %d row %d: the sparse mat-vec gives %g, dense %g", i/rows, i%rows, want[i], dense[i])
						}
					}
				} else if n < 70 && c.thr > 0.5 && dt != kernels.F32 && dt != kernels.F16 {
					t.Fatalf("%d tokens with %.2f of the inputs on were packed", n, keptFraction(x, c.thr))
				}
				for i := range out {
					if out[i] != want[i] {
						t.Fatalf("token %d row %d: %g, want %g", i/rows, i%rows, out[i], want[i])
					}
				}
			})
		}
	}
}

// TestMatMulSplitIsMatMul cuts the product's rows into parts, as a stack
// of q, k and v is cut, on both of MatMul's ways (a few tokens of a
// quantized matrix take the sparse mat-vecs; many are packed, part by
// part): each part holds MatMul's rows, bit for bit, and one token's parts
// hold MulVec's in every format.
func TestMatMulSplitIsMatMul(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	p := kernels.NewPool(2)
	defer p.Close()
	const rows, cols = 320, 256
	for _, dt := range layoutTypes {
		m := encoded(dt, rows, cols, randRowMajor(r, dt, rows, cols))
		for _, parts := range [][]int{{320}, {256, 32, 32}, {160, 160}} {
			for _, n := range []int{1, 2, 70} {
				t.Run(fmt.Sprintf("%v/%v/n=%d", dt, parts, n), func(t *testing.T) {
					x := randInput(r, n*cols)
					var s Scratch
					s.Fit(m, n, p.Size())
					want := make([]float32, n*rows)
					if n == 1 { // one token takes the mat-vec, in any format
						m.MulVec(p, x, 0.7, want, &s)
					} else {
						m.MatMul(p, x, n, 0.7, want, &s)
					}
					outs := make([][]float32, len(parts))
					for i, pr := range parts {
						outs[i] = make([]float32, n*pr)
					}
					m.MatMulSplit(p, x, n, 0.7, outs, &s)
					at := 0
					for i, pr := range parts {
						for tok := range n {
							for k := range pr {
								if got, w := outs[i][tok*pr+k], want[tok*rows+at+k]; got != w {
									t.Fatalf("part %d token %d row %d: %g, MatMul %g", i, tok, k, got, w)
								}
							}
						}
						at += pr
					}
				})
			}
		}
	}
}

func TestPerTokenInCache(t *testing.T) {
	saved := lastLevelCache
	defer func() { lastLevelCache = saved }()
	var cache int64
	lastLevelCache = func() int64 { return cache }
	q8 := &Matrix{Type: kernels.Q8_0, Data: make([]byte, 1000)}
	q4 := &Matrix{Type: kernels.Q4_0, Data: make([]byte, 1000)}
	for _, c := range []struct {
		m     *Matrix
		cache int64
		on    float64
		want  bool
	}{{q8, 1000, 0.5, true}, {q8, 1000, 0.55, true}, {q8, 1000, 0.6, false}, {q8, 999, 0.5, false}, {q8, 0, 0.1, false}, {q4, 1 << 30, 0.1, false}} {
		cache = c.cache
		if got := perTokenInCache(c.m, c.on); got != c.want {
			t.Errorf("%v of %d bytes, cache %d, %.2f on: %v, want %v", c.m.Type, len(c.m.Data), c.cache, c.on, got, c.want)
		}
	}
}

func TestCacheSize(t *testing.T) {
	dir := t.TempDir()
	for i, lv := range [][2]string{{"1", "32K"}, {"2", "512K"}, {"3", "32768K"}, {"1", "32K"}} {
		d := filepath.Join(dir, fmt.Sprintf("index%d", i))
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		for name, v := range map[string]string{"level": lv[0], "size": lv[1]} {
			if err := os.WriteFile(filepath.Join(d, name), []byte(v+"\n"), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	if got := cacheSize(dir); got != 32<<20 {
		t.Errorf("cacheSize = %d, want %d", got, 32<<20)
	}
	if got := cacheSize(filepath.Join(dir, "none")); got != 0 {
		t.Errorf("cacheSize of nothing = %d", got)
	}
	for s, want := range map[string]int64{"512K": 512 << 10, "4096": 4096, "": 0, "x": 0, "-1K": 0, "8M": 0} {
		if got := sysfsSize(s); got != want {
			t.Errorf("sysfsSize(%q) = %d, want %d", s, got, want)
		}
	}
}

func TestPerToken(t *testing.T) {
	for _, c := range []struct {
		n    int
		on   float64
		want bool
	}{{1, 1, true}, {4, 1, true}, {5, 1, false}, {6, 0.75, true}, {7, 0.75, false}, {15, 0.5, true}, {16, 0.5, false}, {128, 0.25, true}, {128, 0.4, false}} {
		if got := perToken(c.n, c.on); got != c.want {
			t.Errorf("perToken(%d, %g) = %v, want %v", c.n, c.on, got, c.want)
		}
	}
}

func TestTableAt(t *testing.T) {
	tab := Table{0, 0.1, 0.2, 0.4}
	cases := []struct {
		s    float64
		want float32
		err  bool
	}{
		{0, 0, false}, {0.25, 0.1, false}, {0.375, 0.15, false}, {0.75, 0.4, false},
		{0.8, 0, true}, {-0.1, 0, true}, {math.NaN(), 0, true},
	}
	for _, c := range cases {
		got, err := tab.At(c.s)
		if (err != nil) != c.err || (!c.err && math.Abs(float64(got-c.want)) > 1e-6) {
			t.Errorf("At(%g) = %g, %v; want %g (error %v)", c.s, got, err, c.want, c.err)
		}
	}
	for _, bad := range []Table{{0}, {0, -1}, {0.5, 0.1}, {0, float32(math.Inf(1))}} {
		if bad.check() == nil {
			t.Errorf("%v passes the check", bad)
		}
	}
}

// TestMulVecKeepsNoStalePlan runs the products of two matrices of one
// shape on one input (the second reuses the first's plan), then on the
// input changed in place, with one Scratch: each must be its own product.
func TestMulVecKeepsNoStalePlan(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	for _, dt := range layoutTypes {
		const rows, cols = 64, 128
		w1, w2 := randRowMajor(r, dt, rows, cols), randRowMajor(r, dt, rows, cols)
		m1, m2 := encoded(dt, rows, cols, w1), encoded(dt, rows, cols, w2)
		var s Scratch
		s.Fit(m1, 1, 1)
		x := randInput(r, cols)
		check := func(what string, m *Matrix, w []byte) {
			want := make([]float32, rows)
			kernels.MatVec(nil, dt, w, rows, cols, thresholded(x, 0.5), want, make([]byte, kernels.MatScratchBytes(dt, cols, 1)))
			got := make([]float32, rows)
			m.MulVec(nil, x, 0.5, got, &s)
			for i := range got {
				if d := math.Abs(float64(got[i] - want[i])); d > 1e-5*math.Abs(float64(want[i]))+1e-6 {
					t.Fatalf("%v, %s: row %d: %g, dense %g", dt, what, i, got[i], want[i])
				}
			}
		}
		check("first matrix", m1, w1)
		check("second matrix, same input", m2, w2)
		for i := range x {
			x[i] = -x[i] * 1.5
		}
		check("input changed in place", m2, w2)
	}
}

func TestSplitCutsByWork(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	for _, c := range []struct {
		name   string
		blocks int
		active float64 // fraction of blocks with work
	}{
		{"one block", 1, 1}, {"few blocks", 5, 1}, {"dense", 64, 1}, {"half idle", 176, 0.5}, {"all idle", 64, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			plans := make([]blockPlan, c.blocks)
			total := 0
			for i := range plans {
				if r.Float64() < c.active {
					plans[i].nq = int32(1 + r.IntN(8))
					total += int(plans[i].nq) + 1
				}
			}
			var j mulJob
			tasks := j.split(plans, 1)
			if tasks != min(decodeTasks, c.blocks) || j.start[0] != 0 || int(j.start[tasks]) != c.blocks {
				t.Fatalf("%d tasks over blocks %d..%d of %d", tasks, j.start[0], j.start[tasks], c.blocks)
			}
			for k := range tasks {
				if j.start[k+1] < j.start[k] {
					t.Fatalf("task %d runs blocks %d..%d", k, j.start[k], j.start[k+1])
				}
			}
			// The first task, the largest share, gets no more than its
			// share of the work plus one block's.
			first := 0
			for _, p := range plans[:j.start[1]] {
				if p.nq > 0 {
					first += int(p.nq) + 1
				}
			}
			shares := 0
			for _, s := range taskShare[:tasks] {
				shares += s
			}
			if tasks > 1 && first*shares > taskShare[0]*total+9*shares {
				t.Fatalf("the first task has %d of %d work, its share %d/%d", first, total, taskShare[0], shares)
			}
		})
	}
}

// keptFraction is the fraction of the entries of x whose magnitude is
// above thr.
func keptFraction(x []float32, thr float32) float64 {
	kept := 0
	for _, v := range x {
		if v > thr || -v > thr {
			kept++
		}
	}
	return float64(kept) / float64(len(x))
}
