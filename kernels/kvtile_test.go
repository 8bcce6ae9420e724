package kernels

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
)

// TestKVAccumRowsMatchesGeneric runs the assembly row accumulation (where
// it runs) and the pure-Go twin on random data of every format, for row
// counts, column counts (multiples of 16, which the assembly takes, and
// others), head counts (around the kernels' groups of four) and strides,
// and requires the same bits; and that nothing outside the heads' outputs
// is written.
func TestKVAccumRowsMatchesGeneric(t *testing.T) {
	rng := rand.New(rand.NewPCG(91, 92))
	for _, bits := range []int{4, 8, 16} {
		for _, cols := range []int{8, 12, 16, 24, 32, 64, 72, 128} {
			for _, heads := range []int{1, 2, 3, 4, 5, 8, 9} {
				t.Run(fmt.Sprintf("bits=%d/cols=%d/heads=%d", bits, cols, heads), func(t *testing.T) {
					for _, rows := range []int{1, 7, 32, 64} {
						coefStride, outStride := rows+rng.IntN(3), cols+rng.IntN(3)
						coef := mixedF32(rng, (heads-1)*coefStride+rows, 8, 8)
						init := mixedF32(rng, heads*outStride+1, 4, 4)
						got, want := append([]float32(nil), init...), append([]float32(nil), init...)
						if bits == 16 {
							stride := cols + rng.IntN(5)
							data := mixedHalves(rng, (rows-1)*stride+cols)
							KVAccumRowsHalves(data, stride, rows, cols, coef, coefStride, heads, got, outStride)
							kvAccumRowsHalvesGeneric(data, stride, rows, cols, coef, coefStride, heads, want, outStride)
						} else {
							rb := kvRowBytes(bits, cols) + rng.IntN(5)
							data := make([]byte, (rows-1)*rb+kvRowBytes(bits, cols))
							for i := range data {
								data[i] = byte(rng.Uint32())
							}
							KVAccumRows(bits, data, rb, rows, cols, coef, coefStride, heads, got, outStride)
							kvAccumRowsGeneric(bits, data, rb, rows, cols, coef, coefStride, heads, want, outStride)
						}
						for i := range got {
							if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
								t.Fatalf("rows=%d: output %d (head %d, column %d): %g, want %g", rows, i, i/outStride, i%outStride, got[i], want[i])
							}
							if i%outStride >= cols && got[i] != init[i] {
								t.Fatalf("rows=%d: wrote output %d, outside the columns", rows, i)
							}
						}
					}
				})
			}
		}
	}
}

// halvesOf rounds x to halves.
func halvesOf(x []float32) []uint16 {
	h := make([]uint16, len(x))
	FP32ToFP16Row(x, h)
	return h
}

// kvTileInput is a tile's worth of halves of the shapes keys and values
// take: per-group offsets and spreads that differ by orders of magnitude,
// as the channels of real keys do.
func kvTileInput(rng *rand.Rand, rows, cols int, byRow bool) []float32 {
	groups := cols
	if byRow {
		groups = rows
	}
	off, spread := make([]float64, groups), make([]float64, groups)
	for g := range groups {
		off[g] = rng.NormFloat64() * math.Pow(10, rng.Float64()*2-1)
		spread[g] = math.Pow(10, rng.Float64()*2-1.5)
	}
	x := make([]float32, rows*cols)
	for r := range rows {
		for c := range cols {
			g := c
			if byRow {
				g = r
			}
			x[r*cols+c] = float32(off[g] + spread[g]*rng.NormFloat64())
		}
	}
	return x
}

// TestQuantizeKVTileError checks the quantizer against its promise: every
// element dequantizes within half a step of its group (plus the rounding
// of a half), no element is clipped, and the result is deterministic.
func TestQuantizeKVTileError(t *testing.T) {
	rng := rand.New(rand.NewPCG(93, 94))
	for _, bits := range []int{4, 8} {
		for _, byRow := range []bool{true, false} {
			for _, shape := range [][2]int{{64, 32}, {32, 64}, {8, 32}, {32, 8}, {128, 32}, {5, 3}} {
				rows, cols := shape[0], shape[1]
				t.Run(fmt.Sprintf("bits=%d/byRow=%v/%dx%d", bits, byRow, rows, cols), func(t *testing.T) {
					src := halvesOf(kvTileInput(rng, rows, cols, byRow))
					tile := make([]byte, KVTileBytes(bits, rows, cols, byRow))
					QuantizeKVTile(tile, src, cols, bits, rows, cols, byRow)
					again := make([]byte, len(tile))
					QuantizeKVTile(again, src, cols, bits, rows, cols, byRow)
					if string(again) != string(tile) {
						t.Fatal("two quantizations of one tile differ")
					}
					groups := cols
					if byRow {
						groups = rows
					}
					s, m := make([]float32, groups), make([]float32, groups)
					KVTileGroups(tile, bits, rows, cols, byRow, s, m)
					back := make([]uint16, rows*cols)
					DequantizeKVTile(back, cols, tile, bits, rows, cols, byRow)
					for r := range rows {
						for c := range cols {
							g := c
							if byRow {
								g = r
							}
							x := float64(FP16ToFP32(src[r*cols+c]))
							y := float64(FP16ToFP32(back[r*cols+c]))
							bound := float64(s[g])/2*1.0001 + math.Abs(x)/1024
							if math.Abs(x-y) > bound {
								t.Fatalf("element (%d,%d) of group %d: %g comes back as %g; step %g, min %g", r, c, g, x, y, s[g], m[g])
							}
							if float64(m[g]) > x {
								t.Fatalf("group %d: coded min %g above element %g", g, m[g], x)
							}
						}
					}
				})
			}
		}
	}
}

// TestQuantizeKVTileHostile feeds the quantizer infinities, NaNs, the
// largest halves and constant groups: it must not panic, and finite
// constant groups must come back exactly.
func TestQuantizeKVTileHostile(t *testing.T) {
	inf, nan := float32(math.Inf(1)), float32(math.NaN())
	cases := map[string][]float32{
		"inf":      {inf, -inf, 1, 2, 3, 4, 5, 6},
		"nan":      {nan, 1, nan, 2, 3, 4, 5, 6},
		"largest":  {65504, -65504, 65504, -65504, 1, 0, 0, 0},
		"constant": {3, 3, 3, 3, -2, -2, -2, -2},
		"zero":     make([]float32, 8),
	}
	for name, x := range cases {
		t.Run(name, func(t *testing.T) {
			for _, bits := range []int{4, 8} {
				src := halvesOf(x)
				tile := make([]byte, KVTileBytes(bits, 2, 4, true))
				QuantizeKVTile(tile, src, 4, bits, 2, 4, true)
				back := make([]uint16, 8)
				DequantizeKVTile(back, 4, tile, bits, 2, 4, true)
				if name == "constant" || name == "zero" {
					for i := range x {
						if got := FP16ToFP32(back[i]); got != x[i] {
							t.Errorf("%d bits: element %d is %g, want %g", bits, i, got, x[i])
						}
					}
				}
			}
		})
	}
}

// TestKVKeyScoresAndValues checks KVKeyScores and KVValueAccum against the
// sums over the dequantized tile in float64.
func TestKVKeyScoresAndValues(t *testing.T) {
	rng := rand.New(rand.NewPCG(95, 96))
	const bt = 32
	for _, bits := range []int{4, 8} {
		for _, hd := range []int{8, 32, 64, 128} {
			for _, heads := range []int{1, 2, 7, 8} {
				t.Run(fmt.Sprintf("bits=%d/hd=%d/heads=%d", bits, hd, heads), func(t *testing.T) {
					scratch := make([]float32, KVScratchFloats(heads, hd, bt))
					// Keys: hd channels × bt tokens, a group per channel.
					kt := make([]byte, KVTileBytes(bits, hd, bt, true))
					QuantizeKVTile(kt, halvesOf(kvTileInput(rng, hd, bt, true)), bt, bits, hd, bt, true)
					k := make([]uint16, hd*bt)
					DequantizeKVTile(k, bt, kt, bits, hd, bt, true)
					q := mixedF32(rng, heads*hd, 2, 2)
					scores := make([]float32, heads*bt)
					KVKeyScores(kt, bits, hd, bt, q, hd, heads, scores, bt, scratch)
					ks, km := make([]float32, hd), make([]float32, hd)
					KVTileGroups(kt, bits, hd, bt, true, ks, km)
					for j := range heads {
						// Integer sums: each coefficient q·s within half a
						// Q8_0 step (its block's largest / 254) of its
						// value, against elements of at most 15.
						coef := make([]float64, hd)
						for c := range hd {
							coef[c] = float64(q[j*hd+c]) * float64(ks[c])
						}
						bound := qStepBound(coef, 15, kvIntegerRows(bits, hd))
						for tk := range bt {
							var want, mag float64
							for c := range hd {
								p := float64(q[j*hd+c]) * float64(FP16ToFP32(k[c*bt+tk]))
								want += p
								mag += math.Abs(p)
							}
							if d := math.Abs(float64(scores[j*bt+tk]) - want); d > 1e-3*mag+bound+1e-6 {
								t.Fatalf("score of head %d token %d: %g, want %g", j, tk, scores[j*bt+tk], want)
							}
						}
					}
					// Values: bt tokens × hd channels, a group per channel.
					vt := make([]byte, KVTileBytes(bits, bt, hd, false))
					QuantizeKVTile(vt, halvesOf(kvTileInput(rng, bt, hd, false)), hd, bits, bt, hd, false)
					v := make([]uint16, bt*hd)
					DequantizeKVTile(v, hd, vt, bits, bt, hd, false)
					w := make([]float32, heads*bt)
					for i := range w {
						w[i] = rng.Float32()
					}
					out := mixedF32(rng, heads*hd, 1, 1)
					base := append([]float32(nil), out...)
					KVValueAccum(vt, bits, bt, hd, w, bt, heads, out, hd, scratch)
					vs, vm := make([]float32, hd), make([]float32, hd)
					KVTileGroups(vt, bits, bt, hd, false, vs, vm)
					for j := range heads {
						wj := make([]float64, bt)
						for r := range bt {
							wj[r] = float64(w[j*bt+r])
						}
						// Quantized weights weigh both terms, s·u and m.
						bound := qStepBound(wj, 1, kvIntegerRows(bits, bt))
						for c := range hd {
							want, mag := float64(base[j*hd+c]), math.Abs(float64(base[j*hd+c]))
							for r := range bt {
								p := float64(w[j*bt+r]) * float64(FP16ToFP32(v[r*hd+c]))
								want += p
								mag += math.Abs(p)
							}
							if d := math.Abs(float64(out[j*hd+c]) - want); d > 1e-3*mag+bound*(15*float64(vs[c])+math.Abs(float64(vm[c])))+1e-6 {
								t.Fatalf("value of head %d channel %d: %g, want %g", j, c, out[j*hd+c], want)
							}
						}
					}
				})
			}
		}
	}
}

// qStepBound is how far Σ x_i·u_i can move when the x are quantized to
// Q8_0 (when quantized is set) against integers u of at most umax: half a
// step, the block's largest |x| / 254, for each.
func qStepBound(x []float64, umax float64, quantized bool) float64 {
	if !quantized {
		return 0
	}
	var bound float64
	for b := 0; b < len(x); b += QK {
		var amax float64
		for _, v := range x[b : b+QK] {
			amax = max(amax, math.Abs(v))
		}
		bound += QK * umax * amax / 254 * 1.01
	}
	return bound
}

// TestKVTileNoAllocs checks that quantizing a tile and attending to it
// allocate nothing: a block fills, and is read, in decode steps.
func TestKVTileNoAllocs(t *testing.T) {
	rng := rand.New(rand.NewPCG(97, 98))
	const hd, bt, heads = 64, 32, 8
	src := halvesOf(kvTileInput(rng, hd, bt, true))
	tile := make([]byte, KVTileBytes(4, hd, bt, true))
	q := mixedF32(rng, heads*hd, 2, 2)
	out := make([]float32, heads*max(hd, bt))
	scratch := make([]float32, KVScratchFloats(heads, hd, bt))
	w := make([]float32, heads*bt)
	for name, f := range map[string]func(){
		"quantize": func() { QuantizeKVTile(tile, src, bt, 4, hd, bt, true) },
		"keys":     func() { KVKeyScores(tile, 4, hd, bt, q, hd, heads, out, bt, scratch) },
		"values":   func() { KVValueAccum(tile, 4, bt, hd, w, bt, heads, out, hd, scratch) },
	} {
		if n := testing.AllocsPerRun(10, f); n != 0 {
			t.Errorf("%s: %v allocations", name, n)
		}
	}
}

// TestKVQuantizerMatchesGeneric runs the quantizer's ranges and levels in
// assembly (where it runs) and in the pure-Go twin on random tiles with
// NaNs, infinities and signed zeros among their halves, by row and by
// column, and requires the same results bit for bit.
func TestKVQuantizerMatchesGeneric(t *testing.T) {
	rng := rand.New(rand.NewPCG(99, 100))
	special := []uint16{0x7e00, 0x7c00, 0xfc00, 0x8000, 0, 0x7bff, 0xfbff}
	for _, byRow := range []bool{true, false} {
		for _, shape := range [][2]int{{64, 32}, {32, 64}, {8, 8}, {32, 8}, {3, 24}, {128, 32}} {
			rows, cols := shape[0], shape[1]
			t.Run(fmt.Sprintf("byRow=%v/%dx%d", byRow, rows, cols), func(t *testing.T) {
				for trial := range 20 {
					stride := cols + rng.IntN(3)
					src := halvesOf(kvTileInput(rng, rows, stride, byRow))
					if trial%2 == 1 {
						for range 1 + rng.IntN(6) {
							src[rng.IntN(len(src))] = special[rng.IntN(len(special))]
						}
					}
					groups := cols
					if byRow {
						groups = rows
					}
					lo, hi := make([]float32, groups), make([]float32, groups)
					wlo, whi := make([]float32, groups), make([]float32, groups)
					kvRanges(src, stride, rows, cols, byRow, lo, hi)
					kvRangesGeneric(src, stride, rows, cols, byRow, wlo, whi)
					for g := range groups {
						if math.Float32bits(lo[g]) != math.Float32bits(wlo[g]) && !(lo[g] == 0 && wlo[g] == 0) ||
							math.Float32bits(hi[g]) != math.Float32bits(whi[g]) && !(hi[g] == 0 && whi[g] == 0) {
							t.Fatalf("trial %d group %d: range [%g, %g], want [%g, %g]", trial, g, lo[g], hi[g], wlo[g], whi[g])
						}
					}
					m, iv := make([]float32, groups), make([]float32, groups)
					for g := range groups {
						m[g] = float32(rng.NormFloat64())
						iv[g] = float32(rng.Float64() * 20)
					}
					for _, levels := range []float32{15, 255} {
						u, w := make([]byte, rows*cols), make([]byte, rows*cols)
						kvLevels(src, stride, rows, cols, byRow, m, iv, levels, u)
						kvLevelsGeneric(src, stride, rows, cols, byRow, m, iv, levels, w)
						if string(u) != string(w) {
							t.Fatalf("trial %d, %v levels: the levels differ", trial, levels)
						}
					}
				}
			})
		}
	}
}

// BenchmarkKVBlockAttention times one 32-token block of decode attention
// for a group of 8 query heads of head_dim 64 (the tinyllama-1.1b shape):
// the keys' scores and the values' weighted sums, from the block's F16
// form and from its 8- and 4-bit tiles. Its ns/op, times the blocks of a
// context and the kv heads and layers of a model, is what a tiered cache
// spends on attention in a decode step.
func BenchmarkKVBlockAttention(b *testing.B) {
	const bt, hd, heads = 32, 64, 8
	rng := rand.New(rand.NewPCG(7, 8))
	keys := halvesOf(kvTileInput(rng, hd, bt, true))
	vals := halvesOf(kvTileInput(rng, bt, hd, false))
	q := make([]float32, heads*hd)
	w := make([]float32, heads*bt)
	for i := range q {
		q[i] = float32(rng.NormFloat64())
	}
	for i := range w {
		w[i] = rng.Float32() / bt
	}
	scores := make([]float32, heads*bt)
	out := make([]float32, heads*hd)
	scratch := make([]float32, KVScratchFloats(heads, hd, bt))
	b.Run("f16", func(b *testing.B) {
		for b.Loop() {
			clear(scores)
			KVAccumRowsHalves(keys, bt, hd, bt, q, hd, heads, scores, bt)
			KVAccumRowsHalves(vals, hd, bt, hd, w, bt, heads, out, hd)
		}
	})
	for _, bits := range []int{8, 4} {
		kt := make([]byte, KVTileBytes(bits, hd, bt, true))
		vt := make([]byte, KVTileBytes(bits, bt, hd, false))
		QuantizeKVTile(kt, keys, bt, bits, hd, bt, true)
		QuantizeKVTile(vt, vals, hd, bits, bt, hd, false)
		b.Run(fmt.Sprintf("q%d", bits), func(b *testing.B) {
			for b.Loop() {
				KVKeyScores(kt, bits, hd, bt, q, hd, heads, scores, bt, scratch)
				KVValueAccum(vt, bits, bt, hd, w, bt, heads, out, hd, scratch)
			}
		})
	}
}

// TestKVDotQ4MatchesGeneric runs the integer dot products of 4-bit tiles
// in assembly (where it runs) and in the pure-Go twin on random rows,
// coefficients at the ends of their range, scales and outputs, and
// requires the same outputs bit for bit.
func TestKVDotQ4MatchesGeneric(t *testing.T) {
	rng := rand.New(rand.NewPCG(101, 102))
	for _, rows := range []int{32, 64, 128} {
		for _, cols := range []int{32, 64, 96, 128} {
			for _, heads := range []int{1, 2, 3, 8} {
				t.Run(fmt.Sprintf("%dx%d/heads=%d", rows, cols, heads), func(t *testing.T) {
					nb := rows / QK
					rowBytes := cols/2 + rng.IntN(3)
					data := make([]byte, rows*rowBytes)
					for i := range data {
						data[i] = byte(rng.IntN(256))
					}
					q8 := make([]byte, heads*nb*bytesQ8_0)
					side := make([]byte, heads*nb*8)
					for b := range heads * nb {
						for i := range QK {
							k := rng.IntN(255) - 127
							if rng.IntN(4) == 0 {
								k = 127 - 254*rng.IntN(2)
							}
							q8[b*bytesQ8_0+2+i] = byte(int8(k))
						}
						le.PutUint32(side[8*b:], math.Float32bits(float32(rng.NormFloat64()/100)))
					}
					outStride := cols + rng.IntN(3)
					got := mixedF32(rng, heads*outStride, 1, 1)
					want := append([]float32(nil), got...)
					kvDotQ4(data, rowBytes, rows, cols, q8, side, heads, got, outStride, make([]float32, cols))
					kvDotQ4Generic(data, rowBytes, rows, cols, q8, side, heads, want, outStride)
					for i := range got {
						if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
							t.Fatalf("output %d: %g, want %g", i, got[i], want[i])
						}
					}
				})
			}
		}
	}
}

// TestKVGroupsMatchesGeneric decodes random codes against random factors
// (infinite and NaN ones too) in assembly and in the pure-Go twin, bit for
// bit.
func TestKVGroupsMatchesGeneric(t *testing.T) {
	rng := rand.New(rand.NewPCG(103, 104))
	factors := []float32{0, 1, float32(math.Inf(1)), float32(math.NaN()), 65504, 6e-8}
	for _, groups := range []int{8, 16, 24, 64, 128, 3, 12} {
		codes := make([]byte, 2*groups)
		for i := range codes {
			codes[i] = byte(rng.IntN(256))
		}
		for trial := range 8 {
			dS, dM := float32(rng.NormFloat64()), float32(rng.NormFloat64())
			if trial < len(factors) {
				dS, dM = factors[trial], factors[len(factors)-1-trial]
			}
			s, m := make([]float32, groups), make([]float32, groups)
			ws, wm := make([]float32, groups), make([]float32, groups)
			kvGroups(codes, dS, dM, s, m)
			kvGroupsGeneric(codes, dS, dM, ws, wm)
			for g := range groups {
				if math.Float32bits(s[g]) != math.Float32bits(ws[g]) || math.Float32bits(m[g]) != math.Float32bits(wm[g]) {
					t.Fatalf("%d groups, factors %g, %g: group %d is %g, %g; want %g, %g", groups, dS, dM, g, s[g], m[g], ws[g], wm[g])
				}
			}
		}
	}
}
