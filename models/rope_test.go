package models

import (
	"math"
	"testing"
)

// TestLlama3RopeFactors compares with the converter's formula evaluated in
// Python (float64) for the rope_scaling of Llama 3.2 1B and Llama 3.1 8B:
// the pairs with factors strictly between 1 and Factor, and how many are
// 1 and Factor.
//
//	def f(dim, base, factor, lo, hi, old):
//	    for i in range(0, dim, 2):
//	        wl = 2*math.pi*base**(i/dim)
//	        yield 1.0 if wl < old/hi else factor if wl > old/lo else \
//	            1/((1-(old/wl-lo)/(hi-lo))/factor + (old/wl-lo)/(hi-lo))
func TestLlama3RopeFactors(t *testing.T) {
	cases := []struct {
		name        string
		dims        int
		s           Llama3Scaling
		blend       map[int]float64
		ones, longs int
	}{
		{"llama-3.2-1b", 64, Llama3Scaling{Factor: 32, LowFreqFactor: 1, HighFreqFactor: 4, OriginalCtx: 8192},
			map[int]float64{15: 1.651329246, 16: 3.292262103, 17: 9.666728979}, 15, 14},
		{"llama-3.1-8b", 128, Llama3Scaling{Factor: 8, LowFreqFactor: 1, HighFreqFactor: 4, OriginalCtx: 8192},
			map[int]float64{29: 1.207483871, 30: 1.553414629, 31: 2.026313206, 32: 2.694529688, 33: 3.684252528, 34: 5.257326589}, 29, 29},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := Llama3RopeFactors(c.dims, 500000, c.s)
			if len(got) != c.dims/2 {
				t.Fatalf("%d factors", len(got))
			}
			ones, longs := 0, 0
			for i, f := range got {
				switch want, blended := c.blend[i]; {
				case blended:
					if math.Abs(float64(f)-want) > 2e-6*want {
						t.Errorf("factor %d = %.9g, want %.9g", i, f, want)
					}
				case f == 1:
					ones++
				case f == c.s.Factor:
					longs++
				default:
					t.Errorf("factor %d = %g, want 1 or %g", i, f, c.s.Factor)
				}
			}
			if ones != c.ones || longs != c.longs {
				t.Errorf("%d ones and %d of %g, want %d and %d", ones, longs, c.s.Factor, c.ones, c.longs)
			}
		})
	}
}
