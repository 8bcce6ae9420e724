package kernels

import (
	"math"
	"math/rand/v2"
	"testing"
)

// twinLengths cover empty input, pure tails, whole vectors, and every mix of
// the 32-wide main loop, the 8-wide loop and the scalar tail.
var twinLengths = []int{0, 1, 3, 7, 8, 9, 15, 16, 31, 32, 33, 40, 63, 64, 100, 257, 1000, 4096}

func randF32(r *rand.Rand, n int, scale float32) []float32 {
	x := make([]float32, n)
	for i := range x {
		x[i] = (r.Float32()*2 - 1) * scale
	}
	return x
}

func randF16(r *rand.Rand, n int, scale float32) []uint16 {
	x := make([]uint16, n)
	for i := range x {
		x[i] = FP32ToFP16((r.Float32()*2 - 1) * scale)
	}
	return x
}

// closeRel reports whether got is within tol of want relative to mag, the
// size of the quantity the result was computed from (Σ|terms| for a sum),
// so that cancellation in a sum does not fail a correct kernel.
func closeRel(got, want, mag, tol float64) bool {
	if math.IsNaN(got) || math.IsNaN(want) {
		return math.IsNaN(got) && math.IsNaN(want)
	}
	return math.Abs(got-want) <= tol*math.Max(mag, 1e-30)
}

func logSIMD(t *testing.T) {
	t.Helper()
	if !useAVX2 {
		t.Log("no AVX2/FMA kernels on this build or CPU: the twins are compared with themselves")
	}
}

func TestReductionsMatchTwins(t *testing.T) {
	logSIMD(t)
	r := rand.New(rand.NewPCG(1, 2))
	type reduction struct {
		name string
		simd func(x, y []float32, hx, hy []uint16) float32
		twin func(x, y []float32, hx, hy []uint16) float32
		mag  func(x, y []float32, hx, hy []uint16) float64
	}
	absDot := func(x, y []float32, _, _ []uint16) float64 {
		var s float64
		for i := range x {
			s += math.Abs(float64(x[i]) * float64(y[i]))
		}
		return s
	}
	cases := []reduction{
		{"DotF32",
			func(x, y []float32, _, _ []uint16) float32 { return DotF32(x, y) },
			func(x, y []float32, _, _ []uint16) float32 { return dotF32Go(x, y) },
			absDot},
		{"DotF16",
			func(_, _ []float32, hx, hy []uint16) float32 { return DotF16(hx, hy) },
			func(_, _ []float32, hx, hy []uint16) float32 { return dotF16Go(hx, hy) },
			func(_, _ []float32, hx, hy []uint16) float64 {
				var s float64
				for i := range hx {
					s += math.Abs(float64(FP16ToFP32(hx[i])) * float64(FP16ToFP32(hy[i])))
				}
				return s
			}},
		{"SumSquares",
			func(x, _ []float32, _, _ []uint16) float32 { return SumSquares(x) },
			func(x, _ []float32, _, _ []uint16) float32 { return sumSquaresGo(x) },
			func(x, _ []float32, _, _ []uint16) float64 { return absDot(x, x, nil, nil) }},
		{"Max",
			func(x, _ []float32, _, _ []uint16) float32 { return Max(x) },
			func(x, _ []float32, _, _ []uint16) float32 { return maxGo(x) },
			func(x, _ []float32, _, _ []uint16) float64 { return 0 }},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			for _, n := range twinLengths {
				x, y := randF32(r, n, 3), randF32(r, n, 3)
				hx, hy := randF16(r, n, 3), randF16(r, n, 3)
				got, want := c.simd(x, y, hx, hy), c.twin(x, y, hx, hy)
				mag := c.mag(x, y, hx, hy)
				if !closeRel(float64(got), float64(want), mag, 1e-5) && got != want {
					t.Errorf("n=%d: kernel %g, twin %g (magnitude %g)", n, got, want, mag)
				}
				// The twin itself against a float64 sum.
				if c.name == "DotF32" || c.name == "SumSquares" {
					var ref float64
					for i := range x {
						if c.name == "DotF32" {
							ref += float64(x[i]) * float64(y[i])
						} else {
							ref += float64(x[i]) * float64(x[i])
						}
					}
					if !closeRel(float64(got), ref, mag, 1e-5) {
						t.Errorf("n=%d: kernel %g, float64 %g", n, got, ref)
					}
				}
			}
		})
	}
}

func TestMaxFindsEveryPosition(t *testing.T) {
	for _, n := range []int{1, 8, 9, 33, 100} {
		for at := 0; at < n; at++ {
			x := make([]float32, n)
			for i := range x {
				x[i] = -float32(i)
			}
			x[at] = 5
			if m := Max(x); m != 5 {
				t.Fatalf("n=%d, max at %d: got %g", n, at, m)
			}
		}
	}
	if m := Max(nil); !math.IsInf(float64(m), -1) {
		t.Errorf("Max(nil) = %g, want -Inf", m)
	}
}

func TestElementwiseMatchTwins(t *testing.T) {
	logSIMD(t)
	r := rand.New(rand.NewPCG(3, 4))
	type elementwise struct {
		name       string
		simd, twin func(dst, x, y []float32, hx []uint16)
	}
	cases := []elementwise{
		{"Axpy",
			func(dst, x, _ []float32, _ []uint16) { Axpy(0.37, x, dst) },
			func(dst, x, _ []float32, _ []uint16) { axpyGo(0.37, x, dst) }},
		{"AxpyF16",
			func(dst, _, _ []float32, hx []uint16) { AxpyF16(-1.25, hx, dst) },
			func(dst, _, _ []float32, hx []uint16) { axpyF16Go(-1.25, hx, dst) }},
		{"Scale",
			func(dst, _, _ []float32, _ []uint16) { Scale(1.7, dst) },
			func(dst, _, _ []float32, _ []uint16) { scaleGo(1.7, dst) }},
		{"Add",
			func(dst, x, y []float32, _ []uint16) { Add(dst, x, y) },
			func(dst, x, y []float32, _ []uint16) { addGo(dst, x, y) }},
		{"Mul",
			func(dst, x, y []float32, _ []uint16) { Mul(dst, x, y) },
			func(dst, x, y []float32, _ []uint16) { mulGo(dst, x, y) }},
		{"AddInPlace",
			func(dst, _, y []float32, _ []uint16) { Add(dst, dst, y) },
			func(dst, _, y []float32, _ []uint16) { addGo(dst, dst, y) }},
		{"mulScale",
			func(dst, x, y []float32, _ []uint16) { mulScale(dst, x, y, 0.3) },
			func(dst, x, y []float32, _ []uint16) { mulScaleGo(dst, x, y, 0.3) }},
		{"FP16ToFP32Row",
			func(dst, _, _ []float32, hx []uint16) { FP16ToFP32Row(hx, dst) },
			func(dst, _, _ []float32, hx []uint16) { fp16ToFP32RowGo(hx, dst) }},
		{"SiLU",
			func(dst, x, _ []float32, _ []uint16) { SiLU(dst, x) },
			func(dst, x, _ []float32, _ []uint16) { siluGo(dst, x) }},
		{"SwiGLU",
			func(dst, x, y []float32, _ []uint16) { SwiGLU(dst, x, y) },
			func(dst, x, y []float32, _ []uint16) { swigluGo(dst, x, y) }},
		{"GELU",
			func(dst, x, _ []float32, _ []uint16) { GELU(dst, x) },
			func(dst, x, _ []float32, _ []uint16) { geluGo(dst, x) }},
		{"expSubSum",
			func(dst, x, _ []float32, _ []uint16) { dst[0] = expSubSum(dst[1:], x[1:], 0.5) },
			func(dst, x, _ []float32, _ []uint16) { dst[0] = expSubSumGo(dst[1:], x[1:], 0.5) }},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			for _, n := range twinLengths {
				if n == 0 && c.name == "expSubSum" {
					continue
				}
				x, y := randF32(r, n, 8), randF32(r, n, 8)
				hx := randF16(r, n, 8)
				init := randF32(r, n, 8)
				got, want := append([]float32(nil), init...), append([]float32(nil), init...)
				c.simd(got, x, y, hx)
				c.twin(want, x, y, hx)
				for i := range got {
					if !closeRel(float64(got[i]), float64(want[i]), math.Abs(float64(want[i])), 1e-5) &&
						math.Abs(float64(got[i]-want[i])) > 1e-6 {
						t.Fatalf("n=%d: element %d: kernel %g, twin %g", n, i, got[i], want[i])
					}
				}
			}
		})
	}
}

func TestFP16RowsBitExact(t *testing.T) {
	// Every half, widened.
	all := make([]uint16, 1<<16)
	for i := range all {
		all[i] = uint16(i)
	}
	wide := make([]float32, len(all))
	FP16ToFP32Row(all, wide)
	for i, h := range all {
		want := FP16ToFP32(h)
		if want != want && wide[i] != wide[i] {
			continue // F16C quiets signalling NaNs; the scalar keeps them as they are
		}
		if math.Float32bits(wide[i]) != math.Float32bits(want) {
			t.Fatalf("half %#04x: row gives %#08x, scalar %#08x", h, math.Float32bits(wide[i]), math.Float32bits(want))
		}
	}
	// Random bit patterns and the edges of the half range, narrowed.
	r := rand.New(rand.NewPCG(5, 6))
	src := make([]float32, 1<<16)
	for i := range src {
		src[i] = math.Float32frombits(r.Uint32())
	}
	edges := []float32{0, -0, 65504, 65519.99, 65520, -65520, 6.1035156e-05, 6.097555e-05, 5.9604645e-08,
		2.9802322e-08, 2.9802326e-08, 1.0009766, 1.0004883, 1.0014648, float32(math.Inf(1)), float32(math.NaN())}
	copy(src, edges)
	for i := len(edges); i < 1<<14; i++ { // many in the half range, with ties
		src[i] = FP16ToFP32(uint16(r.Uint32())) * (1 + float32(r.IntN(3)-1)/2048)
	}
	narrow := make([]uint16, len(src))
	FP32ToFP16Row(src, narrow)
	for i, f := range src {
		if want := FP32ToFP16(f); narrow[i] != want {
			t.Fatalf("%g (%#08x): row gives %#04x, scalar %#04x", f, math.Float32bits(f), narrow[i], want)
		}
	}
}

func TestExpAccuracy(t *testing.T) {
	const n = 20000
	x := make([]float32, n)
	for i := range x {
		x[i] = -100 + 200*float32(i)/n
	}
	x[0], x[1], x[2] = float32(math.Inf(-1)), expLo, expHi
	got := make([]float32, n)
	expSubSum(got, x, 0)
	for i, v := range x {
		want := math.Exp(float64(v))
		switch {
		case v < expLo:
			want = 0
		case v > expHi:
			want = math.Exp(float64(expHi))
		}
		if !closeRel(float64(got[i]), want, want, 3e-7) {
			t.Errorf("exp(%g): kernel %g, want %g", v, got[i], want)
		}
		if g := expf(v); !closeRel(float64(g), want, want, 3e-7) {
			t.Errorf("exp(%g): expf %g, want %g", v, g, want)
		}
	}
	nan := float32(math.NaN())
	in := []float32{nan, nan, nan, nan, nan, nan, nan, nan, nan}
	out := make([]float32, len(in))
	expSubSum(out, in, 0)
	for i, v := range out {
		if v == v {
			t.Errorf("exp(NaN) lane %d = %g", i, v)
		}
	}
}

func TestActivationsAgainstFloat64(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	x := randF32(r, 1001, 12)
	x = append(x, 0, -30, 30, -200, 200)
	up := randF32(r, len(x), 2)
	sig := func(v float64) float64 { return 1 / (1 + math.Exp(-v)) }
	cases := []struct {
		name string
		run  func(dst []float32)
		ref  func(i int) float64
	}{
		{"SiLU", func(dst []float32) { SiLU(dst, x) },
			func(i int) float64 { v := float64(x[i]); return v * sig(v) }},
		{"SwiGLU", func(dst []float32) { SwiGLU(dst, x, up) },
			func(i int) float64 { v := float64(x[i]); return v * sig(v) * float64(up[i]) }},
		{"GELU", func(dst []float32) { GELU(dst, x) },
			func(i int) float64 {
				// 0.5·(1 + tanh z) written as 1/(1 + e^−2z), which float64
				// evaluates without cancellation for very negative z.
				v := float64(x[i])
				z := math.Sqrt(2/math.Pi) * v * (1 + 0.044715*v*v)
				return v / (1 + math.Exp(-2*z))
			}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := make([]float32, len(x))
			c.run(got)
			for i := range got {
				want := c.ref(i)
				// Far in the negative tail the output is tiny and only its
				// relative error grows (with the size of the exponent), so
				// the bound is relative plus a small absolute part.
				if math.Abs(float64(got[i])-want) > 2e-6*math.Abs(want)+1e-9 {
					t.Errorf("x=%g: got %g, want %g", x[i], got[i], want)
				}
			}
		})
	}
}

func TestSoftmax(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 10))
	for _, n := range []int{1, 5, 8, 33, 1000} {
		x := randF32(r, n, 20)
		if n > 4 {
			x[3] = float32(math.Inf(-1)) // a masked position
		}
		want := make([]float64, n)
		m, sum := float32(math.Inf(-1)), 0.0
		for _, v := range x {
			m = max(m, v)
		}
		for i, v := range x {
			want[i] = math.Exp(float64(v - m)) // the float32 difference is the kernel's input
			sum += want[i]
		}
		got := append([]float32(nil), x...)
		Softmax(got)
		twin := append([]float32(nil), x...)
		softmaxGo(twin)
		var total float64
		for i := range got {
			w := want[i] / sum
			total += float64(got[i])
			if !closeRel(float64(got[i]), w, w, 2e-6) || !closeRel(float64(twin[i]), w, w, 2e-6) {
				t.Errorf("n=%d [%d]: got %g, twin %g, want %g", n, i, got[i], twin[i], w)
			}
		}
		if n > 4 && (got[3] != 0 || twin[3] != 0) {
			t.Errorf("n=%d: masked position got %g, twin %g", n, got[3], twin[3])
		}
		if math.Abs(total-1) > 1e-5 {
			t.Errorf("n=%d: sums to %g", n, total)
		}
	}
}

func TestRMSNorm(t *testing.T) {
	r := rand.New(rand.NewPCG(11, 12))
	const eps = 1e-5
	for _, n := range []int{1, 7, 64, 260, 4096} {
		x, w := randF32(r, n, 4), randF32(r, n, 2)
		var ss float64
		for _, v := range x {
			ss += float64(v) * float64(v)
		}
		s := 1 / math.Sqrt(ss/float64(n)+eps)
		for _, weight := range [][]float32{w, nil} {
			got, twin := make([]float32, n), make([]float32, n)
			RMSNorm(got, x, weight, eps)
			rmsNormGo(twin, x, weight, eps)
			inPlace := append([]float32(nil), x...)
			RMSNorm(inPlace, inPlace, weight, eps)
			for i := range got {
				want := float64(x[i]) * s
				if weight != nil {
					want *= float64(weight[i])
				}
				if !closeRel(float64(got[i]), want, math.Abs(want), 3e-6) ||
					!closeRel(float64(twin[i]), want, math.Abs(want), 3e-6) || inPlace[i] != got[i] {
					t.Fatalf("n=%d weight=%v [%d]: got %g, twin %g, in place %g, want %g",
						n, weight != nil, i, got[i], twin[i], inPlace[i], want)
				}
			}
		}
	}
}

func TestLengthMismatchPanics(t *testing.T) {
	cases := map[string]func(){
		"DotF32": func() { DotF32(make([]float32, 8), make([]float32, 9)) },
		"Add":    func() { Add(make([]float32, 7), make([]float32, 8), make([]float32, 8)) },
		"SwiGLU": func() { SwiGLU(make([]float32, 8), make([]float32, 8), make([]float32, 16)) },
		"FP16":   func() { FP16ToFP32Row(make([]uint16, 8), make([]float32, 4)) },
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
