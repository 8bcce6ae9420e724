package kernels

import (
	"math"
	"math/rand/v2"
	"testing"
)

// ggmlExpInputs are random values of every magnitude expf meets, with the
// edges of its fast path (|n| > 126 and > 192 take the other branches),
// infinities and zeros of both signs.
func ggmlExpInputs(rng *rand.Rand, n int) []float32 {
	x := make([]float32, n)
	for i := range x {
		x[i] = float32(rng.NormFloat64() * math.Exp(rng.Float64()*8-3))
	}
	edges := []float32{0, float32(math.Copysign(0, -1)), 87.3, 88.7, 89, -87.3, -88, -103, -104, -150,
		133, -133, 200, -200, float32(math.Inf(1)), float32(math.Inf(-1)), 1e-30, -1e-30}
	for i, e := range edges {
		if i*7 < n {
			x[i*7] = e
		}
	}
	return x
}

func TestExpfLaneAccuracy(t *testing.T) {
	for x := float32(-103); x < 88.7; x += 0.0137 {
		got, want := float64(expfLane(x)), math.Exp(float64(x))
		ulp := math.Abs(float64(math.Nextafter32(float32(want), float32(math.Inf(1)))) - float64(float32(want)))
		if math.Abs(got-want) > 2*ulp {
			t.Fatalf("expfLane(%g) = %g, want %g", x, got, want)
		}
	}
	for x, want := range map[float32]float32{0: 1, 200: float32(math.Inf(1)), -200: 0, float32(math.Inf(-1)): 0} {
		if got := expfLane(x); got != want {
			t.Errorf("expfLane(%g) = %g, want %g", x, got, want)
		}
	}
}

// TestGgmlExpKernelsMatchTwins holds the assembly SiLU, SwiGLU and softmax
// kernels to their pure-Go twins bit for bit, on rows with and without a
// partial group of 8.
func TestGgmlExpKernelsMatchTwins(t *testing.T) {
	rng := rand.New(rand.NewPCG(51, 52))
	same := func(what string, n int, got, want []float32) {
		t.Helper()
		for i := range want {
			if math.Float32bits(got[i]) != math.Float32bits(want[i]) && !(got[i] != got[i] && want[i] != want[i]) {
				t.Fatalf("%s n=%d [%d]: kernel %g, twin %g", what, n, i, got[i], want[i])
			}
		}
	}
	for _, n := range []int{1, 7, 8, 13, 64, 100, 768, 1001} {
		x, up := ggmlExpInputs(rng, n), ggmlExpInputs(rng, n)
		got, twin := make([]float32, n), make([]float32, n)
		SiLU(got, x)
		siluRowGo(twin, x, nil)
		same("SiLU", n, got, twin)
		SwiGLU(got, x, up)
		siluRowGo(twin, x, up)
		same("SwiGLU", n, got, twin)

		scores := randF32(rng, n, 20)
		for i := 3; i < n; i += 5 {
			scores[i] = float32(math.Inf(-1)) // masked
		}
		got = append(got[:0], scores...)
		Softmax(got)
		twin = append(twin[:0], scores...)
		softmaxGo(twin)
		same("Softmax", n, got, twin)
		var sum float64
		for _, p := range got {
			sum += float64(p)
		}
		if math.Abs(sum-1) > 1e-5 {
			t.Fatalf("Softmax n=%d sums to %g", n, sum)
		}
	}
}

func TestSiLURowTail(t *testing.T) {
	// Past the last whole group of 8, ggml calls C's expf: x/(1+e^−x) with
	// a correctly rounded exponential here.
	x := []float32{-3, -0.5, 0, 0.25, 1, 2, 4, 9, -7.5, 3.3, 0.01}
	got := make([]float32, len(x))
	SiLU(got, x)
	for i := 8; i < len(x); i++ {
		if want := x[i] / (1 + float32(math.Exp(float64(-x[i])))); got[i] != want {
			t.Errorf("silu(%g) = %g, want %g", x[i], got[i], want)
		}
	}
}
