package native

import (
	"github.com/ruvllm/ruvllm/kernels"
	"github.com/ruvllm/ruvllm/models"
)

func init() { registerFamily("gpt-oss", family{block: gptOSSBlock}) }

// gptOSSBlock is gpt-oss's block: attention with biases on q, k, v and the
// output and the block's learned sinks (windowed in every other layer,
// YaRN RoPE: tensors and hyperparameters the shared pieces apply), then a
// mixture of experts behind the norm post_attention_norm, routed by the
// softmax over the chosen experts' logits, each expert gpt-oss's clamped
// SwiGLU with biases:
//
//	x += attention(rmsnorm(x) ⊙ attn_norm)
//	x += Σ_j w_j · swiglu_oai_{e_j}(rmsnorm(x) ⊙ post_attention_norm)
func gptOSSBlock(b *Backend, l, n int) {
	t := &b.w.blocks[l]
	b.preNorm(l, n, t, models.AttnNorm, "attn_norm", attention)
	n = b.outputRows(l, n)
	x := b.buf.x[:n*b.cfg.Dim]
	b.observe("ffn_inp", l, x)
	b.preNorm(l, n, t, models.AttnPostNorm, "attn_post_norm", oaiExperts)
	b.observe("l_out", l, x)
}

// gpt-oss's SwiGLU constants (llama.cpp's LLM_FFN_SWIGLU_OAI_MOE).
const (
	oaiAlpha = 1.702
	oaiLimit = 7
)

// oaiExperts is the mixture-of-experts sublayer with gpt-oss's experts.
func oaiExperts(b *Backend, l, n int, t *tensors, xn, proj []float32) {
	b.experts(l, n, t, xn, proj, swigluOAI)
}

// swigluOAI is kernels.SwiGLUOAI with gpt-oss's constants.
func swigluOAI(dst, gate, up []float32) { kernels.SwiGLUOAI(dst, gate, up, oaiAlpha, oaiLimit) }
