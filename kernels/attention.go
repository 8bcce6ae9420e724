package kernels

import (
	"fmt"
	"math"
	"unsafe"
)

// Attention is the shape of causal multi-head attention with grouped-query
// heads: query head h reads key/value head h/(Heads/KVHeads).
//
// The per-sequence cache of one layer holds keys and values in separate
// buffers, each (ctx, KVHeads, HeadDim) row-major: position t of kv head g
// starts at element (t·KVHeads + g)·HeadDim. A new token's keys are thus one
// contiguous row of KVHeads·HeadDim elements, written where the token's
// projection lands.
type Attention struct {
	Heads   int   // n_head: query heads
	KVHeads int   // n_head_kv; divides Heads
	HeadDim int   // elements per head
	KV      DType // element type of the cache: F32 or F16
	// Scale multiplies the scores before the softmax; 0 means 1/sqrt(HeadDim).
	Scale float32
}

// ScratchFloats is the length of the scratch Attend needs on p for queries up
// to position ctx−1: for each worker and each query head of a group, a row of
// ctx scores and a copy of the query, each padded to a cache line.
func (a Attention) ScratchFloats(p *Pool, ctx int) int {
	if a.KVHeads <= 0 || a.Heads%a.KVHeads != 0 {
		return 0
	}
	return p.Size() * a.Heads / a.KVHeads * (roundUp(ctx, 16) + roundUp(a.HeadDim, 16))
}

func roundUp(n, m int) int { return (n + m - 1) / m * m }

// Attend computes attention for nQ query tokens at positions pos0 … pos0+nQ−1
// against the cache (k, v) that already holds positions 0 … pos0+nQ−1. The
// query at position P attends to positions 0 … P with weights
// softmax(Scale·q·k), and its output is the weighted sum of the values.
//
//	q:       (nQ, Heads, HeadDim), already rotated
//	k, v:    (ctx, KVHeads, HeadDim) of a.KV, as bytes; ctx ≥ pos0+nQ
//	out:     (nQ, Heads, HeadDim)
//	scratch: at least a.ScratchFloats(p, pos0+nQ)
//
// A task is one query token and one kv head with the query heads that share
// it (or a share of them, when there are too few tasks to keep p busy): the
// keys and values are read from memory in blocks of attnBlock positions, and
// every head of the task uses a block while it is in cache. For an F16 cache the
// query is rounded to F16 for the dot products, as ggml does; scores, weights
// and the output sum stay float32. Attend does not allocate; wrong shapes
// panic, and k and v must be aligned to their element size.
func (a Attention) Attend(p *Pool, q []float32, nQ, pos0 int, k, v []byte, out, scratch []float32) {
	j := a.job(p, q, nQ, pos0, k, v, out, scratch)
	nTasks := nQ * a.KVHeads * j.split
	if p == nil {
		for t := range nTasks {
			j.Do(t, 0)
		}
		return
	}
	p.mu.Lock()
	p.attn = j
	p.run(nTasks, &p.attn)
	p.attn = attnJob{}
	p.mu.Unlock()
}

func (a Attention) job(p *Pool, q []float32, nQ, pos0 int, k, v []byte, out, scratch []float32) attnJob {
	hd := a.HeadDim
	if a.Heads <= 0 || a.KVHeads <= 0 || hd <= 0 || a.Heads%a.KVHeads != 0 || (a.KV != F32 && a.KV != F16) {
		panic(fmt.Sprintf("kernels: attention with %d heads, %d kv heads of %d, cache %v", a.Heads, a.KVHeads, hd, a.KV))
	}
	ctx := pos0 + nQ
	rowBytes := a.KVHeads * hd * a.KV.BlockBytes()
	if nQ < 0 || pos0 < 0 || len(q) < nQ*a.Heads*hd || len(out) < nQ*a.Heads*hd ||
		len(k) < ctx*rowBytes || len(v) < ctx*rowBytes || len(scratch) < a.ScratchFloats(p, ctx) {
		panic(fmt.Sprintf("kernels: attention of %d queries at %d: q %d, out %d, k %d, v %d bytes, scratch %d",
			nQ, pos0, len(q), len(out), len(k), len(v), len(scratch)))
	}
	scale := a.Scale
	if scale == 0 {
		scale = float32(1 / math.Sqrt(float64(hd)))
	}
	group := a.Heads / a.KVHeads
	// Split the heads of a group over several tasks only when the (token, kv
	// head) pairs alone would leave workers idle.
	per := group
	if units, size := nQ*a.KVHeads, p.Size(); size > 1 && units > 0 && units < 2*size {
		split := min(group, (2*size+units-1)/units)
		per = (group + split - 1) / split
	}
	j := attnJob{
		heads: a.Heads, group: group, kvHeads: a.KVHeads, hd: hd,
		per: per, split: (group + per - 1) / per,
		scale: scale, pos0: pos0, q: q, out: out,
		scratch: scratch, ctxPad: roundUp(ctx, 16), qPad: roundUp(hd, 16),
	}
	if ctx == 0 {
		return j
	}
	n := ctx * a.KVHeads * hd
	if a.KV == F32 {
		j.k32, j.v32 = asF32(k, n), asF32(v, n)
	} else {
		j.k16, j.v16 = asF16(k, n), asF16(v, n)
	}
	return j
}

// asF32 views the first n float32 of b.
func asF32(b []byte, n int) []float32 {
	if uintptr(unsafe.Pointer(&b[0]))%4 != 0 {
		panic("kernels: float32 cache not aligned to 4 bytes")
	}
	return unsafe.Slice((*float32)(unsafe.Pointer(&b[0])), n)
}

// asF16 views the first n halves of b.
func asF16(b []byte, n int) []uint16 {
	if uintptr(unsafe.Pointer(&b[0]))%2 != 0 {
		panic("kernels: float16 cache not aligned to 2 bytes")
	}
	return unsafe.Slice((*uint16)(unsafe.Pointer(&b[0])), n)
}

// attnJob computes, per task, the query heads [h0, h1) of one kv head for one
// query token. Task numbers run over (token, kv head, share of the group).
type attnJob struct {
	heads, group, kvHeads, hd int
	per, split                int // query heads per task; tasks per group
	scale                     float32
	pos0                      int
	q, out                    []float32
	k32, v32                  []float32
	k16, v16                  []uint16
	scratch                   []float32 // per worker: per score rows of ctxPad, then per queries of qPad
	ctxPad, qPad              int
}

// attnBlock is the number of cache positions a task takes at a time: the
// keys (or values) of one kv head for them, 32 KiB at 128 F16 elements, stay
// in cache while every query head of the task passes over them.
const attnBlock = 128

func (j *attnJob) Do(task, worker int) {
	share, rest := task%j.split, task/j.split
	g, tok := rest%j.kvHeads, rest/j.kvHeads
	h0 := g*j.group + share*j.per
	h1 := min(h0+j.per, (g+1)*j.group)
	nh, hd := h1-h0, j.hd
	n := j.pos0 + tok + 1 // positions this query sees
	row := j.kvHeads * hd // elements per cache position
	ws := j.scratch[worker*j.per*(j.ctxPad+j.qPad):][:j.per*(j.ctxPad+j.qPad)]
	scores := func(i int) []float32 { return ws[i*j.ctxPad:][:n] }
	output := func(i int) []float32 { return j.out[(tok*j.heads+h0+i)*hd:][:hd] }
	query := func(i int) []float32 { return j.q[(tok*j.heads+h0+i)*hd:][:hd] }
	if j.k16 != nil {
		// ggml rounds the query to F16 for its F16·F16 dot; keep the
		// rounded values as float32 for the mixed kernel.
		qa := ws[j.per*j.ctxPad:]
		for i := range nh {
			qr := qa[i*j.qPad:][:hd]
			for d, v := range query(i) {
				qr[d] = FP16ToFP32(FP32ToFP16(v))
			}
		}
		query = func(i int) []float32 { return qa[i*j.qPad:][:hd] }
	}

	for t0 := 0; t0 < n; t0 += attnBlock {
		t1 := min(t0+attnBlock, n)
		for i := range nh {
			if j.k32 != nil {
				dotRowsF32(query(i), j.k32[t0*row+g*hd:], row, j.scale, scores(i)[t0:t1])
			} else {
				dotRowsF16(query(i), j.k16[t0*row+g*hd:], row, j.scale, scores(i)[t0:t1])
			}
		}
	}
	for i := range nh {
		Softmax(scores(i))
		clear(output(i))
	}
	for t0 := 0; t0 < n; t0 += attnBlock {
		t1 := min(t0+attnBlock, n)
		for i := range nh {
			if j.v32 != nil {
				axpyRowsF32(scores(i)[t0:t1], j.v32[t0*row+g*hd:], row, output(i))
			} else {
				axpyRowsF16(scores(i)[t0:t1], j.v16[t0*row+g*hd:], row, output(i))
			}
		}
	}
}
