package kernels

import (
	"fmt"
	"math"
	"math/rand/v2"
	"reflect"
	"runtime"
	"strings"
	"testing"
)

// gemmTestTypes are the formats that may have blocked kernels.
var gemmTestTypes = []DType{F16, Q8_0, Q4_0, Q4_K, Q6_K}

// gemmOperands returns rows weight rows of cols weights in format t, each
// wStride bytes apart, and toks activation rows in the layout the blocked
// kernels take (as prepJob writes them, blockedActRowBytes long), aStride
// bytes apart.
func gemmOperands(r *rand.Rand, t DType, rows, cols, wPad, toks, aPad int) (w []byte, wStride int, a []byte, aStride int) {
	tr, _ := TraitsOf(t)
	wStride = t.RowBytes(cols) + wPad
	w = make([]byte, rows*wStride)
	for i := range rows {
		tr.QuantizeRow(randomRow(r, cols), w[i*wStride:i*wStride+t.RowBytes(cols)])
	}
	aRow := blockedActRowBytes(t, cols, toks)
	if aRow == 0 {
		aRow = tr.VecDotType.RowBytes(cols)
	}
	aStride = aRow + aPad
	a = make([]byte, toks*aStride)
	for i := range toks {
		q := prepJob{wt: t, at: tr.VecDotType, x: randomRow(r, cols), cols: cols, a: a[i*aStride : i*aStride+aRow], aRow: aRow}
		q.Do(0, 0)
	}
	return w, wStride, a, aStride
}

// dotActs returns the VecDotType row of token tok of blocked activations a
// (aStride bytes per token), for comparisons with VecDot: for F16 weights
// the float32 activations go back to halves.
func dotActs(t DType, cols int, a []byte, aStride, tok int) []byte {
	tr, _ := TraitsOf(t)
	row := a[tok*aStride : (tok+1)*aStride]
	if t != F16 || len(row) < 4*cols { // F16 rows of one token are halves
		return row[:tr.VecDotType.RowBytes(cols)]
	}
	h := make([]byte, 2*cols)
	for i := range cols {
		le.PutUint16(h[2*i:], FP32ToFP16(math.Float32frombits(le.Uint32(row[4*i:]))))
	}
	return h
}

// TestGemmKernelsMatchGeneric runs every blocked kernel against its pure-Go
// twin, the format's generic VecDot per output, on random data: the results
// must be equal to the bit.
func TestGemmKernelsMatchGeneric(t *testing.T) {
	r := rand.New(rand.NewPCG(41, 42))
	for _, dt := range gemmTestTypes {
		f := gemmFormats[dt]
		if f == nil {
			continue
		}
		generic := genericVecDots[dt]
		for _, nb := range []int{1, 3, 4, 17} {
			cols := nb * f.blockSize
			if dt == F16 {
				cols = nb * 32
			}
			t.Run(fmt.Sprintf("%v/gemv/cols=%d", dt, cols), func(t *testing.T) {
				const rows = 5
				w, ws, a, _ := gemmOperands(r, dt, rows, cols, 6, 1, 0)
				out := make([]float32, rows+1)
				out[rows] = 12345
				f.gemv(cols/f.blockSize, &w[0], ws, &a[0], &out[0], rows)
				for i := range rows {
					want := generic(cols, w[i*ws:(i+1)*ws], dotActs(dt, cols, a, len(a), 0))
					if math.Float32bits(out[i]) != math.Float32bits(want) {
						t.Fatalf("row %d: %g, generic %g", i, out[i], want)
					}
				}
				if out[rows] != 12345 {
					t.Fatalf("wrote past the last row")
				}
			})
			if f.gemvTiles != nil {
				t.Run(fmt.Sprintf("%v/gemvTiles/cols=%d", dt, cols), func(t *testing.T) {
					const rows = 5
					w, ws, a, as := gemmOperands(r, dt, rows, cols, 6, 2, 0)
					out := make([]float32, rows)
					f.gemvTiles(cols/f.blockSize, &w[0], ws, &a[as], &out[0], rows)
					for i := range rows {
						want := generic(cols, w[i*ws:(i+1)*ws], dotActs(dt, cols, a, as, 1))
						if math.Float32bits(out[i]) != math.Float32bits(want) {
							t.Fatalf("row %d: %g, generic %g", i, out[i], want)
						}
					}
				})
			}
			if f.gemv2 != nil {
				t.Run(fmt.Sprintf("%v/gemv2/cols=%d", dt, cols), func(t *testing.T) {
					const rows = 3 // per stream
					w, ws, a, _ := gemmOperands(r, dt, 2*rows+1, cols, 6, 1, 0)
					out := make([]float32, 2*rows+2)
					out[rows], out[2*rows+1] = 12345, 12345
					f.gemv2(cols/f.blockSize, &w[0], &w[(rows+1)*ws], ws, &a[0], &out[0], &out[rows+1], rows)
					for i := range 2*rows + 1 {
						if i == rows {
							if out[i] != 12345 || out[2*rows+1] != 12345 {
								t.Fatalf("wrote past a stream's last row")
							}
							continue
						}
						want := generic(cols, w[i*ws:(i+1)*ws], dotActs(dt, cols, a, len(a), 0))
						if math.Float32bits(out[i]) != math.Float32bits(want) {
							t.Fatalf("row %d: %g, generic %g", i, out[i], want)
						}
					}
				})
			}
			if f.gemm == nil {
				continue
			}
			t.Run(fmt.Sprintf("%v/gemm/cols=%d", dt, cols), func(t *testing.T) {
				w, ws, a, as := gemmOperands(r, dt, f.tileR, cols, 10, f.tileT, 14)
				const outStride = 7
				out := make([]float32, f.tileT*outStride)
				for i := range out {
					out[i] = 12345
				}
				f.gemm(cols/f.blockSize, &w[0], ws, &a[0], as, &out[0], outStride)
				for tok := range f.tileT {
					for i := range outStride {
						got := out[tok*outStride+i]
						if i >= f.tileR {
							if got != 12345 {
								t.Fatalf("token %d: wrote outside the tile at %d", tok, i)
							}
							continue
						}
						want := generic(cols, w[i*ws:(i+1)*ws], dotActs(dt, cols, a, as, tok))
						if math.Float32bits(got) != math.Float32bits(want) {
							t.Fatalf("row %d token %d: %g, generic %g", i, tok, got, want)
						}
					}
				}
			})
		}
	}
}

// groupOperands returns rows weight rows of cols weights in format t,
// wStride bytes apart, and nt tokens of random activations prepared for the
// group kernels of layout l: their rows (aRow bytes each) and one group,
// zero past token nt as matMulBlocked leaves it.
func groupOperands(r *rand.Rand, t DType, l groupLayout, rows, cols, nt int) (w []byte, wStride int, a []byte, aRow int, g []byte) {
	tr, _ := TraitsOf(t)
	w, wStride, _, _ = gemmOperands(r, t, rows, cols, 6, 0, 0)
	aRow = blockedActRowBytes(t, cols, nt)
	x := make([]float32, 0, nt*cols)
	for range nt {
		x = append(x, randomRow(r, cols)...)
	}
	a = make([]byte, nt*aRow)
	g = make([]byte, l.blockBytes*(cols/groupBlockSize(t)))
	q := prepJob{wt: t, at: tr.VecDotType, x: x, cols: cols, a: a, aRow: aRow, groups: g, gLayout: l, gBytes: len(g)}
	for k := range nt {
		q.Do(k, 0)
	}
	return w, wStride, a, aRow, g
}

// kernelName is the name of the function k, for test names.
func kernelName(k any) string {
	name := runtime.FuncForPC(reflect.ValueOf(k).Pointer()).Name()
	return name[strings.LastIndexByte(name, '.')+1:]
}

// TestGemmGroupKernelsMatchGeneric runs every token-group kernel (the wide
// and the narrow ones this CPU picks, and those it does not) on one group of
// 1 to a full group of tokens against the generic VecDot of every output,
// to the bit, and checks that it writes nothing else.
func TestGemmGroupKernelsMatchGeneric(t *testing.T) {
	r := rand.New(rand.NewPCG(55, 56))
	for _, dt := range gemmTestTypes {
		f := gemmFormats[dt]
		if f == nil || dt == F16 { // F16's groups replace the rows: see TestMatMulBlockedMatchesVecDot
			continue
		}
		variants := append([]*gemmFormat{f, f.narrow}, gemmGroupVariants(dt)...)
		generic := genericVecDots[dt]
		for _, v := range variants {
			if v == nil || v.group == nil {
				continue
			}
			l := v.layout
			for _, nb := range []int{1, 3, 9} {
				cols := nb * v.blockSize
				for nt := 1; nt <= l.tokens; nt++ {
					if l.tokens > 8 && nt > 2 && nt < l.tokens-1 {
						continue // the wide groups: the edges suffice
					}
					t.Run(fmt.Sprintf("%v/%s/cols=%d/nt=%d", dt, kernelName(v.group), cols, nt), func(t *testing.T) {
						w, ws, a, aRow, g := groupOperands(r, dt, l, v.groupR, cols, nt)
						outStride := v.groupR + 3
						out := make([]float32, l.tokens*outStride)
						for i := range out {
							out[i] = 12345
						}
						v.group(nb, &w[0], ws, &g[0], &out[0], outStride, nt)
						for tok := range l.tokens {
							for i := range outStride {
								got := out[tok*outStride+i]
								if tok >= nt || i >= v.groupR {
									if got != 12345 {
										t.Fatalf("token %d: wrote outside the tile at %d", tok, i)
									}
									continue
								}
								want := generic(cols, w[i*ws:(i+1)*ws], dotActs(dt, cols, a, aRow, tok))
								if math.Float32bits(got) != math.Float32bits(want) {
									t.Fatalf("row %d token %d: %g, generic %g", i, tok, got, want)
								}
							}
						}
					})
				}
			}
		}
	}
}

// TestMatMulBlockedMatchesVecDot checks the blocked MatMul (tiles, token
// groups, gemv, leftover rows and tokens, several chunks) against the pure-Go
// VecDot of every output, to the bit.
func TestMatMulBlockedMatchesVecDot(t *testing.T) {
	r := rand.New(rand.NewPCG(43, 44))
	p := NewPool(2)
	defer p.Close()
	for _, dt := range gemmTestTypes {
		f := gemmFormats[dt]
		if f == nil {
			continue
		}
		tr, _ := TraitsOf(dt)
		for _, c := range []struct{ rows, n int }{{8, 1}, {53, 1}, {200, 1}, {6, 2}, {53, 3}, {13, 5}, {gemmRowChunk + 11, 8}, {gemmRowChunk + 11, 9}, {37, gemmTokChunk + 6}} {
			t.Run(fmt.Sprintf("%v/rows=%d/n=%d", dt, c.rows, c.n), func(t *testing.T) {
				cols := 2 * max(f.blockSize, 128)
				w, ws, _, _ := gemmOperands(r, dt, c.rows, cols, 0, 0, 0)
				x := make([]float32, c.n*cols)
				for i := 0; i < c.n; i++ {
					copy(x[i*cols:], randomRow(r, cols))
				}
				aRow := tr.VecDotType.RowBytes(cols)
				act := make([]byte, aRow)
				// Also without the group kernels: the tiles that CPUs without
				// them (or formats without groups) use.
				noGroups := *f
				noGroups.group, noGroups.groupTile, noGroups.narrow = nil, nil, nil
				// And the wide groups where narrow ones take few tokens.
				wide := *f
				wide.narrow = nil
				runs := []struct {
					f    *gemmFormat
					pool *Pool
				}{{f, nil}, {f, p}, {&noGroups, p}, {&wide, p}}
				for _, alt := range gemmGroupVariants(dt) {
					runs = append(runs, struct {
						f    *gemmFormat
						pool *Pool
					}{alt, p})
				}
				for _, run := range runs {
					pool := run.pool
					out := make([]float32, c.n*c.rows)
					matMulBlocked(pool, run.f, tr, dt, w, c.rows, cols, x, c.n, out, make([]byte, MatScratchBytes(dt, cols, c.n)))
					for tok := range c.n {
						QuantizeActivations(tr.VecDotType, x[tok*cols:(tok+1)*cols], act)
						for i := range c.rows {
							want := genericVecDots[dt](cols, w[i*ws:(i+1)*ws], act)
							if got := out[tok*c.rows+i]; math.Float32bits(got) != math.Float32bits(want) {
								t.Fatalf("row %d token %d: %g, VecDot %g", i, tok, got, want)
							}
						}
					}
				}
			})
		}
	}
}

// BenchmarkGemvKernels times the gemv kernel of each format on a small
// matrix that stays in cache (compute speed), against one VecDot per row.
func BenchmarkGemvKernels(b *testing.B) {
	r := rand.New(rand.NewPCG(45, 46))
	for _, dt := range gemmTestTypes {
		f := gemmFormats[dt]
		if f == nil {
			continue
		}
		tr, _ := TraitsOf(dt)
		const rows, cols = 48, 2048
		w, ws, a, _ := gemmOperands(r, dt, rows, cols, 0, 1, 0)
		out := make([]float32, rows)
		b.Run(dt.String()+"/gemv", func(b *testing.B) {
			b.SetBytes(int64(len(w)))
			for b.Loop() {
				f.gemv(cols/f.blockSize, &w[0], ws, &a[0], &out[0], rows)
			}
		})
		if f.gemv2 != nil {
			b.Run(dt.String()+"/gemv2", func(b *testing.B) {
				b.SetBytes(int64(len(w)))
				h := rows / 2
				for b.Loop() {
					f.gemv2(cols/f.blockSize, &w[0], &w[h*ws], ws, &a[0], &out[0], &out[h], h)
				}
			})
		}
		b.Run(dt.String()+"/vecdot", func(b *testing.B) {
			ad := dotActs(dt, cols, a, len(a), 0)
			b.SetBytes(int64(len(w)))
			for b.Loop() {
				for i := range rows {
					out[i] = tr.VecDot(cols, w[i*ws:(i+1)*ws], ad)
				}
			}
		})
	}
}

// BenchmarkGemvKernelsDRAM is BenchmarkGemvKernels on a matrix too big for
// the caches (memory speed).
func BenchmarkGemvKernelsDRAM(b *testing.B) {
	r := rand.New(rand.NewPCG(45, 46))
	for _, dt := range gemmTestTypes {
		f := gemmFormats[dt]
		if f == nil {
			continue
		}
		tr, _ := TraitsOf(dt)
		const cols = 2048
		rows := (256 << 20) / dt.RowBytes(cols) / 48 * 48
		_, ws, a, _ := gemmOperands(r, dt, 1, cols, 0, 1, 0)
		w := benchFill(dt, rows, cols)
		out := make([]float32, rows)
		b.Run(dt.String()+"/gemv", func(b *testing.B) {
			b.SetBytes(int64(len(w)))
			for b.Loop() {
				f.gemv(cols/f.blockSize, &w[0], ws, &a[0], &out[0], rows)
			}
		})
		if f.gemv2 != nil {
			b.Run(dt.String()+"/gemv2", func(b *testing.B) {
				b.SetBytes(int64(len(w)))
				h := rows / 2
				for b.Loop() {
					f.gemv2(cols/f.blockSize, &w[0], &w[h*ws], ws, &a[0], &out[0], &out[h], h)
				}
			})
		}
		b.Run(dt.String()+"/vecdot", func(b *testing.B) {
			ad := dotActs(dt, cols, a, len(a), 0)
			b.SetBytes(int64(len(w)))
			for b.Loop() {
				for i := range rows {
					out[i] = tr.VecDot(cols, w[i*ws:(i+1)*ws], ad)
				}
			}
		})
	}
}

// BenchmarkGemmKernels times one tile kernel call per format on operands
// in cache, and reports its multiply-adds per second; for the token-group
// kernels (wide and narrow) one call on 8 tokens, the batched decode of 8
// streams, counting only those tokens' multiply-adds.
func BenchmarkGemmKernels(b *testing.B) {
	r := rand.New(rand.NewPCG(47, 48))
	for _, dt := range gemmTestTypes {
		f := gemmFormats[dt]
		if f == nil {
			continue
		}
		for _, v := range []*gemmFormat{f, f.narrow} {
			if dt == F16 || v == nil || v.group == nil {
				continue
			}
			const nt = 8
			for _, cols := range []int{768, 2048} {
				_, _, _, _, g := groupOperands(r, dt, v.layout, 0, cols, nt)
				w, ws, _, _ := gemmOperands(r, dt, v.groupR, cols, 0, 0, 0)
				out := make([]float32, v.layout.tokens*v.groupR)
				b.Run(fmt.Sprintf("%v/%s/n=%d/cols=%d", dt, kernelName(v.group), nt, cols), func(b *testing.B) {
					for b.Loop() {
						v.group(cols/v.blockSize, &w[0], ws, &g[0], &out[0], v.groupR, nt)
					}
					b.ReportMetric(float64(v.groupR*nt*cols)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GMAC/s")
				})
			}
		}
		if f.gemm == nil {
			continue
		}
		for _, cols := range []int{768, 2048} {
			w, ws, a, as := gemmOperands(r, dt, f.tileR, cols, 0, f.tileT, 0)
			out := make([]float32, f.tileT*f.tileR)
			b.Run(fmt.Sprintf("%v/cols=%d", dt, cols), func(b *testing.B) {
				for b.Loop() {
					f.gemm(cols/f.blockSize, &w[0], ws, &a[0], as, &out[0], f.tileR)
				}
				b.ReportMetric(float64(f.tileR*f.tileT*cols)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GMAC/s")
			})
		}
	}
}

// TestQuantRowQ8_0Act compares the activation quantizer of the blocked
// kernels with its pure-Go twin on random rows and on awkward values: zero
// blocks, ties, infinities, NaNs, huge and tiny numbers.
func TestQuantRowQ8_0Act(t *testing.T) {
	r := rand.New(rand.NewPCG(49, 50))
	rows := map[string][]float32{"random": randomRow(r, 4096)}
	odd := make([]float32, 32*8)
	for i := range odd {
		odd[i] = float32(r.NormFloat64())
	}
	clear(odd[0:32])                 // all zero
	odd[40] = float32(math.Inf(1))   // ∞: the scale overflows
	odd[70] = float32(math.NaN())    // NaN: skipped by the maximum
	odd[100], odd[101] = 1e38, -3e38 // huge
	for i := 128; i < 160; i++ {     // tiny: a subnormal half scale
		odd[i] = float32(i-144) * 1e-7
	}
	for i := 160; i < 192; i++ { // ties at x·127/amax = k + 0.5
		odd[i] = float32(i-176) + 0.5
	}
	odd[191] = 127
	for i := 192; i < 224; i++ {
		odd[i] = float32(math.NaN())
	}
	rows["awkward"] = odd
	for name, x := range rows {
		t.Run(name, func(t *testing.T) {
			nb := len(x) / QK
			got, want := make([]byte, nb*bytesQ8_0), make([]byte, nb*bytesQ8_0)
			gotSide, wantSide := make([]byte, 8*nb), make([]byte, 8*nb)
			quantRowQ8_0Act(x, got, gotSide)
			quantRowQ8_0ActGeneric(x, want, wantSide)
			for b := range nb {
				if g, w := got[b*bytesQ8_0:(b+1)*bytesQ8_0], want[b*bytesQ8_0:(b+1)*bytesQ8_0]; string(g) != string(w) {
					t.Fatalf("block %d: % x, want % x", b, g, w)
				}
				if g, w := gotSide[8*b:8*b+8], wantSide[8*b:8*b+8]; string(g) != string(w) {
					t.Fatalf("block %d side: % x, want % x", b, g, w)
				}
			}
		})
	}
}

// TestQuantRowQ8_K compares the assembly Q8_K quantizer with
// quantizeRowQ8_K on random rows and awkward values: a zero block, ties
// between +max and -max, infinities, NaNs, huge and tiny numbers.
func TestQuantRowQ8_K(t *testing.T) {
	r := rand.New(rand.NewPCG(51, 52))
	odd := make([]float32, QKK*6)
	for i := range odd {
		odd[i] = float32(r.NormFloat64())
	}
	clear(odd[0:QKK])                        // all zero
	odd[QKK+3], odd[QKK+200] = -4, 4         // a tie: the first (-4) sets the sign
	odd[2*QKK+7] = float32(math.Inf(-1))     // -∞
	odd[3*QKK+9] = float32(math.NaN())       // NaN, skipped by the maximum
	odd[4*QKK+1], odd[4*QKK+2] = 3e38, -1e38 // huge
	for i := 5 * QKK; i < 6*QKK; i++ {       // tiny
		odd[i] = float32(i%17-8) * 1e-30
	}
	for name, x := range map[string][]float32{"random": randomRow(r, 4096), "awkward": odd} {
		t.Run(name, func(t *testing.T) {
			got, want := make([]byte, Q8_K.RowBytes(len(x))), make([]byte, Q8_K.RowBytes(len(x)))
			quantRowQ8_K(x, got)
			quantizeRowQ8_K(x, want)
			for b := range len(x) / QKK {
				if g, w := got[b*bytesQ8_K:(b+1)*bytesQ8_K], want[b*bytesQ8_K:(b+1)*bytesQ8_K]; string(g) != string(w) {
					t.Fatalf("block %d:\n% x\nwant\n% x", b, g, w)
				}
			}
		})
	}
}

// TestMatMulBlockedDoesNotAllocate: the blocked path (activation prep, token
// groups, kernels) allocates nothing, on one token, on 8 (the narrow groups)
// and on a prompt.
func TestMatMulBlockedDoesNotAllocate(t *testing.T) {
	r := rand.New(rand.NewPCG(53, 54))
	p := NewPool(2)
	defer p.Close()
	for _, dt := range gemmTestTypes {
		if gemmFormats[dt] == nil {
			continue
		}
		const rows, cols = 40, 512
		w, _, _, _ := gemmOperands(r, dt, rows, cols, 0, 0, 0)
		for _, n := range []int{8, 20} { // batched decode, a prompt
			x, out := randF32(r, n*cols, 1), make([]float32, n*rows)
			scratch := make([]byte, MatScratchBytes(dt, cols, n))
			for _, pool := range []*Pool{nil, p} {
				if a := testing.AllocsPerRun(20, func() { MatVec(pool, dt, w, rows, cols, x[:cols], out[:rows], scratch) }); a != 0 {
					t.Errorf("%v MatVec allocates %v times", dt, a)
				}
				if a := testing.AllocsPerRun(20, func() { MatMul(pool, dt, w, rows, cols, x, n, out, scratch) }); a != 0 {
					t.Errorf("%v MatMul of %d tokens allocates %v times", dt, n, a)
				}
			}
		}
	}
}
