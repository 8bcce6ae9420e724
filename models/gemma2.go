package models

import "math"

// The roles Gemma 2 brings: RMS norms of the attention's and the MLP's
// outputs, before each joins the residual stream (Gemma 3 has them too).
var (
	AttnPostNorm = DefineRole(RoleSpec{Name: "post_attention_norm", Suffix: "weight", Block: true}) // (dim)
	FFNPostNorm  = DefineRole(RoleSpec{Name: "post_ffw_norm", Suffix: "weight", Block: true})       // (dim)
)

// gemmaTensors are the tensors of Gemma 2's blocks, which Gemma 3 extends:
// pre- and post-normed attention and GeGLU MLP. The norm weights are
// stored as (1 + w), which Gemma's norm multiplies by, so a plain RMS norm
// applies them.
var gemmaTensors = concat(
	attentionTensors,
	[]TensorSpec{{Role: AttnPostNorm, Shape: shapeDim}},
	gatedFFNTensors,
	[]TensorSpec{{Role: FFNPostNorm, Shape: shapeDim}},
)

// gemma2 is Gemma 2: embeddings scaled by sqrt(dim), GeGLU MLPs, norms
// after attention and MLP as well as before, attention scores and output
// logits soft-capped by tanh, and every other layer (from the first)
// attending over a sliding window of 4096. The output projection is always
// the embedding matrix: llama.cpp reads no output.weight.
var gemma2 = &Architecture{
	Name: "gemma2",
	Rope: RopeNeoX,
	Tensors: concat(
		[]TensorSpec{{Role: TokenEmbd, Shape: shapeVocab}, {Role: OutputNorm, Shape: shapeDim}},
		gemmaTensors,
	),
	Hyper: func(r *KeyReader, c *Config) {
		c.EmbedScale = float32(math.Sqrt(float64(c.Dim)))
		c.SlidingWindow = r.Int("attention.sliding_window", 4096)
		c.SWALayers = r.LayerPattern("attention.sliding_window_pattern", c.Layers, 2)
		c.AttnSoftCap = r.Float("attn_logit_softcapping", 50)
		c.FinalSoftCap = r.Float("final_logit_softcapping", 30)
		c.RopeBaseSWA = r.Float("rope.freq_base_swa", float64(c.RopeBase))
		c.RopeScaleSWA = c.RopeScale
		gemmaQueryScale(c, 46)
	},
}

// gemmaQueryScale sets the attention scale of Gemma 2 and 3 as llama.cpp
// does (after gemma_pytorch's config): 1/sqrt(head_dim), but
// 1/sqrt(dim/heads) in the 27B model, which llama.cpp knows by its layer
// count (layers27B).
func gemmaQueryScale(c *Config, layers27B int) {
	if c.Layers == layers27B {
		c.AttnScale = 1 / float32(math.Sqrt(float64(c.Dim/c.Heads)))
	}
}

func init() { Register(gemma2) }
