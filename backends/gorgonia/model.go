package gorgonia

import (
	"fmt"

	"gorgonia.org/tensor"

	"github.com/ruvllm/ruvllm/kernels"
	"github.com/ruvllm/ruvllm/models"
	"github.com/ruvllm/ruvllm/models/gguf"
)

// Model is a model's weights in F32 with what its graph needs: the one
// thing the backend and the trainer share, read-only once made, so any
// number of graphs may use it at once.
type Model struct {
	cfg  *models.Config
	w    *weights
	rope kernels.Rope
	// rot (head_dim, head_dim) maps a head to its rotated partner
	// dimensions, signed: RoPE is x⊙cos + (x·rot)⊙sin.
	rot *tensor.Dense
	// targets are the matrices a LoRA adapter may update, by GGUF name.
	targets map[string]*linear
}

// NewModel dequantizes the weights of the model in f, described by cfg,
// to F32. f may be closed afterwards.
func NewModel(f *gguf.File, cfg *models.Config) (*Model, error) {
	if _, ok := blocks[cfg.Arch]; !ok || cfg.Architecture() == nil {
		return nil, fmt.Errorf("gorgonia: architecture %q has no graph in this backend", cfg.Arch)
	}
	if cfg.HeadDimV != cfg.HeadDim {
		return nil, fmt.Errorf("gorgonia: value head size %d differs from key head size %d, which is not supported", cfg.HeadDimV, cfg.HeadDim)
	}
	w, err := loadWeights(f, cfg)
	if err != nil {
		return nil, err
	}
	m := &Model{
		cfg: cfg,
		w:   w,
		rope: kernels.Rope{
			Dims:        cfg.RopeDim,
			Base:        cfg.RopeBase,
			FreqScale:   cfg.RopeScale,
			NeoX:        cfg.Rope == models.RopeNeoX,
			FreqFactors: w.global.vec(models.RopeFreqs),
		},
		targets: w.linears(),
	}
	if cfg.TiedOutput {
		delete(m.targets, w.output.name)
	}
	hd, half := cfg.HeadDim, cfg.RopeDim/2
	rot := make([]float32, hd*hd)
	for i := range half {
		a, b := 2*i, 2*i+1
		if cfg.Rope == models.RopeNeoX {
			a, b = i, i+half
		}
		// (x·rot)[a] = −x[b], (x·rot)[b] = x[a]
		rot[b*hd+a] = -1
		rot[a*hd+b] = 1
	}
	m.rot = tensor.New(tensor.WithShape(hd, hd), tensor.WithBacking(rot))
	return m, nil
}

// Config is the model's hyperparameters.
func (m *Model) Config() *models.Config { return m.cfg }
