package kernels

import (
	"math"
	"math/big"
	"math/rand/v2"
	"testing"
)

// TestFmafIsCorrectlyRounded checks fmaf against a·b + c computed exactly
// with big.Float and rounded once to float32, on random operands, on sums
// that cancel, and on cases a float64 sum would round twice.
func TestFmafIsCorrectlyRounded(t *testing.T) {
	rng := rand.New(rand.NewPCG(31, 32))
	exact := func(a, b, c float32) float32 {
		p := new(big.Float).SetPrec(200).SetFloat64(float64(a))
		p.Mul(p, new(big.Float).SetPrec(200).SetFloat64(float64(b)))
		p.Add(p, new(big.Float).SetPrec(200).SetFloat64(float64(c)))
		f, _ := p.Float32()
		return f
	}
	check := func(a, b, c float32) {
		if got, want := fmaf(a, b, c), exact(a, b, c); math.Float32bits(got) != math.Float32bits(want) {
			t.Fatalf("fmaf(%g, %g, %g) = %g, want %g", a, b, c, got, want)
		}
	}
	for range 200000 {
		a := float32(rng.NormFloat64() * math.Exp(rng.Float64()*20-10))
		b := float32(rng.NormFloat64() * math.Exp(rng.Float64()*20-10))
		c := float32(rng.NormFloat64() * math.Exp(rng.Float64()*40-20))
		check(a, b, c)
		check(a, b, -float32(float64(a)*float64(b))) // cancels to the product's rounding error
	}
	// 1 + 2^-24 is halfway between two floats; the tiny addend decides.
	check(1+0x1p-23, 1-0x1p-23, 0x1p-24) // exact product 1 − 2^-46, sum just below a halfway point
	check(1, 1, 0x1p-24+0x1p-60)
	check(1, 1, 0x1p-24-0x1p-70)
}
