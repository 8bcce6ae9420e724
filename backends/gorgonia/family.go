package gorgonia

import (
	"fmt"

	G "gorgonia.org/gorgonia"

	"github.com/ruvllm/ruvllm/backends"
	"github.com/ruvllm/ruvllm/kernels"
)

// family is what the Gorgonia backend builds for one architecture (a
// models.Architecture of the same name): its block and, where the family
// has them, its hooks on the embeddings and on the logits; or, for a
// family the graphs do not build, why it is refused. Every backend
// registers its families the same way (TestFamiliesEveryBackend in package
// backends walks every architecture against every backend).
type family struct {
	block func(n *net, l int, x *G.Node) *G.Node
	// embed, when set, transforms a token's embedding dst (dim) (Gemma's
	// scale).
	embed func(m *Model, dst []float32)
	// logits, when set, transforms the logits node (rows, vocab) (Gemma
	// 2's soft-cap).
	logits func(n *net, logits *G.Node) *G.Node
	// refused, when set, says why the backend does not run the family.
	refused string
}

// families are the families by architecture name.
var families = map[string]family{}

// registerFamily makes the backend build architecture arch as f says;
// twice, or neither a block nor a refusal, panics.
func registerFamily(arch string, f family) {
	if _, dup := families[arch]; dup || (f.block == nil) == (f.refused == "") {
		panic("gorgonia: family " + arch + " registered twice, or with neither a block nor a refusal")
	}
	families[arch] = f
}

func init() {
	// llama's block serves qwen2 (its biases applied where the block has
	// them) and qwen3 (its q/k norms applied before RoPE).
	registerFamily("llama", family{block: llamaBlock})
	registerFamily("qwen2", family{block: llamaBlock})
	registerFamily("qwen3", family{block: llamaBlock})
	registerFamily("phi3", family{block: phi3Block})
	registerFamily("gemma2", family{block: gemmaBlock, embed: scaleEmbeddings, logits: softCapLogits})
	registerFamily("gemma3", family{block: gemmaBlock, embed: scaleEmbeddings, logits: softCapLogits})
	const moe = "a mixture of experts, whose routing this backend's graphs do not build (the native backend runs it)"
	registerFamily("qwen3moe", family{refused: moe})
	registerFamily("gpt-oss", family{refused: moe})
}

// familyOf is the family of arch: an error wrapping
// backends.ErrUnsupportedArchitecture for a refused one, another for an
// architecture without a family (half registered).
func familyOf(arch string) (family, error) {
	f, ok := families[arch]
	switch {
	case !ok:
		return family{}, fmt.Errorf("gorgonia: architecture %q has no family registered in this backend", arch)
	case f.refused != "":
		return family{}, fmt.Errorf("gorgonia: %s is %s: %w", arch, f.refused, backends.ErrUnsupportedArchitecture)
	}
	return f, nil
}

// scaleEmbeddings multiplies an embedding by the model's EmbedScale
// (Gemma: sqrt(dim)).
func scaleEmbeddings(m *Model, dst []float32) { kernels.Scale(m.cfg.EmbedScale, dst) }

// softCapLogits is c·tanh(logits/c), c the model's FinalSoftCap, when it
// has one (Gemma 2).
func softCapLogits(n *net, logits *G.Node) *G.Node {
	c := n.m.cfg.FinalSoftCap
	if c == 0 {
		return logits
	}
	return must(G.Mul(must(G.Tanh(must(G.Mul(logits, n.constant(float64(1/c)))))), n.constant(float64(c))))
}
