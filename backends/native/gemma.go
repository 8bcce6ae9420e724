package native

import "github.com/ruvllm/ruvllm/models"

// Gemma scales its embeddings by sqrt(dim) and Gemma 2 caps its logits.
func init() {
	registerFamily("gemma2", family{block: gemmaBlock, embed: scaleEmbeddings, logits: softCapLogits})
	registerFamily("gemma3", family{block: gemmaBlock, embed: scaleEmbeddings, logits: softCapLogits})
}

// gemmaBlock is Gemma 2's and 3's block: attention and a GeGLU MLP, each
// RMS-normed before and after,
//
//	x += rmsnorm(attention''(rmsnorm(x) ⊙ attn_norm)) ⊙ post_attention_norm
//	x += rmsnorm(geglu(rmsnorm(x) ⊙ ffn_norm)) ⊙ post_ffw_norm
//
// where the attention scales the queries before the scores, is
// soft-capped (Gemma 2) and windowed in the sliding-window layers, and
// normalises each query and key head in Gemma 3, whose blocks have those
// norms: what differs between the two is tensors and hyperparameters. The
// embeddings' scale and the logits' cap are the family's hooks.
func gemmaBlock(b *Backend, l, n int) {
	t := &b.w.blocks[l]
	b.sandwichNorm(l, n, t, models.AttnNorm, models.AttnPostNorm, [2]string{"attn_norm", "attn_post_norm"}, scaledQueryAttention)
	n = b.outputRows(l, n)
	b.observe("sa_out", l, b.buf.x[:n*b.cfg.Dim])
	b.sandwichNorm(l, n, t, models.FFNNorm, models.FFNPostNorm, [2]string{"ffn_norm", "ffn_post_norm"}, geglu)
	b.observe("l_out", l, b.buf.x[:n*b.cfg.Dim])
}
