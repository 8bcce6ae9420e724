package lora

import (
	"math/rand/v2"

	"github.com/ruvllm/ruvllm/models"
)

// RandomSpec describes a random adapter; zero fields get the defaults said.
type RandomSpec struct {
	// Rank of every update; 0 means 4.
	Rank int
	// Alpha is lora_alpha; 0 means 2·Rank (a scale of 2).
	Alpha float32
	// RSLoRA scales by alpha/√rank.
	RSLoRA bool
	// Amplitude bounds the entries of A and B, drawn uniformly; 0 means 0.05.
	Amplitude float32
	// Seed makes the adapter reproducible.
	Seed uint64
	// Targets are the GGUF names of the weights to update; nil means every
	// linear layer of every block and the output projection (unless tied).
	Targets []string
}

// Random makes an adapter with random matrices for a model of cfg, for
// tests and benchmarks without a trained adapter.
func Random(cfg *models.Config, s RandomSpec) (*Adapter, error) {
	if s.Rank == 0 {
		s.Rank = 4
	}
	if s.Alpha == 0 {
		s.Alpha = 2 * float32(s.Rank)
	}
	if s.Amplitude == 0 {
		s.Amplitude = 0.05
	}
	names := s.Targets
	if names == nil {
		names = cfg.Architecture().Linear(cfg)
	}
	rng := rand.New(rand.NewPCG(s.Seed, 0x10fa))
	fill := func(n int) []float32 {
		xs := make([]float32, n)
		for i := range xs {
			xs[i] = (2*rng.Float32() - 1) * s.Amplitude
		}
		return xs
	}
	var targets []*Target
	for _, name := range names {
		in, out, ok := cfg.LinearShape(name)
		if !ok {
			return nil, invalidf("%s is not a weight an adapter can update", name)
		}
		t, err := NewTarget(name, in, out, s.Rank, fill(s.Rank*in), fill(out*s.Rank), scaleOf(float64(s.Alpha), s.Rank, s.RSLoRA))
		if err != nil {
			return nil, err
		}
		targets = append(targets, t)
	}
	return New("", cfg.Arch, s.Alpha, s.RSLoRA, "", targets)
}
