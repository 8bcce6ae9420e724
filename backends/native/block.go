package native

import (
	"github.com/ruvllm/ruvllm/kernels"
	"github.com/ruvllm/ruvllm/models"
)

// A transformer block is composed, per architecture, from the pieces in
// this file, as llama.cpp's build_attn and build_ffn are: a family's file
// (llama.go, qwen2.go, ...) registers a short blockFunc that calls them in
// its order. Each piece reads its tensors by role from the block's
// tensors, so a piece serves every family that has those roles, and a
// tensor the file lacks (an optional bias) is simply not applied.

// blockFunc runs transformer block l over the n tokens of a pass, updating
// the residual stream b.buf.x in place.
type blockFunc func(b *Backend, l, n int)

// blocks are the block functions by architecture name.
var blocks = map[string]blockFunc{}

// registerBlock makes the native backend run architecture arch (a
// models.Architecture of the same name) with f. It is called from the
// family's file while the package initialises.
func registerBlock(arch string, f blockFunc) {
	if _, dup := blocks[arch]; dup {
		panic("native: block of " + arch + " registered twice")
	}
	blocks[arch] = f
}

// norm sets each of the n rows of dst to the RMS-normalised row of x scaled
// by w.
func (b *Backend) norm(dst, x, w []float32, n int) {
	dim := b.cfg.Dim
	for r := range n {
		kernels.RMSNorm(dst[r*dim:(r+1)*dim], x[r*dim:(r+1)*dim], w, b.cfg.NormEps)
	}
}

// attention sets proj (n, dim) to block l's self-attention of its
// normalised input xn (n, dim):
//
//	proj = Wo·attend(rope(Wq·xn + bq), rope(Wk·xn + bk), Wv·xn + bv)
//
// storing the new keys and values in each sequence's KV blocks first; the
// biases apply when the block has them.
func (b *Backend) attention(l, n int, t *tensors, xn, proj []float32) {
	bf, cfg := &b.buf, b.cfg
	hd, half := cfg.HeadDim, cfg.RopeDim/2
	qDim, kvDim := cfg.Heads*hd, cfg.KVHeads*hd
	q, k, v, att := bf.q[:n*qDim], bf.k[:n*kvDim], bf.v[:n*kvDim], bf.att[:n*qDim]
	b.linear(t.mat(models.AttnQ), xn, n, q, t.vec(models.AttnQBias), bf.runs)
	b.linear(t.mat(models.AttnK), xn, n, k, t.vec(models.AttnKBias), bf.runs)
	b.linear(t.mat(models.AttnV), xn, n, v, t.vec(models.AttnVBias), bf.runs)
	b.observe("Qcur", l, q)
	b.observe("Kcur", l, k)
	b.observe("Vcur", l, v)
	for r := range n {
		cos, sin := bf.cos[r*half:(r+1)*half], bf.sin[r*half:(r+1)*half]
		b.rope.Apply(q[r*qDim:(r+1)*qDim], hd, cos, sin)
		b.rope.Apply(k[r*kvDim:(r+1)*kvDim], hd, cos, sin)
	}
	b.observe("Qrope", l, q)
	b.observe("Krope", l, k)
	for _, sg := range bf.segs {
		r0, r1 := sg.row0, sg.row0+sg.n
		sg.seq.Table.Store(l, sg.pos0, k[r0*kvDim:r1*kvDim], v[r0*kvDim:r1*kvDim])
	}
	b.attnJob.layer = l
	b.pool.Run(b.attnJob.tasks(n), &b.attnJob)
	b.observe("kqv_merged_cont", l, att)
	b.linear(t.mat(models.AttnOut), att, n, proj, nil, bf.runs)
	b.observe("kqv_out", l, proj)
}

// swiglu sets proj (n, dim) to block l's SwiGLU MLP of its normalised input
// xn (n, dim):
//
//	proj = Wdown·(silu(Wgate·xn) ⊙ Wup·xn)
func (b *Backend) swiglu(l, n int, t *tensors, xn, proj []float32) {
	bf, ffn := &b.buf, b.cfg.FFN
	gate, up := bf.gate[:n*ffn], bf.up[:n*ffn]
	b.linear(t.mat(models.FFNGate), xn, n, gate, nil, bf.runs)
	b.linear(t.mat(models.FFNUp), xn, n, up, nil, bf.runs)
	b.observe("ffn_gate", l, gate)
	b.observe("ffn_up", l, up)
	b.pool.Run(n, &b.swigluJob) // one row runs on the caller
	b.observe("ffn_gate_par", l, gate)
	b.linear(t.mat(models.FFNDown), gate, n, proj, nil, bf.runs)
	b.observe("ffn_out", l, proj)
}

// swigluJob sets gate = silu(gate) ⊙ up for the rows of a pass, a row a
// task: ggml's silu treats each row's tail apart. On the pool, because with
// 8 rows of a batched decode it was 4% of the pass on one thread while the
// others waited.
type swigluJob struct {
	b *Backend
}

func (j *swigluJob) Do(r, _ int) {
	bf, ffn := &j.b.buf, j.b.cfg.FFN
	g := bf.gate[r*ffn : (r+1)*ffn]
	kernels.SwiGLU(g, g, bf.up[r*ffn:(r+1)*ffn])
}

// outputRows is n, except in the last block, where it keeps only the rows
// of the tokens whose outputs are wanted and returns their number: as in
// llama.cpp, whatever follows the attention of the last block runs only for
// them, for nothing else reads it, and a lone output row then takes the
// matrix-vector products llama.cpp takes. A block calls it once, after its
// attention's residual.
func (b *Backend) outputRows(l, n int) int {
	if l < len(b.w.blocks)-1 {
		return n
	}
	bf, dim := &b.buf, b.cfg.Dim
	bf.runs = bf.runs[:0]
	for i := range bf.outs {
		o := &bf.outs[i]
		if o.row != i { // rows only move down: outs are in row order
			copy(bf.x[i*dim:(i+1)*dim], bf.x[o.row*dim:(o.row+1)*dim])
		}
		bf.runs = addRun(bf.runs, bf.segs[bf.rowSeg[o.row]].seq, i, 1)
		o.row = i
	}
	return len(bf.outs)
}
