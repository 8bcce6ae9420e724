package kernels

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// quantTypes are the formats TraitsOf knows, in ggml order.
var quantTypes = []DType{F32, F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q8_1, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, Q8_K, IQ4_NL, IQ4_XS, MXFP4}

// randomRow returns n normal floats with scale varying per 32 (as real weight
// rows do), a few outliers, and one all-zero block when n allows.
func randomRow(rng *rand.Rand, n int) []float32 {
	x := make([]float32, n)
	for i := range x {
		x[i] = float32(rng.NormFloat64())
	}
	// Per-block scales between 0.01 and 1.
	for b := 0; b < n; b += 32 {
		s := float32(math.Exp(rng.Float64()*4.6 - 4.6))
		for i := b; i < b+32 && i < n; i++ {
			x[i] *= s
		}
	}
	for range n / 100 {
		x[rng.IntN(n)] *= 5
	}
	if n >= 1024 {
		clear(x[512 : 512+256])
	}
	return x
}

func quantize(t DType, x []float32) []byte {
	tr, _ := TraitsOf(t)
	b := make([]byte, t.RowBytes(len(x)))
	tr.QuantizeRow(x, b)
	return b
}

func dequantize(t DType, b []byte, n int) []float32 {
	tr, _ := TraitsOf(t)
	y := make([]float32, n)
	tr.DequantizeRow(b, y)
	return y
}

// relRMSE is the RMS of x-y over the RMS of x.
func relRMSE(x, y []float32) float64 {
	var se, ss float64
	for i := range x {
		d := float64(x[i]) - float64(y[i])
		se += d * d
		ss += float64(x[i]) * float64(x[i])
	}
	if ss == 0 {
		return math.Sqrt(se)
	}
	return math.Sqrt(se / ss)
}

func TestTraitsOf(t *testing.T) {
	for _, typ := range quantTypes {
		tr, ok := TraitsOf(typ)
		if !ok || tr.DequantizeRow == nil || tr.QuantizeRow == nil || tr.VecDot == nil {
			t.Errorf("TraitsOf(%v) = %v, %v; want complete traits", typ, tr, ok)
			continue
		}
		if _, ok := TraitsOf(tr.VecDotType); !ok {
			t.Errorf("%v: vec dot type %v has no traits", typ, tr.VecDotType)
		}
		for _, n := range []int{-32, 0, 1, 31, 32, 256, 4096, 4097} {
			if got, want := rowBytes(typ, n), typ.RowBytes(n); got != want {
				t.Errorf("rowBytes(%v, %d) = %d, want %d", typ, n, got, want)
			}
		}
	}
	for _, typ := range []DType{IQ2_XXS, IQ3_S, I8, I32, F64, TQ1_0, DType(99), DType(1 << 30)} {
		if _, ok := TraitsOf(typ); ok {
			t.Errorf("TraitsOf(%v) reports traits for a format we cannot compute with", typ)
		}
	}
	want := map[DType]DType{F32: F32, F16: F16, BF16: BF16, Q4_0: Q8_0, Q5_0: Q8_0, Q8_0: Q8_0,
		Q4_1: Q8_1, Q5_1: Q8_1, Q2_K: Q8_K, Q3_K: Q8_K, Q4_K: Q8_K, Q5_K: Q8_K, Q6_K: Q8_K,
		IQ4_NL: Q8_0, IQ4_XS: Q8_K, MXFP4: Q8_0}
	for w, a := range want {
		if tr, _ := TraitsOf(w); tr.VecDotType != a {
			t.Errorf("%v: VecDotType %v, want %v", w, tr.VecDotType, a)
		}
	}
}

// TestRoundTrip quantizes random rows and checks the error of the round trip
// against a bound for each format (relative RMSE over Gaussian-like blocks of
// varying scale), and that an all-zero block comes back exactly zero.
func TestRoundTrip(t *testing.T) {
	bounds := map[DType]float64{
		F32: 0, F16: 5e-4, BF16: 4e-3,
		Q8_0: 0.017, Q8_1: 0.017, Q8_K: 0.03,
		Q4_0: 0.16, Q4_1: 0.15, Q5_0: 0.12, Q5_1: 0.06,
		Q2_K: 0.5, Q3_K: 0.26, Q4_K: 0.11, Q5_K: 0.065, Q6_K: 0.045,
		IQ4_NL: 0.1, IQ4_XS: 0.1, MXFP4: 0.15,
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for _, typ := range quantTypes {
		t.Run(typ.String(), func(t *testing.T) {
			for _, n := range []int{typ.BlockSize(), 256, 4096} {
				if n%typ.BlockSize() != 0 || n < typ.BlockSize() {
					continue
				}
				x := randomRow(rng, n)
				y := dequantize(typ, quantize(typ, x), n)
				if e := relRMSE(x, y); e > bounds[typ] || math.IsNaN(e) {
					t.Errorf("n=%d: relative RMSE %.4g > %.4g", n, e, bounds[typ])
				}
				if n >= 1024 {
					for i := 512; i < 768; i++ {
						if y[i] != 0 {
							t.Fatalf("n=%d: zero block element %d came back as %g", n, i, y[i])
						}
					}
				}
			}
		})
	}
}

// TestRoundTripMaxError bounds the worst single element of the legacy
// formats by their block scale: half a quantization step, or a whole one for
// the value that the asymmetric grid of Q4_0/Q5_0 cannot reach.
func TestRoundTripMaxError(t *testing.T) {
	steps := map[DType]func(amax, lo, hi float32) float32{
		Q4_0: func(amax, _, _ float32) float32 { return amax / 8 },
		Q5_0: func(amax, _, _ float32) float32 { return amax / 16 },
		Q8_0: func(amax, _, _ float32) float32 { return amax / 127 / 2 },
		Q4_1: func(_, lo, hi float32) float32 { return (hi - lo) / 15 / 2 },
		Q5_1: func(_, lo, hi float32) float32 { return (hi - lo) / 31 / 2 },
	}
	rng := rand.New(rand.NewPCG(3, 4))
	for typ, step := range steps {
		t.Run(typ.String(), func(t *testing.T) {
			x := randomRow(rng, 4096)
			y := dequantize(typ, quantize(typ, x), len(x))
			for b := 0; b < len(x); b += QK {
				amax, _ := absMaxSigned(x[b : b+QK])
				lo, hi := minMax(x[b : b+QK])
				// Half-precision scales and mins add up to 2^-11 relative each.
				bound := step(amax, lo, hi)*1.01 + amax*2e-3
				for i := b; i < b+QK; i++ {
					if e := float32(math.Abs(float64(x[i] - y[i]))); e > bound {
						t.Fatalf("element %d: %g came back as %g (error %g > %g)", i, x[i], y[i], e, bound)
					}
				}
			}
		})
	}
}

// dotOperands returns random weights in format typ and activations in its vec
// dot type, and their dequantized values.
func dotOperands(rng *rand.Rand, typ DType, n int) (w, a []byte, wf, af []float32) {
	tr, _ := TraitsOf(typ)
	w = quantize(typ, randomRow(rng, n))
	a = quantize(tr.VecDotType, randomRow(rng, n))
	return w, a, dequantize(typ, w, n), dequantize(tr.VecDotType, a, n)
}

// genericVecDots are the pure-Go dot products, for the comparisons.
var genericVecDots = map[DType]func(int, []byte, []byte) float32{
	F32: vecDotF32Generic, F16: vecDotF16Generic, BF16: vecDotBF16Generic,
	Q4_0: vecDotQ4_0Generic, Q4_1: vecDotQ4_1Generic, Q5_0: vecDotQ5_0Generic, Q5_1: vecDotQ5_1Generic,
	Q8_0: vecDotQ8_0Generic, Q8_1: vecDotQ8_1Generic,
	Q2_K: vecDotQ2_KGeneric, Q3_K: vecDotQ3_KGeneric, Q4_K: vecDotQ4_KGeneric, Q5_K: vecDotQ5_KGeneric,
	Q6_K: vecDotQ6_KGeneric, Q8_K: vecDotQ8_KGeneric,
	IQ4_NL: vecDotIQ4_NLGeneric, IQ4_XS: vecDotIQ4_XSGeneric, MXFP4: vecDotMXFP4Generic,
}

// wantDot is the dot of the dequantized operands in float64, and Σ|w·a| for
// tolerances. Q4_1 and Q5_1 take their min term from the activation block's
// stored s = d·Σq, a half-precision number, as ggml does; so does wantDot.
func wantDot(typ DType, n int, w, a []byte, wf, af []float32) (want, mag float64) {
	for i := range wf {
		want += float64(wf[i]) * float64(af[i])
		mag += math.Abs(float64(wf[i]) * float64(af[i]))
	}
	if typ == Q4_1 || typ == Q5_1 {
		want = 0
		for b := 0; b < n/QK; b++ {
			m := float64(halfAt(w, b*typ.BlockBytes()+2)) // the block min
			for i := b * QK; i < (b+1)*QK; i++ {
				want += (float64(wf[i]) - m) * float64(af[i])
			}
			want += m * float64(halfAt(a, b*bytesQ8_1+2))
		}
	}
	return want, mag
}

// dotLengths are row lengths for the dot tests: one block, odd numbers of
// blocks (the assembly pairs blocks), and a model-sized row.
func dotLengths(typ DType) []int {
	bs := typ.BlockSize()
	if bs == 1 {
		return []int{1, 7, 32, 33, 100, 172, 4096}
	}
	return []int{bs, 3 * bs, 4 * bs, 17 * bs, 4096}
}

// TestVecDotMatchesDequantized checks every dot product (the one TraitsOf
// hands out and the pure-Go twin) against the float dot of the dequantized
// operands, which tests the bit layouts from a second side.
func TestVecDotMatchesDequantized(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	for _, typ := range quantTypes {
		t.Run(typ.String(), func(t *testing.T) {
			tr, _ := TraitsOf(typ)
			for _, n := range dotLengths(typ) {
				if n%typ.BlockSize() != 0 {
					continue
				}
				w, a, wf, af := dotOperands(rng, typ, n)
				want, mag := wantDot(typ, n, w, a, wf, af)
				for name, dot := range map[string]func(int, []byte, []byte) float32{"dispatch": tr.VecDot, "generic": genericVecDots[typ]} {
					got := float64(dot(n, w, a))
					if math.Abs(got-want) > 1e-5*mag+1e-30 {
						t.Errorf("n=%d %s: got %g, dequantized dot %g (Σ|w·a| %g)", n, name, got, want, mag)
					}
				}
			}
		})
	}
}

// TestVecDotAsmVsGeneric runs each assembly kernel and its pure-Go twin on the
// same random data: both do ggml's operations in ggml's order, so they agree
// bit for bit.
func TestVecDotAsmVsGeneric(t *testing.T) {
	if !quantAsm {
		t.Skip("no assembly kernels on this CPU or build")
	}
	rng := rand.New(rand.NewPCG(7, 8))
	for _, typ := range asmVecDotTypes {
		t.Run(typ.String(), func(t *testing.T) {
			tr, _ := TraitsOf(typ)
			for _, n := range dotLengths(typ) {
				if n%typ.BlockSize() != 0 {
					continue
				}
				for range 5 {
					w, a, wf, af := dotOperands(rng, typ, n)
					var mag float64
					for i := range wf {
						mag += math.Abs(float64(wf[i]) * float64(af[i]))
					}
					got, want := tr.VecDot(n, w, a), genericVecDots[typ](n, w, a)
					_ = mag
					if math.Float32bits(got) != math.Float32bits(want) {
						t.Errorf("n=%d: asm %g, generic %g, differ by %g", n, got, want, got-want)
					}
				}
			}
		})
	}
}

// TestVecDotExtremes feeds the kernels the largest quants: all +127 and all
// -127 activations against weights at the ends of their ranges.
func TestVecDotExtremes(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 10))
	for _, typ := range quantTypes {
		tr, _ := TraitsOf(typ)
		t.Run(typ.String(), func(t *testing.T) {
			n := max(256, typ.BlockSize())
			for _, sign := range []float32{1, -1} {
				x := make([]float32, n)
				for i := range x {
					x[i] = sign * float32(1+rng.IntN(2)) // two values: quants hit both ends
				}
				act := make([]float32, n)
				for i := range act {
					act[i] = -sign
				}
				w, a := quantize(typ, x), quantize(tr.VecDotType, act)
				wf, af := dequantize(typ, w, n), dequantize(tr.VecDotType, a, n)
				want, mag := wantDot(typ, n, w, a, wf, af)
				for name, dot := range map[string]func(int, []byte, []byte) float32{"dispatch": tr.VecDot, "generic": genericVecDots[typ]} {
					if got := float64(dot(n, w, a)); math.Abs(got-want) > 1e-5*mag {
						t.Errorf("sign %g %s: got %g, want %g", sign, name, got, want)
					}
				}
			}
		})
	}
}

// TestNoAllocs: the decode path (activation quantization, dot products,
// dequantization) allocates nothing, nor does quantizing a row.
func TestNoAllocs(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 12))
	const n = 1024
	for _, typ := range quantTypes {
		t.Run(typ.String(), func(t *testing.T) {
			tr, _ := TraitsOf(typ)
			x := randomRow(rng, n)
			w, a, _, _ := dotOperands(rng, typ, n)
			y := make([]float32, n)
			act := make([]byte, tr.VecDotType.RowBytes(n))
			checks := map[string]func(){
				"VecDot":              func() { tr.VecDot(n, w, a) },
				"QuantizeRow":         func() { tr.QuantizeRow(x, w) },
				"DequantizeRow":       func() { tr.DequantizeRow(w, y) },
				"QuantizeActivations": func() { QuantizeActivations(tr.VecDotType, x, act) },
			}
			for name, f := range checks {
				if allocs := testing.AllocsPerRun(5, f); allocs != 0 {
					t.Errorf("%s allocates %v times per call", name, allocs)
				}
			}
		})
	}
}

// TestQuantizeActivationsQ8_0 checks that the activation quantizer differs
// from the file quantizer only where x/d is a tie.
func TestQuantizeActivationsQ8_0(t *testing.T) {
	rng := rand.New(rand.NewPCG(13, 14))
	x := randomRow(rng, 4096)
	// Put exact ties in: with amax 127, id is 1 and these are k+0.5.
	for i := 0; i < 32; i++ {
		x[i] = float32(i) - 15.5
	}
	x[31] = 127
	ref := quantize(Q8_0, x)
	act := make([]byte, len(ref))
	QuantizeActivations(Q8_0, x, act)
	for b := 0; b < len(x)/QK; b++ {
		r, a := ref[b*bytesQ8_0:(b+1)*bytesQ8_0], act[b*bytesQ8_0:(b+1)*bytesQ8_0]
		if !slices.Equal(r[:2], a[:2]) {
			t.Fatalf("block %d: scales differ: %x vs %x", b, r[:2], a[:2])
		}
		for j := range QK {
			qr, qa := int8(r[2+j]), int8(a[2+j])
			if qr == qa {
				continue
			}
			v := float64(x[b*QK+j]) * 127 / float64(max(1e-30, absMax64(x[b*QK:(b+1)*QK])))
			if math.Abs(math.Abs(v-math.Trunc(v))-0.5) > 1e-4 || abs(int(qr)-int(qa)) != 1 {
				t.Errorf("block %d element %d: %g quantized to %d (file) and %d (activations) off a tie", b, j, x[b*QK+j], qr, qa)
			}
		}
	}
	// The ties of the first block: away from zero for files, to even for activations.
	for j, want := range map[int][2]int8{0: {-16, -16}, 1: {-15, -14}, 16: {1, 0}, 17: {2, 2}} {
		if got := [2]int8{int8(ref[2+j]), int8(act[2+j])}; got != want {
			t.Errorf("tie %g: quantized to %v, want %v", x[j], got, want)
		}
	}
}

func absMax64(x []float32) float64 {
	a, _ := absMaxSigned(x)
	return float64(a)
}

func abs(v int) int { return max(v, -v) }

// TestNearestInt pins the rounding of the k-quant helpers: ties to even.
func TestNearestInt(t *testing.T) {
	for in, want := range map[float32]int{0.5: 0, 1.5: 2, 2.5: 2, -0.5: 0, -1.5: -2, 3.49: 3, -3.51: -4, 126.5: 126, 1e6 + 0.5: 1e6} {
		if got := nearestInt(in); got != want {
			t.Errorf("nearestInt(%g) = %d, want %d", in, got, want)
		}
	}
}

// TestQ8_0Reference checks a hand-computed block of the reference quantizer.
func TestQ8_0Reference(t *testing.T) {
	x := make([]float32, 32)
	x[0], x[1], x[2], x[3] = 2.54, -1.27, 0.01, 0.015 // d = 0.02; 0.015/0.02 = 0.75
	b := quantize(Q8_0, x)
	if d := halfAt(b, 0); math.Abs(float64(d-0.02)) > 1e-5 {
		t.Errorf("d = %g, want 0.02", d)
	}
	if got := []int8{int8(b[2]), int8(b[3]), int8(b[4]), int8(b[5])}; !slices.Equal(got, []int8{127, -64, 1, 1}) {
		t.Errorf("quants %v, want [127 -64 1 1]", got)
	}
}

// TestCheckRowPanics: wrong sizes are caller bugs and must be caught before
// any kernel reads out of bounds.
func TestCheckRowPanics(t *testing.T) {
	for _, typ := range quantTypes {
		tr, _ := TraitsOf(typ)
		bs := typ.BlockSize()
		n := 8 * max(32, bs)
		cases := map[string]func(){
			"short weights":     func() { tr.VecDot(n, make([]byte, typ.RowBytes(n)-1), make([]byte, tr.VecDotType.RowBytes(n))) },
			"short activations": func() { tr.VecDot(n, make([]byte, typ.RowBytes(n)), make([]byte, tr.VecDotType.RowBytes(n)-1)) },
			"dequantize size":   func() { tr.DequantizeRow(make([]byte, typ.RowBytes(n)-1), make([]float32, n)) },
		}
		if bs > 1 {
			cases["partial block"] = func() { tr.QuantizeRow(make([]float32, n+1), make([]byte, typ.RowBytes(n)+typ.BlockBytes())) }
		}
		for name, f := range cases {
			t.Run(fmt.Sprintf("%v/%s", typ, name), func(t *testing.T) {
				defer func() {
					if recover() == nil {
						t.Error("no panic")
					}
				}()
				f()
			})
		}
	}
}

func BenchmarkVecDot(b *testing.B) {
	const n = 4096
	rng := rand.New(rand.NewPCG(15, 16))
	for _, typ := range quantTypes {
		tr, _ := TraitsOf(typ)
		w, a, _, _ := dotOperands(rng, typ, n)
		b.Run(typ.String(), func(b *testing.B) {
			b.Run("asm", func(b *testing.B) {
				if !quantAsm || !slices.Contains(asmVecDotTypes, typ) {
					b.Skip("no assembly kernel")
				}
				b.SetBytes(int64(len(w)))
				for b.Loop() {
					tr.VecDot(n, w, a)
				}
			})
			b.Run("purego", func(b *testing.B) {
				b.SetBytes(int64(len(w)))
				for b.Loop() {
					genericVecDots[typ](n, w, a)
				}
			})
		})
	}
}

func BenchmarkQuantizeActivations(b *testing.B) {
	const n = 4096
	x := randomRow(rand.New(rand.NewPCG(17, 18)), n)
	for _, typ := range []DType{Q8_0, Q8_1, Q8_K, F16} {
		dst := make([]byte, typ.RowBytes(n))
		b.Run(typ.String(), func(b *testing.B) {
			b.SetBytes(4 * n)
			for b.Loop() {
				QuantizeActivations(typ, x, dst)
			}
		})
	}
}

// TestGarbageWeights runs every kernel on random bytes (NaN and infinite
// half-precision scales included) and the quantizers on NaN and ±Inf: no
// panic, and the dispatched dot equals the pure-Go one wherever the result is
// finite.
func TestGarbageWeights(t *testing.T) {
	rng := rand.New(rand.NewPCG(19, 20))
	for _, typ := range quantTypes {
		t.Run(typ.String(), func(t *testing.T) {
			tr, _ := TraitsOf(typ)
			n := 8 * max(32, typ.BlockSize())
			// Non-finite input to the quantizers must not panic either.
			x := randomRow(rng, n)
			x[3], x[40], x[n-1] = float32(math.NaN()), float32(math.Inf(1)), float32(math.Inf(-1))
			tr.DequantizeRow(quantize(typ, x), make([]float32, n))
			QuantizeActivations(tr.VecDotType, x, make([]byte, tr.VecDotType.RowBytes(n)))
			for range 20 {
				w := make([]byte, typ.RowBytes(n))
				for i := range w {
					w[i] = byte(rng.Uint32())
				}
				y := make([]float32, n)
				tr.DequantizeRow(w, y)
				a := quantize(tr.VecDotType, randomRow(rng, n))
				got, want := tr.VecDot(n, w, a), genericVecDots[typ](n, w, a)
				if math.IsNaN(float64(want)) || math.IsInf(float64(want), 0) {
					continue
				}
				var mag float64
				for i, v := range dequantize(tr.VecDotType, a, n) {
					mag += math.Abs(float64(y[i]) * float64(v))
				}
				if math.IsInf(mag, 0) || math.IsNaN(mag) {
					continue
				}
				if d := math.Abs(float64(got - want)); d > 1e-5*mag {
					t.Fatalf("dispatched %g, pure Go %g", got, want)
				}
			}
		})
	}
}

// TestGemmDotAsmVsGeneric is TestVecDotAsmVsGeneric for the dot products of
// multi-row products (GemmVecDot), including lengths tinyBLAS leaves to
// vec_dot.
func TestGemmDotAsmVsGeneric(t *testing.T) {
	rng := rand.New(rand.NewPCG(41, 42))
	twins := map[DType]func(int, []byte, []byte) float32{
		F32: gemmDotF32Generic, F16: gemmDotF16Generic, BF16: gemmDotBF16Generic,
	}
	for typ, twin := range twins {
		t.Run(typ.String(), func(t *testing.T) {
			dot := GemmVecDot(typ)
			for _, n := range []int{8, 24, 100, 256, 260, 4096} {
				for range 5 {
					w, a, _, _ := dotOperands(rng, typ, n)
					got, want := dot(n, w, a), twin(n, w, a)
					if math.Float32bits(got) != math.Float32bits(want) {
						t.Errorf("n=%d: kernel %g, twin %g", n, got, want)
					}
					if n%8 != 0 {
						if vd := genericVecDots[typ](n, w, a); math.Float32bits(got) != math.Float32bits(vd) {
							t.Errorf("n=%d: %g, but vec_dot gives %g", n, got, vd)
						}
					}
				}
			}
		})
	}
	for _, typ := range []DType{Q8_0, Q4_K, Q6_K} {
		tr, _ := TraitsOf(typ)
		w, a, _, _ := dotOperands(rng, typ, 512)
		if got, want := GemmVecDot(typ)(512, w, a), tr.VecDot(512, w, a); got != want {
			t.Errorf("%v: GemmVecDot %g, VecDot %g", typ, got, want)
		}
	}
	if GemmVecDot(IQ2_XXS) != nil {
		t.Error("GemmVecDot of a format without traits is not nil")
	}
}

// TestDotHalvesRows checks the row-wise products of attention against
// VecDotHalves and GemmDotHalves one row at a time, for head sizes below,
// at and past 32, and that rows past the slice panic.
func TestDotHalvesRows(t *testing.T) {
	rng := rand.New(rand.NewPCG(43, 44))
	for _, n := range []int{8, 12, 32, 40, 64, 128} {
		const rows, stride = 9, 150
		k := make([]uint16, (rows-1)*stride+n)
		FP32ToFP16Row(randF32(rng, len(k), 2), k)
		x := make([]uint16, n)
		FP32ToFP16Row(randF32(rng, n, 2), x)
		out := make([]float32, rows)
		for _, gemm := range []bool{false, true} {
			DotHalvesRows(k, stride, x, out, gemm)
			for r := range out {
				want := VecDotHalves(k[r*stride:][:n], x)
				if gemm {
					want = GemmDotHalves(k[r*stride:][:n], x)
				}
				if math.Float32bits(out[r]) != math.Float32bits(want) {
					t.Fatalf("n=%d gemm=%v row %d: %g, want %g", n, gemm, r, out[r], want)
				}
			}
		}
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("n=%d: rows past the slice did not panic", n)
				}
			}()
			DotHalvesRows(k[:len(k)-1], stride, x, out, false)
		}()
	}
}
