package gorgonia

import (
	"fmt"

	"github.com/ruvllm/ruvllm/kernels"
	"github.com/ruvllm/ruvllm/models"
	"github.com/ruvllm/ruvllm/models/gguf"
)

// Model is a model's weights in F32 with what its graph needs: the one
// thing the backend and the trainer share, read-only once made, so any
// number of graphs may use it at once.
type Model struct {
	cfg  *models.Config
	fam  family // the architecture's block and hooks
	w    *weights
	rope kernels.Rope
	// ropeSWA is the RoPE of the sliding-window layers when its base or
	// scale differs from the others' (Gemma 3); nil otherwise.
	ropeSWA *kernels.Rope
	// targets are the matrices a LoRA adapter may update, by GGUF name.
	targets map[string]*linear
}

// NewModel dequantizes the weights of the model in f, described by cfg,
// to F32. f may be closed afterwards.
func NewModel(f *gguf.File, cfg *models.Config) (*Model, error) {
	fam, err := familyOf(cfg.Arch)
	if err != nil {
		return nil, err
	}
	if cfg.Architecture() == nil {
		return nil, fmt.Errorf("gorgonia: architecture %q is not described in package models", cfg.Arch)
	}
	if cfg.HeadDimV != cfg.HeadDim {
		return nil, fmt.Errorf("gorgonia: value head size %d differs from key head size %d, which is not supported", cfg.HeadDimV, cfg.HeadDim)
	}
	w, err := loadWeights(f, cfg)
	if err != nil {
		return nil, err
	}
	if w.global.vec(models.RopeFactorsLong) != nil || cfg.RopeAttnFactor != 1 {
		return nil, fmt.Errorf("gorgonia: LongRoPE (Phi-3.5, Phi-4-mini) is not supported by this backend")
	}
	// Llama 3.1's RoPE factors: the file's rope_freqs.weight, else those
	// the rope.scaling keys give (models.Llama3RopeFactors).
	factors := w.global.vec(models.RopeFreqs)
	if factors == nil {
		factors = cfg.RopeFactors
	}
	m := &Model{
		cfg: cfg,
		fam: fam,
		w:   w,
		rope: kernels.Rope{
			Dims:        cfg.RopeDim,
			Base:        cfg.RopeBase,
			FreqScale:   cfg.RopeScale,
			NeoX:        cfg.Rope == models.RopeNeoX,
			FreqFactors: factors,
		},
		targets: w.linears(),
	}
	if cfg.TiedOutput {
		delete(m.targets, w.output.name)
	}
	if swa := m.rope; cfg.SlidingWindow > 0 && (cfg.RopeBaseSWA != cfg.RopeBase || cfg.RopeScaleSWA != cfg.RopeScale) {
		swa.Base, swa.FreqScale = cfg.RopeBaseSWA, cfg.RopeScaleSWA
		m.ropeSWA = &swa
	}
	return m, nil
}

// embedRow sets dst (dim) to token id's embedding, transformed as the
// family transforms it (Gemma: scaled by sqrt(dim)).
func (m *Model) embedRow(dst []float32, id int32) {
	dim := m.cfg.Dim
	copy(dst, m.w.embd[int(id)*dim:(int(id)+1)*dim])
	if m.fam.embed != nil {
		m.fam.embed(m, dst)
	}
}

// Config is the model's hyperparameters.
func (m *Model) Config() *models.Config { return m.cfg }
