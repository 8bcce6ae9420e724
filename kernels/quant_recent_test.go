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

// blockWeights are n weights of typ (IQ4_NL or MXFP4): random nibbles, or
// all 0xff (index 15 everywhere) when extreme, under random block scales
// (MXFP4's exponents from 0, subnormal halves, to 2^31, every product
// finite).
func blockWeights(rng *rand.Rand, typ DType, n int, extreme bool) []byte {
	w := make([]byte, typ.RowBytes(n))
	for i := range w {
		w[i] = byte(rng.Uint32())
		if extreme {
			w[i] = 0xff
		}
	}
	bb := typ.RowBytes(QK)
	for b := 0; b < len(w); b += bb {
		if typ == MXFP4 {
			w[b] = byte(rng.IntN(160))
		} else {
			binary.LittleEndian.PutUint16(w[b:], FP32ToFP16(float32(rng.NormFloat64()*0.01)))
		}
	}
	return w
}

// TestRecentProducts4MatchGeneric checks the 4-token kernels lane by lane
// against the pure-Go one-token products and the one-token kernels, on
// random and extreme operands, with activation rows and outputs at several
// strides.
func TestRecentProducts4MatchGeneric(t *testing.T) {
	if vecDotQ4_KRepack4 == nil {
		t.Skip("no 4-token kernels on this CPU or build")
	}
	rng := rand.New(rand.NewPCG(35, 36))
	for _, c := range []struct {
		name      string
		typ, at   DType
		got       func(int, []byte, []byte, int, []float32, int)
		want, one func(int, []byte, []byte) float32
		sizes     []int
		weights   func(*rand.Rand, DType, int, bool) []byte
	}{
		{"repack", Q4_K, Q8_K, vecDotQ4_KRepack4, vecDotQ4_KRepackGeneric, vecDotQ4_KRepack, []int{QKK, 3 * QKK, 2048}, recentWeights},
		{"gemm", Q4_K, Q8_K, vecDotQ4_KGemm4, vecDotQ4_KGemmGeneric, vecDotQ4_KGemm, []int{QKK, 3 * QKK, 2048}, recentWeights},
		{"iq4_nl", IQ4_NL, Q8_0, vecDotIQ4_NLx4, vecDotIQ4_NLGeneric, vecDotIQ4_NL, []int{QK, 3 * QK, 2880}, blockWeights},
		{"mxfp4", MXFP4, Q8_0, vecDotMXFP4x4, vecDotMXFP4Generic, vecDotMXFP4, []int{QK, 3 * QK, 2880}, blockWeights},
		{"mxfp4 side", MXFP4, Q8_0, vecDotMXFP4x4Side, vecDotMXFP4Generic, vecDotMXFP4, []int{QK, 3 * QK, 2880}, blockWeights},
	} {
		t.Run(c.name, func(t *testing.T) {
			for _, n := range c.sizes {
				ab := c.at.RowBytes(n)
				for i := range 30 {
					w := c.weights(rng, c.typ, n, i == 0)
					aRow := ab + c.at.RowBytes(c.at.BlockSize())*(i%3) // rows apart by more than their width too
					a := make([]byte, 3*aRow+ab)
					for tok := range 4 {
						x := randomRow(rng, n)
						if i == 1 {
							for j := range x {
								x[j] = float32(1 - 2*((j+tok)%2)) // activations at ±127
							}
						}
						QuantizeActivations(c.at, x, a[tok*aRow:tok*aRow+ab])
					}
					outRow := 1 + i%5
					got := make([]float32, 3*outRow+1)
					c.got(n, w, a, aRow, got, outRow)
					for tok := range 4 {
						want := c.want(n, w, a[tok*aRow:])
						if g := got[tok*outRow]; math.Float32bits(g) != math.Float32bits(want) {
							t.Fatalf("n=%d case %d token %d: %.9g, pure Go %.9g", n, i, tok, g, want)
						}
						if one := c.one(n, w, a[tok*aRow:]); math.Float32bits(one) != math.Float32bits(want) {
							t.Fatalf("n=%d case %d token %d: one-token kernel %.9g, pure Go %.9g", n, i, tok, one, want)
						}
					}
				}
			}
		})
	}
}

// vecDotMXFP4x4Side is vecDotMXFP4x4s with the 4 tokens' terms written
// for it (MatMul writes them once for all rows).
func vecDotMXFP4x4Side(n int, w, a []byte, aRow int, out []float32, outRow int) {
	side := make([]byte, sideBytes(MXFP4, n, 4))
	for tok := range 4 {
		mxfp4Side(a[tok*aRow:tok*aRow+Q8_0.RowBytes(n)], side, tok, 4)
	}
	vecDotMXFP4x4s(n, w, a, aRow, out, outRow, side, 4)
}

// TestMXFP4Products8MatchGeneric checks the 8-token MXFP4 kernel lane by
// lane against the pure-Go one-token product.
func TestMXFP4Products8MatchGeneric(t *testing.T) {
	if vecDotMXFP4x8s == nil {
		t.Skip("no 8-token kernel on this CPU or build")
	}
	rng := rand.New(rand.NewPCG(39, 40))
	for _, n := range []int{QK, 3 * QK, 2880} {
		ab := Q8_0.RowBytes(n)
		for i := range 30 {
			w := blockWeights(rng, MXFP4, n, i == 0)
			aRow := ab + bytesQ8_0*(i%3)
			nTok := 8 + i%3 // side terms of more tokens than the 8
			a := make([]byte, (nTok-1)*aRow+ab)
			side := make([]byte, sideBytes(MXFP4, n, nTok))
			for tok := range nTok {
				x := randomRow(rng, n)
				if i == 1 {
					for j := range x {
						x[j] = float32(1 - 2*((j+tok)%2)) // activations at ±127
					}
				}
				QuantizeActivations(Q8_0, x, a[tok*aRow:tok*aRow+ab])
				mxfp4Side(a[tok*aRow:tok*aRow+ab], side, tok, nTok)
			}
			first := i % (nTok - 7)
			outRow := 1 + i%5
			got := make([]float32, 7*outRow+1)
			vecDotMXFP4x8s(n, w, a[first*aRow:], aRow, got, outRow, side[4*first:], nTok)
			for tok := range 8 {
				want := vecDotMXFP4Generic(n, w, a[(first+tok)*aRow:])
				if g := got[tok*outRow]; math.Float32bits(g) != math.Float32bits(want) {
					t.Fatalf("n=%d case %d token %d: %.9g, pure Go %.9g", n, i, tok, g, want)
				}
			}
		}
	}
}

// BenchmarkProducts4 times the 4-token kernels against 4 calls of the
// one-token ones over one 2880-wide row (gpt-oss's width; 2816 for Q4_K,
// 11 super-blocks), ns per 4 tokens.
func BenchmarkProducts4(b *testing.B) {
	if vecDotQ4_KRepack4 == nil {
		b.Skip("no 4-token kernels on this CPU or build")
	}
	rng := rand.New(rand.NewPCG(37, 38))
	for _, c := range []struct {
		name    string
		typ, at DType
		n       int
		x4      func(int, []byte, []byte, int, []float32, int)
		one     func(int, []byte, []byte) float32
		weights func(*rand.Rand, DType, int, bool) []byte
	}{
		{"mxfp4", MXFP4, Q8_0, 2880, vecDotMXFP4x4, vecDotMXFP4, blockWeights},
		{"iq4_nl", IQ4_NL, Q8_0, 2880, vecDotIQ4_NLx4, vecDotIQ4_NL, blockWeights},
		{"q4_K repack", Q4_K, Q8_K, 11 * QKK, vecDotQ4_KRepack4, vecDotQ4_KRepack, recentWeights},
	} {
		w := c.weights(rng, c.typ, c.n, false)
		if c.typ == MXFP4 {
			for b := 0; b < len(w); b += bytesMXFP4 {
				w[b] = byte(118 + rng.IntN(8)) // 2^-10…2^-3: no subnormal products
			}
		}
		aRow := c.at.RowBytes(c.n)
		a := make([]byte, 4*aRow)
		for tok := range 4 {
			QuantizeActivations(c.at, randomRow(rng, c.n), a[tok*aRow:(tok+1)*aRow])
		}
		out := make([]float32, 4)
		b.Run(c.name+"/x4", func(b *testing.B) {
			for b.Loop() {
				c.x4(c.n, w, a, aRow, out, 1)
			}
		})
		b.Run(c.name+"/1x4", func(b *testing.B) {
			for b.Loop() {
				for tok := range 4 {
					out[tok] = c.one(c.n, w, a[tok*aRow:])
				}
			}
		})
		if c.typ == MXFP4 { // the side terms written once, as MatMul does
			side := make([]byte, sideBytes(MXFP4, c.n, 4))
			for tok := range 4 {
				mxfp4Side(a[tok*aRow:(tok+1)*aRow], side, tok, 4)
			}
			b.Run(c.name+"/x4s", func(b *testing.B) {
				for b.Loop() {
					vecDotMXFP4x4s(c.n, w, a, aRow, out, 1, side, 4)
				}
			})
		}
		if c.typ == MXFP4 { // 8 tokens, ns per 4 tokens
			a8 := append(append([]byte(nil), a...), a...)
			side := make([]byte, sideBytes(MXFP4, c.n, 8))
			for tok := range 8 {
				mxfp4Side(a8[tok*aRow:(tok+1)*aRow], side, tok, 8)
			}
			out8 := make([]float32, 8)
			b.Run(c.name+"/x8s", func(b *testing.B) {
				for b.Loop() {
					vecDotMXFP4x8s(c.n, w, a8, aRow, out8, 1, side, 8)
				}
				b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/2, "ns/4tok")
			})
		}
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
