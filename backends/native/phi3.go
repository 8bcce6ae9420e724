package native

import "github.com/ruvllm/ruvllm/models"

func init() { registerFamily("phi3", family{block: phi3Block}) }

// phi3Block is llama's block with q, k and v from one matrix, the queries
// scaled before the scores, and the gate and up projections in one
// matrix (the pieces take the fused tensors when a block has them):
//
//	x += attention'(rmsnorm(x) ⊙ attn_norm)
//	x += swiglu(rmsnorm(x) ⊙ ffn_norm)
func phi3Block(b *Backend, l, n int) {
	b.preNorm(l, n, &b.w.blocks[l], models.AttnNorm, "attn_norm", scaledQueryAttention)
	b.lastMLP(l, n, swiglu)
}
