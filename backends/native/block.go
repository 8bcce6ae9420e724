package native

import (
	"github.com/ruvllm/ruvllm/kernels"
	"github.com/ruvllm/ruvllm/models"
)

// A transformer block is composed, per architecture, from the pieces in
// this file, as llama.cpp's build_qkv, build_attn and build_ffn are: a
// family's file (llama.go, qwen3.go, gemma.go, ...) registers a short
// blockFunc that calls them in its order (registerFamily). Each piece reads its tensors by
// role from the block's tensors, so a piece serves every family that has
// those roles, and a tensor the file lacks (an optional bias) is simply not
// applied.

// blockFunc runs transformer block l over the n tokens of a pass, updating
// the residual stream b.buf.x in place. A family registers its own
// (family.go).
type blockFunc func(b *Backend, l, n int)

// sublayer computes a block's attention or MLP: proj (n, dim) from the
// normalised input xn (n, dim). Method expressions of Backend are
// sublayers, passed without allocating.
type sublayer func(b *Backend, l, n int, t *tensors, xn, proj []float32)

// preNorm adds a pre-normed sublayer to the residual stream of the n rows
// of a pass, x += f(rmsnorm(x) ⊙ w) with w the norm of role norm, showing
// the normalised input at point.
func (b *Backend) preNorm(l, n int, t *tensors, norm models.Role, point string, f sublayer) {
	bf, dim := &b.buf, b.cfg.Dim
	x, xn, proj := bf.x[:n*dim], bf.xn[:n*dim], bf.proj[:n*dim]
	b.norm(xn, x, t.vec(norm), n)
	b.observe(point, l, xn)
	f(b, l, n, t, xn, proj)
	kernels.Add(x, x, proj)
}

// sandwichNorm adds a sublayer normed before and after to the residual
// stream, x += rmsnorm(f(rmsnorm(x) ⊙ pre)) ⊙ post, as Gemma's blocks do,
// showing the normalised input and output at points[0] and points[1].
func (b *Backend) sandwichNorm(l, n int, t *tensors, pre, post models.Role, points [2]string, f sublayer) {
	bf, dim := &b.buf, b.cfg.Dim
	x, xn, proj := bf.x[:n*dim], bf.xn[:n*dim], bf.proj[:n*dim]
	b.norm(xn, x, t.vec(pre), n)
	b.observe(points[0], l, xn)
	f(b, l, n, t, xn, proj)
	b.norm(proj, proj, t.vec(post), n)
	b.observe(points[1], l, proj)
	kernels.Add(x, x, proj)
}

// norm sets each of the n rows of dst to the RMS-normalised row of x scaled
// by w; dst may be x.
func (b *Backend) norm(dst, x, w []float32, n int) {
	dim := b.cfg.Dim
	for r := range n {
		kernels.RMSNorm(dst[r*dim:(r+1)*dim], x[r*dim:(r+1)*dim], w, b.cfg.NormEps)
	}
}

// attention is llama's self-attention sublayer:
//
//	proj = Wo·attend(rope(Wq·xn + bq), rope(Wk·xn + bk), Wv·xn + bv)
//
// with the scores scaled by the attention scale.
func attention(b *Backend, l, n int, t *tensors, xn, proj []float32) {
	q, k, v := b.rotatedQKV(l, n, t, xn)
	b.attend(l, n, t, q, k, v, b.cfg.AttnScale, proj)
}

// scaledQueryAttention is attention with the queries scaled by the
// attention scale before the scores (Gemma, Phi-3).
func scaledQueryAttention(b *Backend, l, n int, t *tensors, xn, proj []float32) {
	q, k, v := b.rotatedQKV(l, n, t, xn)
	b.scaleQueries(l, q)
	b.attend(l, n, t, q, k, v, 1, proj)
}

// rotatedQKV projects the queries, keys and values, RMS-normalises each
// query and key head when the block has q/k norms (Qwen3, Gemma 3), and
// rotates the queries and keys.
func (b *Backend) rotatedQKV(l, n int, t *tensors, xn []float32) (q, k, v []float32) {
	q, k, v = b.projectQKV(l, n, t, xn)
	b.normHeads(l, q, t.vec(models.AttnQNorm), "Qcur_normed")
	b.normHeads(l, k, t.vec(models.AttnKNorm), "Kcur_normed")
	b.rotate(l, n, q, k)
	return q, k, v
}

// projectQKV computes the queries, keys and values of the n rows of xn
// into the pass's buffers: by three matrices, or by the fused attn_qkv
// (its rows q, then k, then v) when the block has it, plus the biases the
// block has.
func (b *Backend) projectQKV(l, n int, t *tensors, xn []float32) (q, k, v []float32) {
	bf, cfg := &b.buf, b.cfg
	qDim, kDim, vDim := cfg.Heads*cfg.HeadDim, cfg.KVHeads*cfg.HeadDim, cfg.KVHeads*cfg.HeadDimV
	q, k, v = bf.q[:n*qDim], bf.k[:n*kDim], bf.v[:n*vDim]
	if w := t.mat(models.AttnQKV); w != nil {
		qkv := bf.qkv[:n*w.rows]
		b.linear(w, xn, n, qkv, nil, bf.runs)
		b.observe("wqkv", l, qkv)
		for r := range n {
			row := qkv[r*w.rows : (r+1)*w.rows]
			copy(q[r*qDim:(r+1)*qDim], row[:qDim])
			copy(k[r*kDim:(r+1)*kDim], row[qDim:qDim+kDim])
			copy(v[r*vDim:(r+1)*vDim], row[qDim+kDim:])
		}
	} else if st := t.stack(models.AttnQ); st != nil { // the group q, k, v
		b.linearStack(st, xn, n, [maxStackParts][]float32{q, k, v},
			[maxStackParts][]float32{t.vec(models.AttnQBias), t.vec(models.AttnKBias), t.vec(models.AttnVBias)}, bf.runs)
	} else {
		b.linear(t.mat(models.AttnQ), xn, n, q, t.vec(models.AttnQBias), bf.runs)
		b.linear(t.mat(models.AttnK), xn, n, k, t.vec(models.AttnKBias), bf.runs)
		b.linear(t.mat(models.AttnV), xn, n, v, t.vec(models.AttnVBias), bf.runs)
	}
	b.observe("Qcur", l, q)
	b.observe("Kcur", l, k)
	b.observe("Vcur", l, v)
	return q, k, v
}

// normHeads RMS-normalises every head of x (rows of head_dim values) and
// scales it by w, the per-head query or key norm; a block without the norm
// (w nil) is left as it is.
func (b *Backend) normHeads(l int, x, w []float32, point string) {
	if w == nil {
		return
	}
	hd := b.cfg.HeadDim
	for h := 0; h < len(x); h += hd {
		kernels.RMSNorm(x[h:h+hd], x[h:h+hd], w, b.cfg.NormEps)
	}
	b.observe(point, l, x)
}

// rotate applies layer l's RoPE to the queries and keys of the n rows of a
// pass, by the angles of each row's position (LongRoPE's long factors in
// the rows of a long sequence).
func (b *Backend) rotate(l, n int, q, k []float32) {
	cfg, bf := b.cfg, &b.buf
	hd, half := cfg.HeadDim, cfg.RopeDim/2
	qDim, kDim := cfg.Heads*hd, cfg.KVHeads*hd
	for r := range n {
		rot := &b.rotary[b.layerRotary[l]]
		if bf.segs[bf.rowSeg[r]].seq.long {
			rot = &b.rotary[b.longRotary]
		}
		cos, sin := rot.cos[r*half:(r+1)*half], rot.sin[r*half:(r+1)*half]
		rot.Apply(q[r*qDim:(r+1)*qDim], hd, cos, sin)
		rot.Apply(k[r*kDim:(r+1)*kDim], hd, cos, sin)
	}
	b.observe("Qrope", l, q)
	b.observe("Krope", l, k)
}

// scaleQueries multiplies the queries by the attention scale before
// attention, where Gemma's and Phi-3's graphs put it (ggml_scale of Qcur),
// so that attend then scales the scores by 1: it rounds differently from
// scaling the scores.
func (b *Backend) scaleQueries(l int, q []float32) {
	kernels.Scale(b.cfg.AttnScale, q)
	b.observe("Qscaled", l, q)
}

// attend stores the keys k and values v of the pass in each sequence's KV
// blocks, attends with the queries q (scores scaled by scale, capped by
// the model's attention soft-cap, over the layer's sliding window when it
// has one, with the block's attention sinks when it has them) and sets
// proj to the output projection of the result (plus its bias, gpt-oss).
func (b *Backend) attend(l, n int, t *tensors, q, k, v []float32, scale float32, proj []float32) {
	bf, cfg := &b.buf, b.cfg
	kDim, vDim := cfg.KVHeads*cfg.HeadDim, cfg.KVHeads*cfg.HeadDimV
	for _, sg := range bf.segs {
		r0, r1 := sg.row0, sg.row0+sg.n
		sg.seq.Table.Store(l, sg.pos0, k[r0*kDim:r1*kDim], v[r0*vDim:r1*vDim])
	}
	j := &b.attnJob
	j.layer, j.scale, j.softCap, j.window = l, scale, cfg.AttnSoftCap, 0
	j.sinks = t.vec(models.AttnSinks) // gpt-oss
	if cfg.Windowed(l) {
		j.window = cfg.SlidingWindow
	}
	att := bf.att[:n*cfg.Heads*cfg.HeadDimV]
	b.pool.Run(j.tasks(n), j)
	b.observe("kqv_merged_cont", l, att)
	b.linear(t.mat(models.AttnOut), att, n, proj, t.vec(models.AttnOutBias), bf.runs)
	b.observe("kqv_out", l, proj)
}

// swiglu is the SwiGLU MLP sublayer of llama:
//
//	proj = Wdown·(silu(Wgate·xn) ⊙ Wup·xn)
func swiglu(b *Backend, l, n int, t *tensors, xn, proj []float32) {
	b.gatedMLP(l, n, t, xn, proj, kernels.SwiGLU)
}

// geglu is the GeGLU MLP sublayer of Gemma:
//
//	proj = Wdown·(gelu(Wgate·xn) ⊙ Wup·xn)
func geglu(b *Backend, l, n int, t *tensors, xn, proj []float32) {
	b.gatedMLP(l, n, t, xn, proj, kernels.GeGLU)
}

// gatedMLP computes proj = Wdown·(act(Wgate·xn) ⊙ Wup·xn) with the gate
// and up projections as two matrices, or as the two halves of the rows of
// one ffn_up (gate first, as Phi-3 stores them) when the block has no
// ffn_gate; act(dst, gate, up) is the gated activation.
func (b *Backend) gatedMLP(l, n int, t *tensors, xn, proj []float32, act func(dst, gate, up []float32)) {
	bf, ffn := &b.buf, b.cfg.FFN
	j := &b.gluJob
	j.act, j.dst = act, bf.gate[:n*ffn]
	if wg := t.mat(models.FFNGate); wg != nil {
		gate, up := bf.gate[:n*ffn], bf.up[:n*ffn]
		if st := t.stack(models.FFNGate); st != nil { // the group gate, up
			b.linearStack(st, xn, n, [maxStackParts][]float32{gate, up}, [maxStackParts][]float32{}, bf.runs)
		} else {
			b.linear(wg, xn, n, gate, nil, bf.runs)
			b.linear(t.mat(models.FFNUp), xn, n, up, nil, bf.runs)
		}
		b.observe("ffn_gate", l, gate)
		b.observe("ffn_up", l, up)
		j.gate, j.up, j.stride = gate, up, ffn
	} else {
		gateUp := bf.up[:n*2*ffn]
		b.linear(t.mat(models.FFNUp), xn, n, gateUp, nil, bf.runs)
		b.observe("ffn_up", l, gateUp)
		j.gate, j.up, j.stride = bf.up, bf.up[ffn:], 2*ffn
	}
	b.pool.Run(n, j) // one row runs on the caller
	b.observe("ffn_gate_par", l, j.dst)
	b.linear(t.mat(models.FFNDown), j.dst, n, proj, nil, bf.runs)
	b.observe("ffn_out", l, proj)
}

// gluJob sets dst = act(gate, up) for the rows of a pass, a row a task:
// ggml's activations treat each row's tail apart. On the pool, because
// with 8 rows of a batched decode it was 4% of the pass on one thread while
// the others waited.
type gluJob struct {
	b        *Backend
	act      func(dst, gate, up []float32)
	gate, up []float32 // row r's at r*stride
	stride   int
	dst      []float32 // (rows, ffn)
}

func (j *gluJob) Do(r, _ int) {
	ffn := j.b.cfg.FFN
	j.act(j.dst[r*ffn:(r+1)*ffn], j.gate[r*j.stride:][:ffn], j.up[r*j.stride:][:ffn])
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
