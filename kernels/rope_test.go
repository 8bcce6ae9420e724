package kernels

import (
	"math"
	"math/rand/v2"
	"testing"
)

func TestRopeAnglesAgainstFloat64(t *testing.T) {
	for _, dims := range []int{2, 16, 64, 128} {
		for _, pos := range []int{0, 1, 7, 100, 4095, 32767} {
			for _, base := range []float32{10000, 1e6} {
				r := Rope{Dims: dims, Base: base}
				cos, sin := make([]float32, dims/2), make([]float32, dims/2)
				r.Angles(pos, cos, sin)
				for i := range cos {
					theta := float64(pos) * math.Pow(float64(base), -2*float64(i)/float64(dims))
					// The float32 recurrence θ_{i+1} = θ_i·step (as ggml) drifts
					// by about one rounding per step.
					tol := float64(i+2)*1.2e-7*theta + 1e-6
					if math.Abs(float64(cos[i])-math.Cos(theta)) > tol || math.Abs(float64(sin[i])-math.Sin(theta)) > tol {
						t.Fatalf("dims %d base %g pos %d pair %d: got (%g, %g), want (%g, %g)",
							dims, base, pos, i, cos[i], sin[i], math.Cos(theta), math.Sin(theta))
					}
				}
				if pos == 0 {
					for i := range cos {
						if cos[i] != 1 || sin[i] != 0 {
							t.Fatalf("position 0 pair %d: (%g, %g)", i, cos[i], sin[i])
						}
					}
				}
			}
		}
	}
}

func TestRopeScaling(t *testing.T) {
	// Halving every angle by FreqScale or by freq factors of 2 is exact in
	// float32, so both must give the angles of half the position bit for bit.
	const dims = 64
	plain := Rope{Dims: dims, Base: 500000}
	scaled := Rope{Dims: dims, Base: 500000, FreqScale: 0.5}
	factors := make([]float32, dims/2)
	for i := range factors {
		factors[i] = 2
	}
	divided := Rope{Dims: dims, Base: 500000, FreqFactors: factors}
	want := [2][]float32{make([]float32, dims/2), make([]float32, dims/2)}
	got := [2][]float32{make([]float32, dims/2), make([]float32, dims/2)}
	for _, pos := range []int{1, 10, 1000} {
		plain.Angles(pos, want[0], want[1])
		for name, r := range map[string]Rope{"FreqScale": scaled, "FreqFactors": divided} {
			r.Angles(2*pos, got[0], got[1])
			for i := range got[0] {
				if got[0][i] != want[0][i] || got[1][i] != want[1][i] {
					t.Fatalf("%s pos %d pair %d: (%g, %g), want (%g, %g)", name, pos, i, got[0][i], got[1][i], want[0][i], want[1][i])
				}
			}
		}
	}
}

// TestRopeAttnFactor checks that AttnFactor multiplies every cosine and
// sine once, and that 1 leaves them as they are.
func TestRopeAttnFactor(t *testing.T) {
	const dims = 32
	base := Rope{Dims: dims, Base: 10000, NeoX: true}
	want := [2][]float32{make([]float32, dims/2), make([]float32, dims/2)}
	got := [2][]float32{make([]float32, dims/2), make([]float32, dims/2)}
	for _, m := range []float32{1, 1.1902381, 0.5} {
		r := base
		r.AttnFactor = m
		for _, pos := range []int{0, 7, 4000} {
			base.Angles(pos, want[0], want[1])
			r.Angles(pos, got[0], got[1])
			for i := range got[0] {
				if got[0][i] != want[0][i]*m || got[1][i] != want[1][i]*m {
					t.Fatalf("factor %g pos %d pair %d: (%g, %g), want (%g, %g)·%g", m, pos, i, got[0][i], got[1][i], want[0][i], want[1][i], m)
				}
			}
		}
	}
}

func TestRopeApply(t *testing.T) {
	rng := rand.New(rand.NewPCG(21, 22))
	cases := []struct {
		name          string
		headDim, dims int
		neox          bool
	}{
		{"llama", 64, 64, false},
		{"neox", 64, 64, true},
		{"partial", 80, 32, false}, // dims past n_rot stay
		{"partialNeox", 80, 32, true},
		{"odd pairs", 22, 22, false}, // 11 pairs: vector body and scalar tail
		{"odd pairs neox", 22, 22, true},
		{"wide", 128, 128, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			const heads = 3
			r := Rope{Dims: c.dims, Base: 10000, NeoX: c.neox}
			cos, sin := make([]float32, c.dims/2), make([]float32, c.dims/2)
			r.Angles(37, cos, sin)
			x := randF32(rng, heads*c.headDim, 2)
			got := append([]float32(nil), x...)
			r.Apply(got, c.headDim, cos, sin)
			twin := append([]float32(nil), x...)
			r.applyGo(twin, c.headDim, cos, sin)
			for h := 0; h < heads; h++ {
				base := h * c.headDim
				for i := range c.dims / 2 {
					a, b := base+2*i, base+2*i+1
					if c.neox {
						a, b = base+i, base+i+c.dims/2
					}
					cs, sn := float64(cos[i]), float64(sin[i])
					x0, x1 := float64(x[a]), float64(x[b])
					w0, w1 := x0*cs-x1*sn, x0*sn+x1*cs
					if math.Float32bits(got[a]) != math.Float32bits(twin[a]) || math.Float32bits(got[b]) != math.Float32bits(twin[b]) {
						t.Fatalf("head %d pair %d: kernel (%g, %g), twin (%g, %g)", h, i, got[a], got[b], twin[a], twin[b])
					}
					for _, v := range [][]float32{got, twin} {
						if math.Abs(float64(v[a])-w0) > 1e-6 || math.Abs(float64(v[b])-w1) > 1e-6 {
							t.Fatalf("head %d pair %d: got (%g, %g), want (%g, %g)", h, i, v[a], v[b], w0, w1)
						}
					}
				}
				for i := c.dims; i < c.headDim; i++ {
					if got[base+i] != x[base+i] || twin[base+i] != x[base+i] {
						t.Fatalf("head %d dim %d past n_rot changed: %g -> %g", h, i, x[base+i], got[base+i])
					}
				}
			}
		})
	}
}

func TestRopeRelativePosition(t *testing.T) {
	// The point of RoPE: q·k after rotation depends only on the distance
	// between the two positions.
	rng := rand.New(rand.NewPCG(23, 24))
	for _, neox := range []bool{false, true} {
		r := Rope{Dims: 64, Base: 10000, NeoX: neox}
		q, k := randF32(rng, 64, 1), randF32(rng, 64, 1)
		dot := func(pq, pk int) float32 {
			cos, sin := make([]float32, 32), make([]float32, 32)
			qq, kk := append([]float32(nil), q...), append([]float32(nil), k...)
			r.Angles(pq, cos, sin)
			r.Apply(qq, 64, cos, sin)
			r.Angles(pk, cos, sin)
			r.Apply(kk, 64, cos, sin)
			return DotF32(qq, kk)
		}
		want := dot(10, 3)
		for _, shift := range []int{1, 50, 300} {
			if got := dot(10+shift, 3+shift); math.Abs(float64(got-want)) > 2e-4 {
				t.Errorf("neox=%v: q·k at (10,3) = %g, shifted by %d = %g", neox, want, shift, got)
			}
		}
	}
}
