package native

import (
	"fmt"

	"github.com/ruvllm/ruvllm/kernels"
)

// family is what the native backend runs for one architecture (a
// models.Architecture of the same name): its transformer block and, where
// the family has them, its hooks on the embeddings and on the logits. A
// family's file registers it while the package initialises, as every
// backend registers its families (TestFamiliesEveryBackend in package
// backends walks every architecture against every backend).
type family struct {
	block blockFunc
	// embed, when set, transforms the embeddings x (n, dim) of a pass
	// before the first block (Gemma's scale).
	embed func(b *Backend, x []float32)
	// logits, when set, transforms the logits (rows, vocab) of a chunk of
	// output rows (Gemma 2's soft-cap).
	logits func(b *Backend, logits []float32)
}

// families are the families by architecture name.
var families = map[string]family{}

// registerFamily makes the native backend run architecture arch as f says.
// Registering an architecture twice or without a block panics.
func registerFamily(arch string, f family) {
	if _, dup := families[arch]; dup || f.block == nil {
		panic("native: family " + arch + " registered twice or without a block")
	}
	families[arch] = f
}

// familyOf is the family of arch. The native backend refuses no family
// of package models; an architecture without a family here is a family
// half registered.
func familyOf(arch string) (family, error) {
	f, ok := families[arch]
	if !ok {
		return family{}, fmt.Errorf("native: architecture %q has no family registered in this backend", arch)
	}
	return f, nil
}

// scaleEmbeddings multiplies the embeddings by the model's EmbedScale
// (Gemma: sqrt(dim)), as llama.cpp's ggml_scale of the embeddings.
func scaleEmbeddings(b *Backend, x []float32) {
	kernels.Scale(b.cfg.EmbedScale, x)
	b.observe("inp_scaled", -1, x)
}

// softCapLogits caps the logits to (−c, c) by c·tanh(l/c), c the model's
// FinalSoftCap, when it has one (Gemma 2; Gemma 3 when its file sets one).
func softCapLogits(b *Backend, logits []float32) {
	if c := b.cfg.FinalSoftCap; c > 0 {
		kernels.SoftCap(logits, c)
	}
}
