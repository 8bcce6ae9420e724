package kernels

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
)

// TestMatMulRows4MatchesVecDot checks MatMul of the table formats, whose
// single tokens go 4 rows at a time where a kernel runs, output by output
// against the pure-Go VecDot, for row counts that leave 0-3 rows over and
// for 1-3 tokens, alone and on a pool.
func TestMatMulRows4MatchesVecDot(t *testing.T) {
	rng := rand.New(rand.NewPCG(43, 44))
	pool := NewPool(2)
	defer pool.Close()
	for _, c := range []struct {
		typ  DType
		want func(int, []byte, []byte) float32
	}{
		{MXFP4, vecDotMXFP4Generic},
		{IQ4_NL, vecDotIQ4_NLGeneric},
	} {
		t.Run(c.typ.String(), func(t *testing.T) {
			for _, shape := range [][2]int{{4, 32}, {17, 64}, {35, 2880}, {66, 96}} {
				rows, cols := shape[0], shape[1]
				rb, ab := c.typ.RowBytes(cols), Q8_0.RowBytes(cols)
				w := make([]byte, 0, rows*rb)
				for r := range rows {
					x := randomRow(rng, cols)
					if r%5 == 0 {
						for i := range x {
							x[i] = float32(1 - 2*(i%2)) // the table's ends
						}
					}
					w = append(w, quantize(c.typ, x)...)
				}
				for n := 1; n <= 3; n++ {
					x := randomRow(rng, n*cols)
					a := make([]byte, n*ab)
					for tok := range n {
						QuantizeActivations(Q8_0, x[tok*cols:(tok+1)*cols], a[tok*ab:(tok+1)*ab])
					}
					for _, p := range []*Pool{nil, pool} {
						out := make([]float32, n*rows)
						MatMul(p, c.typ, w, rows, cols, x, n, out, make([]byte, MatScratchBytes(c.typ, cols, n)))
						for tok := range n {
							for r := range rows {
								want := c.want(cols, w[r*rb:(r+1)*rb], a[tok*ab:(tok+1)*ab])
								if got := out[tok*rows+r]; math.Float32bits(got) != math.Float32bits(want) {
									t.Fatalf("(%d, %d) by %d tokens (pool %v), token %d row %d: %.9g, pure Go %.9g",
										rows, cols, n, p != nil, tok, r, got, want)
								}
							}
						}
					}
				}
			}
		})
	}
}

// BenchmarkMatMulRows4 times a decode step's product (one token) of a
// gpt-oss expert's shape in the table formats.
func BenchmarkMatMulRows4(b *testing.B) {
	const rows, cols = 2880, 2880
	rng := rand.New(rand.NewPCG(45, 46))
	for _, typ := range []DType{MXFP4, IQ4_NL} {
		w := quantize(typ, randomRow(rng, rows*cols))
		x := randomRow(rng, cols)
		out := make([]float32, rows)
		scratch := make([]byte, MatScratchBytes(typ, cols, 1))
		b.Run(fmt.Sprint(typ), func(b *testing.B) {
			b.SetBytes(int64(len(w)))
			for b.Loop() {
				MatMul(nil, typ, w, rows, cols, x, 1, out, scratch)
			}
		})
	}
}
