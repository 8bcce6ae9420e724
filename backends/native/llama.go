package native

import "github.com/ruvllm/ruvllm/models"

func init() { registerFamily("llama", family{block: llamaBlock}) }

// llamaBlock is a pre-norm block of attention and a SwiGLU MLP:
//
//	x += attention(rmsnorm(x) ⊙ attn_norm)
//	x += swiglu(rmsnorm(x) ⊙ ffn_norm)
func llamaBlock(b *Backend, l, n int) {
	b.preNorm(l, n, &b.w.blocks[l], models.AttnNorm, "attn_norm", attention)
	b.lastMLP(l, n, swiglu)
}

// lastMLP ends a pre-norm block: it keeps the output rows in the last
// block (outputRows) and adds the MLP f of the normalised stream.
func (b *Backend) lastMLP(l, n int, f sublayer) {
	n = b.outputRows(l, n)
	x := b.buf.x[:n*b.cfg.Dim]
	b.observe("ffn_inp", l, x)
	b.preNorm(l, n, &b.w.blocks[l], models.FFNNorm, "ffn_norm", f)
	b.observe("l_out", l, x)
}
