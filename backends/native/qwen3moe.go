package native

import (
	"github.com/ruvllm/ruvllm/kernels"
	"github.com/ruvllm/ruvllm/models"
)

func init() { registerFamily("qwen3moe", family{block: qwen3moeBlock}) }

// qwen3moeBlock is Qwen3's block with a mixture of SwiGLU experts for its
// MLP (the router's softmax, the best experts' weights renormalised, as
// the architecture's description sets the gating):
//
//	x += attention(rmsnorm(x) ⊙ attn_norm)        (q/k norms before RoPE)
//	x += Σ_j w_j · swiglu_{e_j}(rmsnorm(x) ⊙ ffn_norm)
func qwen3moeBlock(b *Backend, l, n int) {
	b.preNorm(l, n, &b.w.blocks[l], models.AttnNorm, "attn_norm", attention)
	b.lastMLP(l, n, swigluExperts)
}

// swigluExperts is the mixture-of-experts sublayer with SwiGLU experts.
func swigluExperts(b *Backend, l, n int, t *tensors, xn, proj []float32) {
	b.experts(l, n, t, xn, proj, kernels.SwiGLU)
}
