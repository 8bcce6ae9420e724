package kernels

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
)

// matTypes are the weight formats the mat-vec tests run; each needs traits.
var matTypes = []DType{F32, F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K}

// randMatrix quantizes a random (rows, cols) matrix to t and returns its bytes
// and its dequantized values.
func randMatrix(t testing.TB, r *rand.Rand, dt DType, rows, cols int) ([]byte, []float32) {
	t.Helper()
	tr, ok := TraitsOf(dt)
	if !ok {
		t.Fatalf("no traits for %v", dt)
	}
	rb := dt.RowBytes(cols)
	w := make([]byte, rows*rb)
	deq := make([]float32, rows*cols)
	for i := range rows {
		tr.QuantizeRow(randF32(r, cols, 1), w[i*rb:(i+1)*rb])
		tr.DequantizeRow(w[i*rb:(i+1)*rb], deq[i*cols:(i+1)*cols])
	}
	return w, deq
}

func TestMatVec(t *testing.T) {
	r := rand.New(rand.NewPCG(31, 32))
	pools := map[string]*Pool{"nil": nil, "threads=1": NewPool(1), "threads=3": NewPool(3)}
	defer func() {
		for _, p := range pools {
			p.Close()
		}
	}()
	for _, dt := range matTypes {
		t.Run(dt.String(), func(t *testing.T) {
			tr, _ := TraitsOf(dt)
			const rows = 37 // not a whole number of row blocks
			cols := 2 * dt.BlockSize()
			if cols < 64 {
				cols = 64
			}
			w, deq := randMatrix(t, r, dt, rows, cols)
			x := randF32(r, cols, 1)

			// The exact answer: one VecDot per row against x quantized
			// as the activations are.
			act := make([]byte, tr.VecDotType.RowBytes(cols))
			QuantizeActivations(tr.VecDotType, x, act)
			rb := dt.RowBytes(cols)
			for name, p := range pools {
				out := make([]float32, rows)
				MatVec(p, dt, w, rows, cols, x, out, make([]byte, MatScratchBytes(dt, cols, 1)))
				for i := range rows {
					want := tr.VecDot(cols, w[i*rb:(i+1)*rb], act)
					if out[i] != want {
						t.Fatalf("%s: row %d: %g, VecDot gives %g", name, i, out[i], want)
					}
					// And near the float64 product with the dequantized
					// weights; activation quantization costs up to about
					// 1% of Σ|w·x| for the 4-bit activation formats.
					var ref, mag float64
					for c := range cols {
						p := float64(deq[i*cols+c]) * float64(x[c])
						ref += p
						mag += math.Abs(p)
					}
					if math.Abs(float64(out[i])-ref) > 0.02*mag {
						t.Fatalf("%s: row %d: %g, float64 %g (Σ|w·x| %g)", name, i, out[i], ref, mag)
					}
				}
			}
		})
	}
}

func TestMatMulMatchesMatVec(t *testing.T) {
	r := rand.New(rand.NewPCG(33, 34))
	p := NewPool(2)
	defer p.Close()
	for _, dt := range []DType{F32, F16, Q8_0, Q4_0, Q4_K, IQ4_NL, MXFP4} {
		// IQ4_NL and MXFP4: token blocks of 4k + 0…3 tokens through the
		// 4-token kernels.
		for _, n := range []int{1, 3, 4, 6, 7, 12, 15, matTokBlock + 5, matTokBlock + 6, 2*matTokBlock + 3} {
			t.Run(fmt.Sprintf("%v/n=%d", dt, n), func(t *testing.T) {
				const rows = 50
				cols := max(256, dt.BlockSize())
				w, _ := randMatrix(t, r, dt, rows, cols)
				x := randF32(r, n*cols, 1)
				for _, pool := range []*Pool{nil, p} {
					out := make([]float32, n*rows)
					MatMul(pool, dt, w, rows, cols, x, n, out, make([]byte, MatScratchBytes(dt, cols, n)))
					one := make([]float32, rows)
					scratch := make([]byte, MatScratchBytes(dt, cols, 1))
					for j := range n {
						MatVec(nil, dt, w, rows, cols, x[j*cols:(j+1)*cols], one, scratch)
						for i := range rows {
							if math.Float32bits(out[j*rows+i]) != math.Float32bits(one[i]) {
								t.Fatalf("token %d row %d: MatMul %g, MatVec %g", j, i, out[j*rows+i], one[i])
							}
						}
					}
				}
			})
		}
	}
}

// TestExpertMatMulTokensAlone checks ExpertMatMul of Q4_K (the 4-token
// repacked kernel) bit for bit against its products of each token alone.
func TestExpertMatMulTokensAlone(t *testing.T) {
	r := rand.New(rand.NewPCG(35, 36))
	const rows, cols = 48, 512
	w, _ := randMatrix(t, r, Q4_K, rows, cols)
	for _, n := range []int{4, 6, 7, matTokBlock + 5, matTokBlock + 6} {
		x := randF32(r, n*cols, 1)
		out := make([]float32, n*rows)
		ExpertMatMul(nil, Q4_K, w, rows, cols, x, n, out, make([]byte, MatScratchBytes(Q4_K, cols, n)))
		one := make([]float32, rows)
		scratch := make([]byte, MatScratchBytes(Q4_K, cols, 1))
		for j := range n {
			ExpertMatMul(nil, Q4_K, w, rows, cols, x[j*cols:(j+1)*cols], 1, one, scratch)
			for i := range rows {
				if math.Float32bits(out[j*rows+i]) != math.Float32bits(one[i]) {
					t.Fatalf("n=%d token %d row %d: %g, alone %g", n, j, i, out[j*rows+i], one[i])
				}
			}
		}
	}
}

func TestMatScratchBytes(t *testing.T) {
	cases := []struct {
		t       DType
		cols, n int
		want    int
	}{
		{F32, 4096, 8, 0},
		// The blocked kernels take F16 activations as float32, and Q8_0
		// activations with float32 block scales and int32 block sums.
		{F16, 64, 2, 2 * 64 * 4},
		{Q8_0, 4096, 1, 4096 / 32 * (34 + 8)},
		{Q8_0, 4096, 9, 9*4096/32*(34+8) + 2*4096/32*288},
		// Q4_0 also packs tokens in groups (room for 16 tokens, 40 bytes
		// each a block).
		{Q4_0, 4096, 3, 3*4096/32*(34+8) + 16*4096/32*40},
		{Q5_0, 4096, 1, 4096 / 32 * 34},
		{Q4_K, 4096, 1, Q8_K.RowBytes(4096)},
		{Q4_0, 33, 1, -1},     // not whole blocks
		{IQ2_XXS, 256, 1, -1}, // no dot product
		{DType(99), 256, 1, -1},
	}
	for _, c := range cases {
		if got := MatScratchBytes(c.t, c.cols, c.n); got != c.want {
			t.Errorf("MatScratchBytes(%v, %d, %d) = %d, want %d", c.t, c.cols, c.n, got, c.want)
		}
	}
}

func TestMatMulBadSizesPanic(t *testing.T) {
	w := make([]byte, 4*Q8_0.RowBytes(64))
	cases := map[string]func(){
		"short weights": func() { MatVec(nil, Q8_0, w[:10], 4, 64, make([]float32, 64), make([]float32, 4), make([]byte, 68)) },
		"short x":       func() { MatVec(nil, Q8_0, w, 4, 64, make([]float32, 63), make([]float32, 4), make([]byte, 68)) },
		"short out":     func() { MatVec(nil, Q8_0, w, 4, 64, make([]float32, 64), make([]float32, 3), make([]byte, 68)) },
		"short scratch": func() { MatVec(nil, Q8_0, w, 4, 64, make([]float32, 64), make([]float32, 4), make([]byte, 67)) },
		"partial block": func() { MatVec(nil, Q8_0, w, 4, 60, make([]float32, 64), make([]float32, 4), make([]byte, 68)) },
		"no traits":     func() { MatVec(nil, IQ2_XXS, w, 1, 256, make([]float32, 256), make([]float32, 1), w) },
	}
	for name, f := range cases {
		t.Run(name, func(t *testing.T) {
			defer func() {
				if recover() == nil {
					t.Error("no panic")
				}
			}()
			f()
		})
	}
}

func TestMatMulDoesNotAllocate(t *testing.T) {
	r := rand.New(rand.NewPCG(35, 36))
	p := NewPool(2)
	defer p.Close()
	for _, dt := range []DType{F32, Q4_0} {
		const rows, cols, n = 64, 256, 4
		w, _ := randMatrix(t, r, dt, rows, cols)
		x, out := randF32(r, n*cols, 1), make([]float32, n*rows)
		scratch := make([]byte, MatScratchBytes(dt, cols, n))
		for _, pool := range []*Pool{nil, p} {
			if a := testing.AllocsPerRun(50, func() { MatVec(pool, dt, w, rows, cols, x[:cols], out[:rows], scratch) }); a != 0 {
				t.Errorf("%v MatVec allocates %v times", dt, a)
			}
			if a := testing.AllocsPerRun(50, func() { MatMul(pool, dt, w, rows, cols, x, n, out, scratch) }); a != 0 {
				t.Errorf("%v MatMul allocates %v times", dt, a)
			}
		}
	}
}

// BenchmarkMatVec reports the weight bytes streamed per second of a
// 4096×4096 mat-vec.
func BenchmarkMatVec(b *testing.B) {
	const rows, cols = 4096, 4096
	r := rand.New(rand.NewPCG(37, 38))
	x := randF32(r, cols, 1)
	out := make([]float32, rows)
	for _, dt := range []DType{F32, F16, Q8_0, Q4_0, Q4_K} {
		tr, _ := TraitsOf(dt)
		rb := dt.RowBytes(cols)
		w := make([]byte, rows*rb)
		src := make([]float32, cols)
		for i := range rows {
			for c := range src {
				src[c] = r.Float32()*2 - 1
			}
			tr.QuantizeRow(src, w[i*rb:(i+1)*rb])
		}
		scratch := make([]byte, MatScratchBytes(dt, cols, 1))
		for _, threads := range []int{1, 2} {
			b.Run(fmt.Sprintf("%v/threads=%d", dt, threads), func(b *testing.B) {
				p := NewPool(threads)
				defer p.Close()
				b.SetBytes(int64(len(w)))
				for b.Loop() {
					MatVec(p, dt, w, rows, cols, x, out, scratch)
				}
			})
		}
	}
}

// BenchmarkMatMul times a 4096×4096 matrix against a batch of 32 tokens and
// reports the multiply-adds done per second.
func BenchmarkMatMul(b *testing.B) {
	const rows, cols, n = 4096, 4096, 32
	r := rand.New(rand.NewPCG(39, 40))
	x := randF32(r, n*cols, 1)
	out := make([]float32, n*rows)
	for _, dt := range []DType{F32, Q8_0, Q4_0} {
		tr, _ := TraitsOf(dt)
		rb := dt.RowBytes(cols)
		w := make([]byte, rows*rb)
		for i := range rows {
			tr.QuantizeRow(randF32(r, cols, 1), w[i*rb:(i+1)*rb])
		}
		scratch := make([]byte, MatScratchBytes(dt, cols, n))
		for _, threads := range []int{1, 2} {
			b.Run(fmt.Sprintf("%v/threads=%d", dt, threads), func(b *testing.B) {
				p := NewPool(threads)
				defer p.Close()
				for b.Loop() {
					MatMul(p, dt, w, rows, cols, x, n, out, scratch)
				}
				b.ReportMetric(float64(rows*cols*n)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GMAC/s")
			})
		}
	}
}
