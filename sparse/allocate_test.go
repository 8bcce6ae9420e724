package sparse

import (
	"math"
	"testing"
)

func TestAllocate(t *testing.T) {
	// Unit 0 (1000 weights) costs little until 0.6, unit 1 (3000) is
	// linear and dear, unit 2 (1000) has a noisy, non-convex curve.
	units := []Unit{
		{Weights: 1000, Errors: []float64{0, 0.01, 0.02, 0.03, 0.04, 0.05, 1, 2, 3}},
		{Weights: 3000, Errors: []float64{0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9}},
		{Weights: 1000, Errors: []float64{-0.01, 0.5, 0.2, 0.6, 0.7, 0.8, 0.9, 1.0, 1.1}},
	}
	levels, err := Allocate(units, Probes)
	if err != nil {
		t.Fatal(err)
	}
	prev := make([]float64, len(units))
	for k, row := range levels {
		var avg float64
		for u, s := range row {
			avg += s * float64(units[u].Weights) / 5000
			if s < prev[u]-1e-12 || s < 0 || s > MaxSparsity(Levels)+1e-12 {
				t.Fatalf("level %d: unit %d at %g after %g", k, u, s, prev[u])
			}
		}
		if math.Abs(avg-float64(k)/Levels) > 1e-9 {
			t.Fatalf("level %d: average %g", k, avg)
		}
		prev = row
	}
	// The free first tenths of units 0 and 2 go first, then unit 0's
	// cheap stretch to 0.6, then unit 1 (0.1 per tenth over 3000 weights),
	// then unit 2 past its noise (its hull goes to 0.3 at 1 per unit).
	near := func(a, b []float64) bool {
		for i := range a {
			if math.Abs(a[i]-b[i]) > 1e-9 {
				return false
			}
		}
		return true
	}
	if r := levels[10]; !near(r, []float64{0.4, 0, 0.1}) {
		t.Errorf("level 10: %v", r)
	}
	if r := levels[30]; !near(r, []float64{0.6, 0.8 / 3, 0.1}) {
		t.Errorf("level 30: %v", r)
	}
	if r := levels[Levels-1]; math.Abs(r[0]-MaxSparsity(Levels)) > 1e-9 || math.Abs(r[1]-MaxSparsity(Levels)) > 1e-9 {
		t.Errorf("top level: %v", r)
	}
	if _, err := Allocate([]Unit{{Weights: 1, Errors: []float64{1}}}, Probes); err == nil {
		t.Error("a unit with too few errors was accepted")
	}
}
