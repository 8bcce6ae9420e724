package kernels

import (
	"encoding/binary"
	"math"
	"math/rand/v2"
	"testing"
)

// recentTwins pairs each product of recent ggml's repacked kernels (the one
// ExpertMatMul and MatMulRecent take) with its pure-Go twin.
var recentTwins = []struct {
	name      string
	typ       DType
	got, want func(int, []byte, []byte) float32
}{
	{"q4_K repack", Q4_K, vecDotQ4_KRepack, vecDotQ4_KRepackGeneric},
	{"q4_K gemm", Q4_K, vecDotQ4_KGemm, vecDotQ4_KGemmGeneric},
	{"iq4_xs panel", IQ4_XS, vecDotIQ4_XSPanel, vecDotIQ4_XSPanelGeneric},
}

// recentWeights are n weights of typ: random bytes (every scale and quant
// bit pattern) under finite random super-block scales, or all bytes 0xff
// (the largest scales and quants) when extreme.
func recentWeights(rng *rand.Rand, typ DType, n int, extreme bool) []byte {
	w := make([]byte, typ.RowBytes(n))
	for i := range w {
		w[i] = byte(rng.Uint32())
		if extreme {
			w[i] = 0xff
		}
	}
	bb := typ.RowBytes(QKK)
	for b := 0; b < len(w); b += bb {
		binary.LittleEndian.PutUint16(w[b:], FP32ToFP16(float32(rng.NormFloat64()*0.01)))
		if typ == Q4_K {
			binary.LittleEndian.PutUint16(w[b+2:], FP32ToFP16(float32(rng.NormFloat64()*0.01)))
		}
	}
	return w
}

// TestRecentProductsMatchGeneric checks the assembly twins of the repacked
// products bit for bit against the pure-Go ones (which
// TestExpertMatMulMatchesGGML checks against ggml's outputs), on random and
// extreme operands.
func TestRecentProductsMatchGeneric(t *testing.T) {
	rng := rand.New(rand.NewPCG(31, 32))
	for _, c := range recentTwins {
		t.Run(c.name, func(t *testing.T) {
			for _, n := range []int{QKK, 2 * QKK, 11 * QKK, 2048} {
				for i := range 40 {
					w := recentWeights(rng, c.typ, n, i == 0)
					x := randomRow(rng, n)
					if i == 1 {
						for j := range x {
							x[j] = float32(1 - 2*(j%2)) // activations at ±127
						}
					}
					a := make([]byte, Q8_K.RowBytes(n))
					QuantizeActivations(Q8_K, x, a)
					if got, want := c.got(n, w, a), c.want(n, w, a); math.Float32bits(got) != math.Float32bits(want) {
						t.Fatalf("n=%d case %d: %.9g, pure Go %.9g", n, i, got, want)
					}
				}
			}
		})
	}
}

// TestRecentProducts4MatchGeneric checks the 4-token Q4_K kernels lane by
// lane against the pure-Go one-token products.
func TestRecentProducts4MatchGeneric(t *testing.T) {
	if vecDotQ4_KRepack4 == nil {
		t.Skip("no 4-token kernels on this CPU or build")
	}
	rng := rand.New(rand.NewPCG(35, 36))
	for _, c := range []struct {
		name string
		got  func(int, []byte, []byte, int, []float32, int)
		want func(int, []byte, []byte) float32
	}{
		{"repack", vecDotQ4_KRepack4, vecDotQ4_KRepackGeneric},
		{"gemm", vecDotQ4_KGemm4, vecDotQ4_KGemmGeneric},
	} {
		t.Run(c.name, func(t *testing.T) {
			for _, n := range []int{QKK, 3 * QKK, 2048} {
				for i := range 30 {
					w := recentWeights(rng, Q4_K, n, i == 0)
					aRow := Q8_K.RowBytes(n) + 292*(i%3) // rows apart by more than their width too
					a := make([]byte, 3*aRow+Q8_K.RowBytes(n))
					for tok := range 4 {
						x := randomRow(rng, n)
						if i == 1 {
							for j := range x {
								x[j] = float32(1 - 2*((j+tok)%2))
							}
						}
						QuantizeActivations(Q8_K, x, a[tok*aRow:tok*aRow+Q8_K.RowBytes(n)])
					}
					outRow := 1 + i%5
					got := make([]float32, 3*outRow+1)
					c.got(n, w, a, aRow, got, outRow)
					for tok := range 4 {
						want := c.want(n, w, a[tok*aRow:])
						if g := got[tok*outRow]; math.Float32bits(g) != math.Float32bits(want) {
							t.Fatalf("n=%d case %d token %d: %.9g, pure Go %.9g", n, i, tok, g, want)
						}
					}
				}
			}
		})
	}
}

// BenchmarkRecentProducts times the repacked products against their pure-Go
// twins over one 2048-wide row (an expert's row in Qwen3-30B-A3B).
func BenchmarkRecentProducts(b *testing.B) {
	const n = 2048
	rng := rand.New(rand.NewPCG(33, 34))
	for _, c := range recentTwins {
		w := recentWeights(rng, c.typ, n, false)
		a := make([]byte, Q8_K.RowBytes(n))
		QuantizeActivations(Q8_K, randomRow(rng, n), a)
		for _, v := range []struct {
			name string
			dot  func(int, []byte, []byte) float32
		}{{"kernel", c.got}, {"purego", c.want}} {
			b.Run(c.name+"/"+v.name, func(b *testing.B) {
				b.SetBytes(int64(len(w)))
				for b.Loop() {
					v.dot(n, w, a)
				}
			})
		}
	}
}

// BenchmarkRecentProducts4 times the 4-token Q4_K products against 4 calls
// of the one-token kernels over one 2048-wide row.
func BenchmarkRecentProducts4(b *testing.B) {
	if vecDotQ4_KRepack4 == nil {
		b.Skip("no 4-token kernels on this CPU or build")
	}
	const n = 2048
	rng := rand.New(rand.NewPCG(37, 38))
	w := recentWeights(rng, Q4_K, n, false)
	aRow := Q8_K.RowBytes(n)
	a := make([]byte, 4*aRow)
	for tok := range 4 {
		QuantizeActivations(Q8_K, randomRow(rng, n), a[tok*aRow:(tok+1)*aRow])
	}
	out := make([]float32, 4)
	for _, c := range []struct {
		name string
		four func(int, []byte, []byte, int, []float32, int)
		one  func(int, []byte, []byte) float32
	}{
		{"repack", vecDotQ4_KRepack4, vecDotQ4_KRepack},
		{"gemm", vecDotQ4_KGemm4, vecDotQ4_KGemm},
	} {
		b.Run(c.name+"/4-token", func(b *testing.B) {
			b.SetBytes(int64(4 * len(w)))
			for b.Loop() {
				c.four(n, w, a, aRow, out, 1)
			}
		})
		b.Run(c.name+"/1-token×4", func(b *testing.B) {
			b.SetBytes(int64(4 * len(w)))
			for b.Loop() {
				for tok := range 4 {
					out[tok] = c.one(n, w, a[tok*aRow:])
				}
			}
		})
	}
}

// TestRecentMatMulTokenGroups checks ExpertMatMul and MatMulRecent of Q4_K
// for every token count up to 19, alone and on a pool, against the pure-Go
// products token by token: the groups of 8 and 4, the rest taken again
// with a group's last tokens, and MatMulRecent's split between its gemm and
// its gemv must not change an output.
func TestRecentMatMulTokenGroups(t *testing.T) {
	const rows, cols = 24, 2 * QKK
	rng := rand.New(rand.NewPCG(41, 42))
	w := make([]byte, 0, rows*Q4_K.RowBytes(cols))
	for range rows {
		w = append(w, recentWeights(rng, Q4_K, cols, false)...)
	}
	rb, ab := Q4_K.RowBytes(cols), Q8_K.RowBytes(cols)
	pool := NewPool(2)
	defer pool.Close()
	for n := 1; n <= 19; n++ {
		x := randomRow(rng, n*cols)
		a := make([]byte, n*ab)
		for tok := range n {
			QuantizeActivations(Q8_K, x[tok*cols:(tok+1)*cols], a[tok*ab:(tok+1)*ab])
		}
		for _, c := range []struct {
			name string
			mul  func(p *Pool, t DType, w []byte, rows, cols int, x []float32, n int, out []float32, scratch []byte)
			want func(tok int) func(int, []byte, []byte) float32
		}{
			{"ExpertMatMul", ExpertMatMul, func(int) func(int, []byte, []byte) float32 { return vecDotQ4_KRepackGeneric }},
			{"MatMulRecent", MatMulRecent, func(tok int) func(int, []byte, []byte) float32 {
				if tok < n-n%4 {
					return vecDotQ4_KGemmGeneric
				}
				return vecDotQ4_KRepackGeneric
			}},
		} {
			for _, p := range []*Pool{nil, pool} {
				out := make([]float32, n*rows)
				c.mul(p, Q4_K, w, rows, cols, x, n, out, make([]byte, MatScratchBytes(Q4_K, cols, n)))
				for tok := range n {
					for r := range rows {
						want := c.want(tok)(cols, w[r*rb:(r+1)*rb], a[tok*ab:(tok+1)*ab])
						if got := out[tok*rows+r]; math.Float32bits(got) != math.Float32bits(want) {
							t.Fatalf("%s of %d tokens (pool %v), token %d row %d: %.9g, pure Go %.9g", c.name, n, p != nil, tok, r, got, want)
						}
					}
				}
			}
		}
	}
}
