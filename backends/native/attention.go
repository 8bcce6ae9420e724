package native

import (
	"math"

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
// padding without flash attention), and the positions of a KV block.
const attnPad = 32

// attnScratch is one worker's scratch, sized for the longest sequence.
type attnScratch struct {
	scores []float32 // (max_len rounded up to attnPad)
	w16    []uint16  // (max_len rounded up to attnPad): weights as F16
	q16    []uint16  // (head_dim): the query as F16
	offs   []int     // (max_len / block_tokens): where a value row's pieces start
	// For tiered pools (made with the first tiered sequence): the scores
	// of a kv head's query heads, (heads per kv head, max_len rounded up
	// to a block); their queries, scaled; and the KV tiles' scratch.
	group  []float32
	qs     []float32
	tileKV []float32
}

// attnJob computes attention of layer for the rows of a pass, a span of
// query heads of one row per task; the keys and values of every row are
// already in its sequence's blocks.
type attnJob struct {
	b     *Backend
	layer int
	span  int // query heads per task
	// scale multiplies the scores; softCap (0: none) caps them to
	// (−softCap, softCap) first; window (0: none) is how many positions,
	// the query's own included, a query sees.
	scale, softCap float32
	window         int
	// sinks, when set, are each query head's learned sink logit (gpt-oss),
	// which the softmax normalises with as if it were one more position.
	sinks []float32 // (heads)
}

// tasks sets the span of heads per task for n rows and returns the number
// of tasks: about 8 a worker, so that a late or slower worker holds up
// little, but no more, for each task costs an atomic add that the workers'
// cores pass back and forth (with a task per head, 96 a layer for 8 rows).
//
// When a pass holds a row of a tiered pool, a task spans whole groups of
// the query heads that share a kv head: the tiered kernels read each block
// once for all of them.
func (j *attnJob) tasks(n int) int {
	heads := j.b.cfg.Heads
	j.span = min(heads, max(1, n*heads/(8*j.b.pool.Size())))
	if j.b.tieredPass {
		g := heads / j.b.cfg.KVHeads
		j.span = max(g, j.span/g*g)
	}
	return n * ((heads + j.span - 1) / j.span)
}

// growAttention sizes the attention scratch of every worker for sequences
// of up to maxLen tokens, with the tiered kernels' scratch when tiered is
// set. NewSequence calls it, so Forward never allocates.
func (b *Backend) growAttention(maxLen int, tiered bool) {
	if len(b.buf.attn) == 0 {
		b.buf.attn = make([]attnScratch, b.pool.Size())
	}
	padded := (maxLen + attnPad - 1) / attnPad * attnPad
	for i := range b.buf.attn {
		s := &b.buf.attn[i]
		if len(s.scores) < padded {
			s.scores = make([]float32, padded)
			s.w16 = make([]uint16, padded)
			s.offs = make([]int, padded/kvBlockTokens)
		}
		if s.q16 == nil {
			s.q16 = make([]uint16, b.cfg.HeadDim)
		}
		if tiered {
			g := b.cfg.Heads / b.cfg.KVHeads
			if len(s.group) < g*padded {
				s.group = make([]float32, g*padded)
			}
			if s.qs == nil {
				s.qs = make([]float32, g*b.cfg.HeadDim)
				s.tileKV = make([]float32, kernels.KVScratchFloats(g, b.cfg.HeadDim, kvBlockTokens))
			}
		}
	}
}

// Do reads the keys and values where they lie, block by block: the scores
// of a block's positions are independent dot products, and the value dot
// products run over a row's pieces in every block in turn with the same
// accumulators (kernels.DotHalvesPaged), which sums as one dot product over
// a contiguous row does.
func (j *attnJob) Do(task, worker int) {
	heads := j.b.cfg.Heads
	perRow := (heads + j.span - 1) / j.span
	r, h0 := task/perRow, task%perRow*j.span
	h1 := min(h0+j.span, heads)
	if t := j.b.buf.segs[j.b.buf.rowSeg[r]].seq.Table; t.Pool().Tiered() {
		g := heads / j.b.cfg.KVHeads
		for h := h0; h < h1; h += g {
			j.tieredGroup(r, h/g, worker)
		}
		return
	}
	for h := h0; h < h1; h++ {
		j.head(r, h, worker)
	}
}

// tieredGroup computes the query heads of kv head g of row r over a tiered
// pool: every block in the form the row's position reads it (ReadForm),
// its keys against all the group's queries at once, then its values
// weighted by all their probabilities. As in head (llama.cpp's arithmetic
// with an F16 cache), the query and the probabilities are rounded to F16
// first, so that a tiered cache's exact blocks give what an F16 cache
// gives up to the order of the sums: that rounding moves the next-token
// distributions of the mini models more than any other difference
// (kl_test.go). Scores are weighed as head weighs them (the soft-cap, the
// window's mask, the scale, softmax), and with a window only the blocks
// that hold positions within it are read.
func (j *attnJob) tieredGroup(r, g, worker int) {
	b, l := j.b, j.layer
	bf, cfg := &b.buf, b.cfg
	heads, hd := cfg.Heads, cfg.HeadDim
	gh := heads / cfg.KVHeads // query heads of a kv head
	h0 := g * gh
	sg := &bf.segs[bf.rowSeg[r]]
	pos := sg.pos0 + r - sg.row0
	n := pos + 1
	t := sg.seq.Table
	p, blocks := t.Pool(), t.Blocks()
	bt := p.BlockTokens()
	// Positions lo ≤ t < n are seen; blocks b0 ≤ i < nb are read, from
	// position first = b0·bt.
	lo := 0
	if j.window > 0 {
		lo = max(0, n-j.window)
	}
	b0, nb := lo/bt, (n+bt-1)/bt
	first := b0 * bt
	seen := n - first
	stride := (nb - b0) * bt // of one head's scores
	s := &bf.attn[worker]
	scores := s.group[:gh*stride]
	qs := s.qs[:gh*hd]
	copy(qs, bf.q[(r*heads+h0)*hd:(r*heads+h0+gh)*hd])
	roundToHalves(qs, s.w16)
	for i := b0; i < nb; i++ {
		blk := blocks[i]
		sc := scores[(i-b0)*bt:]
		switch f := p.ReadForm(blk, i, pos); f {
		case kvcache.FormF16:
			for h := range gh {
				clear(sc[h*stride : h*stride+bt])
			}
			keys := p.HalfKeys(blk, l)[g*hd*bt : (g+1)*hd*bt]
			kernels.KVAccumRowsHalves(keys, bt, hd, bt, qs, hd, gh, sc, stride)
		default:
			kernels.KVKeyScores(p.QuantKeys(blk, l, g, f), f.Bits(), hd, bt, qs, hd, gh, sc, stride, s.tileKV)
		}
	}
	for h := range gh {
		j.weigh(scores[h*stride:h*stride+seen], lo-first, h0+h)
		roundToHalves(scores[h*stride:h*stride+seen], s.w16)
	}
	out := bf.att[(r*heads+h0)*hd : (r*heads+h0+gh)*hd]
	clear(out)
	for i := b0; i < nb; i++ {
		blk := blocks[i]
		w := scores[(i-b0)*bt:]
		switch f := p.ReadForm(blk, i, pos); f {
		case kvcache.FormF16:
			vals := p.HalfValues(blk, l)[g*bt*hd : (g+1)*bt*hd]
			kernels.KVAccumRowsHalves(vals, hd, min(bt, seen-(i-b0)*bt), hd, w, stride, gh, out, hd)
		default:
			// A row reads its own block, the only partial one, exactly.
			kernels.KVValueAccum(p.QuantValues(blk, l, g, f), f.Bits(), bt, hd, w, stride, gh, out, hd, s.tileKV)
		}
	}
}

// roundToHalves rounds x to F16 values in place, through buf.
func roundToHalves(x []float32, buf []uint16) {
	for len(x) > 0 {
		k := min(len(x), len(buf))
		kernels.FP32ToFP16Row(x[:k], buf[:k])
		kernels.FP16ToFP32Row(buf[:k], x[:k])
		x = x[k:]
	}
}

// head computes query head h of row r. With a window, it reads only the
// blocks that hold positions within it and masks the positions before it
// in the first of them.
func (j *attnJob) head(r, h, worker int) {
	b, l := j.b, j.layer
	bf, cfg := &b.buf, b.cfg
	heads, hd := cfg.Heads, cfg.HeadDim
	g := h / (heads / cfg.KVHeads) // the kv head this query head reads
	sg := &bf.segs[bf.rowSeg[r]]
	pos := sg.pos0 + r - sg.row0
	n := pos + 1 // positions this token sees
	t := sg.seq.Table
	p, blocks := t.Pool(), t.Blocks()
	bt := p.BlockTokens()
	q := bf.q[(r*heads+h)*hd:][:hd]
	out := bf.att[(r*heads+h)*hd:][:hd]
	s := &bf.attn[worker]
	// Positions lo ≤ t < n are seen; blocks b0 ≤ i < nb are read, from
	// position first = b0·bt.
	lo := 0
	if j.window > 0 {
		lo = max(0, n-j.window)
	}
	b0, nb := lo/bt, (n+bt-1)/bt
	first := b0 * bt
	scores := s.scores[:n-first]
	// The value dots run over the padded length, which ends at a block's
	// end; the padding weights are 0 and the cells past n hold zeros,
	// values of this pass's later tokens, or (in a block another sequence
	// shares) its values: finite, so they add nothing.
	nv := (n+attnPad-1)/attnPad*attnPad - first
	batched := sg.prompt
	offs := s.offs[:nb-b0]
	for i, blk := range blocks[b0:nb] {
		offs[i] = p.ValueOffset(blk, l) + g*hd*bt
	}

	if p.Type() == kvcache.F16 {
		kernels.FP32ToFP16Row(q, s.q16)
		for i, blk := range blocks[b0:nb] {
			t0 := i * bt
			kernels.DotHalvesRows(p.KeysF16(blk, l)[g*bt*hd:], hd, s.q16, scores[t0:min(t0+bt, len(scores))], batched)
		}
		j.weigh(scores, lo-first, h)
		w := s.w16[:nv]
		kernels.FP32ToFP16Row(scores, w[:len(scores)])
		clear(w[len(scores):])
		kernels.DotHalvesPaged(p.ValueStoreF16(), offs, bt, bt, w, out, batched)
		return
	}
	dot := kernels.VecDotFloats
	if batched {
		dot = kernels.GemmDotFloats
	}
	for i, blk := range blocks[b0:nb] {
		keys := p.KeysF32(blk, l)
		for t := range min(bt, len(scores)-i*bt) {
			scores[i*bt+t] = dot(keys[(g*bt+t)*hd:][:hd], q)
		}
	}
	j.weigh(scores, lo-first, h)
	w := s.scores[:nv]
	clear(w[len(scores):])
	kernels.DotFloatsPaged(p.ValueStoreF32(), offs, bt, bt, w, out, batched)
}

// weigh turns the dot products of query head h with the keys into
// attention weights, as llama.cpp's graph does: the soft-cap when the model
// has one, the positions before the window (the first masked of them)
// masked, then softmax(scale·scores), normalised with the head's sink when
// the block has sinks.
func (j *attnJob) weigh(scores []float32, masked, h int) {
	if j.softCap > 0 {
		kernels.SoftCap(scores, j.softCap)
	}
	for t := range masked {
		scores[t] = float32(math.Inf(-1))
	}
	if j.scale != 1 {
		for t := range scores {
			scores[t] *= j.scale
		}
	}
	if j.sinks != nil {
		kernels.SoftmaxSink(scores, j.sinks[h])
		return
	}
	kernels.Softmax(scores)
}
