package models

import "math"

// Llama3Scaling is the "llama3" RoPE scaling of Llama 3.1 and later, as
// their config.json's rope_scaling holds it: wavelengths longer than the
// original context / LowFreqFactor are stretched by Factor, those shorter
// than original context / HighFreqFactor are kept, and the ones between are
// blended.
type Llama3Scaling struct {
	Factor, LowFreqFactor, HighFreqFactor float32
	OriginalCtx                           int
}

// Llama3RopeFactors computes the divisors of the RoPE angles of each of the
// dims/2 rotated pairs of a head under scaling s, as llama.cpp's converter
// writes them into rope_freqs.weight (convert_hf_to_gguf.py,
// LlamaModel.generate_extra_tensors), step for step in float32 as its torch
// code rounds: θ_i = base^(−2i/dims), wavelength 2π/θ_i, and the factor
// 1 (short), Factor (long) or 1/((1−smooth)/Factor + smooth) with smooth =
// (OriginalCtx/wavelength − LowFreqFactor)/(HighFreqFactor − LowFreqFactor).
func Llama3RopeFactors(dims int, base float32, s Llama3Scaling) []float32 {
	half := dims / 2
	factors := make([]float32, half)
	lowWavelen := float64(s.OriginalCtx) / float64(s.LowFreqFactor)
	highWavelen := float64(s.OriginalCtx) / float64(s.HighFreqFactor)
	twoPi := float32(2 * math.Pi)
	old := float32(s.OriginalCtx)
	span := float32(float64(s.HighFreqFactor) - float64(s.LowFreqFactor))
	for i := range factors {
		// Every float32(...) rounds as one torch float32 operation does.
		exp := float32(float32(2*i) / float32(dims))
		freq := float32(1 / float32(math.Pow(float64(base), float64(exp))))
		wavelen := float32(twoPi / freq)
		switch {
		case wavelen < float32(highWavelen):
			factors[i] = 1
		case wavelen > float32(lowWavelen):
			factors[i] = s.Factor
		default:
			smooth := float32(float32(float32(old/wavelen)-s.LowFreqFactor) / span)
			factors[i] = float32(1 / float32(float32(float32(1-smooth)/s.Factor)+smooth))
		}
	}
	return factors
}
