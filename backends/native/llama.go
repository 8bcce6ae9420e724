package native

import (
	"github.com/ruvllm/ruvllm/kernels"
	"github.com/ruvllm/ruvllm/models"
)

func init() { registerBlock("llama", llamaBlock) }

// llamaBlock is a pre-norm block of attention and a SwiGLU MLP:
//
//	x += attention(rmsnorm(x) ⊙ attn_norm)
//	x += swiglu(rmsnorm(x) ⊙ ffn_norm)
func llamaBlock(b *Backend, l, n int) {
	t, bf, dim := &b.w.blocks[l], &b.buf, b.cfg.Dim
	x, xn, proj := bf.x[:n*dim], bf.xn[:n*dim], bf.proj[:n*dim]
	b.norm(xn, x, t.vec(models.AttnNorm), n)
	b.observe("attn_norm", l, xn)
	b.attention(l, n, t, xn, proj)
	kernels.Add(x, x, proj)

	n = b.outputRows(l, n)
	x, xn, proj = bf.x[:n*dim], bf.xn[:n*dim], bf.proj[:n*dim]
	b.observe("ffn_inp", l, x)
	b.norm(xn, x, t.vec(models.FFNNorm), n)
	b.observe("ffn_norm", l, xn)
	b.swiglu(l, n, t, xn, proj)
	kernels.Add(x, x, proj)
	b.observe("l_out", l, x)
}
