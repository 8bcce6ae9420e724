package native

import (
	"github.com/ruvllm/ruvllm/kernels"
	"github.com/ruvllm/ruvllm/kvcache"
)

// Attention follows the arithmetic of llama.cpp's CPU graph without flash
// attention, because greedy parity depends on it:
//
//   - with an F16 cache the query is rounded to F16 for the q·k dot products
//     and the softmax weights are rounded to F16 before they multiply the
//     (transposed) values; scores and the softmax itself are float32, the
//     softmax as ggml's (kernels.Softmax);
//   - llama.cpp attends over a multiple of attnPad cache cells, the extra
//     ones masked to weight 0, so the value dot products run over the padded
//     length (the cache is allocated padded, see NewSequence);
//   - the dot products are ggml's vec_dot for a step of one token and
//     llamafile's tinyBLAS kernels for the tokens of a step of two or more
//     (a prompt), as in llama.cpp, where a micro-batch of two or more tokens
//     goes through tinyBLAS. The two sum in different orders. Unlike
//     llama.cpp, the choice is made per step, so that a sequence's results
//     depend neither on the other sequences of a batch nor on how a long
//     prompt is split over passes.

// attnPad is the granularity of llama.cpp's attention length (its KV cache
// padding without flash attention).
const attnPad = 32

// attnScratch is one worker's scratch, sized for the longest sequence.
type attnScratch struct {
	scores []float32 // (max_len rounded up to attnPad)
	w16    []uint16  // (max_len rounded up to attnPad): weights as F16
	q16    []uint16  // (head_dim): the query as F16
}

// attnJob computes attention of layer for the rows of a pass, one
// (row, query head) pair per task; the keys and values of every row are
// already in its sequence's cache.
type attnJob struct {
	b     *Backend
	layer int
}

// growAttention sizes the attention scratch of every worker for sequences
// of up to maxLen tokens. NewSequence calls it, so Forward never allocates.
func (b *Backend) growAttention(maxLen int) {
	if len(b.buf.attn) == 0 {
		b.buf.attn = make([]attnScratch, b.pool.Size())
	}
	padded := (maxLen + attnPad - 1) / attnPad * attnPad
	for i := range b.buf.attn {
		s := &b.buf.attn[i]
		if len(s.scores) < padded {
			s.scores = make([]float32, padded)
			s.w16 = make([]uint16, padded)
		}
		if s.q16 == nil {
			s.q16 = make([]uint16, b.cfg.HeadDim)
		}
	}
}

func (j *attnJob) Do(task, worker int) {
	b, l := j.b, j.layer
	bf, cfg := &b.buf, b.cfg
	heads, hd := cfg.Heads, cfg.HeadDim
	r, h := task/heads, task%heads
	g := h / (heads / cfg.KVHeads) // the kv head this query head reads
	sg := &bf.segs[bf.rowSeg[r]]
	pos := sg.pos0 + r - sg.row0
	n := pos + 1 // positions this token sees
	c := sg.seq.cache
	maxLen, kvRow := c.MaxLen(), cfg.KVHeads*hd
	q := bf.q[(r*heads+h)*hd:][:hd]
	out := bf.att[(r*heads+h)*hd:][:hd]
	s := &bf.attn[worker]
	scores := s.scores[:n]
	// The value dots run over the padded length; the padding weights are 0
	// and the cells past n hold zeros or values of this pass's later tokens
	// (kvcache zeroes what Truncate and Reset forget).
	nv := min((n+attnPad-1)/attnPad*attnPad, maxLen)
	batched := sg.prompt

	if c.Type() == kvcache.F16 {
		keys, vals := c.KeysF16(l), c.ValuesF16(l)
		kernels.FP32ToFP16Row(q, s.q16)
		kernels.DotHalvesRows(keys[g*hd:], kvRow, s.q16, scores, batched)
		for t := range scores {
			scores[t] *= b.attnScale
		}
		kernels.Softmax(scores)
		w := s.w16[:nv]
		kernels.FP32ToFP16Row(scores, w[:n])
		clear(w[n:])
		kernels.DotHalvesRows(vals[g*hd*maxLen:], maxLen, w, out, batched)
		return
	}
	dot := kernels.VecDotFloats
	if batched {
		dot = kernels.GemmDotFloats
	}
	keys, vals := c.KeysF32(l), c.ValuesF32(l)
	for t := range scores {
		scores[t] = dot(keys[t*kvRow+g*hd:][:hd], q) * b.attnScale
	}
	kernels.Softmax(scores)
	w := s.scores[:nv]
	clear(w[n:])
	for d := range out {
		out[d] = dot(vals[(g*hd+d)*maxLen:][:nv], w)
	}
}
